"""node_parser/_nodes.py on its own (the CI mutation sample runs only the test files that import
it): a node's id, place, metadata, excluded keys (the section title shown to the LLM only when
there is one, the trace key hidden) and source; its document's templates (also for a document
type without a text template); an earlier trace extended, not replaced; neighbours linked;
id_func restored; the parse event's signals, sizes and storage expansion to four places."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core import Document
from llama_index.core.schema import BaseNode, MetadataMode, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.layout import SECTION_TITLE_KEY
from llama_index_ext_advrag.node_parser._nodes import (
    DEFAULT_TEXT_TEMPLATE,
    NodeFactory,
    ParseStats,
    link_prev_next,
    parse_event,
    restore_id_func,
    source_info,
)
from llama_index_ext_advrag.trace import TRACE_KEY


def make(factory: NodeFactory, **settings: Any) -> TextNode:
    fields: dict[str, Any] = {"start": 0, "end": 7, "metadata": {}, "excluded_keys": ()}
    return factory.make("n1", "Ed Wood", **{**fields, **settings})


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


def test_restore_id_func_drops_the_default_and_refuses_a_custom_one() -> None:
    data = {"id_func": {"id_func_name": "default_id_func"}, "chunk_size": 3}
    assert restore_id_func(data) == {"chunk_size": 3}
    assert restore_id_func({"chunk_size": 3}) == {"chunk_size": 3}
    assert restore_id_func({"id_func": None, "chunk_size": 3}) == {"id_func": None, "chunk_size": 3}
    with pytest.raises(
        ValueError,
        match=r"^id_func 'mine' cannot be restored from a serialised parser; pass id_func= again$",
    ):
        restore_id_func({"id_func": {"id_func_name": "mine"}})


def test_link_prev_next_links_neighbours_only() -> None:
    nodes = [TextNode(text=t, id_=t) for t in "abc"]
    link_prev_next(nodes)
    assert [n.prev_node.node_id if n.prev_node else None for n in nodes] == [None, "a", "b"]
    assert [n.next_node.node_id if n.next_node else None for n in nodes] == ["b", "c", None]
    given = [TextNode(text=t, id_=t) for t in "xy"]
    infos = [RelatedNodeInfo(node_id=f"info-{t}") for t in "xy"]
    link_prev_next(given, infos)
    assert given[0].next_node == infos[1] and given[1].prev_node == infos[0]
    assert given[0].prev_node is None and given[1].next_node is None


def test_a_node_is_built_with_its_place_keys_and_source() -> None:
    document = Document(
        text="Ed Wood is a film.",
        id_="doc",
        metadata={"title": "Ed Wood", "year": 1994},
        excluded_embed_metadata_keys=["year"],
        excluded_llm_metadata_keys=["year"],
    )
    source = source_info(document)
    plain = NodeFactory(document, source, include_metadata=False)
    node = make(plain, metadata={"page": 1}, excluded_keys=("page",), start=3, end=7)
    assert (node.node_id, node.start_char_idx, node.end_char_idx) == ("n1", 3, 7)
    assert node.metadata == {"page": 1} and node.source_node == source
    # untitled: the section title key is hidden from the LLM too; the trace key is not listed
    assert node.excluded_embed_metadata_keys == ["year", "page", SECTION_TITLE_KEY]
    assert node.excluded_llm_metadata_keys == ["year", "page", SECTION_TITLE_KEY]
    titled = make(plain, metadata={SECTION_TITLE_KEY: "Plot"}, excluded_keys=("page",))
    assert titled.excluded_embed_metadata_keys == ["year", "page", SECTION_TITLE_KEY]
    assert titled.excluded_llm_metadata_keys == ["year", "page"]  # the title is shown
    traced = NodeFactory(document, source, include_metadata=True, trace_component="window")
    node = make(traced, metadata={SECTION_TITLE_KEY: "Plot"})
    assert node.metadata == {"title": "Ed Wood", "year": 1994, SECTION_TITLE_KEY: "Plot",
                             TRACE_KEY: {"window": None}}  # fmt: skip
    assert node.excluded_embed_metadata_keys == ["year", SECTION_TITLE_KEY, TRACE_KEY]
    assert node.excluded_llm_metadata_keys == ["year", TRACE_KEY]
