"""Rank fusion maths: weighted reciprocal rank fusion and normalised score fusion.

Pure functions over node ids and scores, shared by :class:`HybridFusionRetriever` and usable
on their own. A *leg* is one retriever's result list, best first. Ranks start at 1 and come
from the leg's order; a node id repeated within a leg keeps its first (best) position.

* ``rrf``: ``score(d) = sum_i w_i / (k + rank_i(d))`` over the legs that returned ``d``.
* ``score``: each leg's scores are normalised (min-max to [0, 1], or z-score with the
  population standard deviation), then ``score(d) = sum_i w_i * norm_i(d)``. A node a leg did
  not return gets that leg's floor: 0 for min-max, one standard deviation below the leg's
  lowest returned score for z-score; so being absent is never better than being last, and a
  leg that returned a single node still separates it from the rest. A leg whose scores are
  all equal normalises to 1 (min-max) or 0 (z-score); a leg with missing (``None``) scores is
  scored ``1 / rank``.

An English-only leg (a dense leg on an English embedding model such as all-MiniLM-L6-v2) can
have its weight lowered by :func:`language_factor`: by the share of CJK characters in the
query and, per candidate, in the node's text (the model reads neither), down to ``floor``
times its weight for wholly CJK text. :func:`language_scaled_weights` applies the query part
to the leg weights; ``node_factors`` (one ``{node_id: factor}`` per leg) applies the per-node
part inside :func:`fuse_rrf` and :func:`fuse_scores`.

Ties are broken deterministically: higher fused score, then the best rank in any leg, then
the ranks leg by leg, then the node id.

Example:
    >>> legs = [[LegHit("a", 0.9), LegHit("b", 0.5)], [LegHit("b", 7.0), LegHit("c", 3.0)]]
    >>> [(h.node_id, round(h.score, 5)) for h in fuse_rrf(legs, weights=(1.0, 1.0), k=60)]
    [('b', 0.03252), ('a', 0.01639), ('c', 0.01613)]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import NamedTuple

from llama_index_ext_advrag._enums import parse_enum

DEFAULT_RRF_K = 60
# Weight factor of an English-only leg on wholly CJK text (query or passage): 0, the leg is
# muted where its model cannot read. Chosen on CMRC 2018 questions 1001-2000 (held out from the
# reported first 1,000): floor 0 ties BM25 there, 0.1 falls 0.1-0.3 points below (docs/retrievers_fusion.md).
DEFAULT_CJK_WEIGHT_FLOOR = 0.0
_TIE_DIGITS = 12  # fused scores equal to 12 decimals are ties (float sums depend on order)


class FusionMode(str, Enum):
    """How the legs are merged."""

    RRF = "rrf"
    SCORE = "score"


class Normalization(str, Enum):
    """Per-leg score normalisation for :attr:`FusionMode.SCORE`."""

    MINMAX = "minmax"
    ZSCORE = "zscore"


class LegHit(NamedTuple):
    """One result of one leg: the node id and the leg's own score (``None`` if it has none)."""

    node_id: str
    score: float | None


class FusedHit(NamedTuple):
    """One fused result, with where it stood in every leg (``None`` where a leg missed it)."""

    node_id: str
    score: float
    ranks: tuple[int | None, ...]
    scores: tuple[float | None, ...]


def validate_weights(weights: Sequence[float] | None, n_legs: int) -> tuple[float, ...]:
    """Return the weights as a tuple (all 1.0 when ``None``).

    Raises:
        ValueError: wrong length, a negative or non-finite weight, or all weights zero.
    """
    if weights is None:
        return (1.0,) * n_legs
    values = tuple(float(w) for w in weights)
    if len(values) != n_legs:
        raise ValueError(f"weights {list(values)} has {len(values)} entries for {n_legs} legs")
    bad = [w for w in values if not math.isfinite(w) or w < 0]
    if bad:
        raise ValueError(f"weights must be finite and >= 0, got {list(values)}")
    if n_legs and not any(values):
        raise ValueError(f"at least one weight must be > 0, got {list(values)}")
    return values


def language_factor(
    query_cjk_share: float,
    text_cjk_share: float = 0.0,
    floor: float = DEFAULT_CJK_WEIGHT_FLOOR,
) -> float:
    """The weight factor of an English-only leg: ``r + (1 - r) * floor`` where
    ``r = 1 - max(query_cjk_share, text_cjk_share)`` is how readable the pair is to the model.

    English query and passage give 1.0; a wholly CJK query or passage gives ``floor``.

    Raises:
        ValueError: a share outside [0, 1] or ``floor`` outside [0, 1].

    Example:
        >>> language_factor(0.0, 0.0, floor=0.1), language_factor(1.0, 0.0, floor=0.1)
        (1.0, 0.1)
        >>> round(language_factor(0.5, 0.2, floor=0.1), 4)
        0.55
    """
    for name, value in (("query_cjk_share", query_cjk_share), ("text_cjk_share", text_cjk_share)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value}")
    if not 0.0 <= floor <= 1.0:
        raise ValueError(f"floor must be in [0, 1], got {floor}")
    readable = 1.0 - max(query_cjk_share, text_cjk_share)
    return readable + (1.0 - readable) * floor


