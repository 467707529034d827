"""The comparison's outputs: terminal tables, report.md, results.csv, frontier.csv, charts.

The recommendation is read at equal context tokens and paired per question (see
:mod:`~llama_index_ext_advrag.evaluation.decision` for the pairing and the rule).
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llama_index_ext_advrag.evaluation.answer_report import (
    answer_differences,
    answer_notes,
    answer_rows,
    difference_rows,
    summarize_answers,
)
from llama_index_ext_advrag.evaluation.answers import AnswerResult
from llama_index_ext_advrag.evaluation.compare import QuestionResult, Summary
from llama_index_ext_advrag.evaluation.decision import (
    VersusBaseline,
    recommendation,
    versus_baseline,
)
from llama_index_ext_advrag.evaluation.frontier import common_budgets, compare_at_budgets
from llama_index_ext_advrag.evaluation.paired import DEFAULT_CONFIDENCE
from llama_index_ext_advrag.evaluation.question_rows import describe_skipped
from llama_index_ext_advrag.evaluation.run import CompareRun

logger = logging.getLogger(__name__)


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f}"


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], markdown: bool) -> str:
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    lines = [fmt.format(*headers), "-" * (sum(widths) + 2 * (len(widths) - 1))]
    lines += [fmt.format(*row) for row in rows]
    return "\n".join(lines)


def main_table(run: CompareRun, markdown: bool = False) -> str:
    ingest = {r.parser: r for r in run.ingest}
    by_pipeline = run.settings.get("pipeline_indexes", {})
    headers = [
        "pipeline",
        "n",
        "coverage",
        f"hit@{run.main_k}",
        "MRR",
        "ctx tok mean",
        "ctx tok p95",
        "lat p50 ms",
        "lat p95 ms",
        "ingest s",
        "LLM calls",
    ]
    rows = []
    for s in run.main():
        seconds = sum(ingest[p].seconds for p in by_pipeline.get(s.pipeline, []) if p in ingest)
        rows.append(
            [
                s.pipeline,
                str(s.questions),
                _fmt(s.coverage),
                _fmt(s.hit),
                _fmt(s.mrr),
                _fmt(s.mean_tokens, 0),
                _fmt(s.p95_tokens, 0),
                _fmt(s.p50_latency_ms, 1),
                _fmt(s.p95_latency_ms, 1),
                _fmt(seconds, 1),
                str(s.llm_calls),
            ]
        )
    return _table(headers, rows, markdown)


def table_budgets(run: CompareRun, count: int = 5) -> list[float]:
    """Budgets for the frontier table: spread over the token range every pipeline reaches,
    or, when the ranges do not all overlap, over the baseline's own range (pipelines that do
    not reach a budget show '-')."""
    curves = run.curves()
    budgets = common_budgets(curves, count=count)
    if not budgets and run.baseline in curves:
        budgets = common_budgets({run.baseline: curves[run.baseline]}, count=count)
    return budgets


def frontier_table(run: CompareRun, markdown: bool = False) -> str:
    curves = run.curves()
    rows_cmp = compare_at_budgets(curves, table_budgets(run))
    if not rows_cmp:
        return "(no token budget that the pipelines reach in common)"
    names = list(curves)
    headers = ["tokens", *names, "best"]
    rows = [
        [_fmt(c.budget, 0), *(_fmt(c.coverage.get(n)) for n in names), c.best] for c in rows_cmp
    ]
    return _table(headers, rows, markdown)


def sweep_table(run: CompareRun, markdown: bool = False) -> str:
    headers = ["pipeline", "k", run.metric, "ctx tokens"]
    rows = [
        [s.pipeline, str(s.k), _fmt(getattr(s, run.metric)), _fmt(s.mean_tokens, 0)]
        for s in sorted(run.summaries, key=lambda s: (s.pipeline, s.k))
        if s.group == "all"
    ]
    return _table(headers, rows, markdown)


def paired_table(run: CompareRun, markdown: bool = False) -> str:
    """Each pipeline against the baseline at each shared budget: both values, the mean
    per-question difference, its interval and how many questions changed."""
    headers = ["pipeline", "tokens", "pipeline", run.baseline, "difference",
               f"{DEFAULT_CONFIDENCE:.0%} interval", "better/worse/same", "verdict"]  # fmt: skip
    rows = []
    for c in versus_baseline(run):
        if not c.budgets:
            rows.append([c.pipeline, "-", "-", "-", "-", "-", "-", c.verdict.value])
        for b in c.budgets:
            rows.append(
                [
                    c.pipeline,
                    _fmt(b.budget, 0),
                    _fmt(b.candidate),
                    _fmt(b.baseline),
                    f"{b.interval.mean:+.3f}",
                    f"[{b.interval.low:+.3f}, {b.interval.high:+.3f}]",
                    f"{b.changes.better}/{b.changes.worse}/{b.changes.same}",
                    f"{c.verdict.value} {run.baseline}",
                ]
            )
    if not rows:
        return f"(no pipeline to compare with {run.baseline})"
    return _table(headers, rows, markdown)


def answer_tables(run: CompareRun, markdown: bool = False) -> str:
    """The answer table and the paired differences against the baseline ('' without answers)."""
    if not run.answers:
        return ""
    headers, rows = answer_rows(summarize_answers(run.answers))
    differences = answer_differences(
        run.answers, run.baseline, resamples=run.resamples, seed=run.bootstrap_seed
    )
    parts = [_table(headers, rows, markdown)]
    if differences:
        headers, rows = difference_rows(differences, run.baseline)
        parts += [f"Against {run.baseline}, paired per question:", _table(headers, rows, markdown)]
    parts.append(answer_notes(run.baseline, run.answer_identity, run.answer_budget))
    return "\n\n".join(parts)


def ingest_table(run: CompareRun, markdown: bool = False) -> str:
    headers = ["index", "nodes", "seconds", "texts embedded", "reused"]
    rows = [
        [
            r.parser if len(r.parser) < 60 else r.parser[:57] + "...",
            str(r.nodes),
            _fmt(r.seconds, 1),
            str(r.embedded_texts),
            "yes" if r.reused else "no",
        ]
        for r in run.ingest
    ]
    return _table(headers, rows, markdown)


def terminal_report(run: CompareRun) -> str:
    parts = [
        run.title,
        "",
        f"Pipelines at k={run.main_k}:",
        main_table(run),
        "",
        f"{run.metric.capitalize()} at equal context tokens (interpolated over k={run.ks}):",
        frontier_table(run),
        "",
        f"Against {run.baseline}, paired per question at equal tokens:",
        paired_table(run),
        "",
        recommendation(run).replace("**", ""),
    ]
    if run.answers:
        parts += ["", "Answers (generated from each pipeline's context):", answer_tables(run)]
    if run.skipped:
        parts += ["", describe_skipped(run.skipped)]
    return "\n".join(parts)


def write_csv(run: CompareRun, out_dir: Path) -> tuple[Path, Path]:
    results = out_dir / "results.csv"
    with results.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(QuestionResult.__dataclass_fields__))
        writer.writeheader()
        for r in run.results:
            if r.k == run.main_k:
                writer.writerow(asdict(r))
    frontier = out_dir / "frontier.csv"
    with frontier.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(Summary.__dataclass_fields__))
        writer.writeheader()
        for s in sorted(run.summaries, key=lambda s: (s.pipeline, s.group, s.k)):
            writer.writerow(asdict(s))
    return results, frontier


def write_charts(run: CompareRun, out_dir: Path) -> list[Path]:
    """frontier.png (metric against mean context tokens, one line per pipeline, k marked) and
    latency.png (p50 and p95 query latency at the main k)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed (extra 'report'); no charts written")
        return []
    paths = []
    figure, axes = plt.subplots(figsize=(8, 5.5))
    markers = itertools.cycle("osD^vP*Xh<>")
    for name in sorted({s.pipeline for s in run.summaries}):
        series = sorted(
            (s for s in run.summaries if s.pipeline == name and s.group == "all"),
            key=lambda s: s.mean_tokens,
        )
        values = [(s.mean_tokens, getattr(s, run.metric), s.k) for s in series]
        values = [v for v in values if v[1] is not None]
        if not values:
            continue
        style = "--" if name == run.baseline else "-"
        axes.plot(
            [v[0] for v in values], [v[1] for v in values], style, marker=next(markers), label=name
        )
        for tokens, value, k in values:
            axes.annotate(
                f"{k}", (tokens, value), fontsize=7, xytext=(2, 2), textcoords="offset points"
            )
    spans = [s.mean_tokens for s in run.summaries if s.mean_tokens > 0]
    if spans and max(spans) / min(spans) > 20:  # curves from tens to thousands of tokens
        axes.set_xscale("log")
    axes.set_xlabel("mean context tokens")
    axes.set_ylabel(run.metric)
    axes.set_title(f"{run.metric} vs context tokens (labels: k)")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    figure.tight_layout()
    paths.append(out_dir / "frontier.png")
    figure.savefig(paths[-1], dpi=110)
    plt.close(figure)

    main = [s for s in run.main() if s.p50_latency_ms is not None]
    if main:
        figure, axes = plt.subplots(figsize=(8, 0.45 * len(main) + 1.5))
        names = [s.pipeline for s in main]
        axes.barh(names, [s.p95_latency_ms or 0 for s in main], color="#c8d7ea", label="p95")
        axes.barh(names, [s.p50_latency_ms or 0 for s in main], color="#3a6ea5", label="p50")
        axes.set_xlabel(f"query latency at k={run.main_k} (ms)")
        axes.invert_yaxis()
        axes.legend()
        figure.tight_layout()
        paths.append(out_dir / "latency.png")
        figure.savefig(paths[-1], dpi=110)
        plt.close(figure)
    return paths


