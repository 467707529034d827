"""The recommendation of ``advrag compare``: paired per question at equal tokens, decided by the
bootstrap interval, checked against scipy and against hand-computed per-question scores."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy import stats

from llama_index_ext_advrag.evaluation.compare import QuestionResult, summarize_all
from llama_index_ext_advrag.evaluation.decision import Verdict, versus_baseline
from llama_index_ext_advrag.evaluation.paired import MIN_PAIRED_QUESTIONS
from llama_index_ext_advrag.evaluation.report import CompareRun, markdown_report, recommendation


def results_for(
    pipeline: str, covered: dict[int, list[bool]], tokens: dict[int, int]
) -> list[QuestionResult]:
    """One result per question and k; every question's context has the k's token count."""
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


def flipped(column: list[bool], index: int) -> list[bool]:
    return [not v if i == index else v for i, v in enumerate(column)]


BASE_10 = {1: [True] * 4 + [False] * 6, 5: [True] * 7 + [False] * 3}
TOKENS = {1: 100, 5: 300}


@pytest.mark.parametrize("index", range(10))
def test_a_one_question_difference_on_ten_questions_never_recommends(index: int) -> None:
    candidate = {k: flipped(column, index) for k, column in BASE_10.items()}
    run = make_run(results_for("baseline", BASE_10, TOKENS), results_for("c", candidate, TOKENS))
    [versus] = versus_baseline(run)
    assert versus.verdict is Verdict.TOO_FEW and versus.questions == 10
    # the interval itself does not exclude 0 either: one question is noise at any minimum
    assert any(b.interval.low <= 0 <= b.interval.high for b in versus.budgets)
    text = recommendation(run)
    assert not text.startswith("Use") and "Too few questions to decide" in text
    assert "c too few questions to decide against baseline" in text


def consistent_gain(gained: int, lost: int, questions: int = 200) -> tuple[dict, dict]:
    rng = random.Random(7)
    base1 = [rng.random() < 0.4 for _ in range(questions)]
    base5 = [v or rng.random() < 0.3 for v in base1]
    misses = [i for i in range(questions) if not base1[i] and not base5[i]]
    hits = [i for i in range(questions) if base1[i] and base5[i]]
    up, down = set(misses[:gained]), set(hits[:lost])
    cand1 = [(v or i in up) and i not in down for i, v in enumerate(base1)]
    cand5 = [(v or i in up) and i not in down for i, v in enumerate(base5)]
    return {1: base1, 5: base5}, {1: cand1, 5: cand5}


def test_a_consistent_gain_on_200_questions_is_recommended_with_its_rule() -> None:
    base, cand = consistent_gain(gained=30, lost=5)
    run = make_run(results_for("baseline", base, TOKENS), results_for("cand", cand, TOKENS))
    [versus] = versus_baseline(run)
    assert versus.verdict is Verdict.BEATS and versus.questions == 200
    assert [b.budget for b in versus.budgets] == [100.0, 200.0, 300.0]
    for row in versus.budgets:
        assert (row.changes.better, row.changes.worse, row.changes.same) == (30, 5, 165)
        assert row.interval.mean == pytest.approx(25 / 200)
        assert row.interval.low > 0
    report = markdown_report(run, [])
    assert report.count("Use **cand**") == 1
    assert "Rule: a pipeline is recommended over baseline only when, at every token budget" in (
        report
    )
    assert "| cand | 200 |" in report and "30/5/165" in report  # the paired table


@pytest.mark.parametrize(
    ("gained", "lost", "reverse", "verdict"),
    [(30, 5, True, Verdict.LOSES), (6, 5, False, Verdict.UNCLEAR)],
)
def test_a_loss_or_a_mixed_result_keeps_the_baseline(
    gained: int, lost: int, reverse: bool, verdict: Verdict
) -> None:
    base, cand = consistent_gain(gained, lost)
    if reverse:  # the consistent gain, the other way round
        base, cand = cand, base
    run = make_run(results_for("baseline", base, TOKENS), results_for("other", cand, TOKENS))
    [versus] = versus_baseline(run)
    assert versus.verdict is verdict
    assert recommendation(run).startswith("Keep **baseline**")


def test_the_interval_matches_scipy_on_hand_interpolated_scores() -> None:
    base, cand = consistent_gain(gained=20, lost=8)
    cand_tokens = {1: 150, 5: 350}  # the candidate's curve is shifted: shared range 150-300
    run = make_run(results_for("baseline", base, TOKENS), results_for("cand", cand, cand_tokens))
    [versus] = versus_baseline(run)
    assert [b.budget for b in versus.budgets] == [150.0, 225.0, 300.0]
    b1, b5 = np.array(base[1], float), np.array(base[5], float)
    c1, c5 = np.array(cand[1], float), np.array(cand[5], float)
    by_hand = {  # per-question scores, weights read off the two token curves
        150.0: (c1, 0.75 * b1 + 0.25 * b5),
        225.0: (0.625 * c1 + 0.375 * c5, 0.375 * b1 + 0.625 * b5),
        300.0: (0.25 * c1 + 0.75 * c5, b5),
    }
    for row in versus.budgets:
        ours, theirs = by_hand[row.budget]
        assert row.candidate == pytest.approx(ours.mean()) and row.baseline == pytest.approx(
            theirs.mean()
        )
        assert row.interval.mean == pytest.approx((ours - theirs).mean())
        reference = stats.bootstrap(
            (ours, theirs),
            lambda x, y, axis: np.mean(x - y, axis=axis),
            paired=True,
            vectorized=True,
            n_resamples=run.resamples,
            confidence_level=0.95,
            method="percentile",
            random_state=np.random.default_rng(12345),
        ).confidence_interval
        # Two independent bootstraps of 10,000 resamples differ by Monte Carlo error: the SE
        # of a 2.5% quantile is ~0.027 standard errors of the mean, ~0.038 for the difference
        # of two runs; 0.2 SE is > 5 of those, plus one step of the discrete grid (1/(4n)).
        se = (ours - theirs).std(ddof=1) / np.sqrt(len(ours))
        tolerance = 0.2 * se + 1 / (4 * len(ours))
        assert row.interval.low == pytest.approx(reference.low, abs=tolerance)
        assert row.interval.high == pytest.approx(reference.high, abs=tolerance)


def test_pairing_uses_only_questions_scored_for_both() -> None:
    questions = MIN_PAIRED_QUESTIONS + 10
    base = {1: [False] * questions, 5: [True] * questions}
    rows = results_for("baseline", base, TOKENS)
    # the last 10 questions carry no answer: unscored for every pipeline
    rows = [
        QuestionResult(**{**r.__dict__, "covered": None})
        if int(r.question_id[1:]) >= MIN_PAIRED_QUESTIONS
        else r
        for r in rows
    ]
    cand = [QuestionResult(**{**r.__dict__, "pipeline": "c"}) for r in rows]
    run = make_run(rows, cand)
    [versus] = versus_baseline(run)
    assert versus.questions == MIN_PAIRED_QUESTIONS
    assert versus.verdict is Verdict.UNCLEAR  # identical pipelines: interval [0, 0]
    assert all(b.changes.same == MIN_PAIRED_QUESTIONS for b in versus.budgets)


def test_a_probe_recommendation_says_proxy_on_its_own_line() -> None:
    base, cand = consistent_gain(gained=30, lost=5)
    run = make_run(
        results_for("baseline", base, TOKENS), results_for("cand", cand, TOKENS), probe=True
    )
    lines = recommendation(run).splitlines()
    assert lines[0].startswith("Use **cand**")
    [proxy] = [line for line in lines if "proxy" in line.lower()]
    assert proxy.startswith("Proxy:") and proxy not in lines[0]


def test_no_common_token_range_is_not_comparable() -> None:
    base, cand = consistent_gain(gained=30, lost=5)
    run = make_run(
        results_for("baseline", base, TOKENS),
        results_for("far", cand, {1: 1000, 5: 2000}),
    )
    [versus] = versus_baseline(run)
    assert versus.verdict is Verdict.NOT_COMPARABLE and versus.advantage is None
    assert "far: no common token range with baseline; not comparable." in recommendation(run)


@pytest.mark.parametrize("direction", ["gain", "loss"])
def test_budgets_that_disagree_decide_nothing(direction: str) -> None:
    """A clear difference at the smallest budget and none at the largest: the rule asks for
    every budget, so neither "beats" nor "loses"."""
    base, gained = consistent_gain(gained=30, lost=0)
    cand = {1: gained[1], 5: base[5]}  # ahead at k=1 only, identical at k=5
    if direction == "loss":
        base, cand = cand, base
    run = make_run(results_for("baseline", base, TOKENS), results_for("cand", cand, TOKENS))
    [versus] = versus_baseline(run)
    first, last = versus.budgets[0], versus.budgets[-1]
    assert [b.budget for b in versus.budgets] == [100.0, 200.0, 300.0]
    if direction == "gain":
        assert first.interval.low > 0
    else:
        assert first.interval.high < 0
    assert last.interval.low == last.interval.high == 0.0  # no question differs at k=5
    assert versus.verdict is Verdict.UNCLEAR
    assert recommendation(run).startswith("Keep **baseline**")
