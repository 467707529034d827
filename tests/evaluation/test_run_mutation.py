"""CompareRun's views of its summaries: the main table (the main k, all questions) and the
coverage curves (all questions, measured values only). Kills the mutants of
evaluation/run.py that the report tests leave alive (mutation testing, issue #39)."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.evaluation.compare import Summary
from llama_index_ext_advrag.evaluation.run import CompareRun

pytestmark = pytest.mark.unit


def summary(pipeline: str, k: int, group: str, coverage: float | None, tokens: float) -> Summary:
    return Summary(pipeline, k, group, 10, 10, coverage, None, None, tokens, tokens, None, None, 0)


def run_of(summaries: list[Summary]) -> CompareRun:
    return CompareRun("t", "a", 5, [1, 5], summaries, [], [], {})


def test_main_is_the_main_k_over_all_questions_only() -> None:
    rows = [
        summary("a", 5, "all", 0.5, 50.0),
        summary("a", 1, "all", 0.2, 10.0),  # another k
        summary("a", 5, "multi-hop", 0.4, 60.0),  # a question group
        summary("a", 1, "multi-hop", 0.1, 12.0),  # neither
    ]
    assert run_of(rows).main() == [rows[0]]


def test_curves_keep_all_questions_and_measured_values_only() -> None:
    rows = [
        summary("a", 1, "all", 0.2, 10.0),
        summary("a", 5, "all", 0.5, 50.0),
        summary("a", 5, "multi-hop", 0.4, 60.0),  # a group: not a curve point
        summary("b", 5, "all", 0.3, 40.0),
    ]
    assert run_of(rows).curves() == {"a": [(10.0, 0.2), (50.0, 0.5)], "b": [(40.0, 0.3)]}
    # a row of all questions without a coverage (none measured at that k) is no point either
    unmeasured = [*rows, summary("c", 5, "all", None, 5.0)]
    assert "c" not in run_of(unmeasured).curves()
