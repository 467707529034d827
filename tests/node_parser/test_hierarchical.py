"""HierarchicalSentenceNodeParser: exact containment, core compatibility, invalid arguments."""

from __future__ import annotations

import asyncio
import signal

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import get_leaf_nodes, get_root_nodes
from llama_index.core.retrievers import AutoMergingRetriever
from llama_index.core.schema import NodeRelationship

from llama_index_ext_advrag.node_parser import HierarchicalSentenceNodeParser
from llama_index_ext_advrag.node_parser.hierarchical import pack_sentences, plan_hierarchy
from llama_index_ext_advrag.text import count_tokens, split_sentences

ENGLISH = " ".join(
    f"Sentence number {i} talks about topic {i % 4} with some padding words." for i in range(40)
)
CHINESE = "".join(f"第{i}句话讲述了主题{i % 3}的一些内容，并补充了细节。" for i in range(30))
SECTIONED = "# One\nAlpha beta. Gamma delta.\n\n# Two\nEpsilon zeta. Eta theta."


def by_id(nodes):
    return {n.node_id: n for n in nodes}


def check_containment(nodes, source):
    index = by_id(nodes)
    parents = [n for n in nodes if NodeRelationship.CHILD in n.relationships]
    assert parents, "expected at least one parent"
    for parent in parents:
        children = [index[info.node_id] for info in parent.child_nodes]
        assert "".join(c.text for c in children) == parent.text
        assert children[0].start_char_idx == parent.start_char_idx
        assert children[-1].end_char_idx == parent.end_char_idx
        for child in children:
            assert child.parent_node.node_id == parent.node_id
    for node in nodes:
        assert source[node.start_char_idx : node.end_char_idx] == node.text
    sentence_edges = {s.start for s in split_sentences(source)}
    assert all(n.start_char_idx in sentence_edges for n in nodes)


def test_defaults_and_class_name():
    parser = HierarchicalSentenceNodeParser()
    assert parser.chunk_sizes == [2048, 512, 128]
    assert parser.class_name() == "HierarchicalSentenceNodeParser"


@pytest.mark.parametrize("sizes", [[], [0], [64, 256], [256, 256], [128, -1]])
def test_invalid_chunk_sizes(sizes):
    with pytest.raises(ValueError, match="chunk_sizes"):
        HierarchicalSentenceNodeParser(chunk_sizes=sizes)


def test_serialisation_round_trip():
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[300, 30], split_at_headings=False)
    restored = HierarchicalSentenceNodeParser.from_dict(parser.to_dict())
    assert restored.model_dump() == parser.model_dump()


def test_pack_sentences_by_hand():
    assert pack_sentences([4, 4, 4, 4, 4], 0, 5, 8, [False] * 5) == [(0, 2), (2, 4), (4, 5)]
    assert pack_sentences([20, 1, 1], 0, 3, 8, [False] * 3) == [(0, 1), (1, 3)]
    assert pack_sentences([1, 1, 1], 1, 3, 8, [False, False, True]) == [(1, 2), (2, 3)]
    assert pack_sentences([], 0, 0, 8, []) == []


def test_plan_hierarchy_children_stay_inside_parents():
    levels = plan_hierarchy([3] * 10, [12, 6, 3], [False] * 10)
    assert [(a, b) for a, b, _ in levels[0]] == [(0, 4), (4, 8), (8, 10)]
    assert [(a, b, p) for a, b, p in levels[1]][:3] == [(0, 2, 0), (2, 4, 0), (4, 6, 1)]
    assert len(levels[2]) == 10


@pytest.mark.parametrize("text", [ENGLISH, CHINESE])
def test_exact_containment_english_and_chinese(text):
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[200, 60, 20])
    nodes = parser.get_nodes_from_documents([Document(text=text, id_="d")])
    check_containment(nodes, text)
    levels = [n.metadata["hierarchy_level"] for n in nodes]
    assert levels == sorted(levels) and set(levels) == {0, 1, 2}
    roots = get_root_nodes(nodes)
    assert "".join(r.text for r in roots) == text.strip()
    for node in nodes:
        budget = parser.chunk_sizes[node.metadata["hierarchy_level"]]
        sentences = [s for s in split_sentences(node.text)]
        assert count_tokens(node.text) <= budget or len(sentences) == 1