def markdown_report(run: CompareRun, charts: Sequence[Path]) -> str:
    settings = "\n".join(f"- {k}: {v}" for k, v in run.settings.items() if k != "pipeline_indexes")
    descriptions = "\n".join(f"- **{n}**: {d}" for n, d in run.descriptions.items())
    sections = [
        f"# {run.title}",
        "## Recommendation",
        recommendation(run),
        f"### Against {run.baseline}, paired per question at equal tokens",
        paired_table(run, markdown=True),
        "Difference: the mean over the paired questions of (pipeline - baseline) per question "
        "at the budget; better/worse/same: how many questions the pipeline scored higher, "
        "lower or the same there.",
        *(["## Answers", answer_tables(run, markdown=True)] if run.answers else []),
        f"## Pipelines at k={run.main_k}",
        main_table(run, markdown=True),
        "Coverage: every gold answer part inside the context handed to the LLM (normalised). "
        f"hit@{run.main_k} / MRR: the first context node matching the gold evidence. Latency: "
        "retrieval and postprocessing per query, the question embedded beforehand.",
        f"## {run.metric.capitalize()} at equal context tokens",
        "Interpolated linearly between measured k (no extrapolation), at budgets every "
        "pipeline reaches (or, when the ranges do not all overlap, over the baseline's range; "
        "'-' where a pipeline does not reach the budget).",
        frontier_table(run, markdown=True),
        "### Every k",
        sweep_table(run, markdown=True),
    ]
    if run.by_type:
        headers = ["pipeline", "type", "n", "coverage", "ctx tokens"]
        rows = [
            [s.pipeline, s.group, str(s.questions), _fmt(s.coverage), _fmt(s.mean_tokens, 0)]
            for s in run.by_type
            if s.group != "all" and s.k == run.main_k
        ]
        sections += [f"### By question type (k={run.main_k})", _table(headers, rows, True)]
    if run.skipped:
        rows = [[s.where, s.question_id or "-", s.reason] for s in run.skipped]
        sections += [
            "## Skipped questions",
            f"{len(run.skipped)} question rows were read but not asked (not counted anywhere).",
            _table(
                ["row", "id", "reason"], [[c.replace("|", "\\|") for c in r] for r in rows], True
            ),
        ]
    sections += ["## Ingest", ingest_table(run, markdown=True)]
    if charts:
        sections += ["## Charts", "\n".join(f"![{p.stem}]({p.name})" for p in charts)]
    sections += ["## Pipelines", descriptions, "## Settings", settings]
    return "\n\n".join(sections) + "\n"


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinite floats as ``None`` (strict JSON has neither)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def json_report(run: CompareRun) -> dict[str, Any]:
    """The run as plain data: which pipelines ran, the settings (with the embedding model
    decision), the summaries at every k, the skipped question rows and the recommendation."""
    return _finite(
        {
            "title": run.title,
            "baseline": run.baseline,
            "pipelines": list(run.descriptions),
            "main_k": run.main_k,
            "ks": run.ks,
            "metric": run.metric,
            "probe": run.probe,
            "settings": run.settings,
            "embedding": run.embedding,
            "skipped_questions": [asdict(s) for s in run.skipped],
            "summaries": [asdict(s) for s in run.summaries],
            "recommendation": recommendation(run),
            "answer_budget": run.answer_budget,
            "answer_summaries": [asdict(s) for s in summarize_answers(run.answers)],
            "answer_differences": [
                asdict(d)
                for d in answer_differences(
                    run.answers, run.baseline, resamples=run.resamples, seed=run.bootstrap_seed
                )
            ]
            if run.answers
            else [],
        }
    )


