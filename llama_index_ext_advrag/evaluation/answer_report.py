"""The answer-level tables of the report, and each pipeline against the baseline per question.

Table: pipeline | hallucination rate | fact recall (EM) | token F1 | latency | context tokens.
The paired table gives, per metric, the mean per-question difference (pipeline - baseline)
over the questions scored for both, with the paired-bootstrap interval of
:mod:`~llama_index_ext_advrag.evaluation.paired` and how many questions changed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_ext_advrag.evaluation.answers import AnswerResult
from llama_index_ext_advrag.evaluation.compare import percentile
from llama_index_ext_advrag.evaluation.paired import (
    DEFAULT_BOOTSTRAP_SEED,
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    MIN_PAIRED_QUESTIONS,
    ChangeCounts,
    PairedInterval,
    count_changes,
    paired_bootstrap_intervals,
)


@dataclass(frozen=True)
class AnswerSummary:
    """One pipeline's answers (``None`` where nothing was measurable)."""

    pipeline: str
    k: int
    questions: int
    errors: int
    judged: int  # answers whose every sentence was judged (or one judged unsupported)
    hallucination_rate: float | None
    fact_recall: float | None
    token_f1: float | None
    p50_latency_ms: float | None
    mean_context_tokens: float | None
    mean_answer_tokens: float | None
    llm_calls: int
    cached: int
    truncated: int = 0  # answers cut at the LLM's output limit
    refused: int = 0  # the pipeline's own refusals (not judged, no hallucination)


def _mean(values: Sequence[float]) -> float | None:
    return float(np.mean(values)) if values else None


def summarize_answers(results: Sequence[AnswerResult]) -> list[AnswerSummary]:
    """One summary per pipeline, in the order the pipelines first appear."""
    groups: dict[str, list[AnswerResult]] = {}
    for r in results:
        groups.setdefault(r.pipeline, []).append(r)
    out = []
    for name, rows in groups.items():
        ok = [r for r in rows if r.error is None]
        judged = [float(r.hallucinated) for r in ok if r.hallucinated is not None]
        recall = [float(r.fact_recall) for r in ok if r.fact_recall is not None]
        f1 = [r.token_f1 for r in ok if r.token_f1 is not None]
        latency = [r.latency_ms for r in ok if r.latency_ms is not None]
        out.append(
            AnswerSummary(
                pipeline=name,
                k=rows[0].k,
                questions=len(rows),
                errors=len(rows) - len(ok),
                judged=len(judged),
                hallucination_rate=_mean(judged),
                fact_recall=_mean(recall),
                token_f1=_mean(f1),
                p50_latency_ms=percentile(latency, 50) if latency else None,
                mean_context_tokens=_mean([r.context_tokens for r in ok]),
                mean_answer_tokens=_mean([r.answer_tokens for r in ok]),
                llm_calls=sum(r.llm_calls for r in rows),
                cached=sum(r.cached for r in rows),
                truncated=sum(r.truncated for r in ok),
                refused=sum(r.refused for r in ok),
            )
        )
    return out


METRICS: dict[str, Callable[[AnswerResult], float | None]] = {
    "hallucination rate": lambda r: None if r.hallucinated is None else float(r.hallucinated),
    "fact recall": lambda r: None if r.fact_recall is None else float(r.fact_recall),
    "token F1": lambda r: r.token_f1,
}


@dataclass(frozen=True)
class AnswerDifference:
    """One pipeline against the baseline on one answer metric."""

    pipeline: str
    metric: str
    questions: int
    interval: PairedInterval | None  # None: no question scored for both
    changes: ChangeCounts | None


def _by_question(results: Sequence[AnswerResult], pipeline: str, metric: str) -> dict:
    values: dict[tuple[str, int], float] = {}
    seen: dict[str, int] = {}
    for r in results:
        if r.pipeline != pipeline:
            continue
        occurrence = seen.get(r.question_id, 0)
        seen[r.question_id] = occurrence + 1
        value = None if r.error else METRICS[metric](r)
        if value is not None:
            values[(r.question_id, occurrence)] = value
    return values


