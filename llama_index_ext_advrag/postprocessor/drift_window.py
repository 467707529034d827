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

Each call opens an instrumentation span and emits a
:class:`~llama_index_ext_advrag.events.DriftWindowEvent`: every window's growth record (why it
stopped, what it added and pruned).
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_ext_advrag.events import DriftWindowEvent
from llama_index_ext_advrag.layout import NodeLayout
from llama_index_ext_advrag.models import resolve_embed_model, settings_embed_model
from llama_index_ext_advrag.plan import Call, adrive, arun_call, drive, run_call
from llama_index_ext_advrag.postprocessor._growth import (
    GrowthLimits,
    StopReason,
    WindowUnit,
    grow_window,
    prune_window,
    window_change_limits,
)
from llama_index_ext_advrag.postprocessor._neighbours import (
    NeighbourStore,
    StoreBackedPostprocessor,
)
from llama_index_ext_advrag.postprocessor._window_session import WindowSession
from llama_index_ext_advrag.postprocessor.calibration import default_thresholds
from llama_index_ext_advrag.postprocessor.pieces import dedupe_hits, merge_pieces, piece_to_node
from llama_index_ext_advrag.queries import clean_query_bundle

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "drift_window"
DEFAULT_MAX_WINDOW_TOKENS = 768


# --- the postprocessor ------------------------------------------------------------------------


