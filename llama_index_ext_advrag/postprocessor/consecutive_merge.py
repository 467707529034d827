"""Merge hits that are neighbours in a document into one node, optionally filling small gaps.

Retrieval often returns chunks 5 and 6 of the same document as two separate hits; the LLM then
reads the same passage cut in two, possibly far apart in the context. This postprocessor joins
them into one node in reading order. With ``fill_gaps=True`` hits a few nodes apart (5 and 8)
are joined too, the missing nodes fetched from the store in one batched query.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from llama_index_ext_advrag.layout import (
    CHAIN_PREFIX,
    Location,
    NodeLayout,
    ids_are_computable,
    locate_all,
)
from llama_index_ext_advrag.postprocessor._neighbours import (
    NeighbourStore,
    StoreBackedPostprocessor,
)
from llama_index_ext_advrag.postprocessor.pieces import (
    Member,
    Piece,
    dedupe_hits,
    expansion_event,
    merge_pieces,
    piece_from_members,
    piece_to_node,
)

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "consecutive_merge"
DEFAULT_MAX_GAP = 2


# --- the postprocessor ------------------------------------------------------------------------


def find_gaps(
    hits: Sequence[NodeWithScore], locations: dict[str, Location], layout: NodeLayout, max_gap: int
) -> list[list[str]]:
    """Per gap, the ids of the nodes missing between two hits at most ``max_gap`` nodes apart."""
    located = sorted(
        (locations[h.node.node_id], h.node)
        for h in hits
        if not locations[h.node.node_id].doc_id.startswith(CHAIN_PREFIX)
    )
    gaps: list[list[str]] = []
    for (left, node), (right, _) in zip(located, located[1:], strict=False):
        gap = right.first - left.last
        if left.doc_id != right.doc_id or gap <= 0 or gap % left.width:
            continue
        steps = gap // left.width
        if steps <= max_gap and ids_are_computable(node, left, layout):
            gaps.append([i for k in range(1, steps + 1) if (i := layout.neighbour_id(left, k))])
    return gaps


def hit_pieces(hits: Sequence[NodeWithScore], locations: dict[str, Location]) -> list[Piece]:
    pieces = []
    for rank, hit in enumerate(hits):
        member = Member(hit.node, locations[hit.node.node_id], "hit", hit.score)
        pieces.append(piece_from_members([member], hit, rank))
    return pieces


class ConsecutiveMergePostprocessor(StoreBackedPostprocessor):
    """Merge hits that are adjacent in their document (chunks 5 and 6) into one node.

    Nodes are placed by the pack's parser metadata (``document_id``, ``sentence_span``), or, for
    other parsers, by ``PREVIOUS``/``NEXT`` relationships among the hits. Output: one node per
    merged run, in reading order within each document, documents ordered by their best hit;
    each output node is a copy of its best hit with the joined text and the best score.

    Args:
        vector_store: the ``MilvusVectorStore`` holding the nodes (needed for ``fill_gaps``).
        docstore: a LlamaIndex docstore holding the nodes, instead of ``vector_store``.
        fill_gaps: also merge hits up to ``max_gap`` nodes apart, fetching the nodes between (one
            batched query); needs position metadata and a store.
        max_gap: the largest gap, in nodes, that ``fill_gaps`` fills.

    Raises:
        ValueError: ``fill_gaps`` without a store, both stores, a store of the wrong type.

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index.core.schema import NodeWithScore
        >>> from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
        >>> nodes = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        ...     [Document(text="A a. B b. C c. D d.", id_="doc")])
        >>> hits = [NodeWithScore(node=nodes[2], score=0.8), NodeWithScore(node=nodes[1], score=0.9)]
        >>> [(n.node.text, n.score) for n in ConsecutiveMergePostprocessor().postprocess_nodes(hits)]
        [('B b. C c.', 0.9)]
    """

    layout: NodeLayout = Field(default_factory=NodeLayout, description="Position metadata keys.")
    fill_gaps: bool = Field(default=False, description="Fill gaps of up to max_gap nodes.")
    max_gap: int = Field(default=DEFAULT_MAX_GAP, ge=1, le=50, description="Largest filled gap.")
    separator: str = Field(default=" ", description="Joins the texts of adjacent nodes.")

    _store: NeighbourStore | None = PrivateAttr(default=None)

    def __init__(self, vector_store: Any = None, docstore: Any = None, **data: Any) -> None:
        super().__init__(vector_store, docstore, **data)
        if self.fill_gaps and not self.has_store:
            raise ValueError("fill_gaps=True needs vector_store= or docstore= to fetch the gaps")
        if self.has_store:
            self._store = self._open_store(self.layout)

    @classmethod
    def class_name(cls) -> str:
        return "ConsecutiveMergePostprocessor"

    def _gaps(self, hits: Sequence[NodeWithScore]) -> tuple[list[list[str]], dict[str, Location]]:
        locations = locate_all((h.node for h in hits), self.layout)
        if not (self.fill_gaps and self._store is not None):
            return [], locations
        return find_gaps(hits, locations, self.layout, self.max_gap), locations

    def _assemble(
        self,
        hits: Sequence[NodeWithScore],
        locations: dict[str, Location],
        gaps: list[list[str]],
        found: dict[str, BaseNode],
    ) -> list[NodeWithScore]:
        pieces = hit_pieces(hits, locations)
        filled: set[str] = set()
        unfilled = 0
        for gap in gaps:
            gap_locations = [self.layout.locate(found[i]) if i in found else None for i in gap]
            if None in gap_locations:  # a hole in the store: merging would skip text silently
                unfilled += 1
                continue
            for node_id, location in zip(gap, gap_locations, strict=True):
                node = found[node_id]
                filled.add(node_id)
                member = Member(node, location, "gap")  # type: ignore[arg-type]
                pieces.append(piece_from_members([member], NodeWithScore(node=node), len(hits)))
        record = {
            "fill_gaps": self.fill_gaps,
            "round_trips": int(bool(gaps)),
            "gaps_filled": len(gaps) - unfilled,
            "gaps_unfilled": unfilled,
        }
        output = []
        for piece in merge_pieces(pieces):
            piece.hits = [h for h in piece.hits if h.node.node_id not in filled]
            output.append(
                piece_to_node(piece, TRACE_COMPONENT, record, self.layout, self.separator)
            )
        dispatcher.event(expansion_event(TRACE_COMPONENT, record, output))
        return output

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        hits = dedupe_hits(nodes)
        if not hits:
            return []
        gaps, locations = self._gaps(hits)
        ids = [i for gap in gaps for i in gap]
        found = self._store.get_nodes(ids, False) if ids and self._store else {}
        return self._assemble(hits, locations, gaps, found)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        hits = dedupe_hits(nodes)
        if not hits:
            return []
        gaps, locations = self._gaps(hits)
        ids = [i for gap in gaps for i in gap]
        found = await self._store.aget_nodes(ids, False) if ids and self._store else {}
        return self._assemble(hits, locations, gaps, found)


__all__ = ["ConsecutiveMergePostprocessor", "find_gaps", "hit_pieces"]