def language_scaled_weights(
    weights: Sequence[float],
    english_only: Sequence[bool],
    cjk_share: float,
    floor: float = DEFAULT_CJK_WEIGHT_FLOOR,
) -> tuple[float, ...]:
    """Scale each English-only leg's weight by ``language_factor(cjk_share, 0, floor)``, that is
    ``(1 - cjk_share) + cjk_share * floor``.

    ``cjk_share`` is the share of CJK characters among the query's letters and digits
    (:func:`~llama_index_ext_advrag.text.words.cjk_share`): an English query keeps every weight,
    a Chinese one gives an English-only leg ``floor`` times its weight.

    Raises:
        ValueError: ``english_only`` and ``weights`` differ in length, or ``cjk_share`` or ``floor``
            is outside [0, 1].

    Example:
        >>> language_scaled_weights((1.0, 1.0), (True, False), cjk_share=1.0, floor=0.1)
        (0.1, 1.0)
        >>> language_scaled_weights((1.0, 1.0), (True, False), cjk_share=0.5, floor=0.1)
        (0.55, 1.0)
    """
    if len(english_only) != len(weights):
        raise ValueError(
            f"english_only {list(english_only)} has {len(english_only)} entries "
            f"for {len(weights)} weights"
        )
    factor = language_factor(cjk_share, 0.0, floor)
    return tuple(
        float(w) * factor if english else float(w)
        for w, english in zip(weights, english_only, strict=True)
    )


def dedupe_leg(leg: Sequence[LegHit]) -> list[LegHit]:
    """Keep the first occurrence of every node id, in order."""
    seen: set[str] = set()
    kept = []
    for hit in leg:
        if hit.node_id not in seen:
            seen.add(hit.node_id)
            kept.append(hit)
    return kept


def minmax_normalize(scores: Sequence[float]) -> list[float]:
    """Scale to [0, 1]: ``(s - min) / (max - min)``; all-equal scores become 1.0."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def zscore_normalize(scores: Sequence[float]) -> list[float]:
    """Standardise: ``(s - mean) / std`` (population std); all-equal scores become 0.0."""
    if not scores:
        return []
    mean = math.fsum(scores) / len(scores)
    std = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / len(scores))
    if std == 0:
        return [0.0] * len(scores)
    return [(s - mean) / std for s in scores]


NORMALIZERS: dict[Normalization, Callable[[Sequence[float]], list[float]]] = {
    Normalization.MINMAX: minmax_normalize,
    Normalization.ZSCORE: zscore_normalize,
}
# The normalised score of a node a leg did not return, from the leg's normalised scores.
ABSENT_FLOORS: dict[Normalization, Callable[[Sequence[float]], float]] = {
    Normalization.MINMAX: lambda normalized: 0.0,
    Normalization.ZSCORE: lambda normalized: min(normalized) - 1.0,
}


def _raw_scores(leg: Sequence[LegHit]) -> list[float]:
    if any(hit.score is None for hit in leg):
        return [1.0 / rank for rank in range(1, len(leg) + 1)]
    return [float(hit.score) for hit in leg]  # type: ignore[arg-type]


def _positions(legs: Sequence[Sequence[LegHit]]) -> tuple[list[str], list[dict[str, int]]]:
    """Node ids in first-seen order across legs, and per leg ``node_id -> 1-based rank``."""
    order: dict[str, None] = {}
    ranks = []
    for leg in legs:
        ranks.append({hit.node_id: rank for rank, hit in enumerate(leg, start=1)})
        for hit in leg:
            order.setdefault(hit.node_id, None)
    return list(order), ranks


def _collect(
    legs: Sequence[Sequence[LegHit]], fused: dict[str, float], ranks: list[dict[str, int]]
) -> list[FusedHit]:
    leg_scores = [{hit.node_id: hit.score for hit in leg} for leg in legs]
    hits = [
        FusedHit(
            node_id=node_id,
            score=score,
            ranks=tuple(r.get(node_id) for r in ranks),
            scores=tuple(s.get(node_id) for s in leg_scores),
        )
        for node_id, score in fused.items()
    ]
    return sorted(hits, key=tie_break_key)


def tie_break_key(hit: FusedHit) -> tuple:
    """Sort key: fused score (desc), best rank, ranks leg by leg (absent last), node id."""
    present = [r for r in hit.ranks if r is not None]
    per_leg = tuple(math.inf if r is None else r for r in hit.ranks)
    return (-round(hit.score, _TIE_DIGITS), min(present, default=math.inf), per_leg, hit.node_id)


NodeFactors = Sequence[Mapping[str, float] | None]


def validate_node_factors(
    node_factors: NodeFactors | None, n_legs: int
) -> list[Mapping[str, float]]:
    """One ``{node_id: factor}`` per leg (empty where ``None``); a missing node has factor 1.

    Raises:
        ValueError: wrong length, or a factor that is negative or not finite.
    """
    if node_factors is None:
        return [{} for _ in range(n_legs)]
    if len(node_factors) != n_legs:
        raise ValueError(f"node_factors has {len(node_factors)} entries for {n_legs} legs")
    checked: list[Mapping[str, float]] = [dict(factors or {}) for factors in node_factors]
    for factors in checked:
        bad = {node: f for node, f in factors.items() if not math.isfinite(f) or f < 0}
        if bad:
            raise ValueError(f"node_factors must be finite and >= 0, got {bad}")
    return checked


def fuse_rrf(
    legs: Sequence[Sequence[LegHit]],
    weights: Sequence[float] | None = None,
    k: int = DEFAULT_RRF_K,
    node_factors: NodeFactors | None = None,
) -> list[FusedHit]:
    """Weighted reciprocal rank fusion: ``sum_i w_i * f_i(d) / (k + rank_i)``, ranks from 1,
    with ``f_i(d)`` the leg's factor for the node (``node_factors``, default 1).

    Raises:
        ValueError: ``k < 0``, invalid weights or node factors.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    legs = [dedupe_leg(leg) for leg in legs]
    weight = validate_weights(weights, len(legs))
    factors = validate_node_factors(node_factors, len(legs))
    order, ranks = _positions(legs)
    fused = {node_id: 0.0 for node_id in order}
    for w, leg_ranks, leg_factors in zip(weight, ranks, factors, strict=True):
        for node_id, rank in leg_ranks.items():
            fused[node_id] += w * leg_factors.get(node_id, 1.0) / (k + rank)
    return _collect(legs, fused, ranks)


