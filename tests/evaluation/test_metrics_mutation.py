"""Compare's metrics and frontier at their edges (found by mutation testing): coverage with
blank or alternative answers, interpolation ends, budgets and ties."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.evaluation.frontier import (
    common_budgets,
    compare_at_budgets,
    frontier_points,
    interpolate_coverage,
)
from llama_index_ext_advrag.evaluation.metrics import answer_covered, normalize_for_match

# --- coverage ----------------------------------------------------------------------------------


def test_normalize_keeps_spaces_between_latin_and_cjk() -> None:
    assert normalize_for_match("COVID 19 病毒\n的 传播") == "covid 19 病毒的传播"
    assert normalize_for_match("Straße") == "strasse"  # case-folded


def test_blank_answer_parts_are_ignored() -> None:
    assert answer_covered("Paris is the capital.", ["paris", "  "])
    assert not answer_covered("Paris is the capital.", [])
    assert answer_covered("Paris", ["lyon", "PARIS"], require_all=False)
    assert not answer_covered("Paris", ["lyon", "nice"], require_all=False)
    assert not answer_covered("Paris", ["paris", "lyon"])  # require_all by default


# --- the frontier ------------------------------------------------------------------------------


def test_nan_coverage_is_dropped_and_a_single_point_is_its_own_curve() -> None:
    assert frontier_points([(100, float("nan")), (200, 0.5)]) == [(200.0, 0.5)]
    assert interpolate_coverage([(200, 0.5)], 200) == 0.5
    assert interpolate_coverage([(200, 0.5)], 200.5) is None
    assert interpolate_coverage([(200, 0.5)], 199.5) is None


def test_interpolation_inside_each_segment() -> None:
    curve = [(0, 0.0), (10, 1.0), (20, 0.0)]
    assert interpolate_coverage(curve, 10) == 1.0
    assert interpolate_coverage(curve, 15) == pytest.approx(0.5)
    assert interpolate_coverage(curve, 2.5) == pytest.approx(0.25)


def test_common_budgets_narrow_or_single() -> None:
    curves = {"a": [(100, 0.1), (101, 0.2)], "b": [(100.5, 0.1), (300, 0.2)]}
    assert common_budgets(curves) == [100.5]  # overlap narrower than 2 tokens: its low end
    wide = {"a": [(100, 0.1), (400, 0.2)]}
    assert common_budgets(wide, count=1) == [100.0]
    assert common_budgets(wide, count=3) == [100.0, 250.0, 400.0]
    assert common_budgets({"a": [(100, 0.1), (102, 0.2)]}, count=3) == [100.0, 101.0, 102.0]
    assert common_budgets({}) == [] and common_budgets({"a": []}) == []
    touching = {"a": [(100, 0.1), (200, 0.2)], "b": [(200, 0.3), (300, 0.4)]}
    assert common_budgets(touching) == [200.0]  # ranges meeting in one point


def test_best_is_alphabetical_on_a_tie_and_rows_skip_unreached_budgets() -> None:
    curves = {"zeta": [(100, 0.5), (200, 0.5)], "alpha": [(100, 0.5), (150, 0.5)]}
    rows = compare_at_budgets(curves, [120.0, 180.0, 999.0])
    assert [(r.budget, r.best) for r in rows] == [(120.0, "alpha"), (180.0, "zeta")]
    assert rows[1].coverage == {"zeta": 0.5}


def test_default_budget_count_and_one_question() -> None:
    assert common_budgets({"a": [(100, 0.1), (400, 0.2)]}) == [100.0, 200.0, 300.0, 400.0]
