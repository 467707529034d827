"""Compare's metrics and frontier at their edges (found by mutation testing): coverage with
blank or alternative answers, per-type summaries, interpolation ends, budgets and ties."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.evaluation.frontier import (
    common_budgets,
    compare_at_budgets,
    frontier_points,
    interpolate_coverage,
)
from llama_index_ext_advrag.evaluation.metrics import (
    QuestionRun,
    answer_covered,
    format_table,
    normalize_for_match,
    summarize_runs,
)

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


# --- summaries -------------------------------------------------------------------------------


def run(pipeline: str, kind: str, covered: bool, tokens: int, latency: float) -> QuestionRun:
    return QuestionRun(pipeline, f"{pipeline}-{kind}-{tokens}", kind, covered, tokens, latency)


RUNS = [
    run("b", "fact", True, 100, 10.0),
    run("b", "fact", False, 300, 30.0),
    run("b", "list", True, 200, 50.0),
    run("a", "fact", False, 50, 5.0),
]


def test_summaries_by_hand() -> None:
    rows = {(s.pipeline, s.group): s for s in summarize_runs(RUNS)}
    assert sorted(rows) == [("a", "all"), ("a", "fact"), ("b", "all"), ("b", "fact"), ("b", "list")]
    everything = rows[("b", "all")]
    assert everything.questions == 3
    assert everything.coverage == pytest.approx(2 / 3)
    assert everything.mean_context_tokens == pytest.approx(200.0)
    assert everything.p50_latency_ms == 30.0
    fact = rows[("b", "fact")]
    assert (fact.questions, fact.coverage, fact.mean_context_tokens) == (2, 0.5, 200.0)
    assert fact.p50_latency_ms == pytest.approx(20.0)  # the median of two is their mean
    assert [(s.pipeline, s.group) for s in summarize_runs(RUNS, by_type=False)] == [
        ("a", "all"),
        ("b", "all"),
    ]


def test_table_has_a_header_a_rule_and_a_row_per_summary() -> None:
    table = format_table(summarize_runs(RUNS, by_type=False)).splitlines()
    assert table[0].split() == ["pipeline", "group", "n", "coverage", "ctx", "tokens", "p50", "ms"]
    assert set(table[1]) == {"-"} and len(table[1]) == len(table[0])
    assert table[3].split() == ["b", "all", "3", "0.667", "200.0", "30.0"]
    assert len(table) == 4


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
