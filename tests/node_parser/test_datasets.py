"""Invariants of both parsers on the real COVID-QA papers and CMRC 2018 paragraphs."""

from __future__ import annotations

import json

import pytest
from llama_index.core import Document
from llama_index.core.node_parser import get_root_nodes
from llama_index.core.schema import NodeRelationship

from llama_index_ext_advrag.node_parser import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
)
from llama_index_ext_advrag.text import split_sentences

pytestmark = pytest.mark.dataset


def load_documents(path, limit):
    data = json.loads(path.read_text(encoding="utf-8"))
    contexts = [p["context"] for article in data["data"] for p in article["paragraphs"]]
    return [Document(text=text, id_=f"{path.stem}-{i}") for i, text in enumerate(contexts[:limit])]


@pytest.fixture(params=["covidqa/200423_covidQA.json", "cmrc2018/cmrc2018_dev.json"])
def documents(request, shared_datasets):
    path = shared_datasets / request.param
    if not path.is_file():
        pytest.skip(f"{path} missing")
    return load_documents(path, limit=3 if "covid" in request.param else 40)


def test_windows_are_exact_slices_and_cover_every_sentence(documents):
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", max_window_tokens=200, breakpoint_percentile=None
    )
    nodes = parser.get_nodes_from_documents(documents)
    texts = {d.node_id: d.text for d in documents}
    covered: dict[str, set[int]] = {}
    text_end: dict[str, int] = {}
    for node in nodes:
        source = texts[node.ref_doc_id]
        assert source[node.start_char_idx : node.end_char_idx] == node.text
        first, last = node.metadata["sentence_span"]
        covered.setdefault(node.ref_doc_id, set()).update(range(first, last))
        text_end[node.ref_doc_id] = max(text_end.get(node.ref_doc_id, 0), node.end_char_idx)
    # every document, every sentence up to its last, and the text up to its last character
    assert covered.keys() == {d.node_id for d in documents if d.text.strip()}
    for doc_id, sentences in covered.items():
        assert sentences == set(range(len(split_sentences(texts[doc_id])))), doc_id
        assert text_end[doc_id] == len(texts[doc_id].rstrip()), doc_id
    assert 1.0 < parser.last_parse_stats.storage_expansion < 3.0


def test_hierarchy_roots_tile_each_document(documents):
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[1024, 256, 64])
    nodes = parser.get_nodes_from_documents(documents)
    by_id = {n.node_id: n for n in nodes}
    for document in documents:
        roots = [n for n in get_root_nodes(nodes) if n.ref_doc_id == document.node_id]
        assert "".join(r.text for r in roots) == document.text.strip()
    for node in nodes:
        children = node.relationships.get(NodeRelationship.CHILD)
        if children:
            assert "".join(by_id[c.node_id].text for c in children) == node.text
