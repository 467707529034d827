"""The recommendation's exact words and numbers, the per-question scores it pairs and the budgets
it reads them at (kills the mutants of evaluation/decision.py that the behaviour tests in
test_decision.py leave alive: every wording, the ranking of the pipelines, the hit metric,
repeated question ids).

Pipelines whose per-question differences are constant have a bootstrap interval of exactly that
constant, so their whole report line is known by hand."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pytest

from llama_index_ext_advrag.evaluation.compare import QuestionResult, summarize_all
from llama_index_ext_advrag.evaluation.decision import (
    DECISION_BUDGETS,
    Verdict,
    decision_rule,
    question_values,
    recommendation,
    scores_at_budget,
    versus_baseline,
)
from llama_index_ext_advrag.evaluation.paired import paired_bootstrap_intervals
from llama_index_ext_advrag.evaluation.report import CompareRun

TOKENS = {1: 100, 5: 300}
N = 40
RULE = (
    "Rule: a pipeline is recommended over baseline only when, at every token budget both reach, "
    "the 95% paired-bootstrap interval of the mean per-question difference in coverage (2,000 "
    "resamples of the questions, seed 0) lies above 0; with fewer than 30 questions scored for "
    'both, it says "too few questions to decide". Per-question scores at a budget interpolate '
    "each question's 0/1 score between the two k whose mean context tokens bracket it."
)


def results_for(
    pipeline: str, covered: dict[int, list[bool]], tokens: dict[int, int]
) -> list[QuestionResult]:
    """One result per question and k (as in test_decision.py)."""
    return [
        QuestionResult(pipeline, f"q{i}", "t", False, k, hit, 1, tokens[k], k, None, 0)
        for k, column in covered.items()
        for i, hit in enumerate(column)
    ]


def make_run(*pipelines: list[QuestionResult], probe: bool = False) -> CompareRun:
    results = [r for rows in pipelines for r in rows]
    ks = sorted({r.k for r in results})
    return CompareRun(
        "t", "baseline", ks[-1], ks, summarize_all(results), results, [], {}, probe=probe
    )


def constant(value: bool, n: int = N) -> dict[int, list[bool]]:
    return {1: [value] * n, 5: [value] * n}


def run_of(pipelines: dict[str, dict[int, list[bool]]], tokens=None, **kwargs):
    rows = [
        results_for(name, covered, (tokens or {}).get(name, TOKENS))
        for name, covered in pipelines.items()
    ]
    run = make_run(*rows, **kwargs)
    return replace(run, resamples=2000)


def line(pipeline: str, verdict: str, values: list[tuple[int, float, float]]) -> str:
    """A report line for constant per-question differences: interval = mean."""
    mean = sum(c - b for _, c, b in values) / len(values)
    detail = "; ".join(
        f"{t} tok: {c:.3f} vs {b:.3f}, {c - b:+.3f} [{c - b:+.3f}, {c - b:+.3f}]"
        for t, c, b in values
    )
    return f"- {pipeline} {verdict} baseline: {mean:+.3f} ({detail})"


def test_the_best_of_two_winners_is_named_with_its_exact_figures() -> None:
    partial = {1: [i < 30 for i in range(N)], 5: [i < 30 for i in range(N)]}
    # the weaker winner first: the best is chosen by advantage, not by order
    run = run_of({"baseline": constant(False), "b": partial, "a": constant(True)})
    lines = recommendation(run).splitlines()
    all_gained = [(100, 1.0, 0.0), (200, 1.0, 0.0), (300, 1.0, 0.0)]
    detail = line("a", "beats", all_gained).split(" (", 1)[1][:-1]
    assert lines[0] == (
        "Use **a**: at equal context tokens it beats baseline on coverage by +1.000 on average "
        f"over 40 paired questions, the interval above 0 at every shared budget ({detail}) "
        "(1 other(s) also beat it; not tested against each other)."
    )
    assert lines[1] == line("a", "beats", all_gained)
    assert re.fullmatch(
        r"- b beats baseline: \+0\.750 \(100 tok: 0\.750 vs 0\.000, \+0\.750 \[\+0\.\d+, "
        r"\+0\.\d+\]; 200 tok: .*; 300 tok: .*\)",
        lines[2],
    )
    assert lines[3:] == ["", RULE]
    verdicts = {v.pipeline: (v.verdict, v.questions, v.advantage) for v in versus_baseline(run)}
    assert verdicts == {"b": (Verdict.BEATS, 40, 0.75), "a": (Verdict.BEATS, 40, 1.0)}


def test_a_single_winner_has_no_other_winners_clause() -> None:
    run = run_of({"baseline": constant(False), "a": constant(True)})
    first = recommendation(run).splitlines()[0]
    assert first.startswith("Use **a**: ") and first.endswith("+1.000 [+1.000, +1.000])."), first


def test_losers_unclear_and_incomparable_pipelines_are_ranked_by_advantage() -> None:
    rising = {1: [False] * N, 5: [True] * N}  # 0 at 100 tokens, 0.5 at 200, 1 at 300
    run = run_of(
        {
            "baseline": constant(True),
            "far": constant(False),
            "c": constant(False),
            "d": rising,
        },
        tokens={"far": {1: 1000, 5: 2000}},
    )
    assert recommendation(run).splitlines() == [
        "Keep **baseline**: no pipeline beats it on coverage at every shared token budget by "
        "more than the paired interval.",
        line("d", "no clear difference from", [(100, 0, 1), (200, 0.5, 1), (300, 1, 1)]),
        line("c", "loses to", [(100, 0, 1), (200, 0, 1), (300, 0, 1)]),
        "- far: no common token range with baseline; not comparable.",
        "",
        RULE,
    ]
    by_name = {v.pipeline: v for v in versus_baseline(run)}
    assert by_name["d"].verdict is Verdict.UNCLEAR
    assert [b.budget for b in by_name["d"].budgets] == [100.0, 200.0, 300.0]
    assert len(by_name["d"].budgets) == DECISION_BUDGETS
    assert [(b.changes.better, b.changes.worse, b.changes.same) for b in by_name["d"].budgets] == [
        (0, 40, 0),
        (0, 40, 0),
        (0, 0, 40),
    ]
    assert (by_name["far"].verdict, by_name["far"].questions) == (Verdict.NOT_COMPARABLE, 40)
    assert by_name["far"].budgets == [] and by_name["far"].advantage is None


def test_too_few_questions_in_words() -> None:
    run = run_of({"baseline": constant(False, 10), "a": constant(True, 10)})
    lines = recommendation(run).splitlines()
    assert lines[0] == (
        "Too few questions to decide: keep **baseline** until at least 30 questions are "
        "scored for both pipelines."
    )
    assert lines[1].startswith("- a too few questions to decide against baseline: +1.000 (")
    assert lines[-1] == RULE
    assert [v.verdict for v in versus_baseline(run)] == [Verdict.TOO_FEW]


def test_exactly_the_minimum_decides() -> None:
    run = run_of({"baseline": constant(False, 30), "a": constant(True, 30)})
    assert [v.verdict for v in versus_baseline(run)] == [Verdict.BEATS]


def test_the_rule_names_the_runs_settings() -> None:
    run = replace(run_of({"baseline": constant(False)}), resamples=12_345, bootstrap_seed=7)
    assert decision_rule(run) == RULE.replace("2,000", "12,345").replace("seed 0", "seed 7")


def test_without_the_baseline_there_is_no_recommendation() -> None:
    run = run_of({"a": constant(True)})
    assert versus_baseline(run) == []
    assert recommendation(run) == (
        "No recommendation: the baseline 'baseline' was not run or not scored."
    )


def test_a_probe_run_ends_with_the_proxy_warning() -> None:
    run = run_of({"baseline": constant(False), "a": constant(True)}, probe=True)
    lines = recommendation(run).splitlines()
    assert lines[-3:] == [
        RULE,
        "",
        "Proxy: these are probe questions made from the documents (the gold is the sampled "
        "sentence), not labelled questions; confirm with labelled questions before deciding.",
    ]


def hit_row(pipeline: str, question: str, k: int, rank: int | None, covered=None):
    [row] = results_for(pipeline, {k: [False]}, {k: 100})
    return replace(row, question_id=question, evidence_rank=rank, covered=covered)


def test_hit_and_coverage_values_and_repeated_question_ids() -> None:
    rows = [
        hit_row("p", "q", 1, 3),
        hit_row("p", "q", 1, 0),  # the same id again: a second question, not an overwrite
        hit_row("p", "r", 1, None),  # no gold: not scored
        hit_row("p", "s", 5, 1, covered=True),
        hit_row("p", "t", 5, 0, covered=False),
    ]
    assert question_values(rows, "hit") == {
        ("p", 1): {("q", 0): 1.0, ("q", 1): 0.0},
        ("p", 5): {("s", 0): 1.0, ("t", 0): 0.0},
    }
    assert question_values(rows, "coverage") == {("p", 5): {("s", 0): 1.0, ("t", 0): 0.0}}


def test_scores_at_a_budget_interpolate_each_question() -> None:
    values = {1: {("a", 0): 0.0, ("b", 0): 1.0}, 5: {("a", 0): 1.0, ("b", 0): 1.0}}
    keys = [("a", 0), ("b", 0)]
    tokens = {5: 300.0, 1: 100.0}  # unsorted on purpose
    assert scores_at_budget(values, tokens, 150.0, keys).tolist() == [0.25, 1.0]
    assert scores_at_budget(values, tokens, 300.0, keys).tolist() == [1.0, 1.0]
    assert scores_at_budget(values, tokens, 301.0, keys) is None
    assert isinstance(scores_at_budget(values, tokens, 100.0, keys), np.ndarray)


@pytest.mark.parametrize("metric", ["hit", "coverage"])
def test_the_hit_metric_pairs_by_evidence_rank(metric: str) -> None:
    base = [hit_row("baseline", f"q{i}", k, 0, covered=False) for i in range(N) for k in (1, 5)]
    cand = [hit_row("a", f"q{i}", k, 2, covered=True) for i in range(N) for k in (1, 5)]
    run = make_run(base, cand)
    run = replace(run, resamples=2000)
    assert run.metric == "coverage"
    [versus] = versus_baseline(run)
    assert versus.verdict is Verdict.BEATS and versus.advantage == 1.0


def test_the_intervals_use_the_runs_resamples_and_seed() -> None:
    rng = np.random.default_rng(3)
    base = {k: [bool(v) for v in rng.integers(0, 2, 200)] for k in TOKENS}
    cand = {k: [bool(v) for v in rng.integers(0, 2, 200)] for k in TOKENS}
    run = replace(run_of({"baseline": base, "a": cand}), resamples=2000, bootstrap_seed=7)
    [versus] = versus_baseline(run)
    differences = np.column_stack(
        [np.array(cand[k], dtype=float) - np.array(base[k], dtype=float) for k in (1, 1, 5)]
    )
    differences[:, 1] = (differences[:, 0] + differences[:, 2]) / 2  # 200 tokens: halfway
    differences = differences[sorted(range(200), key=lambda i: f"q{i}")]  # paired in key order
    expected = paired_bootstrap_intervals(differences, resamples=2000, seed=7)
    assert [b.interval for b in versus.budgets] == expected
    assert expected != paired_bootstrap_intervals(differences, resamples=2000, seed=0)
    assert expected != paired_bootstrap_intervals(differences, resamples=10_000, seed=7)
