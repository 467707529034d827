"""Hybrid retrieval: several legs (typically dense Milvus + BM25) fused into one ranking.

Each leg over-fetches ``leg_top_k`` results; the legs are merged with weighted reciprocal rank
fusion or normalised score fusion (the maths is in :mod:`.fusion`), and the best
``similarity_top_k`` are returned as copies whose score is the fused score. Every returned node
records, under ``metadata["advrag_trace"]["hybrid_fusion"]``, its rank and score in every leg
(``None`` where a leg missed it). In async the legs run concurrently. A leg that raises or
returns nothing is skipped with a logged warning and the others carry on; only when every leg
raises is the first error re-raised.

Legs named in ``english_only_legs`` (a dense leg on an English-only embedding model) count less
where the model cannot read: by default each candidate's term is scaled by
:func:`~.fusion.language_factor` of the query's and the node's share of CJK characters (down to
``cjk_weight_floor`` for wholly CJK text); with ``node_language=False`` only the query's share
lowers the leg weight (:func:`~.fusion.language_scaled_weights`). The factors used are in the
trace. Each call opens an instrumentation span and emits a
:class:`~llama_index_ext_advrag.events.HybridFusionEvent` (the legs and the fused ranking).

The lexical leg's backend is recorded under ``lexical`` (trace and event): ``milvus`` when BM25
runs inside the Milvus collection (:class:`~.milvus_bm25.MilvusBM25Retriever`, chosen by
:meth:`HybridFusionRetriever.from_defaults` when the store has full-text search), ``bm25s``
for the in-process index, with the reason.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr, model_validator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from llama_index_ext_advrag.events import HybridFusionEvent, LexicalChoiceRecord
from llama_index_ext_advrag.queries import clean_query_bundle
from llama_index_ext_advrag.retrievers._config import (
    ConfiguredRetriever,
    aclose_all,
    close_all,
    settings_model,
)
from llama_index_ext_advrag.retrievers.fusion import (
    DEFAULT_CJK_WEIGHT_FLOOR,
    DEFAULT_RRF_K,
    FusedHit,
    FusionMode,
    LegHit,
    NodeFactors,
    Normalization,
    fuse,
    language_factor,
    language_scaled_weights,
    validate_weights,
)
from llama_index_ext_advrag.text.words import cjk_share
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score, get_trace

if TYPE_CHECKING:
    from llama_index_ext_advrag.retrievers.milvus_bm25 import LexicalChoice

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_SIMILARITY_TOP_K = 10
DEFAULT_OVERFETCH = 3  # leg_top_k = 3 * similarity_top_k unless given
TRACE_COMPONENT = "hybrid_fusion"
# The fusion settings from_defaults uses when its dense leg is not English-only (a model that
# reads Chinese, e.g. multilingual-e5): z-score fusion, dense 1.0 / BM25 0.5. Chosen with the
# multilingual-e5 dense leg on CMRC 2018 (500 questions, k = 3, 5, 10: the largest summed paired
# gain over the better single leg, never below it) and reported on RGB zh (100 questions: at or
# above dense alone at every k, with fewer tokens); RRF with equal weights, the class default,
# fell one question below dense alone there (docs/retrievers_fusion.md).
MULTILINGUAL_FUSION_DEFAULTS: dict[str, Any] = {
    "mode": FusionMode.SCORE,
    "normalization": Normalization.ZSCORE,
    "weights": (1.0, 0.5),
}
# The fusion settings from_defaults uses when its dense leg is English-only (the default
# bge-small-en-v1.5, all-MiniLM): z-score fusion, equal weights. Chosen with bge-small as the
# dense leg on COVID-QA (first 30 papers, 213 questions, k = 1, 3, 5, 10 (8 for chunks), over
# both sentence nodes and 256-token chunks: the largest summed paired gain over the better single
# leg among settings whose 95% interval never lies wholly below 0) and reported on SQuAD 2.0
# (first 5 dev articles, 705 answerable questions: above the better leg at every k on both
# units). RRF with equal weights, the class default and the earlier default here, fell 2.3
# points below bge alone at k = 3 and 5 on COVID-QA sentences. Only modes that keep BM25's order
# where the English-only leg is muted (Chinese text) were candidates: RRF and z-score (min-max
# maps BM25's last hit to the score of the nodes it missed). docs/retrievers_fusion.md.
ENGLISH_FUSION_DEFAULTS: dict[str, Any] = {
    "mode": FusionMode.SCORE,
    "normalization": Normalization.ZSCORE,
    "weights": (1.0, 1.0),
}
# The same choice over sentence nodes alone (the legs of advrag compare's hybrid pipeline): BM25
# over single sentences is the weaker leg there, and dense 1.0 / BM25 0.3 gains the most.
ENGLISH_SENTENCE_FUSION_DEFAULTS: dict[str, Any] = {
    "mode": FusionMode.SCORE,
    "normalization": Normalization.ZSCORE,
    "weights": (1.0, 0.3),
}
# Giving any of these to from_defaults keeps the class defaults for the rest (the tuned set is
# applied whole or not at all).
FUSION_SETTINGS = ("mode", "normalization", "weights", "k")


def default_fusion_settings(
    dense_english_only: bool, sentence_units: bool = False
) -> dict[str, Any]:
    """The tuned fusion settings for a dense leg that reads only English
    (:data:`ENGLISH_FUSION_DEFAULTS`; :data:`ENGLISH_SENTENCE_FUSION_DEFAULTS` when both legs
    index single sentences) or one that also reads Chinese (:data:`MULTILINGUAL_FUSION_DEFAULTS`);
    a copy.

    >>> default_fusion_settings(True)["weights"], default_fusion_settings(True, True)["weights"]
    ((1.0, 1.0), (1.0, 0.3))
    """
    if not dense_english_only:
        chosen = MULTILINGUAL_FUSION_DEFAULTS
    else:
        chosen = ENGLISH_SENTENCE_FUSION_DEFAULTS if sentence_units else ENGLISH_FUSION_DEFAULTS
    logger.info("dense leg English-only=%s: fusion %s", dense_english_only, chosen)
    return dict(chosen)


def with_top_k(retriever: BaseRetriever, top_k: int) -> BaseRetriever:
    """A copy of ``retriever`` fetching ``top_k`` (the caller's object is untouched).

    The pack's retrievers are copied with ``with_settings`` (sharing their open stores) on
    the setting that bounds their results (``top_k_setting``); other retrievers with a
    ``similarity_top_k`` attribute (core's vector retrievers) are shallow-copied with it set;
    the rest are returned as they are (logged at DEBUG)."""
    setting = getattr(retriever, "top_k_setting", None)
    if isinstance(retriever, ConfiguredRetriever) and setting:
        return retriever.with_settings(**{setting: top_k})
    if not hasattr(retriever, "similarity_top_k"):
        logger.debug("%s has no similarity_top_k; used as configured", type(retriever).__name__)
        return retriever
    clone = copy.copy(retriever)
    clone.similarity_top_k = top_k  # type: ignore[attr-defined]
    return clone


def leg_hits(results: Sequence[NodeWithScore]) -> list[LegHit]:
    return [LegHit(r.node.node_id, r.score) for r in results]


def build_fused_nodes(
    fused: Sequence[FusedHit],
    legs: Sequence[Sequence[NodeWithScore]],
    leg_names: Sequence[str],
    config: HybridFusionRetriever,
    degraded: Sequence[dict[str, Any]],
    language: dict[str, Any] | None = None,
    node_factors: NodeFactors | None = None,
    lexical: LexicalChoiceRecord | None = None,
) -> list[NodeWithScore]:
    """Copies of the fused nodes (taken from the first leg holding each) with traces;
    ``language`` (the query's CJK share and the weights used) is recorded when given, and a
    leg's language factor for the node under ``legs[i]["language_factor"]``."""
    first: dict[str, NodeWithScore] = {}
    for leg in legs:
        for result in leg:
            first.setdefault(result.node.node_id, result)
    nodes = []
    for hit in fused[: config.similarity_top_k]:
        result = copy_node_with_score(first[hit.node_id])
        result.score = hit.score
        record: dict[str, Any] = {
            "mode": config.mode.value,
            "fused_score": hit.score,
            "legs": [
                {"leg": name, "rank": rank, "score": score}
                for name, rank, score in zip(leg_names, hit.ranks, hit.scores, strict=True)
            ],
        }
        for entry, factors in zip(record["legs"], node_factors or (), strict=False):
            if factors is not None:
                entry["language_factor"] = factors.get(hit.node_id, 1.0)
        if degraded:
            record["degraded"] = list(degraded)
        if language:
            record["language"] = dict(language)
        if lexical:
            record["lexical"] = dict(lexical)
        add_trace(result.node, TRACE_COMPONENT, record)
        nodes.append(result)
    return nodes


class HybridFusionRetriever(ConfiguredRetriever):
    """Fuse several retrievers (dense + BM25) with weighted RRF or normalised score fusion.

    Args:
        retrievers: the legs, e.g. ``[vector_index.as_retriever(), JiebaBM25Retriever(nodes)]``.
        weights: one weight per leg (default all 1.0); honoured in both modes.
        mode: ``"rrf"`` (``sum w_i / (k + rank_i)``) or ``"score"`` (normalise, weighted sum).
        k: the RRF constant (default 60). normalization: ``"minmax"`` or ``"zscore"``.
        similarity_top_k: fused results returned. leg_top_k: results fetched per leg (default ``3 *
            similarity_top_k``); the legs are copied with it set (:func:`with_top_k`), the
            caller's retrievers are not modified.
        leg_names: names used in the trace (default: the legs' class names).
        english_only_legs: names of legs whose model only reads English (e.g. ``["dense"]`` over
            bge-small-en-v1.5 or all-MiniLM-L6-v2): such a leg's term for a candidate is
            multiplied by ``r + (1 - r) * cjk_weight_floor`` with ``r = 1 - max(s_query,
            s_node)``, the ``s`` being shares of CJK characters; English text fuses with the
            given weights, Chinese text leans on the language-independent legs (BM25).
        cjk_weight_floor: that factor for wholly CJK text, in [0, 1] (0 mutes the leg there). The
            default is chosen on held-out CMRC 2018 questions (docs/retrievers_fusion.md).
        node_language: ``True`` (default): the factor uses the query's and the candidate node's CJK
            share (the model can read neither a Chinese query nor a Chinese passage); ``False``: the
            query's share only, applied to the leg weight.

    The settings are fields (``leg_names`` and ``weights`` are filled in when not given), so
    ``to_dict()`` holds everything but the legs: ``from_dict(data, retrievers=legs)``.
    :meth:`close` closes the legs that can be closed.

    Raises:
        ValueError: no legs, weights of the wrong length or negative, an unknown ``mode`` or
            ``normalization``, a top-k below 1, an ``english_only_legs`` name that is not a leg
            name, a ``cjk_weight_floor`` outside [0, 1].

    Example:
        >>> from llama_index.core import VectorStoreIndex
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> from llama_index.core.schema import TextNode
        >>> nodes = [TextNode(text=t, id_=str(i)) for i, t in enumerate(
        ...     ["The FX-40 syncs every 15 minutes.", "潜伏期一般为三到七天。", "Receipts from 25 euros."])]
        >>> index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
        >>> hybrid = HybridFusionRetriever.from_defaults(  # dense leg from the index + BM25 over nodes
        ...     index, nodes=nodes, mode="rrf", similarity_top_k=1, english_only_legs=["dense"])
        >>> best = hybrid.retrieve("潜伏期有多长？")[0]
        >>> best.node.text
        '潜伏期一般为三到七天。'
        >>> trace = best.node.metadata["advrag_trace"]["hybrid_fusion"]
        >>> trace["mode"], trace["language"]["cjk_share"], [leg["leg"] for leg in trace["legs"]]
        ('rrf', 1.0, ['dense', 'bm25'])
    """

    weights: tuple[float, ...] | None = Field(
        default=None,
        description="One weight >= 0 per leg, honoured in both modes; None (given) = all 1.0.",
    )
    mode: FusionMode = Field(default=FusionMode.RRF, description="'rrf' or 'score'.")
    k: int = Field(default=DEFAULT_RRF_K, ge=0, le=100_000, description="RRF constant k.")
    normalization: Normalization = Field(
        default=Normalization.MINMAX, description="Per-leg normalisation in 'score' mode."
    )
    similarity_top_k: int = Field(
        default=DEFAULT_SIMILARITY_TOP_K, ge=1, le=10_000, description="Fused results returned."
    )
    leg_top_k: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Results fetched per leg before fusion; None = 3 * similarity_top_k.",
    )
    leg_names: list[str] | None = Field(
        default=None, description="Leg names in the trace; None (given) = the legs' class names."
    )
    english_only_legs: tuple[str, ...] = Field(
        default=(),
        description="Leg names whose model reads English only (scaled down on CJK text).",
    )
    cjk_weight_floor: float = Field(
        default=DEFAULT_CJK_WEIGHT_FLOOR,
        ge=0.0,
        le=1.0,
        description="Weight factor of an English-only leg on wholly CJK text (0 mutes it).",
    )
    node_language: bool = Field(
        default=True,
        description="Scale English-only legs per candidate by the CJK share of the query "
        "and of the node's text; False = by the query's share only.",
    )

    _legs: list[BaseRetriever] = PrivateAttr(default_factory=list)
    _lexical: LexicalChoice | None = PrivateAttr(default=None)

    def __init__(
        self,
        retrievers: Sequence[BaseRetriever] = (),
        lexical_choice: LexicalChoice | None = None,
        **settings: Any,
    ) -> None:
        if not retrievers:
            raise ValueError("retrievers must hold at least one retriever, got none")
        if settings.get("leg_names") is None:
            settings["leg_names"] = [type(r).__name__ for r in retrievers]
        if settings.get("weights") is None:
            settings["weights"] = (1.0,) * len(retrievers)
        super().__init__(**settings)
        self._legs = list(retrievers)
        self._check_legs()
        if lexical_choice is None:
            from llama_index_ext_advrag.retrievers.milvus_bm25 import lexical_choice_of

            lexical_choice = lexical_choice_of(self._legs)
        self._lexical = lexical_choice

    @model_validator(mode="after")
    def _check_on_write(self) -> HybridFusionRetriever:
        if self.__pydantic_private__ is not None and self._legs:  # after __init__
            self._check_legs()
        return self

    def _check_legs(self) -> None:
        count = len(self._legs)
        validate_weights(self.weights, count)
        names = list(self.leg_names or ())
        if len(names) != count:
            raise ValueError(f"leg_names {names} has {len(names)} entries for {count} legs")
        unknown = sorted(set(self.english_only_legs) - set(names))
        if unknown:
            raise ValueError(f"english_only_legs {unknown} are not leg names {names}")

    @classmethod
    def class_name(cls) -> str:
        return "HybridFusionRetriever"

    @property
    def effective_leg_top_k(self) -> int:
        """Results fetched per leg: ``leg_top_k`` or ``3 * similarity_top_k``."""
        return self.leg_top_k or DEFAULT_OVERFETCH * self.similarity_top_k

    @property
    def leg_weights(self) -> tuple[float, ...]:
        """One weight per leg (``weights``, or all 1.0)."""
        return validate_weights(self.weights, len(self._legs))

    @property
    def english_only(self) -> tuple[bool, ...]:
        """Per leg, whether it is named in ``english_only_legs``."""
        return tuple(name in self.english_only_legs for name in self.leg_names or ())

    @property
    def lexical_choice(self) -> LexicalChoice | None:
        """The lexical leg's backend (``milvus`` or ``bm25s``) and why; ``None`` without one."""
        return self._lexical

    @property
    def legs(self) -> list[BaseRetriever]:
        """The legs as given (a new list)."""
        return list(self._legs)

    def _fetching_legs(self) -> list[BaseRetriever]:
        """The legs set to fetch :attr:`effective_leg_top_k` (shallow copies sharing the legs'
        open stores, made per call: the caller keeps one retriever per k)."""
        top_k = self.effective_leg_top_k
        return [with_top_k(r, top_k) for r in self._legs]

    @classmethod
    def from_defaults(
        cls,
        vector_index: Any,
        nodes: Sequence[BaseNode] | None = None,
        bm25_retriever: BaseRetriever | None = None,
        **kwargs: Any,
    ) -> HybridFusionRetriever:
        """Dense leg from ``vector_index`` + a BM25 leg: given, else Milvus full-text search
        when the index's Milvus collection has it (:class:`~.milvus_bm25.MilvusBM25Retriever`;
        Milvus Lite or a server >= 2.5, collection opened with ``full_text=``), else bm25s
        built over ``nodes``. The choice and its reason are in :attr:`lexical_choice`, the
        trace (``lexical``) and the event.

        Unless ``english_only_legs`` is given, the dense leg is marked English-only exactly
        when the index's embedding model is (:func:`~llama_index_ext_advrag.embeddings.
        language.is_english_only`): bge-small-en-v1.5 or all-MiniLM-L6-v2 is scaled down on
        Chinese text, a multilingual model is not.

        When none of ``mode``, ``normalization``, ``weights`` and ``k`` is given, the fusion
        settings are the tuned ones (:func:`default_fusion_settings`):
        :data:`ENGLISH_FUSION_DEFAULTS` for an English-only dense leg (fitted with
        bge-small-en-v1.5), :data:`MULTILINGUAL_FUSION_DEFAULTS` otherwise (a dense leg that
        reads the language is the stronger leg). Given any of them, the class defaults (RRF,
        equal weights) fill in the rest."""
        from llama_index_ext_advrag.embeddings.language import is_english_only
        from llama_index_ext_advrag.retrievers.milvus_bm25 import choose_lexical_leg

        if bm25_retriever is None:
            bm25_retriever, choice = choose_lexical_leg(vector_index, nodes)
            kwargs.setdefault("lexical_choice", choice)
            logger.info("hybrid lexical leg: %s (%s)", choice.backend, choice.reason)
        dense = vector_index.as_retriever()
        legs = [dense, bm25_retriever]
        names = kwargs.setdefault("leg_names", ["dense", "bm25"])
        if "english_only_legs" not in kwargs:
            embed_model = getattr(dense, "_embed_model", None) or getattr(
                vector_index, "_embed_model", None
            )
            english = embed_model is not None and is_english_only(embed_model)
            kwargs["english_only_legs"] = [names[0]] if english else []
            logger.debug("dense leg english_only=%s (model %r)", english, embed_model)
        if not any(key in kwargs for key in FUSION_SETTINGS):
            kwargs.update(default_fusion_settings(names[0] in kwargs["english_only_legs"]))
        return cls(retrievers=legs, **kwargs)

    def close(self) -> None:
        """Close the legs that can be closed (e.g. the pack's Milvus retrievers)."""
        close_all(self._legs)

    async def aclose(self) -> None:
        await aclose_all(self._legs)

    def query_weights(self, query_str: str) -> tuple[tuple[float, ...], dict[str, Any] | None]:
        """The leg weights for ``query_str`` scaled by its CJK share (as with
        ``node_language=False``) and, with English-only legs, what chose them."""
        if not any(self.english_only):
            return self.leg_weights, None
        share = cjk_share(query_str)
        weights = language_scaled_weights(
            self.leg_weights, self.english_only, share, self.cjk_weight_floor
        )
        return weights, {"cjk_share": round(share, 4), "weights": list(weights)}

    def node_factors(
        self, query_share: float, legs: Sequence[Sequence[NodeWithScore]]
    ) -> list[dict[str, float] | None]:
        """Per leg, ``{node_id: language_factor(query_share, node share)}`` for English-only
        legs (``None`` for the others), over the nodes of every leg: a node the leg did not
        return is scored with the leg's absent floor, which the factor scales too."""
        floor = self.cjk_weight_floor
        texts = {r.node.node_id: r.node.get_content() for leg in legs for r in leg}
        factors = {
            node_id: language_factor(query_share, cjk_share(text), floor)
            for node_id, text in texts.items()
        }
        return [factors if english else None for english in self.english_only]

    def _fuse(
        self, query_str: str, outcomes: Sequence[list[NodeWithScore] | BaseException]
    ) -> list[NodeWithScore]:
        legs, degraded = self._triage(outcomes)
        factors: NodeFactors | None = None
        if self.node_language and any(self.english_only):
            share = cjk_share(query_str)
            weights, factors = self.leg_weights, self.node_factors(share, legs)
            language: dict[str, Any] | None = {"cjk_share": round(share, 4)}
        else:
            weights, language = self.query_weights(query_str)
        fused = fuse(
            [leg_hits(leg) for leg in legs],
            mode=self.mode,
            weights=weights,
            k=self.k,
            normalization=self.normalization,
            node_factors=factors,
        )
        leg_names = self.leg_names or []
        lexical = self._lexical.to_dict() if self._lexical else None
        nodes = build_fused_nodes(
            fused, legs, leg_names, self, degraded, language, factors, lexical
        )
        reasons = {entry["leg"]: entry["reason"] for entry in degraded}
        dispatcher.event(
            HybridFusionEvent(
                mode=self.mode.value,
                legs=[
                    {"leg": name, "weight": weight, "hits": len(leg), "degraded": reasons.get(name)}
                    for name, weight, leg in zip(leg_names, weights, legs, strict=True)
                ],
                fused=[
                    {
                        "node_id": node.node.node_id,
                        "score": node.score,
                        "ranks": [
                            leg["rank"] for leg in get_trace(node.node, TRACE_COMPONENT)["legs"]
                        ],
                    }
                    for node in nodes
                ],
                lexical=lexical,
            )
        )
        return nodes

    def _triage(
        self, outcomes: Sequence[list[NodeWithScore] | BaseException]
    ) -> tuple[list[list[NodeWithScore]], list[dict[str, Any]]]:
        """Turn failed legs into empty ones, log why, and re-raise when all legs failed."""
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors and len(errors) == len(outcomes):
            raise errors[0]
        legs: list[list[NodeWithScore]] = []
        degraded = []
        top_k = self.effective_leg_top_k
        for name, outcome in zip(self.leg_names or [], outcomes, strict=True):
            if isinstance(outcome, BaseException):
                logger.warning("hybrid leg %s failed (%r); fusing the other legs", name, outcome)
                degraded.append({"leg": name, "reason": f"error: {outcome!r}"})
                legs.append([])
            elif not outcome:
                logger.warning("hybrid leg %s returned nothing; fusing the other legs", name)
                degraded.append({"leg": name, "reason": "empty"})
                legs.append([])
            else:
                legs.append(list(outcome[:top_k]))
        return legs, degraded

    @dispatcher.span
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        outcomes: list[list[NodeWithScore] | BaseException] = []
        for leg in self._fetching_legs():
            try:
                outcomes.append(leg.retrieve(query_bundle))
            except Exception as exc:
                outcomes.append(exc)
        return self._fuse(query_bundle.query_str, outcomes)

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        gathered = await asyncio.gather(
            *(leg.aretrieve(query_bundle) for leg in self._fetching_legs()), return_exceptions=True
        )
        outcomes: list[list[NodeWithScore] | BaseException] = []
        for outcome in gathered:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome  # cancellation and interrupts are not a leg failure
            outcomes.append(outcome)
        return self._fuse(query_bundle.query_str, outcomes)


# Deprecated: the settings of earlier versions' ``config`` attribute (now fields).
HybridFusionConfig = settings_model(HybridFusionRetriever, "HybridFusionConfig")

__all__ = [
    "ENGLISH_FUSION_DEFAULTS",
    "ENGLISH_SENTENCE_FUSION_DEFAULTS",
    "MULTILINGUAL_FUSION_DEFAULTS",
    "HybridFusionConfig",
    "HybridFusionRetriever",
    "build_fused_nodes",
    "default_fusion_settings",
    "leg_hits",
    "with_top_k",
]
