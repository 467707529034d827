"""Coverage against context tokens: reading "A beats B" at equal tokens.

Each pipeline is run at several k, giving points (mean context tokens, coverage). A larger
context trivially covers more, so two pipelines are compared at the same token budget: each
pipeline's coverage is linearly interpolated between its two points that bracket the budget
(never extrapolated), at budgets inside the token range that all compared pipelines reach.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

Point = tuple[float, float]  # (mean context tokens, coverage)


def frontier_points(points: Sequence[Point]) -> list[Point]:
    """Sort by tokens; points with equal tokens are averaged into one."""
    grouped: dict[float, list[float]] = {}
    for tokens, coverage in points:
        if math.isnan(tokens) or math.isnan(coverage):
            continue
        grouped.setdefault(float(tokens), []).append(float(coverage))
    return [(t, sum(c) / len(c)) for t, c in sorted(grouped.items())]


def interpolation_weights(tokens: Sequence[float], budget: float) -> dict[int, float] | None:
    """Weights over the indexes of ``tokens`` (one mean-token count per measured k) that read a
    curve at ``budget``: linear between the two token counts that bracket it, points with
    equal tokens sharing their weight equally; ``None`` outside the measured range (no
    extrapolation). ``sum(w * value[i])`` is the interpolated value, and the same weights
    applied to each question's values give per-question values whose mean is that value.

    >>> interpolation_weights([100.0, 300.0], 150.0)
    {0: 0.75, 1: 0.25}
    """
    groups: dict[float, list[int]] = {}
    for index, count in enumerate(tokens):
        if not math.isnan(count):
            groups.setdefault(float(count), []).append(index)
    curve = sorted(groups)
    if not curve or budget < curve[0] or budget > curve[-1]:
        return None
    upper = next(i for i, t in enumerate(curve) if t >= budget)
    if curve[upper] == budget or upper == 0:
        shares = {curve[upper]: 1.0}
    else:
        t0, t1 = curve[upper - 1], curve[upper]
        share = (budget - t0) / (t1 - t0)
        shares = {t0: 1.0 - share, t1: share}
    weights: dict[int, float] = {}
    for count, share in shares.items():
        for index in groups[count]:
            weights[index] = share / len(groups[count])
    return weights


def interpolate_coverage(points: Sequence[Point], budget: float) -> float | None:
    """Coverage at ``budget`` tokens, linear between the bracketing points; ``None`` outside
    the measured range (no extrapolation)."""
    kept = [(t, c) for t, c in points if not (math.isnan(t) or math.isnan(c))]
    weights = interpolation_weights([t for t, _ in kept], budget)
    if weights is None:
        return None
    return sum(share * kept[index][1] for index, share in weights.items())


def common_budgets(curves: Mapping[str, Sequence[Point]], count: int = 4) -> list[float]:
    """``count`` budgets evenly spaced over the token range every curve covers (its ends
    included), rounded to whole tokens; empty when the ranges do not overlap."""
    ranges = [(p[0][0], p[-1][0]) for p in (frontier_points(c) for c in curves.values()) if p]
    if not ranges:
        return []
    low = max(r[0] for r in ranges)
    high = min(r[1] for r in ranges)
    if low > high:
        return []
    if count <= 1 or high - low < 2:
        return [low]
    step = (high - low) / (count - 1)
    budgets = [low + i * step for i in range(count)]
    # Round inward so a rounded budget never leaves the common range.
    rounded = [float(math.ceil(budgets[0]))] + [float(round(b)) for b in budgets[1:-1]]
    rounded.append(float(math.floor(budgets[-1])))
    return sorted({b for b in rounded if low <= b <= high})


@dataclass(frozen=True)
class BudgetComparison:
    """Coverage of every pipeline at one token budget, and the best one there."""

    budget: float
    coverage: dict[str, float]
    best: str


def compare_at_budgets(
    curves: Mapping[str, Sequence[Point]], budgets: Sequence[float]
) -> list[BudgetComparison]:
    """Interpolated coverage of each pipeline at each budget (pipelines that do not reach a
    budget are left out of that row)."""
    rows = []
    for budget in budgets:
        values = {
            name: value
            for name, points in curves.items()
            if (value := interpolate_coverage(points, budget)) is not None
        }
        if values:
            best = max(sorted(values), key=lambda n: values[n])
            rows.append(BudgetComparison(budget, values, best))
    return rows


__all__ = [
    "BudgetComparison",
    "common_budgets",
    "compare_at_budgets",
    "frontier_points",
    "interpolate_coverage",
    "interpolation_weights",
]
