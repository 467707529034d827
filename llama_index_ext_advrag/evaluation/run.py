"""What one ``advrag compare`` run measured: the record that the report and the
recommendation are made from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llama_index_ext_advrag.evaluation.answers import AnswerResult
from llama_index_ext_advrag.evaluation.compare import QuestionResult, Summary
from llama_index_ext_advrag.evaluation.frontier import Point
from llama_index_ext_advrag.evaluation.ingest import IngestRecord
from llama_index_ext_advrag.evaluation.paired import DEFAULT_BOOTSTRAP_SEED, DEFAULT_RESAMPLES
from llama_index_ext_advrag.evaluation.question_rows import SkippedQuestion


@dataclass
class CompareRun:
    """Everything a report is made from."""

    title: str
    baseline: str
    main_k: int
    ks: list[int]
    summaries: list[Summary]
    results: list[QuestionResult]
    ingest: list[IngestRecord]
    descriptions: dict[str, str]
    settings: dict[str, Any] = field(default_factory=dict)
    probe: bool = False
    by_type: list[Summary] = field(default_factory=list)
    skipped: list[SkippedQuestion] = field(default_factory=list)  # question rows not asked
    embedding: dict[str, Any] = field(default_factory=dict)  # the embedding model decision
    resamples: int = DEFAULT_RESAMPLES  # of the paired bootstrap behind the recommendation
    bootstrap_seed: int = DEFAULT_BOOTSTRAP_SEED
    answers: list[AnswerResult] = field(default_factory=list)  # with answers evaluated
    answer_budget: float | None = None  # the context tokens the answers were read at
    answer_identity: dict[str, Any] = field(default_factory=dict)  # LLM and support judge

    @property
    def metric(self) -> str:
        """``coverage`` when questions carry answers, else ``hit`` (BEIR)."""
        return "coverage" if any(s.coverage is not None for s in self.summaries) else "hit"

    def main(self) -> list[Summary]:
        return [s for s in self.summaries if s.k == self.main_k and s.group == "all"]

    def curves(self) -> dict[str, list[Point]]:
        curves: dict[str, list[Point]] = {}
        for s in self.summaries:
            value = getattr(s, self.metric)
            if s.group == "all" and value is not None:
                curves.setdefault(s.pipeline, []).append((s.mean_tokens, value))
        return curves


__all__ = ["CompareRun"]