def answer_differences(
    results: Sequence[AnswerResult],
    baseline: str,
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> list[AnswerDifference]:
    """Every other pipeline against ``baseline``, per metric, paired per question."""
    names = list(dict.fromkeys(r.pipeline for r in results))
    out = []
    for name in names:
        if name == baseline:
            continue
        for metric in METRICS:
            mine = _by_question(results, name, metric)
            theirs = _by_question(results, baseline, metric)
            keys = sorted(set(mine) & set(theirs))
            if not keys:
                out.append(AnswerDifference(name, metric, 0, None, None))
                continue
            diff = np.array([mine[k] - theirs[k] for k in keys])
            (interval,) = paired_bootstrap_intervals(diff, resamples=resamples, seed=seed)
            out.append(AnswerDifference(name, metric, len(keys), interval, count_changes(diff)))
    return out


def _fmt(value: float | None, digits: int = 3, percent: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.1%}" if percent else f"{value:.{digits}f}"


def answer_rows(summaries: Sequence[AnswerSummary]) -> tuple[list[str], list[list[str]]]:
    headers = ["pipeline", "k", "n", "hallucination rate", "fact recall (EM)", "token F1",
               "latency p50 ms", "context tokens", "answer tokens", "judged", "errors",
               "LLM calls", "cached", "truncated", "refused"]  # fmt: skip
    rows = [
        [
            s.pipeline,
            str(s.k),
            str(s.questions),
            _fmt(s.hallucination_rate, percent=True),
            _fmt(s.fact_recall, percent=True),
            _fmt(s.token_f1),
            _fmt(s.p50_latency_ms, 0),
            _fmt(s.mean_context_tokens, 0),
            _fmt(s.mean_answer_tokens, 0),
            str(s.judged),
            str(s.errors),
            str(s.llm_calls),
            str(s.cached),
            str(s.truncated),
            str(s.refused),
        ]  # fmt: skip
        for s in summaries
    ]
    return headers, rows


def difference_rows(
    differences: Sequence[AnswerDifference], baseline: str
) -> tuple[list[str], list[list[str]]]:
    headers = ["pipeline", "metric", "n", f"difference vs {baseline}",
               f"{DEFAULT_CONFIDENCE:.0%} interval", "higher/lower/same"]  # fmt: skip
    rows = []
    for d in differences:
        if d.interval is None or d.changes is None:
            rows.append([d.pipeline, d.metric, "0", "-", "-", "-"])
            continue
        rows.append([d.pipeline, d.metric, str(d.questions), f"{d.interval.mean:+.3f}",
                     f"[{d.interval.low:+.3f}, {d.interval.high:+.3f}]",
                     f"{d.changes.better}/{d.changes.worse}/{d.changes.same}"])  # fmt: skip
    return headers, rows


def answer_notes(baseline: str, identity: dict, budget: float | None) -> str:
    """How to read the answer tables (the rule and the settings)."""
    judge = identity.get("judge", "FaithfulnessEvaluator")
    target = f"{budget:.0f} context tokens" if budget is not None else "the table's k"
    return (
        f"Each pipeline answers at the k whose mean context tokens is closest to {target}. "
        "Hallucination rate: the share of answers with at least one sentence that the support "
        f"judge ({judge}, one call per sentence) says the context does not support, over the "
        "answers whose sentences were all judged. Fact recall (EM): every gold answer part is "
        "stated in the answer (SQuAD normalisation). Token F1: SQuAD's token F1 against the "
        "gold answer. Latency: retrieval + generation. Differences: mean per question of "
        f"(pipeline - {baseline}) over the questions scored for both, with the "
        f"{DEFAULT_CONFIDENCE:.0%} paired-bootstrap interval; a lower hallucination rate is "
        f"better. With fewer than {MIN_PAIRED_QUESTIONS} paired questions read the intervals "
        "as too wide to decide."
    )


__all__ = [
    "AnswerDifference",
    "AnswerSummary",
    "summarize_answers",
    "METRICS",
    "answer_differences",
    "answer_notes",
    "answer_rows",
    "difference_rows",
]
