"""The recommendation of ``advrag compare``: each pipeline against the baseline, paired per
question at equal context tokens.

Pairing at a token budget: each pipeline ran at several k, each k with its mean context tokens
over the questions. At a budget, a pipeline's score for one question is that question's 0/1
score at the two k whose mean tokens bracket the budget, weighted linearly (the weights of
:func:`~llama_index_ext_advrag.evaluation.frontier.interpolation_weights`). The mean of these
per-question scores is the pipeline's value in the frontier table, and candidate minus baseline
per question is the paired difference. The budgets are those of the frontier: spread over the
token range both pipelines reach (3 budgets, ends included), never extrapolated. The pairing is
at equal *mean* tokens: one question's context may be longer or shorter than the budget.

Rule: a pipeline beats the baseline when, at every shared budget, the 95% paired-bootstrap
interval of the mean difference lies above 0 (it loses when every interval lies below 0);
with fewer than ``MIN_PAIRED_QUESTIONS`` paired questions no decision is made.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import numpy as np

from llama_index_ext_advrag.evaluation.frontier import common_budgets, interpolation_weights
from llama_index_ext_advrag.evaluation.paired import (
    DEFAULT_CONFIDENCE,
    MIN_PAIRED_QUESTIONS,
    ChangeCounts,
    PairedInterval,
    count_changes,
    paired_bootstrap_intervals,
)

if TYPE_CHECKING:
    from llama_index_ext_advrag.evaluation.compare import QuestionResult
    from llama_index_ext_advrag.evaluation.run import CompareRun

logger = logging.getLogger(__name__)

DECISION_BUDGETS = 3
QuestionKey = tuple[str, int]  # (question id, occurrence of that id), robust to repeated ids


class Verdict(str, Enum):
    """A pipeline against the baseline, as the report words it."""

    BEATS = "beats"
    LOSES = "loses to"
    UNCLEAR = "no clear difference from"
    TOO_FEW = "too few questions to decide against"
    NOT_COMPARABLE = "not comparable with"


@dataclass(frozen=True)
class BudgetDifference:
    """Candidate against baseline at one token budget over the paired questions."""

    budget: float
    candidate: float
    baseline: float
    interval: PairedInterval
    changes: ChangeCounts


@dataclass(frozen=True)
class VersusBaseline:
    """One pipeline against the baseline at the token budgets both reach."""

    pipeline: str
    questions: int  # paired questions (scored for both pipelines)
    budgets: list[BudgetDifference]
    verdict: Verdict

    @property
    def advantage(self) -> float | None:
        """Mean difference over the budgets (``None``: no shared budget)."""
        if not self.budgets:
            return None
        return sum(b.interval.mean for b in self.budgets) / len(self.budgets)

    @property
    def detail(self) -> str:
        if not self.budgets:
            return "no common token range"
        return "; ".join(
            f"{b.budget:.0f} tok: {b.candidate:.3f} vs {b.baseline:.3f}, "
            f"{b.interval.mean:+.3f} [{b.interval.low:+.3f}, {b.interval.high:+.3f}]"
            for b in self.budgets
        )


def question_value(result: QuestionResult, metric: str) -> float | None:
    """One question's 0/1 score: ``coverage`` (answer inside the context) or ``hit``."""
    if metric == "coverage":
        return None if result.covered is None else float(result.covered)
    if result.evidence_rank is None:
        return None
    return float(result.evidence_rank > 0)


def question_values(
    results: Sequence[QuestionResult], metric: str
) -> dict[tuple[str, int], dict[QuestionKey, float]]:
    """``{(pipeline, k): {question key: score}}`` for the questions with a score."""
    table: dict[tuple[str, int], dict[QuestionKey, float]] = {}
    seen: dict[tuple[str, int, str], int] = {}
    for r in results:
        occurrence = seen.get((r.pipeline, r.k, r.question_id), 0)
        seen[(r.pipeline, r.k, r.question_id)] = occurrence + 1
        value = question_value(r, metric)
        if value is not None:
            table.setdefault((r.pipeline, r.k), {})[(r.question_id, occurrence)] = value
    return table


def scores_at_budget(
    values: Mapping[int, Mapping[QuestionKey, float]],
    tokens: Mapping[int, float],
    budget: float,
    keys: Sequence[QuestionKey],
) -> np.ndarray | None:
    """Each question's score at ``budget``: its scores at the bracketing k, weighted as the
    frontier interpolates the means; ``None`` when the budget is outside the measured range."""
    ks = sorted(tokens)
    weights = interpolation_weights([tokens[k] for k in ks], budget)
    if weights is None:
        return None
    return np.array(
        [sum(share * values[ks[i]][key] for i, share in weights.items()) for key in keys]
    )


def _curve(run: CompareRun, pipeline: str) -> dict[int, float]:
    """``{k: mean context tokens}`` of one pipeline at the k where its metric was measured."""
    return {
        s.k: s.mean_tokens
        for s in run.summaries
        if s.pipeline == pipeline and s.group == "all" and getattr(s, run.metric) is not None
    }


