"""Pieces: the merge-and-emit logic every neighbour postprocessor ends with.

Each postprocessor turns its hits into pieces (a stretch of one document and the nodes kept
from it), merges pieces of a document that overlap or touch, and emits one node per piece in
reading order, documents ordered by their best hit.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.schema import BaseNode, NodeRelationship, NodeWithScore

from llama_index_ext_advrag.events import NeighbourExpansionEvent
from llama_index_ext_advrag.layout import ANNOTATION_KEYS, CHAIN_PREFIX, Location, NodeLayout
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score, get_trace

GAP_MARKER = " ... "


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
        doc_id=left.doc_id,
        first=min(left.first, right.first),
        last=max(left.last, right.last),
        rank=min(left.rank, right.rank),
        members=dict(left.members),
        hits=[*left.hits, *right.hits],
        records=[*left.records, *right.records],
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


def dedupe_hits(nodes: Sequence[NodeWithScore]) -> list[NodeWithScore]:
    """The first occurrence of each node id (retrievers fusing lists may repeat a node)."""
    seen: dict[str, NodeWithScore] = {}
    for hit in nodes:
        seen.setdefault(hit.node.node_id, hit)
    return list(seen.values())


def expansion_event(
    component: str, decision: dict[str, Any], results: Sequence[NodeWithScore]
) -> NeighbourExpansionEvent:
    """The instrumentation event of one expansion: ``decision`` (the record shared by every
    returned node) and, per returned node, the rest of its trace (members, hits, span, role)."""
    nodes = []
    for result in results:
        record = get_trace(result.node, component) or {}
        own = {key: value for key, value in record.items() if key not in decision}
        nodes.append({"node_id": result.node.node_id, **own})
    return NeighbourExpansionEvent(component=component, decision=dict(decision), nodes=nodes)


__all__ = [
    "GAP_MARKER",
    "Member",
    "Piece",
    "add_member",
    "char_span",
    "dedupe_hits",
    "expansion_event",
    "join_texts",
    "merge_pieces",
    "ordered_members",
    "piece_from_members",
    "piece_to_node",
]
