"""Adaptive context windows: grow from each hit while the neighbours pay, then prune.

A fixed window (``k`` sentences each side) is too wide where the hit already answers and too
narrow where the answer runs on. Here each hit's window grows one sentence at a time towards
the more query-similar neighbour and stops on the first of: a token budget, a step budget,
similarity below ``min_sim``, similarity falling two steps in a row, a topic drift (the
candidate's entity/keyword cues barely overlap the window's, ``drift_patience`` times in a
row), or a section boundary. Then sentences below ``prune_sim`` are dropped (never the hit),
overlapping windows merge, and every decision is recorded in the trace.

Similarities use the vectors already stored with the nodes (fetched in the same batched query
as the neighbours); only the query is embedded. ``min_sim``/``prune_sim`` are raw cosine
values, which depend on the embedding model: derive them with
:func:`llama_index_ext_advrag.postprocessor.calibration.calibrate_thresholds`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, SerializeAsAny
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.postprocessor._growth import (
    Growth,
    GrowthLimits,
    LazyUnits,
    StopReason,
    WindowUnit,
    grow_window,
    prune_window,
    window_change_limits,
)
from llama_index_ext_advrag.postprocessor._layout import NodeLayout, locate_all
from llama_index_ext_advrag.postprocessor._neighbours import (
    FetchResult,
    NeighbourRequest,
    NeighbourStore,
    build_neighbour_store,
)
from llama_index_ext_advrag.postprocessor.annotations import stored_cues
from llama_index_ext_advrag.postprocessor.calibration import (
    MINILM_MIN_SIM,
    MINILM_PRUNE_SIM,
    cosine_to_query,
)
from llama_index_ext_advrag.postprocessor.consecutive_merge import (
    Member,
    Piece,
    dedupe_hits,
    merge_pieces,
    piece_to_node,
)
from llama_index_ext_advrag.text import extract_cues

logger = logging.getLogger(__name__)

TRACE_COMPONENT = "drift_window"
DEFAULT_MAX_WINDOW_TOKENS = 768
FIRST_FETCH_STEPS = 4
MORE_FETCH_STEPS = 4


# --- the postprocessor ------------------------------------------------------------------------


class DriftAwareWindowPostprocessor(BaseNodePostprocessor):
    """Grow each hit into the smallest window of neighbours that still pays, then prune it.

    Args:
        vector_store: the LlamaIndex ``MilvusVectorStore`` holding the (sentence) nodes; their
            stored vectors are fetched with them.
        docstore: a LlamaIndex docstore instead; neighbours it holds without a vector are
            embedded at query time (one batch), which the trace records.
        embed_model: embeds the query when ``QueryBundle.embedding`` is not set; resolved with
            ``resolve_embed_model`` at query time. Must be the model the store was built with.
        min_sim: a neighbour is added only if its cosine to the query is at least this.
        prune_sim: after growth, non-anchor units below this are dropped.
        max_window_tokens: token budget of one window (the hit alone may exceed it).
        max_expand_steps: units added per window at most.
        drift_patience: consecutive drifting candidates that stop growth.
        drift_overlap: cue overlap below which a candidate counts as drifting.
        max_window_change: for conversations: a window has at most this many units more or
            less than the previous call's mean window (``reset_conversation`` forgets it).

    The defaults of ``min_sim``/``prune_sim`` are calibrated for all-MiniLM-L6-v2 (see
    docs/postprocessors.md); for another model run ``calibrate_thresholds``.

    Raises:
        ValueError: a bound violated, both or no store, a store of the wrong type; at query
            time, no query.

    Example:
        >>> window = DriftAwareWindowPostprocessor(vector_store=vector_store)  # doctest: +SKIP
        >>> nodes = window.postprocess_nodes(retriever.retrieve(q), query_str=q)  # doctest: +SKIP
    """

    vector_store: Any = Field(default=None, exclude=True, description="MilvusVectorStore.")
    docstore: Any = Field(default=None, exclude=True, description="LlamaIndex docstore.")
    embed_model: SerializeAsAny[BaseEmbedding] | None = Field(
        default=None, exclude=True, description="Query embedding model (same as the store's)."
    )
    layout: NodeLayout = Field(default_factory=NodeLayout, description="Position metadata keys.")
    min_sim: float = Field(default=MINILM_MIN_SIM, ge=-1, le=1, description="Growth threshold.")
    prune_sim: float = Field(default=MINILM_PRUNE_SIM, ge=-1, le=1, description="Prune threshold.")
    max_window_tokens: int = Field(
        default=DEFAULT_MAX_WINDOW_TOKENS, ge=1, le=100_000, description="Token budget per window."
    )
    max_expand_steps: int = Field(default=12, ge=0, le=100, description="Units added at most.")
    drift_patience: int = Field(default=3, ge=1, le=100, description="Drifts in a row that stop.")
    drift_overlap: float = Field(default=0.2, ge=0, le=1, description="Cue overlap = drift below.")
    max_hole: int = Field(
        default=1, ge=0, le=10, description="Dropped units kept between kept ones."
    )
    max_window_change: int | None = Field(
        default=None, ge=0, le=100, description="Conversation: window size change per turn."
    )
    separator: str = Field(default=" ", description="Joins the texts of adjacent nodes.")

    _store: NeighbourStore = PrivateAttr()
    _previous_units: int | None = PrivateAttr(default=None)
    _resolved_embed_model: BaseEmbedding | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self._store = build_neighbour_store(self.vector_store, self.docstore, self.layout)

    @classmethod
    def class_name(cls) -> str:
        return "DriftAwareWindowPostprocessor"

    def _embedder(self) -> BaseEmbedding:
        """Resolve the embedding model once per postprocessor, at first use (loading the packaged
        default costs seconds; it must not happen on every query)."""
        if self._resolved_embed_model is None:
            self._resolved_embed_model = resolve_embed_model(self.embed_model)
        return self._resolved_embed_model

    def reset_conversation(self) -> None:
        """Forget the previous turn's window size (``max_window_change``)."""
        self._previous_units = None

    # --- pure parts ----------------------------------------------------------------------------

    def _limits(self) -> GrowthLimits:
        min_units, max_units = window_change_limits(self._previous_units, self.max_window_change)
        return GrowthLimits(
            self.min_sim, self.max_window_tokens, self.max_expand_steps, self.drift_patience,
            self.drift_overlap, self.prune_sim, min_units, max_units,
        )  # fmt: skip

    def _window(
        self, session: _Session, index: int, locations: dict[str, Any]
    ) -> tuple[Piece, int, Growth]:
        hit, hood = session.hits[index], session.hoods[index]
        nodes, anchor, limits = hood.nodes, hood.anchor_index, session.limits
        units = LazyUnits(nodes, session.sims, locations, session.units)
        growth = grow_window(units, anchor, limits, lambda i: session.cues_of(nodes[i]))
        kept, pruned = prune_window(
            units, growth, anchor, self.prune_sim, limits.min_units, self.max_hole
        )
        members = [
            Member(hit.node if i == anchor else nodes[i], locations[nodes[i].node_id],
                   "hit" if i == anchor else "neighbour", hit.score)
            for i in kept
        ]  # fmt: skip
        piece = Piece(members[0].location.doc_id, locations[nodes[growth.left].node_id].first,
                      locations[nodes[growth.right].node_id].last, index, hits=[hit])  # fmt: skip
        piece.members = {m.node.node_id: m for m in members}
        added = [
            {"id": nodes[step["index"]].node_id, **{k: v for k, v in step.items() if k != "index"}}
            for step in growth.added
        ]
        piece.records.append({
            "anchor": hit.node.node_id,
            "anchor_similarity": _rounded(units[anchor].similarity),
            "added": added,
            "pruned": [{"id": nodes[i].node_id, "similarity": round(units[i].similarity, 4)} for i in pruned],
            "stop": growth.stop.value,
            "sides": growth.sides,
            "units": len(kept),
            "tokens": sum(units[i].tokens for i in kept),
        })  # fmt: skip
        return piece, len(kept), growth

    def _finish(self, session: _Session, query_embedded: bool) -> list[NodeWithScore]:
        sizes = [window[1] for window in session.windows if window is not None]
        if self.max_window_change is not None and sizes:
            self._previous_units = round(sum(sizes) / len(sizes))
        record = {
            "query_embedded": query_embedded,
            "embedded_units": session.embedded,
            "round_trips": session.round_trips,
            "rows_read": session.rows_read,
            "fetched": len(session.nodes),
            "limits": session.limits.__dict__,
        }
        pieces = [window[0] for window in session.windows if window is not None]
        return [
            piece_to_node(p, TRACE_COMPONENT, record, self.layout, self.separator)
            for p in merge_pieces(pieces)
        ]

    def _start(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[list[NodeWithScore], QueryBundle]:
        if query_bundle is None:
            raise ValueError("DriftAwareWindowPostprocessor needs the query (query_bundle=None)")
        return dedupe_hits(nodes), query_bundle

    # --- sync / async: only the I/O differs ----------------------------------------------------

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        hits, query = self._start(nodes, query_bundle)
        if not hits:
            return []
        query_vector = query.embedding
        if query_vector is None:
            query_vector = self._embedder().get_agg_embedding_from_queries(query.embedding_strs)
        session = _Session(self, hits, query_vector)
        while requests := session.requests():
            fetched = self._store.fetch(
                requests, light=True, known=session.known(), anchor_vectors=False
            )
            if missing := session.absorb(fetched):
                vectors = self._embedder().get_text_embedding_batch(list(missing.values()))
                session.add_vectors(list(missing), vectors)
            session.grow()
        return self._finish(session, query.embedding is None)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        hits, query = self._start(nodes, query_bundle)
        if not hits:
            return []
        query_vector = query.embedding
        if query_vector is None:
            query_vector = await self._embedder().aget_agg_embedding_from_queries(
                query.embedding_strs
            )
        session = _Session(self, hits, query_vector)
        while requests := session.requests():
            fetched = await self._store.afetch(
                requests, light=True, known=session.known(), anchor_vectors=False
            )
            if missing := session.absorb(fetched):
                vectors = await self._embedder().aget_text_embedding_batch(list(missing.values()))
                session.add_vectors(list(missing), vectors)
            session.grow()
        return self._finish(session, query.embedding is None)


def _rounded(similarity: float) -> float | None:
    """A similarity for the trace; ``None`` for a hit whose vector was not at hand."""
    return None if math.isnan(similarity) else round(similarity, 4)


class _Session:
    """One call: neighbourhoods fetched so far, vectors, similarities, memoised tokens and cues.

    The first fetch asks ``FIRST_FETCH_STEPS`` nodes each side of every hit. A window that grew
    into the edge of what was fetched on a side (not the document's edge) gets
    ``MORE_FETCH_STEPS`` more on that side only (one batched query for all such hits, nodes
    already held excluded) and is regrown from scratch, until no window touches a fetch edge:
    the result equals one fetch of ``max_expand_steps`` each side, at about half the rows
    (Milvus charges per row returned, and most windows stop within three sentences a side).
    """

    def __init__(
        self, post: DriftAwareWindowPostprocessor, hits: list[NodeWithScore], query: Any
    ) -> None:
        self.post, self.hits, self.query = post, hits, query
        self.limits = post._limits()
        self.hoods: list[Any] = [None] * len(hits)
        self.windows: list[tuple[Piece, int, Growth] | None] = [None] * len(hits)
        first = min(FIRST_FETCH_STEPS, post.max_expand_steps)
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
        locations = locate_all(
            [*self.nodes.values(), *(h.node for h in self.hits)], self.post.layout
        )
        for index in self.pending:
            self.windows[index] = self.post._window(self, index, locations)
        self.pending = [index for index in self.pending if self._widen(index)]

    def _widen(self, index: int) -> bool:
        """Reach further on each side where the window ran into the edge of what was fetched."""
        growth, hood = self.windows[index][2], self.hoods[index]  # type: ignore[index]
        edge, cap = StopReason.DOCUMENT_EDGE.value, self.post.max_expand_steps
        widened = False
        for position, (side, nodes) in enumerate((("left", hood.before), ("right", hood.after))):
            reach = self.reach[index][position]
            if growth.sides.get(side) == edge and len(nodes) == reach < cap:
                self.reach[index][position] = min(cap, reach + MORE_FETCH_STEPS)
                widened = True
        return widened


__all__ = [
    "DriftAwareWindowPostprocessor",
    "GrowthLimits",
    "StopReason",
    "WindowUnit",
    "grow_window",
    "prune_window",
    "window_change_limits",
]
