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


def interpolate_coverage(points: Sequence[Point], budget: float) -> float | None:
    """Coverage at ``budget`` tokens, linear between the bracketing points; ``None`` outside
    the measured range (no extrapolation)."""
    curve = frontier_points(points)
    if not curve or budget < curve[0][0] or budget > curve[-1][0]:
        return None
    for (t0, c0), (t1, c1) in zip(curve, curve[1:], strict=False):
        if t0 <= budget <= t1:
            if t1 == t0:
                return c0
            return c0 + (c1 - c0) * (budget - t0) / (t1 - t0)
    return curve[0][1]  # a single point exactly at the budget


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


def standard_error(coverage: float, questions: int) -> float:
    """Binomial standard error of a coverage share over ``questions``."""
    if questions <= 0:
        return float("nan")
    return math.sqrt(max(coverage * (1 - coverage), 0.0) / questions)


__all__ = [
    "BudgetComparison",
    "common_budgets",
    "compare_at_budgets",
    "frontier_points",
    "interpolate_coverage",
    "standard_error",
]
