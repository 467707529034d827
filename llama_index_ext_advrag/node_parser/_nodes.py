"""Node construction shared by the parsers: metadata, relationships, stats.

The keys and ids the parsers write are the layout contract in :mod:`llama_index_ext_advrag.layout`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.node_parser.node_utils import default_id_func
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.events import NodeParseEvent
from llama_index_ext_advrag.layout import SECTION_TITLE_KEY
from llama_index_ext_advrag.trace import TRACE_KEY, exclude_trace_key, with_record

logger = logging.getLogger(__name__)

# Read once: building a throwaway TextNode per node to get it cost a tenth of the parse time.
DEFAULT_TEXT_TEMPLATE: str = TextNode.model_fields["text_template"].default


def restore_id_func(data: dict[str, Any]) -> dict[str, Any]:
    """Undo core's serialisation of ``id_func`` (a ``{"id_func_name": ...}`` dict that core's own
    ``from_dict`` rejects): the default comes back as the default; a custom function cannot.

    Raises:
        ValueError: the serialised ``id_func`` was a custom function.
    """
    serialised = data.get("id_func")
    if not isinstance(serialised, dict):
        return data
    name = serialised.get("id_func_name")
    if name != default_id_func.__name__:
        raise ValueError(
            f"id_func {name!r} cannot be restored from a serialised parser; pass id_func= again"
        )
    return {key: value for key, value in data.items() if key != "id_func"}


def source_info(document: BaseNode) -> RelatedNodeInfo:
    """The SOURCE relationship for nodes cut from ``document``: the document's own source when it
    has one (as LlamaIndex core does), else the document. Computed once per document since it
    hashes the whole text."""
    return document.source_node or document.as_related_node_info()


class NodeFactory:
    """Builds the text nodes of one document; each inherits the document's metadata settings
    without sharing its lists.

    The section title is shown to the LLM (when there is one) but not embedded: prefixed to a
    short window or sentence it would pull every embedding of a section towards its title. With
    ``trace_component`` each node gets ``metadata[TRACE_KEY][trace_component]`` with the
    helpers :func:`~llama_index_ext_advrag.trace.add_trace` uses. What all nodes of the
    document share (metadata, templates, excluded-key lists) is worked out once: a parse builds
    tens of thousands of nodes.
    """

    __slots__ = ("_document", "_excluded", "_include_metadata", "_shared", "_source", "_trace")

    def __init__(
        self,
        document: BaseNode,
        source: RelatedNodeInfo,
        include_metadata: bool,
        trace_component: str | None = None,
    ) -> None:
        self._document, self._source = document, source
        self._include_metadata, self._trace = include_metadata, trace_component
        self._excluded: dict[tuple[tuple[str, ...], bool], tuple[list[str], list[str]]] = {}
        self._shared = {
            "metadata_separator": document.metadata_separator,
            "metadata_template": document.metadata_template,
            "text_template": getattr(document, "text_template", DEFAULT_TEXT_TEMPLATE),
        }

    def _excluded_keys(self, keys: tuple[str, ...], untitled: bool) -> tuple[list[str], list[str]]:
        """Embed- and LLM-excluded keys of a node excluding ``keys`` (and the trace key)."""
        cached = self._excluded.get((keys, untitled))
        if cached is None:
            document = self._document
            llm_keys = [*keys, SECTION_TITLE_KEY] if untitled else [*keys]
            embed = list(
                dict.fromkeys([*document.excluded_embed_metadata_keys, *keys, SECTION_TITLE_KEY])
            )
            llm = list(dict.fromkeys([*document.excluded_llm_metadata_keys, *llm_keys]))
            if self._trace is not None:
                exclude_trace_key(llm)
                exclude_trace_key(embed)
            cached = self._excluded[(keys, untitled)] = (embed, llm)
        return cached

    def make(
        self,
        node_id: str,
        text: str,
        *,
        start: int,
        end: int,
        metadata: dict[str, object],
        excluded_keys: tuple[str, ...],
        trace: object = None,
    ) -> TextNode:
        """A node of ``text`` (``source[start:end]``) with the document's metadata (when
        included) under ``metadata``, hiding ``excluded_keys`` from the embedding and the LLM."""
        merged = (
            {**self._document.metadata, **metadata} if self._include_metadata else dict(metadata)
        )
        if self._trace is not None:
            merged[TRACE_KEY] = with_record(merged.get(TRACE_KEY), self._trace, trace)
        embed, llm = self._excluded_keys(excluded_keys, merged.get(SECTION_TITLE_KEY) is None)
        return TextNode(
            id_=node_id,
            text=text,
            start_char_idx=start,
            end_char_idx=end,
            metadata=merged,
            excluded_embed_metadata_keys=list(embed),
            excluded_llm_metadata_keys=list(llm),
            relationships={NodeRelationship.SOURCE: self._source},
            **self._shared,
        )


def link_prev_next(
    nodes: Sequence[BaseNode], infos: Sequence[RelatedNodeInfo] | None = None
) -> None:
    """Set PREVIOUS/NEXT between consecutive nodes (all of one document and one level);
    ``infos`` are the nodes' ``as_related_node_info()`` when the caller already has them."""
    if infos is None:
        infos = [node.as_related_node_info() for node in nodes]
    for index, node in enumerate(nodes):
        if index > 0:
            node.relationships[NodeRelationship.PREVIOUS] = infos[index - 1]
        if index + 1 < len(nodes):
            node.relationships[NodeRelationship.NEXT] = infos[index + 1]


@dataclass(frozen=True)
class ParseStats:
    """What one parse produced; ``storage_expansion`` is stored window characters over source
    characters (1.0 means no overlap; sliding windows of 3 sentences by 1 store about 3x)."""

    documents: int
    sentences: int
    nodes: int
    source_chars: int
    window_chars: int
    breakpoint_signals: dict[str, int] = field(default_factory=dict)
    """Documents whose semantic breakpoints came from each signal (``"embedding"``,
    ``"lexical"``); empty when no breakpoints were placed."""

    @property
    def storage_expansion(self) -> float:
        return self.window_chars / self.source_chars if self.source_chars else 0.0


def parse_event(component: str, parser: str, stats: ParseStats, **sizes: Any) -> NodeParseEvent:
    """The instrumentation event of one parse: ``stats`` and the sizes the parser chose."""
    return NodeParseEvent(
        component=component,
        parser=parser,
        documents=stats.documents,
        sentences=stats.sentences,
        nodes=stats.nodes,
        storage_expansion=round(stats.storage_expansion, 4),
        breakpoint_signals=dict(stats.breakpoint_signals),
        **sizes,
    )


__all__ = [
    "NodeFactory",
    "ParseStats",
    "link_prev_next",
    "parse_event",
    "restore_id_func",
    "source_info",
]
