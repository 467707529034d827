"""Merge hits that are neighbours in a document into one node, optionally filling small gaps.

Retrieval often returns chunks 5 and 6 of the same document as two separate hits; the LLM then
reads the same passage cut in two, possibly far apart in the context. This postprocessor joins
them into one node in reading order. With ``fill_gaps=True`` hits a few nodes apart (5 and 8)
are joined too, the missing nodes fetched from the store in one batched query.

The pieces/merge helpers here are shared by the other neighbour postprocessors: every one of
them ends by merging overlapping or touching pieces of a document and emitting them in reading
order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, NodeRelationship, NodeWithScore, QueryBundle

from llama_index_ext_advrag.postprocessor._layout import (
    CHAIN_PREFIX,
    Location,
    NodeLayout,
    ids_are_computable,
    locate_all,
)
from llama_index_ext_advrag.postprocessor._neighbours import NeighbourStore, build_neighbour_store
from llama_index_ext_advrag.postprocessor.annotations import ANNOTATION_KEYS
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)

TRACE_COMPONENT = "consecutive_merge"
DEFAULT_MAX_GAP = 2
GAP_MARKER = " ... "


# --- pieces: the shared merge-and-emit logic ------------------------------------------------------


@dataclass
class Member:
    """One stored node inside an output piece: a hit, a neighbour or a gap filler."""

    node: BaseNode
    location: Location
    role: str
    score: float | None = None


@dataclass
class Piece:
    """A stretch ``[first, last)`` of one document and the members kept from it."""

    doc_id: str
    first: int
    last: int
    rank: int  # best rank (position in the caller's list) of the hits inside
    members: dict[str, Member] = field(default_factory=dict)
    hits: list[NodeWithScore] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)


def piece_from_members(
    members: Sequence[Member], hit: NodeWithScore, rank: int, record: dict[str, Any] | None = None
) -> Piece:
    """A piece spanning ``members`` (any order), built around one hit."""
    first = min(m.location.first for m in members)
    last = max(m.location.last for m in members)
    piece = Piece(members[0].location.doc_id, first, last, rank, hits=[hit])
    for member in members:
        add_member(piece, member)
    if record is not None:
        piece.records.append(record)
    return piece


def add_member(piece: Piece, member: Member) -> None:
    """Add ``member`` unless present; a hit role and the higher score win over a neighbour's."""
    known = piece.members.get(member.node.node_id)
    if known is None or (known.role != "hit" and member.role == "hit"):
        piece.members[member.node.node_id] = member


def merge_pieces(pieces: Iterable[Piece], max_gap: int = 0) -> list[Piece]:
    """Merge pieces of a document that overlap, touch, or (``max_gap`` > 0) lie that close.

    Returns pieces ordered by the best hit rank of their document, then reading order.
    """
    by_doc: dict[str, list[Piece]] = {}
    for piece in pieces:
        by_doc.setdefault(piece.doc_id, []).append(piece)
    merged: list[Piece] = []
    for doc_pieces in by_doc.values():
        doc_pieces.sort(key=lambda p: (p.first, p.last))
        current = doc_pieces[0]
        for piece in doc_pieces[1:]:
            if piece.first - current.last <= max_gap:
                current = _join(current, piece)
            else:
                merged.append(current)
                current = piece
        merged.append(current)
    best_rank: dict[str, int] = {}
    for piece in merged:
        best_rank[piece.doc_id] = min(best_rank.get(piece.doc_id, piece.rank), piece.rank)
    merged.sort(key=lambda p: (best_rank[p.doc_id], p.doc_id, p.first))
    return merged


def _join(left: Piece, right: Piece) -> Piece:
    joined = Piece(
        left.doc_id,
        min(left.first, right.first),
        max(left.last, right.last),
        min(left.rank, right.rank),
        dict(left.members),
        [*left.hits, *right.hits],
        [*left.records, *right.records],
    )
    for member in right.members.values():
        add_member(joined, member)
    return joined


def char_span(node: BaseNode) -> tuple[int | None, int | None]:
    """``(start_char_idx, end_char_idx)`` of a text node, ``(None, None)`` for other nodes."""
    return getattr(node, "start_char_idx", None), getattr(node, "end_char_idx", None)


def ordered_members(piece: Piece) -> list[Member]:
    return sorted(piece.members.values(), key=lambda m: (m.location.first, m.location.last))


def join_texts(
    members: Sequence[Member], separator: str = " ", gap_marker: str = GAP_MARKER
) -> str:
    """Member texts in reading order; sentences shared by overlapping windows appear once, and
    ``gap_marker`` shows where text between two members was left out."""
    parts: list[str] = []
    previous: Member | None = None
    covered: int | None = None  # the furthest source character already included
    for member in members:
        text = member.node.get_content()
        start, end = char_span(member.node)
        if start is not None and end is not None and end - start == len(text):
            if covered is not None and start < covered:
                text = text[min(covered - start, len(text)) :].lstrip()
            covered = end if covered is None else max(covered, end)
        if text and previous is not None:
            contiguous = member.location.first <= previous.location.last
            parts.append(separator if contiguous else gap_marker)
        if text:
            parts.append(text)
        previous = member
    return "".join(parts).strip()