def test_leaf_nodes_and_relationships_match_core_conventions():
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[200, 60, 20])
    nodes = parser.get_nodes_from_documents([Document(text=ENGLISH, id_="d")])
    leaves = get_leaf_nodes(nodes)
    assert leaves and all(n.metadata["hierarchy_level"] == 2 for n in leaves)
    assert all(n.ref_doc_id == "d" for n in nodes)
    # PREVIOUS/NEXT link siblings only (same level, same parent), as core does.
    index = by_id(nodes)
    linked = 0
    for node in nodes:
        if node.next_node is not None:
            linked += 1
            neighbour = index[node.next_node.node_id]
            assert neighbour.metadata["hierarchy_level"] == node.metadata["hierarchy_level"]
            assert neighbour.start_char_idx == node.end_char_idx
            assert neighbour.prev_node.node_id == node.node_id
            if node.parent_node is not None:
                assert neighbour.parent_node.node_id == node.parent_node.node_id
    assert linked > 0


def _alarm(signum, frame):
    raise TimeoutError("AutoMergingRetriever did not terminate")


def test_auto_merging_terminates_with_single_child_parents():
    # A and C are retrieved, B lies between them and is the single child of its parent.
    # Were PREVIOUS/NEXT linked across parents, core's AutoMergingRetriever would fill B in,
    # merge it up into its parent, then fill it in again, forever.
    filler = " ".join(f"word{i}" for i in range(40))
    sentences = [
        "Alpha one two three four five six seven.",
        "Alpha eight nine ten eleven twelve thirteen.",
        "Zebra quantum zebra quantum lemon apple pear.",  # A
        f"Bridge {filler} end.",  # B: one leaf, one parent
        "Zebra quantum lemon kiwi mango plum fig.",  # C
        "Gamma one two three four five six seven.",
        "Gamma eight nine ten eleven twelve thirteen.",
    ]
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[50, 20])
    nodes = parser.get_nodes_from_documents([Document(text=" ".join(sentences), id_="p")])
    leaves = get_leaf_nodes(nodes)
    bridge = next(n for n in leaves if n.text.startswith("Bridge"))
    parent = next(n for n in nodes if n.node_id == bridge.parent_node.node_id)
    assert len(parent.child_nodes) == 1
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    index = VectorStoreIndex(leaves, storage_context=storage, embed_model=HashEmbedding(dim=256))
    retriever = AutoMergingRetriever(index.as_retriever(similarity_top_k=2), storage)
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        results = retriever.retrieve("zebra quantum zebra quantum")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert {r.node.text.split()[0] for r in results} == {"Zebra"}


def test_headings_close_chunks_at_every_level():
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[1000, 100])
    nodes = parser.get_nodes_from_documents([Document(text=SECTIONED)])
    roots = get_root_nodes(nodes)
    assert [r.metadata["section_title"] for r in roots] == ["One", "Two"]
    assert roots[1].text.startswith("# Two")
    merged = HierarchicalSentenceNodeParser(chunk_sizes=[1000, 100], split_at_headings=False)
    assert len(get_root_nodes(merged.get_nodes_from_documents([Document(text=SECTIONED)]))) == 1


def test_ids_deterministic_and_empty_input():
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[100, 20])
    first = [n.node_id for n in parser.get_nodes_from_documents([Document(text=ENGLISH, id_="x")])]
    again = [n.node_id for n in parser.get_nodes_from_documents([Document(text=ENGLISH, id_="x")])]
    assert first == again and len(set(first)) == len(first)
    assert parser.get_nodes_from_documents([Document(text="  \n ")]) == []
    assert parser.get_nodes_from_documents([]) == []


def test_sync_and_async_agree():
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[100, 20])
    docs = [Document(text=ENGLISH, id_="a"), Document(text=CHINESE, id_="b")]
    sync_nodes = parser.get_nodes_from_documents(docs)
    async_nodes = asyncio.run(parser.aget_nodes_from_documents(docs))
    assert [(n.node_id, n.text) for n in sync_nodes] == [(n.node_id, n.text) for n in async_nodes]


def test_core_auto_merging_retriever_merges_children_into_parent():
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[120, 30])
    text = (
        "Bananas are yellow fruit. Bananas grow in bunches. Bananas are rich in potassium. "
        "Bananas ripen quickly. "
        "Engines burn diesel oil. Engines need cooling water. Engines drive the pumps. "
        "Engines are serviced yearly."
    )
    nodes = parser.get_nodes_from_documents([Document(text=text, id_="d")])
    storage = StorageContext.from_defaults()
    storage.docstore.add_documents(nodes)
    leaves = get_leaf_nodes(nodes)
    index = VectorStoreIndex(leaves, storage_context=storage, embed_model=HashEmbedding(dim=256))
    retriever = AutoMergingRetriever(
        index.as_retriever(similarity_top_k=4), storage, simple_ratio_thresh=0.5
    )
    results = retriever.retrieve("bananas bananas yellow potassium ripen bunches")
    parents = {n.node_id for n in nodes if NodeRelationship.CHILD in n.relationships}
    merged = [r for r in results if r.node.node_id in parents]
    assert merged, "the leaves of one parent should merge into it"
    assert "Bananas" in merged[0].node.text