def versus_baseline(run: CompareRun) -> list[VersusBaseline]:
    """Every pipeline against ``run.baseline``, paired per question at equal tokens."""
    curves = run.curves()
    if run.baseline not in curves:
        return []
    metric = run.metric
    values = question_values(run.results, metric)
    base_tokens = _curve(run, run.baseline)
    out = []
    for name, points in curves.items():
        if name == run.baseline:
            continue
        tokens = _curve(run, name)
        budgets = common_budgets(
            {name: points, run.baseline: curves[run.baseline]}, count=DECISION_BUDGETS
        )
        ours = {k: values.get((name, k), {}) for k in tokens}
        theirs = {k: values.get((run.baseline, k), {}) for k in base_tokens}
        shared = set.intersection(*(set(v) for v in (*ours.values(), *theirs.values())))
        keys = sorted(shared)
        if not budgets or not keys:
            out.append(VersusBaseline(name, len(keys), [], Verdict.NOT_COMPARABLE))
            continue
        columns = []
        for budget in budgets:
            mine = scores_at_budget(ours, tokens, budget, keys)
            base = scores_at_budget(theirs, base_tokens, budget, keys)
            assert mine is not None and base is not None  # budgets lie in both ranges
            columns.append((budget, mine, base))
        differences = np.column_stack([mine - base for _, mine, base in columns])
        intervals = paired_bootstrap_intervals(
            differences, resamples=run.resamples, seed=run.bootstrap_seed
        )
        rows = [
            BudgetDifference(
                budget, float(mine.mean()), float(base.mean()), interval, count_changes(diff)
            )
            for (budget, mine, base), interval, diff in zip(
                columns, intervals, differences.T, strict=True
            )
        ]
        out.append(VersusBaseline(name, len(keys), rows, decide(rows, len(keys))))
    return out


def decide(budgets: Sequence[BudgetDifference], questions: int) -> Verdict:
    """The rule (module docstring) applied to one pipeline's budget rows."""
    if not budgets:
        return Verdict.NOT_COMPARABLE
    if questions < MIN_PAIRED_QUESTIONS:
        return Verdict.TOO_FEW
    if all(b.interval.low > 0 for b in budgets):
        return Verdict.BEATS
    if all(b.interval.high < 0 for b in budgets):
        return Verdict.LOSES
    return Verdict.UNCLEAR


def decision_rule(run: CompareRun) -> str:
    """The rule in words, with this run's settings."""
    return (
        f"Rule: a pipeline is recommended over {run.baseline} only when, at every token budget "
        f"both reach, the {DEFAULT_CONFIDENCE:.0%} paired-bootstrap interval of the mean "
        f"per-question difference in {run.metric} ({run.resamples:,} resamples of the "
        f"questions, seed {run.bootstrap_seed}) lies above 0; with fewer than "
        f'{MIN_PAIRED_QUESTIONS} questions scored for both, it says "too few questions to '
        "decide\". Per-question scores at a budget interpolate each question's 0/1 score "
        "between the two k whose mean context tokens bracket it."
    )


def recommendation(run: CompareRun) -> str:
    """What to use, read at equal tokens against the baseline, with the rule and (for probe
    questions) the proxy warning on lines of their own."""
    comparisons = versus_baseline(run)
    if not comparisons:
        return f"No recommendation: the baseline {run.baseline!r} was not run or not scored."
    metric = run.metric
    winners = [c for c in comparisons if c.verdict is Verdict.BEATS]
    lines = []
    if winners:
        best = max(winners, key=lambda c: c.advantage or 0.0)
        also = f" ({len(winners) - 1} other(s) also beat it; not tested against each other)"
        lines.append(
            f"Use **{best.pipeline}**: at equal context tokens it beats {run.baseline} on "
            f"{metric} by {best.advantage:+.3f} on average over {best.questions} paired "
            f"questions, the interval above 0 at every shared budget ({best.detail})"
            + (also if len(winners) > 1 else "")
            + "."
        )
    elif all(c.verdict in (Verdict.TOO_FEW, Verdict.NOT_COMPARABLE) for c in comparisons):
        lines.append(
            f"Too few questions to decide: keep **{run.baseline}** until at least "
            f"{MIN_PAIRED_QUESTIONS} questions are scored for both pipelines."
        )
    else:
        lines.append(
            f"Keep **{run.baseline}**: no pipeline beats it on {metric} at every shared token "
            "budget by more than the paired interval."
        )
    ranked = sorted(comparisons, key=lambda c: -(c.advantage if c.advantage is not None else -9))
    for c in ranked:
        if c.advantage is None:
            lines.append(f"- {c.pipeline}: {c.detail} with {run.baseline}; not comparable.")
        else:
            lines.append(
                f"- {c.pipeline} {c.verdict.value} {run.baseline}: {c.advantage:+.3f} ({c.detail})"
            )
    lines.append("")
    lines.append(decision_rule(run))
    if run.probe:
        lines.append("")
        lines.append(
            "Proxy: these are probe questions made from the documents (the gold is the sampled "
            "sentence), not labelled questions; confirm with labelled questions before deciding."
        )
    return "\n".join(lines)


__all__ = [
    "BudgetDifference",
    "DECISION_BUDGETS",
    "VersusBaseline",
    "Verdict",
    "decide",
    "decision_rule",
    "question_values",
    "recommendation",
    "scores_at_budget",
    "versus_baseline",
]
