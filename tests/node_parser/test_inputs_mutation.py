"""What the parsers settle about a document before cutting it: unique document ids (repeats
numbered past ids other documents already have, each logged) and lone surrogates replaced on a
copy (logged with their counts). Kills the mutants of node_parser/inputs.py the parser tests
leave alive (mutation testing, issue #39)."""

from __future__ import annotations

import logging

import pytest
from llama_index.core import Document

from llama_index_ext_advrag.node_parser.inputs import clean_document, unique_document_ids

pytestmark = pytest.mark.unit

LOGGER = "llama_index_ext_advrag.node_parser.inputs"


def docs(*ids: str) -> list[Document]:
    return [Document(text=f"text {i}", id_=i) for i in ids]


def test_a_third_repeat_is_numbered_two() -> None:
    assert unique_document_ids(docs("a", "a", "a")) == ["a", "a#1", "a#2"]


def test_repeats_skip_ids_other_documents_have_and_ids_given_before() -> None:
    assert unique_document_ids(docs("a", "a#1", "a", "a")) == ["a", "a#1", "a#2", "a#3"]


def test_each_repeat_is_logged_naming_its_position_id_and_new_id(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    unique_document_ids(docs("a", "b", "a"))
    assert [r.getMessage() for r in caplog.records] == [
        "document 2 has the id 'a' of an earlier document of this parse; its nodes are derived "
        "from 'a#1' instead (same text: the same nodes twice; give documents unique ids to "
        "avoid this)"
    ]


def test_a_clean_document_is_returned_as_it_is(caplog) -> None:
    document = Document(text="kettle", id_="d", metadata={"title": "tea"})
    assert clean_document(document) is document
    assert not caplog.records


def test_surrogates_in_the_text_are_replaced_on_a_copy_and_counted(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    document = Document(text="ket\ud800tle\udc00", id_="d", metadata={"title": "tea \udfff"})
    cleaned = clean_document(document)
    assert cleaned is not document
    assert cleaned.text == "ket\ufffdtle\ufffd"  # the text alone, no metadata header
    assert cleaned.metadata == {"title": "tea \ufffd"}
    assert document.text == "ket\ud800tle\udc00" and document.metadata == {"title": "tea \udfff"}
    assert [r.getMessage() for r in caplog.records] == [
        "document 'd' holds 3 lone surrogate code points (2 in its text, 1 in its metadata), "
        "which cannot be encoded: replaced with U+FFFD"
    ]


def test_surrogates_only_in_the_metadata_leave_the_text(caplog) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)
    document = Document(text="kettle", id_="d", metadata={"title": "tea \udfff"})
    cleaned = clean_document(document)
    assert (cleaned.text, cleaned.metadata) == ("kettle", {"title": "tea \ufffd"})
    assert "(0 in its text, 1 in its metadata)" in caplog.records[0].getMessage()
    only_text = clean_document(Document(text="a\ud800", id_="e", metadata={"title": "tea"}))
    assert (only_text.text, only_text.metadata) == ("a\ufffd", {"title": "tea"})
