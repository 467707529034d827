"""Coverage at equal tokens: the interpolation maths checked against hand-computed values."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.evaluation.frontier import (
    common_budgets,
    compare_at_budgets,
    frontier_points,
    interpolate_coverage,
    interpolation_weights,
)

A = [(100.0, 0.40), (300.0, 0.60), (500.0, 0.70)]
B = [(200.0, 0.45), (600.0, 0.75)]


def test_interpolation_by_hand() -> None:
    # between (100, 0.40) and (300, 0.60): slope 0.001 per token
    assert interpolate_coverage(A, 200) == pytest.approx(0.50)
    assert interpolate_coverage(A, 400) == pytest.approx(0.65)
    # B: (200, 0.45) -> (600, 0.75): 0.45 + 0.30 * 100/400
    assert interpolate_coverage(B, 300) == pytest.approx(0.525)
    assert interpolate_coverage(A, 100) == pytest.approx(0.40)  # an end point exactly
    assert interpolate_coverage(A, 500) == pytest.approx(0.70)


def test_no_extrapolation() -> None:
    assert interpolate_coverage(A, 99.9) is None
    assert interpolate_coverage(A, 501) is None
    assert interpolate_coverage([], 10) is None


def test_points_are_sorted_and_equal_tokens_averaged() -> None:
    points = frontier_points([(300, 0.6), (100, 0.2), (100, 0.4)])
    assert [t for t, _ in points] == [100, 300]
    assert [c for _, c in points] == pytest.approx([0.3, 0.6])
    assert frontier_points([(float("nan"), 0.5), (1, 0.1)]) == [(1, 0.1)]


def test_common_budgets_lie_in_every_range() -> None:
    # overlap of [100, 500] and [200, 600] is [200, 500]; 4 budgets: 200, 300, 400, 500
    assert common_budgets({"a": A, "b": B}, count=4) == [200.0, 300.0, 400.0, 500.0]
    # rounding stays inside the overlap: [100.4, 200.6] -> ceil 101, floor 200
    budgets = common_budgets({"x": [(100.4, 0.1), (200.6, 0.2)]}, count=2)
    assert budgets == [101.0, 200.0]
    assert common_budgets({"a": A, "c": [(900, 0.9), (1000, 0.95)]}) == []


def test_compare_at_budgets_picks_the_best_at_each() -> None:
    rows = compare_at_budgets({"a": A, "b": B}, [200.0, 500.0])
    assert rows[0].coverage == pytest.approx({"a": 0.50, "b": 0.45})
    assert rows[0].best == "a"
    # at 500: a 0.70, b 0.45 + 0.30 * 300/400 = 0.675
    assert rows[1].coverage["b"] == pytest.approx(0.675)
    assert rows[1].best == "a"


def test_interpolation_weights_read_the_curve_by_hand() -> None:
    assert interpolation_weights([100.0, 300.0, 500.0], 250.0) == pytest.approx({0: 0.25, 1: 0.75})
    assert interpolation_weights([100.0, 300.0], 300.0) == {1: 1.0}
    # two k at the same mean tokens share their weight
    assert interpolation_weights([100.0, 100.0, 300.0], 150.0) == pytest.approx(
        {0: 0.375, 1: 0.375, 2: 0.25}
    )
    assert interpolation_weights([100.0, float("nan"), 300.0], 200.0) == {0: 0.5, 2: 0.5}
    assert interpolation_weights([100.0, 300.0], 301.0) is None
    assert interpolation_weights([], 1.0) is None
