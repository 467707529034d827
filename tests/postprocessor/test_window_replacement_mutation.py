"""Window replacement's reading of each hit, exactly (kills the mutants of
postprocessor/window_replacement.py that test_window_replacement.py leaves): the own sentence
from ``original_text``, the document from ``ref_doc_id`` or the ``document_id`` metadata, hits
without a document never covered, ``top_n`` applied, the debug line counting skipped hits, and
the class name. Sync and async give the same output."""

from __future__ import annotations

import asyncio
import logging

import pytest
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.layout import DOCUMENT_ID_KEY
from llama_index_ext_advrag.postprocessor.window_replacement import (
    WindowReplacementPostprocessor,
)

MODES = ["sync", "async"]


def run(post: WindowReplacementPostprocessor, mode: str, hits: list[NodeWithScore]) -> list[str]:
    if mode == "sync":
        output = post.postprocess_nodes(hits)
    else:
        output = asyncio.run(post.apostprocess_nodes(hits))
    return [o.node.get_content() for o in output]


def hit(
    text: str, window: str | None = None, doc: str | None = None, **metadata: str
) -> NodeWithScore:
    node = TextNode(text=text, metadata=dict(metadata))
    if window is not None:
        node.metadata["window"] = window
    if doc is not None:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=doc)
    return NodeWithScore(node=node, score=0.5)


def test_class_name() -> None:
    assert WindowReplacementPostprocessor.class_name() == "WindowReplacementPostprocessor"


@pytest.mark.parametrize("mode", MODES)
def test_the_own_sentence_is_read_from_original_text(mode: str) -> None:
    # the second hit's text is not in the first window, its original_text is: covered
    hits = [
        hit("first", "A. B. C.", "d", original_text="A."),
        hit("unrelated text", "B. C. D.", "d", original_text=" B. "),
    ]
    assert run(WindowReplacementPostprocessor(), mode, hits) == ["A. B. C."]


@pytest.mark.parametrize("mode", MODES)
def test_without_original_text_the_text_alone_is_the_sentence(mode: str) -> None:
    # metadata must not leak into the sentence (nor into the window it stands in for)
    hits = [hit("Plain text.", doc="d", source="file.txt")]
    assert run(WindowReplacementPostprocessor(), mode, hits) == ["Plain text."]


@pytest.mark.parametrize("mode", MODES)
def test_the_document_id_metadata_places_a_hit_without_a_source(mode: str) -> None:
    hits = [
        hit("A.", "A. B. C.", **{DOCUMENT_ID_KEY: "d"}),
        hit("B.", "B. C. D.", **{DOCUMENT_ID_KEY: "d"}),
    ]
    assert run(WindowReplacementPostprocessor(), mode, hits) == ["A. B. C."]


@pytest.mark.parametrize("mode", MODES)
def test_hits_without_a_document_or_of_two_documents_are_never_covered(mode: str) -> None:
    orphans = [hit("A.", "A. B. C."), hit("B.", "B. C. D.")]
    assert run(WindowReplacementPostprocessor(), mode, orphans) == ["A. B. C.", "B. C. D."]
    two_docs = [hit("A.", "A. B. C.", "d"), hit("B.", "B. C. D.", "e")]
    assert run(WindowReplacementPostprocessor(), mode, two_docs) == ["A. B. C.", "B. C. D."]


@pytest.mark.parametrize("mode", MODES)
def test_top_n_limits_the_windows(mode: str) -> None:
    hits = [hit("A.", "A.", "d"), hit("B.", "B.", "d"), hit("C.", "C.", "d")]
    assert run(WindowReplacementPostprocessor(top_n=1), mode, hits) == ["A."]
    assert run(WindowReplacementPostprocessor(top_n=2), mode, hits) == ["A.", "B."]


@pytest.mark.parametrize("mode", MODES)
def test_skipped_hits_are_counted_in_a_debug_line(mode: str, caplog) -> None:
    hits = [hit("A.", "A. B. C.", "d"), hit("B.", "B. C.", "d"), hit("C.", "C.", "d")]
    logger = "llama_index_ext_advrag.postprocessor.window_replacement"
    with caplog.at_level(logging.DEBUG, logger=logger):
        run(WindowReplacementPostprocessor(), mode, hits)
    assert [r.getMessage() for r in caplog.records if r.name == logger] == [
        "skipped 2 hits already inside a kept window"
    ]