def fuse_scores(
    legs: Sequence[Sequence[LegHit]],
    weights: Sequence[float] | None = None,
    normalization: Normalization | str = Normalization.MINMAX,
    node_factors: NodeFactors | None = None,
) -> list[FusedHit]:
    """Normalise each leg's scores, then take the weighted sum (absent = the leg's floor),
    each term times the leg's factor for the node (``node_factors``, default 1).

    Raises:
        ValueError: an unknown ``normalization``, invalid weights or node factors.
    """
    method = parse_enum(Normalization, normalization, "normalization")
    normalize, absent_floor = NORMALIZERS[method], ABSENT_FLOORS[method]
    legs = [dedupe_leg(leg) for leg in legs]
    weight = validate_weights(weights, len(legs))
    factors = validate_node_factors(node_factors, len(legs))
    order, ranks = _positions(legs)
    fused = {node_id: 0.0 for node_id in order}
    for w, leg, leg_factors in zip(weight, legs, factors, strict=True):
        if not leg:
            continue
        normalized = normalize(_raw_scores(leg))
        floor = absent_floor(normalized)
        by_id = {hit.node_id: value for hit, value in zip(leg, normalized, strict=True)}
        for node_id in order:
            fused[node_id] += w * leg_factors.get(node_id, 1.0) * by_id.get(node_id, floor)
    return _collect(legs, fused, ranks)


def fuse(
    legs: Sequence[Sequence[LegHit]],
    mode: FusionMode | str = FusionMode.RRF,
    weights: Sequence[float] | None = None,
    k: int = DEFAULT_RRF_K,
    normalization: Normalization | str = Normalization.MINMAX,
    node_factors: NodeFactors | None = None,
) -> list[FusedHit]:
    """Fuse ``legs`` with ``mode`` (``"rrf"`` or ``"score"``); see the module docstring."""
    dispatch: dict[FusionMode, Callable[[], list[FusedHit]]] = {
        FusionMode.RRF: lambda: fuse_rrf(legs, weights, k, node_factors),
        FusionMode.SCORE: lambda: fuse_scores(legs, weights, normalization, node_factors),
    }
    return dispatch[parse_enum(FusionMode, mode, "mode")]()


__all__ = [
    "DEFAULT_CJK_WEIGHT_FLOOR",
    "DEFAULT_RRF_K",
    "FusedHit",
    "FusionMode",
    "LegHit",
    "Normalization",
    "dedupe_leg",
    "fuse",
    "fuse_rrf",
    "fuse_scores",
    "NodeFactors",
    "language_factor",
    "language_scaled_weights",
    "minmax_normalize",
    "tie_break_key",
    "validate_node_factors",
    "validate_weights",
    "zscore_normalize",
]
