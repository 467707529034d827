"""One call of the drift-aware window: what was fetched, the similarities, and each hit's window.

The session holds the neighbourhoods fetched so far and grows every hit's window with the rules
in :mod:`._growth`; :class:`~.drift_window.DriftAwareWindowPostprocessor` runs the fetches (sync
or async) and hands the results in. The dependency is one way: the postprocessor builds the
session from its settings, and the session never calls back into it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from llama_index.core.schema import BaseNode, NodeWithScore

from llama_index_ext_advrag.layout import Location, NodeLayout, locate_all, stored_cues
from llama_index_ext_advrag.postprocessor._growth import (
    Growth,
    GrowthLimits,
    LazyUnits,
    StopReason,
    WindowUnit,
    grow_window,
    prune_window,
)
from llama_index_ext_advrag.postprocessor._neighbours import (
    FetchResult,
    Neighbourhood,
    NeighbourRequest,
)
from llama_index_ext_advrag.postprocessor.pieces import Member, Piece
from llama_index_ext_advrag.similarity import cosine_to_query
from llama_index_ext_advrag.text import extract_cues

FIRST_FETCH_STEPS = 4
MORE_FETCH_STEPS = 4


def _rounded(similarity: float) -> float | None:
    """A similarity for the trace; ``None`` for a hit whose vector was not at hand."""
    return None if math.isnan(similarity) else round(similarity, 4)


def build_window(
    hit: NodeWithScore,
    rank: int,
    hood: Neighbourhood,
    units: Sequence[WindowUnit],
    locations: dict[str, Location],
    *,
    limits: GrowthLimits,
    cues: Callable[[BaseNode], frozenset[str]],
    max_hole: int,
) -> tuple[Piece, int, Growth]:
    """Grow and prune the window of ``hit`` (the ``rank``-th hit) over its neighbourhood.

    Returns the window as a piece (with its trace record), its number of units and how it grew.
    ``cues`` gives the cues of a node of the neighbourhood.
    """
    nodes, anchor = hood.nodes, hood.anchor_index
    growth = grow_window(units, anchor, limits, lambda i: cues(nodes[i]))
    kept, pruned = prune_window(units, growth, anchor, limits.prune_sim, limits.min_units, max_hole)
    members = [
        Member(
            node=hit.node if i == anchor else nodes[i],
            location=locations[nodes[i].node_id],
            role="hit" if i == anchor else "neighbour",
            score=hit.score,
        )
        for i in kept
    ]
    piece = Piece(
        doc_id=members[0].location.doc_id,
        first=locations[nodes[growth.left].node_id].first,
        last=locations[nodes[growth.right].node_id].last,
        rank=rank,
        hits=[hit],
    )
    piece.members = {m.node.node_id: m for m in members}
    added = [
        {"id": nodes[step["index"]].node_id, **{k: v for k, v in step.items() if k != "index"}}
        for step in growth.added
    ]
    pruned_units = [
        {"id": nodes[i].node_id, "similarity": round(units[i].similarity, 4)} for i in pruned
    ]
    piece.records.append(
        {
            "anchor": hit.node.node_id,
            "anchor_similarity": _rounded(units[anchor].similarity),
            "added": added,
            "pruned": pruned_units,
            "stop": growth.stop.value,
            "sides": {side: reason.value for side, reason in growth.sides.items()},
            "units": len(kept),
            "tokens": sum(units[i].tokens for i in kept),
        }
    )
    return piece, len(kept), growth


class WindowSession:
    """One call: neighbourhoods fetched so far, vectors, similarities, memoised tokens and cues.

    The first fetch asks ``FIRST_FETCH_STEPS`` nodes each side of every hit. A window that grew
    into the edge of what was fetched on a side (not the document's edge) gets
    ``MORE_FETCH_STEPS`` more on that side only (one batched query for all such hits, nodes
    already held excluded) and is regrown from scratch, until no window touches a fetch edge:
    the result equals one fetch of ``max_expand_steps`` each side, at about half the rows
    (Milvus charges per row returned, and most windows stop within three sentences a side).
    """

    def __init__(
        self,
        hits: list[NodeWithScore],
        query: Sequence[float],
        *,
        limits: GrowthLimits,
        layout: NodeLayout,
        max_hole: int,
    ) -> None:
        self.hits, self.query = hits, query
        self.limits, self.layout, self.max_hole = limits, layout, max_hole
        self.hoods: list[Any] = [None] * len(hits)
        self.windows: list[tuple[Piece, int, Growth] | None] = [None] * len(hits)
        first = min(FIRST_FETCH_STEPS, limits.max_expand_steps)
        self.reach = [[first, first] for _ in hits]  # nodes asked for before / after each hit
        self.pending = list(range(len(hits)))
        self.hit_ids = {hit.node.node_id for hit in hits}
        self.nodes: dict[str, BaseNode] = {}
        self.vectors: dict[str, Any] = {}
        self.sims: dict[str, float] = {}
        self.units: dict[str, WindowUnit] = {}
        self.cues: dict[str, frozenset[str]] = {}
        self.round_trips = self.embedded = self.rows_read = 0

    def cues_of(self, node: BaseNode) -> frozenset[str]:
        if node.node_id not in self.cues:
            cues = stored_cues(node.metadata)  # annotated at ingest (UnitAnnotator), or now
            self.cues[node.node_id] = extract_cues(node.get_content()) if cues is None else cues
        return self.cues[node.node_id]

    def requests(self) -> list[NeighbourRequest]:
        return [NeighbourRequest(self.hits[i].node, *self.reach[i]) for i in self.pending]

    def absorb(self, fetched: FetchResult) -> dict[str, str]:
        """Take a fetch in; returns the texts of nodes that came without a vector."""
        self.round_trips += fetched.round_trips
        self.rows_read += fetched.fetched
        for index, hood in zip(self.pending, fetched.neighbourhoods, strict=True):
            self.hoods[index] = hood
            for node in hood.nodes:
                held = self.nodes.get(node.node_id)
                if held is None or (held.embedding is None and node.embedding is not None):
                    self.nodes[node.node_id] = node
        # A hit's own similarity decides nothing (it is always kept), so a hit that came back
        # from the retriever without its vector is neither fetched again nor embedded, unless
        # it is also another hit's neighbour.
        needed = {
            node.node_id
            for hood in self.hoods
            if hood is not None
            for node in (*hood.before, *hood.after)
        }
        fresh = [self.nodes[i] for i in needed if i not in self.vectors]
        self.vectors.update((n.node_id, n.embedding) for n in fresh if n.embedding is not None)
        return {n.node_id: n.get_content() for n in fresh if n.embedding is None}

    def known(self) -> dict[str, BaseNode]:
        """Nodes not to fetch again: all but hits held without their vector (a hit may turn
        out to be another hit's neighbour, whose similarity is then needed)."""
        return {
            node_id: node
            for node_id, node in self.nodes.items()
            if node_id not in self.hit_ids or node_id in self.vectors
        }

    def add_vectors(self, ids: list[str], vectors: Sequence[Sequence[float]]) -> None:
        self.vectors.update(zip(ids, vectors, strict=True))
        self.embedded += len(ids)

    def grow(self) -> None:
        """(Re)grow the pending windows; keep pending those that need a wider fetch."""
        new = [i for i in self.vectors if i not in self.sims]
        self.sims.update(
            zip(new, cosine_to_query(self.query, [self.vectors[i] for i in new]), strict=True)
        )
        locations = locate_all([*self.nodes.values(), *(h.node for h in self.hits)], self.layout)
        for index in self.pending:
            hood = self.hoods[index]
            units = LazyUnits(hood.nodes, self.sims, locations, self.units)
            self.windows[index] = build_window(
                self.hits[index],
                index,
                hood,
                units,
                locations,
                limits=self.limits,
                cues=self.cues_of,
                max_hole=self.max_hole,
            )
        self.pending = [index for index in self.pending if self._widen(index)]

    def _widen(self, index: int) -> bool:
        """Reach further on each side where the window ran into the edge of what was fetched."""
        growth, hood = self.windows[index][2], self.hoods[index]  # type: ignore[index]
        edge, cap = StopReason.DOCUMENT_EDGE, self.limits.max_expand_steps
        widened = False
        for position, (side, nodes) in enumerate((("left", hood.before), ("right", hood.after))):
            reach = self.reach[index][position]
            if growth.sides.get(side) == edge and len(nodes) == reach < cap:
                self.reach[index][position] = min(cap, reach + MORE_FETCH_STEPS)
                widened = True
        return widened


__all__ = ["FIRST_FETCH_STEPS", "MORE_FETCH_STEPS", "WindowSession", "build_window"]