def write_report(run: CompareRun, out_dir: str | Path) -> dict[str, Path]:
    """Write report.md, report.json, results.csv, frontier.csv and the charts into
    ``out_dir``; returns every file written by key (``report``, ``json``, ``results``,
    ``frontier``, ``answers`` when answers were measured, ``frontier_chart`` and
    ``latency_chart`` when matplotlib is installed)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results, frontier = write_csv(run, out)
    charts = write_charts(run, out)
    report = out / "report.md"
    report.write_text(markdown_report(run, charts), encoding="utf-8")
    data = out / "report.json"
    text = json.dumps(json_report(run), ensure_ascii=False, indent=1, default=str, allow_nan=False)
    data.write_text(text + "\n", encoding="utf-8")
    files = {"report": report, "json": data, "results": results, "frontier": frontier}
    if run.answers:
        files["answers"] = out / "answers.csv"
        with files["answers"].open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(AnswerResult.__dataclass_fields__))
            writer.writeheader()
            writer.writerows(asdict(a) for a in run.answers)
    files.update({f"{p.stem}_chart": p for p in charts})  # frontier.csv keeps "frontier"
    return files


__all__ = [
    "CompareRun",
    "VersusBaseline",
    "json_report",
    "main_table",
    "paired_table",
    "markdown_report",
    "recommendation",
    "terminal_report",
    "versus_baseline",
    "write_report",
]
