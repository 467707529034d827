"""A whole comparison on a tiny corpus: report.md, results.csv, frontier.csv and the charts."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import QUESTIONS, write_corpus

from llama_index_ext_advrag.evaluation.compare import (
    QuestionResult,
    Summary,
    summarize,
    summarize_all,
)
from llama_index_ext_advrag.evaluation.report import CompareRun, recommendation, versus_baseline
from llama_index_ext_advrag.evaluation.session import CompareOptions, guess_doc_type, run_compare


@pytest.mark.milvus_lite
def test_compare_writes_every_output(tmp_path: Path) -> None:
    docs, qa = write_corpus(tmp_path)
    options = CompareOptions(
        docs=[str(docs)], questions=str(qa), pipelines=["baseline", "prev-next"],
        uri=str(tmp_path / "m.db"), out=str(tmp_path / "report"), state_dir=str(tmp_path / "s"),
        k=2, ks=[1, 3], embed_model=HashEmbedding(dim=64), use_llm=False, show_progress=False,
    )  # fmt: skip
    run, files = run_compare(options)
    assert set(files) >= {"report", "results", "frontier", "frontier_chart", "latency_chart"}
    assert files["frontier"] == tmp_path / "report" / "frontier.csv"
    assert files["frontier_chart"] == tmp_path / "report" / "frontier.png"
    assert files["frontier_chart"].read_bytes()[:4] == b"\x89PNG"
    with files["results"].open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2 * len(QUESTIONS)  # one row per pipeline x question
    assert {r["k"] for r in rows} == {"2"}
    unanswerable = [r for r in rows if r["question_id"] == "u1"]
    assert all(r["covered"] == "" for r in unanswerable)  # not scored
    report = files["report"].read_text(encoding="utf-8")
    assert "## Recommendation" in report and "| baseline |" in report
    assert "Rule: a pipeline is recommended over baseline only when" in report
    assert "Too few questions to decide" in report  # 3 answerable questions
    assert "| prev-next |" in report.split("## Pipelines at")[0]  # the paired table
    assert str(tmp_path) not in report  # no absolute paths in the report
    assert {s.k for s in run.summaries} == {1, 2, 3}
    # a second run reuses both indexes
    run2, _ = run_compare(options)
    assert all(record.reused for record in run2.ingest)


def result(pipeline: str, k: int, covered: bool, tokens: int, rank: int | None = 1,
           latency: float | None = 10.0) -> QuestionResult:  # fmt: skip
    return QuestionResult(pipeline, "q", "t", False, k, covered, rank, tokens, 1, latency, 0)


def test_summary_maths_by_hand() -> None:
    rows = [result("a", 1, True, 100, 1, 10.0), result("a", 1, False, 300, 2, 30.0),
            result("a", 1, True, 200, 0, 20.0), result("a", 1, True, 400, None, None)]  # fmt: skip
    s = summarize(rows)
    assert s.coverage == pytest.approx(0.75)
    assert s.hit == pytest.approx(2 / 3)
    assert s.mrr == pytest.approx((1 + 0.5 + 0) / 3)
    assert s.mean_tokens == pytest.approx(250)
    assert s.p95_tokens == pytest.approx(385)  # numpy linear: 300 + 0.85 * 100
    assert s.p50_latency_ms == pytest.approx(20)


def summary(name: str, k: int, coverage: float, tokens: float) -> Summary:
    return Summary(name, k, "all", 400, 400, coverage, None, None, tokens, tokens, 1, 2, 0)


def per_question(name: str, k: int, covered_below: int, tokens: int) -> list[QuestionResult]:
    """400 questions; questions q0 .. q(covered_below - 1) are covered."""
    return [QuestionResult(name, f"q{i}", "t", False, k, i < covered_below, 1, tokens, 1, None, 0)
            for i in range(400)]  # fmt: skip


def test_recommendation_reads_at_equal_tokens() -> None:
    # baseline looks better at k=5 (0.80 vs 0.70) only because it hands over twice the tokens;
    # at equal tokens a wins: at 400 tokens a = 0.70, baseline = 0.50 * 2/3 + 0.80 * 1/3 = 0.60.
    results = [*per_question("baseline", 1, 200, 200), *per_question("baseline", 5, 320, 800),
               *per_question("a", 1, 240, 200), *per_question("a", 5, 280, 400)]  # fmt: skip
    run = CompareRun("t", "baseline", 5, [1, 5], summarize_all(results), results, [], {},
                     probe=True)  # fmt: skip
    [versus] = versus_baseline(run)
    assert [b.budget for b in versus.budgets] == [200.0, 300.0, 400.0]
    # differences: 0.10 at 200, (0.65 - 0.55) at 300, (0.70 - 0.60) at 400
    assert versus.advantage == pytest.approx(0.10)
    assert versus.budgets[-1].baseline == pytest.approx(0.60)
    text = recommendation(run)
    assert text.startswith("Use **a**")
    assert "probe questions" in text


def test_document_type_guess() -> None:
    from llama_index.core.schema import Document

    faq = Document(text="\n".join(["How do I reset it?", "Hold the button.", "Why?", "Because."]))
    assert guess_doc_type([faq]) == "qa"
    paper = Document(text=" ".join(["Smith et al. found it.", "Abstract", "References"] * 5))
    assert guess_doc_type([paper]) == "article"
    assert guess_doc_type([Document(text="A plain story. It goes on.")]) == "general"


def test_frontier_table_falls_back_to_the_baseline_range() -> None:
    from llama_index_ext_advrag.evaluation.report import frontier_table, table_budgets

    summaries = [summary("baseline", 1, 0.50, 200), summary("baseline", 5, 0.80, 600),
                 summary("big", 1, 0.60, 700), summary("big", 5, 0.90, 900),
                 summary("small", 1, 0.55, 100), summary("small", 5, 0.75, 400)]  # fmt: skip
    run = CompareRun("t", "baseline", 5, [1, 5], summaries, [], [], {})
    assert table_budgets(run, count=3) == [200.0, 400.0, 600.0]  # no common range: baseline's
    table = frontier_table(run)
    row_400 = next(line for line in table.splitlines() if line.startswith("400"))
    # baseline 0.65, big does not reach 400 tokens, small at its end point 0.75
    assert row_400.split()[1:] == ["0.650", "-", "0.750", "small"]
