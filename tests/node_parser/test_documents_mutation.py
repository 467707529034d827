"""node_parser/_documents.py on its own (the CI mutation sample runs only the test files that
import it): the document id kept, or made unique for a repeated id; the text without metadata;
``max_sentence_chars`` reaching the cut of a long sentence (pieces of the text, marked as cut)
and the warning naming the document; paragraph breaks, tokens and source worked out on demand."""

from __future__ import annotations

import logging

import pytest
from llama_index.core import Document

from llama_index_ext_advrag.node_parser._documents import DocumentPlan, plan_documents
from llama_index_ext_advrag.node_parser._nodes import source_info
from llama_index_ext_advrag.text import count_tokens

LONG = "Short one. " + "x" * 250 + " end. Last one here."


def test_document_ids_are_kept_or_made_unique() -> None:
    documents = [
        Document(text="A.", id_="a"),
        Document(text="B.", id_="b"),
        Document(text="C.", id_="a"),
    ]
    assert [p.document_id for p in plan_documents(documents)] == ["a", "b", "a#1"]
    assert DocumentPlan(Document(text="A.", id_="a")).document_id == "a"
    assert DocumentPlan(Document(text="A.", id_="a"), "a#2").document_id == "a#2"


def test_a_long_sentence_is_cut_at_max_sentence_chars_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        (plan,) = plan_documents([Document(text=LONG, id_="a")], max_sentence_chars=100)
    assert plan.cut_sentences == 1
    pieces = [(s.start, s.end, s.cut) for s in plan.sentences]
    assert pieces == [(0, 100, True), (100, 200, True), (200, 266, True), (267, 281, False)]
    assert [s.text for s in plan.sentences] == [LONG[a:b] for a, b, _ in pieces]
    messages = [r.getMessage() for r in caplog.records if r.name.endswith("_documents")]
    assert messages == [
        "document 'a': 1 sentences longer than 100 characters were cut into pieces "
        "(4 sentences now)"
    ]
    assert DocumentPlan(Document(text=LONG, id_="a")).cut_sentences == 0  # the default: 4,000


def test_the_plan_reads_the_text_alone_and_works_out_the_rest_on_demand() -> None:
    document = Document(text="One here.\n\nTwo here. Three.", id_="a", metadata={"title": "T"})
    plan = DocumentPlan(document)
    assert plan.text == "One here.\n\nTwo here. Three."  # no metadata in the text planned
    assert plan.break_after is None
    assert plan.paragraph_breaks() == [True, False, False]
    assert plan.tokens == [count_tokens(s.text) for s in plan.sentences] and plan.tokens[0] > 0
    assert plan.source == source_info(plan.document) and plan.source.node_id == "a"