def piece_to_node(
    piece: Piece,
    component: str,
    record: dict[str, Any],
    layout: NodeLayout,
    separator: str = " ",
) -> NodeWithScore:
    """One output node for a piece: a copy of its best hit holding the joined text."""
    best = max(piece.hits, key=lambda h: h.score if h.score is not None else float("-inf"))
    result = copy_node_with_score(best)
    members = ordered_members(piece)
    node = result.node
    if len(members) > 1:
        node.set_content(join_texts(members, separator))
        node.embedding = None
        for key in ANNOTATION_KEYS:  # they describe one unit, not the joined text
            node.metadata.pop(key, None)
        spans = [char_span(m.node) for m in members]
        starts = [s for s, _ in spans if s is not None]
        ends = [e for _, e in spans if e is not None]
        if len(starts) == len(ends) == len(members) and hasattr(node, "start_char_idx"):
            node.start_char_idx, node.end_char_idx = min(starts), max(ends)  # type: ignore[attr-defined]
        if not piece.doc_id.startswith(CHAIN_PREFIX) and layout.span_key in node.metadata:
            # the text's extent: a pruned window edge is not part of it
            last = max(m.location.last for m in members)
            node.metadata[layout.span_key] = [members[0].location.first, last]
        for relation, member in (
            (NodeRelationship.PREVIOUS, members[0]),
            (NodeRelationship.NEXT, members[-1]),
        ):
            info = member.node.relationships.get(relation)
            if info is None:
                node.relationships.pop(relation, None)
            else:
                node.relationships[relation] = info
    result.score = best.score
    add_trace(
        node,
        component,
        {
            **record,
            "span": [piece.first, piece.last],
            "members": [{"id": m.node.node_id, "role": m.role} for m in members],
            "hits": [h.node.node_id for h in piece.hits],
            "records": piece.records,
        },
    )
    return result


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


def dedupe_hits(nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """The first occurrence of each node id (retrievers fusing lists may repeat a node)."""
    seen: dict[str, NodeWithScore] = {}
    for hit in nodes:
        seen.setdefault(hit.node.node_id, hit)
    return list(seen.values())


class ConsecutiveMergePostprocessor(BaseNodePostprocessor):
    """Merge hits that are adjacent in their document (chunks 5 and 6) into one node.

    Nodes are placed by the pack's parser metadata (``document_id``, ``sentence_span``), or, for
    other parsers, by ``PREVIOUS``/``NEXT`` relationships among the hits. Output: one node per
    merged run, in reading order within each document, documents ordered by their best hit;
    each output node is a copy of its best hit with the joined text and the best score.

    Args:
        vector_store: the ``MilvusVectorStore`` holding the nodes (needed for ``fill_gaps``).
        docstore: a LlamaIndex docstore holding the nodes, instead of ``vector_store``.
        fill_gaps: also merge hits up to ``max_gap`` nodes apart, fetching the nodes between
            (one batched query); needs position metadata and a store.
        max_gap: the largest gap, in nodes, that ``fill_gaps`` fills.

    Raises:
        ValueError: ``fill_gaps`` without a store, both stores, a store of the wrong type.

    Example:
        >>> merge = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True)  # doctest: +SKIP
        >>> merged = merge.postprocess_nodes(retriever.retrieve("query"))  # doctest: +SKIP
    """

    vector_store: Any = Field(default=None, exclude=True, description="MilvusVectorStore.")
    docstore: Any = Field(default=None, exclude=True, description="LlamaIndex docstore.")
    layout: NodeLayout = Field(default_factory=NodeLayout, description="Position metadata keys.")
    fill_gaps: bool = Field(default=False, description="Fill gaps of up to max_gap nodes.")
    max_gap: int = Field(default=DEFAULT_MAX_GAP, ge=1, le=50, description="Largest filled gap.")
    separator: str = Field(default=" ", description="Joins the texts of adjacent nodes.")

    _store: NeighbourStore | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        has_store = self.vector_store is not None or self.docstore is not None
        if self.fill_gaps and not has_store:
            raise ValueError("fill_gaps=True needs vector_store= or docstore= to fetch the gaps")
        if has_store:
            self._store = build_neighbour_store(self.vector_store, self.docstore, self.layout)

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


__all__ = [
    "ConsecutiveMergePostprocessor",
    "Member",
    "Piece",
    "join_texts",
    "merge_pieces",
    "piece_from_members",
    "piece_to_node",
]
