"""HierarchicalAutoMergingRetriever on Milvus Lite and on the Milvus server (same assertions)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes
from llama_index.core.schema import NodeRelationship, TextNode

from llama_index_ext_advrag import IndexLayoutError
from llama_index_ext_advrag.retrievers import HierarchicalAutoMergingRetriever
from llama_index_ext_advrag.retrievers import auto_merging as module
from llama_index_ext_advrag.text import count_tokens
from llama_index_ext_advrag.trace import TRACE_KEY

TOPICS = ["volcano", "glacier", "desert", "reef", "forest", "tundra"]


def documents() -> list[Document]:
    """Two documents; each paragraph repeats its topic word so HashEmbedding can find it."""
    docs = []
    for d in range(2):
        paragraphs = []
        for i, topic in enumerate(TOPICS):
            sentences = [
                f"The {topic} in region {d} has feature {j} of the {topic} survey."
                for j in range(6)
            ]
            paragraphs.append(f"## Part {i} about {topic}\n\n" + " ".join(sentences))
        docs.append(Document(text="\n\n".join(paragraphs), id_=f"doc-{d}"))
    return docs


def build(uri: str, name: str, **kwargs) -> HierarchicalAutoMergingRetriever:
    kwargs.setdefault("chunk_sizes", [256, 64, 24])
    return HierarchicalAutoMergingRetriever.from_documents(
        documents(), uri=uri, collection_name=name, embed_model=HashEmbedding(dim=64), **kwargs
    )


def summary(nodes) -> list[tuple[str, float]]:
    return [(n.node.node_id, round(n.score or 0.0, 5)) for n in nodes]


@pytest.fixture(scope="module")
def retriever(module_milvus_uri: str) -> HierarchicalAutoMergingRetriever:
    """One index per backend shared by the read-only tests of this module (builds are slow)."""
    return build(module_milvus_uri, f"t_{uuid.uuid4().hex[:12]}", similarity_top_k=8)


def location(retriever: HierarchicalAutoMergingRetriever) -> tuple[str, str]:
    data = retriever.to_dict()
    return data["uri"], data["collection_name"]


def test_merges_into_parents_with_trace(retriever: HierarchicalAutoMergingRetriever) -> None:
    nodes = retriever.retrieve("glacier survey glacier feature")
    assert nodes, "the query matches glacier paragraphs"
    assert any("glacier" in n.node.get_content() for n in nodes)
    merged = [n for n in nodes if n.node.metadata[TRACE_KEY]["auto_merging"]["merged"]]
    assert merged, "eight hits on a 6-sentence topic must merge at least one parent"
    record = merged[0].node.metadata[TRACE_KEY]["auto_merging"]
    last = record["merges"][-1]
    assert last["parent_id"] == merged[0].node.node_id
    assert last["ratio"] > 0.5 and len(last["children_retrieved"]) <= last["children_total"]
    # the node stands for exactly the leaves its last merge replaced; each child that merge took
    # is a retrieved leaf or the parent an earlier merge of this node produced
    assert record["leaf_ids"] == last["leaf_ids"] and record["leaf_ids"]
    earlier = {m["parent_id"] for m in record["merges"][:-1]}
    assert set(last["children_retrieved"]) <= set(record["leaf_ids"]) | earlier
    # no duplicates, no overlap: every retrieved leaf is represented once
    leaf_sets = [set(n.node.metadata[TRACE_KEY]["auto_merging"]["leaf_ids"]) for n in nodes]
    assert sum(len(s) for s in leaf_sets) == len(set().union(*leaf_sets)) == 8
    assert len({n.node.node_id for n in nodes}) == len(nodes)


def test_reading_order_within_documents(retriever: HierarchicalAutoMergingRetriever) -> None:
    nodes = retriever.retrieve("reef survey feature")
    by_doc: dict[str, list[int]] = {}
    for n in nodes:
        by_doc.setdefault(n.node.ref_doc_id or "", []).append(n.node.metadata["advrag_pos"])
    for positions in by_doc.values():
        assert positions == sorted(positions)
    docs_in_order = list(dict.fromkeys(n.node.ref_doc_id for n in nodes))
    best = [max(n.score or 0 for n in nodes if n.node.ref_doc_id == d) for d in docs_in_order]
    assert best == sorted(best, reverse=True)


def test_sync_and_async_agree(retriever: HierarchicalAutoMergingRetriever) -> None:
    query = "desert feature region"
    sync = retriever.retrieve(query)
    async_ = asyncio.run(retriever.aretrieve(query))
    assert summary(sync) == summary(async_)
    assert [n.node.metadata[TRACE_KEY] for n in sync] == [
        n.node.metadata[TRACE_KEY] for n in async_
    ]


def test_async_uses_only_the_async_client(
    retriever: HierarchicalAutoMergingRetriever, forbid_blocking_milvus
) -> None:
    expected = summary(retriever.retrieve("glacier survey glacier feature"))
    forbid_blocking_milvus(module, "fetch_nodes")
    found = asyncio.run(retriever.aretrieve("glacier survey glacier feature"))
    assert summary(found) == expected
    assert any(n.node.metadata[TRACE_KEY]["auto_merging"]["merged"] for n in found)


def test_reopen_from_uri_gives_same_results(retriever: HierarchicalAutoMergingRetriever) -> None:
    milvus_uri, collection_name = location(retriever)
    reopened = HierarchicalAutoMergingRetriever.from_uri(
        milvus_uri, embed_model=HashEmbedding(dim=64), collection_name=collection_name,
        similarity_top_k=8,
    )  # fmt: skip
    assert reopened.layout["chunk_sizes"] == [256, 64, 24]
    assert reopened.layout["embed_dim"] == 64
    assert reopened.layout["node_parser"] == "HierarchicalSentenceNodeParser"
    for query in ("volcano feature", "tundra survey region 1"):
        assert summary(reopened.retrieve(query)) == summary(retriever.retrieve(query))


def test_to_dict_round_trip(retriever: HierarchicalAutoMergingRetriever) -> None:
    retriever_dict = retriever.to_dict()
    assert retriever_dict["similarity_top_k"] == 8 and retriever_dict["merge_ratio"] == 0.5
    clone = HierarchicalAutoMergingRetriever.from_dict(
        retriever_dict, embed_model=HashEmbedding(dim=64)
    )
    assert clone.to_dict() == retriever_dict
    assert summary(clone.retrieve("forest")) == summary(retriever.retrieve("forest"))


def test_budget_limits_context(milvus_uri: str, collection_name: str) -> None:
    parent = TextNode(id_="p", text="alpha beta. gamma delta. " + "filler words " * 20)
    kids = [
        TextNode(id_="k1", text="alpha beta. "),
        TextNode(id_="k2", text="gamma delta. "),
        TextNode(id_="k3", text="filler words " * 20),
    ]
    parent.relationships[NodeRelationship.CHILD] = [k.as_related_node_info() for k in kids]
    for kid in kids:
        kid.relationships[NodeRelationship.PARENT] = parent.as_related_node_info()
    free = HierarchicalAutoMergingRetriever.from_nodes(
        [parent, *kids], uri=milvus_uri, collection_name=collection_name,
        embed_model=HashEmbedding(dim=64), similarity_top_k=2,
    )  # fmt: skip
    query = "alpha beta gamma delta"
    assert [n.node.node_id for n in free.retrieve(query)] == ["p"]  # 2/3 > 0.5
    leaf_tokens = count_tokens("alpha beta. ") + count_tokens("gamma delta. ")
    budget = HierarchicalAutoMergingRetriever.from_dict(
        {**free.to_dict(), "max_context_tokens": leaf_tokens}, embed_model=HashEmbedding(dim=64)
    )
    limited = budget.retrieve(query)
    assert sorted(n.node.node_id for n in limited) == ["k1", "k2"]
    skipped = limited[0].node.metadata[TRACE_KEY]["auto_merging"]["merge_skipped"]
    assert skipped[0]["parent_id"] == "p" and skipped[0]["max_context_tokens"] == leaf_tokens
    assert skipped[0]["tokens_after_merge"] == count_tokens(parent.text)


def test_one_parent_fetch_per_round(retriever: HierarchicalAutoMergingRetriever, spy) -> None:
    calls = spy(module, "fetch_nodes", record=lambda store, ids, *args, **kwargs: len(ids))
    retriever.retrieve("glacier survey glacier feature")
    assert 1 <= len(calls) <= 2  # three levels: at most two parent levels to fetch


def test_leaves_are_a_plain_llamaindex_vector_store(
    retriever: HierarchicalAutoMergingRetriever,
) -> None:
    index = VectorStoreIndex.from_vector_store(
        retriever.vector_store, embed_model=HashEmbedding(dim=64)
    )
    hits = index.as_retriever(similarity_top_k=3).retrieve("volcano")
    assert len(hits) == 3
    assert all(n.node.relationships.get(NodeRelationship.PARENT) for n in hits)


def test_existing_index_is_not_overwritten_silently(milvus_uri: str, collection_name: str) -> None:
    build(milvus_uri, collection_name)
    with pytest.raises(ValueError, match="already exist"):
        build(milvus_uri, collection_name)
    rebuilt = build(milvus_uri, collection_name, overwrite=True, chunk_sizes=[128, 32])
    assert rebuilt.layout["chunk_sizes"] == [128, 32]


def test_unknown_index_names_existing_ones(retriever: HierarchicalAutoMergingRetriever) -> None:
    milvus_uri, collection_name = location(retriever)
    with pytest.raises(IndexLayoutError, match=collection_name):
        HierarchicalAutoMergingRetriever.from_uri(milvus_uri, collection_name="t_no_such_index")


def test_wrong_embedding_dimension_is_named(retriever: HierarchicalAutoMergingRetriever) -> None:
    milvus_uri, collection_name = location(retriever)
    other = HierarchicalAutoMergingRetriever.from_uri(
        milvus_uri, embed_model=HashEmbedding(dim=32), collection_name=collection_name
    )
    with pytest.raises(ValueError, match="32 dimensions.*64"):
        other.retrieve("volcano")


def test_core_parser_hierarchy_and_caller_nodes_untouched(
    milvus_uri: str, collection_name: str
) -> None:
    parser = HierarchicalNodeParser.from_defaults(chunk_sizes=[256, 64, 32], chunk_overlap=0)
    docs = documents()
    nodes = parser.get_nodes_from_documents(docs)
    before = [(n.node_id, dict(n.metadata), n.embedding) for n in nodes]
    retriever = HierarchicalAutoMergingRetriever.from_nodes(
        nodes, uri=milvus_uri, collection_name=collection_name,
        embed_model=HashEmbedding(dim=64), similarity_top_k=10,
    )  # fmt: skip
    assert [(n.node_id, dict(n.metadata), n.embedding) for n in nodes] == before
    assert retriever.layout["num_leaves"] == len(get_leaf_nodes(nodes))
    results = retriever.retrieve("reef survey feature reef")
    assert results and all(TRACE_KEY not in n.metadata for n in nodes)
    assert len({n.node.node_id for n in results}) == len(results)


def test_hand_made_hierarchy_merges_exactly(milvus_uri: str, collection_name: str) -> None:
    parent = TextNode(id_="p", text="alpha beta. gamma delta.")
    kids = [TextNode(id_="k1", text="alpha beta."), TextNode(id_="k2", text="gamma delta.")]
    other = TextNode(id_="k3", text="zeta eta theta iota")
    parent.relationships[NodeRelationship.CHILD] = [k.as_related_node_info() for k in kids]
    for kid in kids:
        kid.relationships[NodeRelationship.PARENT] = parent.as_related_node_info()
    retriever = HierarchicalAutoMergingRetriever.from_nodes(
        [parent, *kids, other], uri=milvus_uri, collection_name=collection_name,
        embed_model=HashEmbedding(dim=64), similarity_top_k=2,
    )  # fmt: skip
    assert retriever.layout["num_parents"] == 1
    nodes = retriever.retrieve("alpha beta gamma delta")
    assert [n.node.node_id for n in nodes] == ["p"]  # 2/2 children hit
    assert nodes[0].node.metadata[TRACE_KEY]["auto_merging"]["leaf_ids"] == ["k1", "k2"]
    single = HierarchicalAutoMergingRetriever.from_dict(
        {**retriever.to_dict(), "similarity_top_k": 1}, embed_model=HashEmbedding(dim=64)
    )
    assert [n.node.node_id for n in single.retrieve("alpha beta")] == ["k1"]  # 1/2: no merge


def test_invalid_arguments_are_named(milvus_uri: str, collection_name: str) -> None:
    with pytest.raises(ValueError, match="merge_ratio"):
        build(milvus_uri, collection_name, merge_ratio=2.0)
    with pytest.raises(ValueError, match="empty"):
        HierarchicalAutoMergingRetriever.from_nodes(
            [], uri=milvus_uri, collection_name=collection_name, embed_model=HashEmbedding()
        )
