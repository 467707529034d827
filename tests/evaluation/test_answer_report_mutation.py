"""evaluation/answer_report.py beyond test_answers.py: every field of a pipeline's summary
(errors left out of the means, counted in the calls), answers paired per question and
occurrence, a metric nobody scored not ending the others, the bootstrap seed, and the rows and
notes of the report's answer tables spelled out (kills the module's mutants those tests
leave)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from llama_index_ext_advrag.evaluation.answer_report import (
    AnswerDifference,
    AnswerSummary,
    answer_differences,
    answer_notes,
    answer_rows,
    difference_rows,
    summarize_answers,
)
from llama_index_ext_advrag.evaluation.answers import AnswerResult
from llama_index_ext_advrag.evaluation.paired import (
    ChangeCounts,
    PairedInterval,
    paired_bootstrap_intervals,
)


def answer(pipeline: str, question_id: str, **fields: Any) -> AnswerResult:
    values: dict[str, Any] = {
        "k": 3, "answer": "a", "fact_recall": None, "token_f1": None, "hallucinated": None,
        "sentences": 1, "unsupported": 0, "unjudged": 0, "context_tokens": 100,
        "answer_tokens": 10, "latency_ms": None, "cached": False, "llm_calls": 1,
    }  # fmt: skip
    return AnswerResult(pipeline=pipeline, question_id=question_id, **{**values, **fields})


def test_every_summary_field_errors_out_of_the_means() -> None:
    results = [
        answer("base", "q1", fact_recall=True, token_f1=0.5, hallucinated=False,
               latency_ms=100.0, context_tokens=200, answer_tokens=10, llm_calls=2,
               truncated=True),
        answer("solo", "q1", k=5, token_f1=1.0),
        answer("base", "q2", k=8, hallucinated=True, latency_ms=300.0, context_tokens=100,
               answer_tokens=20, cached=True, llm_calls=0),
        answer("base", "q3", error="boom", fact_recall=False, token_f1=0.0, latency_ms=5.0,
               context_tokens=9000, answer_tokens=900, llm_calls=1, truncated=True),
    ]  # fmt: skip
    base, solo = summarize_answers(results)
    assert base == AnswerSummary(
        pipeline="base", k=3, questions=3, errors=1, judged=2, hallucination_rate=0.5,
        fact_recall=1.0, token_f1=0.5, p50_latency_ms=200.0, mean_context_tokens=150.0,
        mean_answer_tokens=15.0, llm_calls=3, cached=1, truncated=1,
    )  # fmt: skip
    assert solo == AnswerSummary(
        pipeline="solo", k=5, questions=1, errors=0, judged=0, hallucination_rate=None,
        fact_recall=None, token_f1=1.0, p50_latency_ms=None, mean_context_tokens=100.0,
        mean_answer_tokens=10.0, llm_calls=1, cached=0, truncated=0,
    )  # fmt: skip


def test_repeated_questions_pair_by_occurrence_in_order_with_the_given_seed() -> None:
    base = [0.0, 1.0, 0.25, 0.5, 0.1, 0.9, 0.3, 0.0]
    mine = [1.0, 1.0, 0.0, 0.75, 0.2, 0.35, 0.3, 0.6]
    results = [answer("base", "q1", token_f1=v) for v in base] + [
        answer("new", "q1", token_f1=v) for v in mine
    ]
    results.append(answer("new", "q9", token_f1=1.0))  # not asked of the baseline: unpaired
    results.append(answer("base", "q2", token_f1=1.0, error="boom"))  # an error: unscored
    results.append(answer("new", "q2", token_f1=0.0))
    (hallucination, recall, f1) = answer_differences(results, "base", resamples=2000, seed=7)
    assert hallucination == AnswerDifference("new", "hallucination rate", 0, None, None)
    assert recall == AnswerDifference("new", "fact recall", 0, None, None)
    diff = np.array(mine) - np.array(base)
    (expected,) = paired_bootstrap_intervals(diff, resamples=2000, seed=7)
    (reordered,) = paired_bootstrap_intervals(diff[::-1], resamples=2000, seed=7)
    (unseeded,) = paired_bootstrap_intervals(diff, resamples=2000)
    assert expected != reordered and expected != unseeded  # the test can tell them apart
    assert f1 == AnswerDifference("new", "token F1", 8, expected, ChangeCounts(4, 2, 2))


def test_fmt_rows_of_the_answer_table() -> None:
    summary = AnswerSummary(
        pipeline="base", k=3, questions=4, errors=1, judged=2, hallucination_rate=0.125,
        fact_recall=0.5, token_f1=0.33333, p50_latency_ms=1234.6, mean_context_tokens=150.4,
        mean_answer_tokens=15.5, llm_calls=7, cached=2, truncated=1, refused=3,
    )  # fmt: skip
    empty = AnswerSummary("none", 1, 0, 0, 0, None, math.nan, None, None, None, None, 0, 0)
    headers, rows = answer_rows([summary, empty])
    assert headers == [
        "pipeline", "k", "n", "hallucination rate", "fact recall (EM)", "token F1",
        "latency p50 ms", "context tokens", "answer tokens", "judged", "errors", "LLM calls",
        "cached", "truncated", "refused",
    ]  # fmt: skip
    assert rows == [
        ["base", "3", "4", "12.5%", "50.0%", "0.333", "1235", "150", "16", "2", "1", "7", "2",
         "1", "3"],
        ["none", "1", "0", "-", "-", "-", "-", "-", "-", "0", "0", "0", "0", "0", "0"],
    ]  # fmt: skip


def test_rows_of_the_difference_table() -> None:
    differences = [
        AnswerDifference("new", "token F1", 4, PairedInterval(0.25, -0.125, 0.5),
                         ChangeCounts(2, 1, 1)),
        AnswerDifference("new", "fact recall", 0, None, None),
        AnswerDifference("new", "hallucination rate", 3, PairedInterval(0.1, 0.0, 0.2), None),
    ]  # fmt: skip
    headers, rows = difference_rows(differences, "base")
    assert headers == [
        "pipeline",
        "metric",
        "n",
        "difference vs base",
        "95% interval",
        "higher/lower/same",
    ]
    assert rows == [
        ["new", "token F1", "4", "+0.250", "[-0.125, +0.500]", "2/1/1"],
        ["new", "fact recall", "0", "-", "-", "-"],
        ["new", "hallucination rate", "0", "-", "-", "-"],
    ]


NOTES = (
    "Each pipeline answers at the k whose mean context tokens is closest to {target}. "
    "Hallucination rate: the share of answers with at least one sentence that the support "
    "judge ({judge}, one call per sentence) says the context does not support, over the "
    "answers whose sentences were all judged. Fact recall (EM): every gold answer part is "
    "stated in the answer (SQuAD normalisation). Token F1: SQuAD's token F1 against the gold "
    "answer. Latency: retrieval + generation. Differences: mean per question of (pipeline - "
    "plain) over the questions scored for both, with the 95% paired-bootstrap interval; a "
    "lower hallucination rate is better. With fewer than 30 paired questions read the "
    "intervals as too wide to decide."
)


@pytest.mark.parametrize(
    ("identity", "budget", "judge", "target"),
    [
        ({}, 800.4, "FaithfulnessEvaluator", "800 context tokens"),
        ({"judge": "cross-encoder"}, None, "cross-encoder", "the table's k"),
    ],
)
def test_the_notes_name_the_budget_judge_and_baseline(
    identity: dict, budget: float | None, judge: str, target: str
) -> None:
    assert answer_notes("plain", identity, budget) == NOTES.format(judge=judge, target=target)
