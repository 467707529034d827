"""Answer coverage and context-size metrics.

Answer coverage@k: the gold answer string (whitespace-normalised, case-folded) occurs in the
context finally handed to the LLM. Always report it with the mean context size in tokens, since
a larger context trivially raises coverage.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from llama_index_ext_advrag.text.charsets import CJK_TEXT

_SPACE = re.compile(r"\s+")
# Between two CJK characters whitespace carries no meaning (hard-wrapped Chinese text).
_CJK_GAP = re.compile(rf"(?<=[{CJK_TEXT}])\s+(?=[{CJK_TEXT}])")


def normalize_for_match(text: str) -> str:
    """Case-fold and collapse whitespace (removed entirely between CJK characters)."""
    text = _CJK_GAP.sub("", text.casefold())
    return _SPACE.sub(" ", text).strip()


def answer_covered(context: str, answers: Sequence[str], require_all: bool = True) -> bool:
    """Whether the gold answer strings occur in ``context``.

    Args:
        context: the text handed to the LLM.
        answers: gold answer strings. A question whose answer spans two sentences lists both parts,
            so by default every part must be present.
        require_all: ``False`` treats ``answers`` as alternatives (any one suffices).

    Returns:
        bool: ``False`` for an empty ``answers`` list (nothing to cover).
    """
    if not answers:
        return False
    haystack = normalize_for_match(context)
    hits = (normalize_for_match(answer) in haystack for answer in answers if answer.strip())
    return all(hits) if require_all else any(hits)


@dataclass(frozen=True)
class QuestionRun:
    """One question answered by one pipeline."""

    pipeline: str
    question_id: str
    question_type: str
    covered: bool
    context_tokens: int
    latency_ms: float


@dataclass(frozen=True)
class RunSummary:
    pipeline: str
    group: str
    questions: int
    coverage: float
    mean_context_tokens: float
    p50_latency_ms: float


def summarize_runs(runs: Iterable[QuestionRun], by_type: bool = True) -> list[RunSummary]:
    """Aggregate per pipeline (and per question type when ``by_type``), plus an ``all`` row."""
    groups: dict[tuple[str, str], list[QuestionRun]] = defaultdict(list)
    for run in runs:
        groups[(run.pipeline, "all")].append(run)
        if by_type:
            groups[(run.pipeline, run.question_type)].append(run)
    summaries = []
    for (pipeline, group), members in sorted(groups.items()):
        summaries.append(
            RunSummary(
                pipeline=pipeline,
                group=group,
                questions=len(members),
                coverage=sum(m.covered for m in members) / len(members),
                mean_context_tokens=statistics.fmean(m.context_tokens for m in members),
                p50_latency_ms=statistics.median(m.latency_ms for m in members),
            )
        )
    return summaries


def format_table(summaries: Sequence[RunSummary]) -> str:
    """A plain-text table, one row per pipeline and group."""
    header = f"{'pipeline':28s} {'group':26s} {'n':>4s} {'coverage':>9s} {'ctx tokens':>11s} {'p50 ms':>8s}"
    lines = [header, "-" * len(header)]
    for s in summaries:
        lines.append(
            f"{s.pipeline:28s} {s.group:26s} {s.questions:4d} {s.coverage:9.3f} "
            f"{s.mean_context_tokens:11.1f} {s.p50_latency_ms:8.1f}"
        )
    return "\n".join(lines)
