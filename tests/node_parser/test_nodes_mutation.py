"""node_parser/_nodes.py beyond the parser tests: a node keeps its document's metadata
templates (also for a document type without a text template), an earlier trace in the metadata
is extended, not replaced, and the parse event carries the breakpoint signals, the sizes given
and the storage expansion to four places (kills the module's mutants those tests leave)."""

from __future__ import annotations

from typing import Any

from llama_index.core import Document
from llama_index.core.schema import BaseNode, MetadataMode, TextNode

from llama_index_ext_advrag.node_parser._nodes import (
    DEFAULT_TEXT_TEMPLATE,
    NodeFactory,
    ParseStats,
    parse_event,
    source_info,
)
from llama_index_ext_advrag.trace import TRACE_KEY


def make(factory: NodeFactory, **settings: Any) -> TextNode:
    return factory.make(
        "n1", "Ed Wood", start=0, end=7, **{"metadata": {}, "excluded_keys": (), **settings}
    )


def test_a_node_keeps_its_documents_templates() -> None:
    document = Document(
        text="Ed Wood is a film.",
        metadata={"title": "Ed Wood"},
        metadata_separator="; ",
        metadata_template="{key}={value}",
        text_template="[{metadata_str}] {content}",
    )
    node = make(NodeFactory(document, source_info(document), include_metadata=True))
    assert (node.metadata_separator, node.metadata_template, node.text_template) == (
        "; ",
        "{key}={value}",
        "[{metadata_str}] {content}",
    )
    assert node.get_content(metadata_mode=MetadataMode.LLM) == "[title=Ed Wood] Ed Wood"


class Plain(BaseNode):
    """A document type of one's own: a BaseNode without a text template."""

    text: str = ""

    @classmethod
    def get_type(cls) -> str:
        return "plain"

    def get_content(self, metadata_mode: MetadataMode = MetadataMode.ALL) -> str:
        return self.text

    def get_content_blocks(self) -> list[Any]:
        return []

    def set_content(self, value: str) -> None:
        self.text = value

    @property
    def hash(self) -> str:
        return self.text


def test_a_document_without_a_text_template_gives_the_default_one() -> None:
    document = Plain(text="Ed Wood is a film.", id_="plain", metadata_separator="|")
    assert not hasattr(document, "text_template")
    node = make(NodeFactory(document, source_info(document), include_metadata=True))
    assert node.text_template == DEFAULT_TEXT_TEMPLATE and node.metadata_separator == "|"


def test_an_earlier_trace_is_extended_not_replaced() -> None:
    earlier = {"reader": {"page": 3}}
    document = Document(text="Ed Wood is a film.", metadata={TRACE_KEY: earlier})
    factory = NodeFactory(document, source_info(document), True, trace_component="window")
    node = make(factory, trace={"size": 1})
    assert node.metadata[TRACE_KEY] == {"reader": {"page": 3}, "window": {"size": 1}}
    assert document.metadata[TRACE_KEY] == earlier  # the document's own dict is not changed
    given = make(factory, metadata={TRACE_KEY: {"mine": 1}}, trace=2)
    assert given.metadata[TRACE_KEY] == {"mine": 1, "window": 2}


def test_the_parse_event_carries_signals_sizes_and_four_places() -> None:
    stats = ParseStats(2, 5, 4, 3, 10, {"embedding": 1, "lexical": 1})
    event = parse_event("sliding_window", "Parser", stats, window_sizes={3: 4})
    assert event.storage_expansion == 3.3333
    assert event.breakpoint_signals == {"embedding": 1, "lexical": 1}
    assert event.window_sizes == {3: 4}
    assert (event.documents, event.sentences, event.nodes) == (2, 5, 4)
