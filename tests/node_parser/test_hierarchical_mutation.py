"""HierarchicalSentenceNodeParser pinned exactly (found by mutation testing, issue #39): the
parse statistics over several documents, node ids, the document's metadata, the long-sentence
cut and the progress bar."""

from __future__ import annotations

import re

from llama_index.core import Document

from llama_index_ext_advrag.layout import deterministic_node_id
from llama_index_ext_advrag.node_parser import HierarchicalSentenceNodeParser
from llama_index_ext_advrag.node_parser._nodes import ParseStats

FIRST = "One two. Three four. Five."
SECOND = "Six seven eight. Nine ten."


def test_stats_and_nodes_add_up_over_documents_and_skip_an_empty_one() -> None:
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[8, 4])
    docs = [
        Document(text=FIRST, id_="a"),
        Document(text="   ", id_="blank"),
        Document(text=f"  {SECOND}\n", id_="b"),
    ]
    nodes = parser.get_nodes_from_documents(docs)
    assert [n.metadata["document_id"] for n in nodes] == ["a"] * 4 + ["b"] * 3
    stored = sum(len(n.text) for n in nodes)
    assert parser.last_parse_stats == ParseStats(3, 5, 7, len(FIRST) + len(SECOND), stored)


def test_node_ids_derive_from_the_document_level_and_sentence_span() -> None:
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[8, 4])
    nodes = parser.get_nodes_from_documents([Document(text=FIRST, id_="a")])
    spans = [(n.metadata["hierarchy_level"], *n.metadata["sentence_span"]) for n in nodes]
    assert spans == [(0, 0, 3), (1, 0, 1), (1, 1, 2), (1, 2, 3)]
    assert [n.node_id for n in nodes] == [deterministic_node_id("a", "level", *s) for s in spans]


def test_nodes_carry_the_documents_metadata() -> None:
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[8, 4])
    doc = Document(text=FIRST, id_="a", metadata={"author": "Ann"})
    assert all(n.metadata["author"] == "Ann" for n in parser.get_nodes_from_documents([doc]))


def test_max_sentence_chars_cuts_a_long_sentence() -> None:
    text = " ".join(["word"] * 60) + "."  # 300 characters, one sentence
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[1000], max_sentence_chars=100)
    nodes = parser.get_nodes_from_documents([Document(text=text, id_="a")])
    assert parser.last_parse_stats is not None and parser.last_parse_stats.sentences >= 3
    assert len(nodes) == 1 and nodes[0].text == text


def test_show_progress_shows_a_bar_named_building_hierarchy(capfd) -> None:  # noqa: ANN001
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[8, 4])
    capfd.readouterr()
    parser.get_nodes_from_documents([Document(text=FIRST, id_="a")], show_progress=True)
    assert re.search(r"(^|\r)Building hierarchy: ", capfd.readouterr().err)