class DriftAwareWindowPostprocessor(StoreBackedPostprocessor):
    """Grow each hit into the smallest window of neighbours that still pays, then prune it.

    Args:
        vector_store: the LlamaIndex ``MilvusVectorStore`` holding the (sentence) nodes; their
            stored vectors are fetched with them.
        docstore: a LlamaIndex docstore instead; neighbours it holds without a vector are embedded
            at query time (one batch), which the trace records.
        embed_model: embeds the query when ``QueryBundle.embedding`` is not set; resolved with
            ``resolve_embed_model`` at query time. Must be the model the store was built with.
        min_sim: a neighbour is added only if its cosine to the query is at least this.
        prune_sim: after growth, non-anchor units below this are dropped.
        max_window_tokens: token budget of one window (the hit alone may exceed it).
        max_expand_steps: units added per window at most.
        drift_patience: consecutive drifting candidates that stop growth.
        drift_overlap: cue overlap below which a candidate counts as drifting.
        max_window_change: for conversations: a window has at most this many units more or less than
            the previous call's mean window (``reset_conversation`` forgets it).

    ``min_sim``/``prune_sim`` default to the values calibrated for the embedding model's
    family (bge-small-en-v1.5, all-MiniLM-L6-v2, multilingual-e5; see :meth:`thresholds` and
    docs/postprocessors.md); for another model run ``calibrate_thresholds``.

    Raises:
        ValueError: a bound violated, both or no store, a store of the wrong type; at query time, no
            query.

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> from llama_index.core.schema import NodeWithScore
        >>> from llama_index.core.storage.docstore import SimpleDocumentStore
        >>> from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
        >>> nodes = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        ...     [Document(text="A a. B b. C c. D d.", id_="doc")])
        >>> docstore = SimpleDocumentStore()
        >>> docstore.add_documents(nodes)
        >>> window = DriftAwareWindowPostprocessor(  # or vector_store=milvus_store
        ...     docstore=docstore, embed_model=MockEmbedding(embed_dim=8), max_expand_steps=1)
        >>> out = window.postprocess_nodes([NodeWithScore(node=nodes[1], score=0.8)], query_str="B?")
        >>> out[0].node.metadata["advrag_trace"]["drift_window"]["records"][0]["stop"]
        'max_expand_steps'
    """

    layout: NodeLayout = Field(default_factory=NodeLayout, description="Position metadata keys.")
    min_sim: float | None = Field(
        default=None, ge=-1, le=1, description="Growth threshold (None: the model's default)."
    )
    prune_sim: float | None = Field(
        default=None, ge=-1, le=1, description="Prune threshold (None: the model's default)."
    )
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
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    _previous_units: int | None = PrivateAttr(default=None)
    _resolved_embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    _warned_uncalibrated: bool = PrivateAttr(default=False)

    def __init__(
        self,
        vector_store: Any = None,
        docstore: Any = None,
        embed_model: BaseEmbedding | None = None,
        **data: Any,
    ) -> None:
        super().__init__(vector_store, docstore, **data)
        self._embed_model = embed_model
        self._store = self._open_store(self.layout)

    @property
    def embed_model(self) -> BaseEmbedding | None:
        """The query embedding model as given (resolved at first use)."""
        return self._embed_model

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

    def thresholds(self, query: str = "") -> tuple[float, float, str]:
        """``(min_sim, prune_sim, source)`` for ``query``: the values given, else the
        calibrated defaults of the embedding model's family and the query's language
        (:func:`default_thresholds`; source ``"given"``, ``"bge-small-en"``, ``"minilm"``,
        ``"multilingual-e5"``, ``"multilingual-e5/zh"`` or ``"uncalibrated"``, which logs one
        warning). The model is
        the one given, else ``Settings.embed_model`` if set, else the packaged default; it is
        not loaded for this."""
        model = self._resolved_embed_model or self.embed_model
        if model is None:
            model = settings_embed_model()  # None: the packaged default
        min_sim, prune_sim, family = default_thresholds(model, query)
        if self.min_sim is not None and self.prune_sim is not None:
            return self.min_sim, self.prune_sim, "given"
        if family == "uncalibrated" and not self._warned_uncalibrated:
            self._warned_uncalibrated = True
            logger.warning(
                "DriftAwareWindowPostprocessor: no calibrated thresholds for embedding model %r; "
                "using all-MiniLM-L6-v2's (min_sim=%s, prune_sim=%s). Run "
                "calibrate_thresholds(texts, embed_model, queries) and pass its values.",
                getattr(model, "model_name", type(model).__name__),
                min_sim,
                prune_sim,
            )
        source = family if self.min_sim is None and self.prune_sim is None else "given+" + family
        return (
            min_sim if self.min_sim is None else self.min_sim,
            prune_sim if self.prune_sim is None else self.prune_sim,
            source,
        )

    def _limits(self, query: str = "") -> GrowthLimits:
        min_units, max_units = window_change_limits(self._previous_units, self.max_window_change)
        min_sim, prune_sim, _ = self.thresholds(query)
        return GrowthLimits(
            min_sim=min_sim,
            max_window_tokens=self.max_window_tokens,
            max_expand_steps=self.max_expand_steps,
            drift_patience=self.drift_patience,
            drift_overlap=self.drift_overlap,
            prune_sim=prune_sim,
            min_units=min_units,
            max_units=max_units,
        )

    def _session(
        self, hits: list[NodeWithScore], query_vector: Sequence[float], query: str = ""
    ) -> WindowSession:
        return WindowSession(
            hits,
            query_vector,
            limits=self._limits(query),
            layout=self.layout,
            max_hole=self.max_hole,
        )

    def _finish(
        self, session: WindowSession, query_embedded: bool, query: str = ""
    ) -> list[NodeWithScore]:
        sizes = [window[1] for window in session.windows if window is not None]
        if self.max_window_change is not None and sizes:
            self._previous_units = round(sum(sizes) / len(sizes))
        source = self.thresholds(query)[2]
        record = {
            "query_embedded": query_embedded,
            "embedded_units": session.embedded,
            "round_trips": session.round_trips,
            "rows_read": session.rows_read,
            "fetched": len(session.nodes),
            "limits": session.limits.__dict__,
            "thresholds": source,
        }
        pieces = [window[0] for window in session.windows if window is not None]
        dispatcher.event(
            DriftWindowEvent(
                windows=[dict(r) for p in pieces for r in p.records],
                thresholds=source,
                round_trips=session.round_trips,
            )
        )
        return [
            piece_to_node(p, TRACE_COMPONENT, record, self.layout, self.separator)
            for p in merge_pieces(pieces)
        ]

    def _start(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[list[NodeWithScore], QueryBundle]:
        if query_bundle is None:
            raise ValueError("DriftAwareWindowPostprocessor needs the query (query_bundle=None)")
        if query_bundle.embedding is None and not query_bundle.embedding_strs:
            raise ValueError(
                "DriftAwareWindowPostprocessor grows windows towards the query, got an empty "
                f"query {query_bundle.query_str!r} without an embedding"
            )
        return dedupe_hits(nodes), clean_query_bundle(query_bundle, self.class_name())

    # --- the plan: the session loop written once, its I/O named in both flavours -------------

    def _embed_texts(self, texts: list[str]) -> Call:
        embedder = self._embedder()
        return Call(
            lambda: embedder.get_text_embedding_batch(texts),
            lambda: embedder.aget_text_embedding_batch(texts),
        )

    def _windows(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> Generator[Call, Any, list[NodeWithScore]]:
        """Embed the query (unless given), then fetch neighbours round by round (embedding the
        ones stored without a vector) while any window grows."""
        hits, query = self._start(nodes, query_bundle)
        if not hits:
            return []
        query_vector = query.embedding
        if query_vector is None:
            embedder, strings = self._embedder(), query.embedding_strs
            query_vector = yield Call(
                lambda: embedder.get_agg_embedding_from_queries(strings),
                lambda: embedder.aget_agg_embedding_from_queries(strings),
            )
        session = self._session(hits, query_vector, query.query_str)
        while requests := session.requests():
            fetched = yield from self._store.fetching(
                requests, light=True, known=session.known(), anchor_vectors=False
            )
            if missing := session.absorb(fetched):
                vectors = yield self._embed_texts(list(missing.values()))
                session.add_vectors(list(missing), vectors)
            session.grow()
        return self._finish(session, query.embedding is None, query.query_str)

    @dispatcher.span
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return drive(self._windows(nodes, query_bundle), run_call)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return await adrive(self._windows(nodes, query_bundle), arun_call)


__all__ = [
    "DriftAwareWindowPostprocessor",
    "GrowthLimits",
    "StopReason",
    "WindowUnit",
    "grow_window",
    "prune_window",
    "window_change_limits",
]
