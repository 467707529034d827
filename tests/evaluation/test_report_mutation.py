"""evaluation/report.py's written outputs from a run built by hand (no index, no Milvus): the
terminal and markdown tables row by row, report.md section by section, results.csv /
frontier.csv / answers.csv byte for byte, report.json's keys and values, and which charts are
written with what on them (read from the matplotlib figures as they are saved; no pixels).

The run: four pipelines over two questions at k = 1 and 3 (main k 3). ``baseline`` never covers
the answer (its gold node second at k=3), ``window`` always does, ``far`` hands over 1,000 and
2,000 tokens (no token range in common with the baseline) and ``silent`` has neither answers nor
gold nodes (no coverage at all). Constant per-question differences make the paired intervals
exact (+1.000 everywhere), so every figure below is known by hand."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import locale
import logging
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pytest

from llama_index_ext_advrag.evaluation.answer_report import (
    answer_differences,
    answer_notes,
    answer_rows,
    difference_rows,
    summarize_answers,
)
from llama_index_ext_advrag.evaluation.answers import AnswerResult
from llama_index_ext_advrag.evaluation.compare import QuestionResult, Summary, summarize_all
from llama_index_ext_advrag.evaluation.ingest import IngestRecord
from llama_index_ext_advrag.evaluation.question_rows import SkippedQuestion, describe_skipped
from llama_index_ext_advrag.evaluation.report import (
    CompareRun,
    _finite,
    _fmt,
    _table,
    answer_tables,
    frontier_table,
    ingest_table,
    json_report,
    main_table,
    markdown_report,
    paired_table,
    recommendation,
    sweep_table,
    table_budgets,
    terminal_report,
    write_charts,
    write_csv,
    write_report,
)


def question(pipeline: str, qid: str, k: int, covered: bool | None, rank: int | None,
             tokens: int, latency: float | None = None, calls: int = 0,
             qtype: str = "fact") -> QuestionResult:  # fmt: skip
    return QuestionResult(pipeline, qid, qtype, False, k, covered, rank, tokens, k, latency, calls)


def results() -> list[QuestionResult]:
    return [
        question("baseline", "q1", 1, False, 0, 90),
        question("baseline", "q2", 1, False, 0, 110),
        question("baseline", "q1", 3, False, 2, 280, 10.0),
        question("baseline", "q2", 3, False, 2, 320, 30.0),
        question("window", "q1", 1, True, 1, 200, calls=1),
        question("window", "q2", 1, True, 1, 200, calls=1, qtype="how"),
        question("window", "q1", 3, True, 1, 500, 40.0, 2),
        question("window", "q2", 3, True, 1, 700, 60.0, 2, qtype="how"),
        question("far", "q1", 1, True, 1, 1000),
        question("far", "q1", 3, False, 0, 2000, 5.0),
        question("silent", "q1", 1, None, None, 50),
        question("silent", "q1", 3, None, None, 60),
    ]


def make_run(**fields: Any) -> CompareRun:
    rows = results()
    values: dict[str, Any] = {
        "title": "advrag compare: test",
        "baseline": "baseline",
        "main_k": 3,
        "ks": [1, 3],
        "summaries": summarize_all(rows),
        "results": rows,
        "ingest": [
            IngestRecord("sentence-window", "c1", 12, 1.5, False, 12),
            IngestRecord("prev-next", "c2", 7, 2.0, True, 0),
        ],
        "descriptions": {
            "baseline": "plain dense",
            "window": "sentence windows",
            "far": "long",
            "silent": "none",
        },  # fmt: skip
        "settings": {
            "documents": "2 from a.md",
            "k (table)": 3,
            "pipeline_indexes": {
                "baseline": ["sentence-window"],
                "window": ["sentence-window", "prev-next", "gone"],  # "gone": no record
            },
        },
    }
    values.update(fields)
    return CompareRun(**values)


def answer(pipeline: str, qid: str, f1: float, **fields: Any) -> AnswerResult:
    values: dict[str, Any] = {
        "k": 3, "answer": "an answer", "fact_recall": True, "token_f1": f1, "hallucinated": False,
        "sentences": 1, "unsupported": 0, "unjudged": 0, "context_tokens": 300,
        "answer_tokens": 12, "latency_ms": 900.0, "cached": False, "llm_calls": 2,
    }  # fmt: skip
    values.update(fields)
    return AnswerResult(pipeline=pipeline, question_id=qid, **values)


def answers() -> list[AnswerResult]:
    """Token F1 differences 0.5, 0.1, 0.3, -0.2, 0.9 (not constant: the seed shows)."""
    base = [0.1, 0.5, 0.2, 0.6, 0.0]
    mine = [0.6, 0.6, 0.5, 0.4, 0.9]
    return [answer("baseline", f"q{i}", v) for i, v in enumerate(base)] + [
        answer("window", f"q{i}", v, context="ctx | ünï") for i, v in enumerate(mine)
    ]


def answered_run(**fields: Any) -> CompareRun:
    return make_run(
        answers=answers(), resamples=2000, bootstrap_seed=7, answer_budget=250.0,
        answer_identity={"llm": "tiny", "judge": "judge-x"}, **fields,
    )  # fmt: skip


@contextlib.contextmanager
def ascii_locale() -> Iterator[None]:
    """The locale's encoding is ASCII: a file opened without ``encoding`` cannot take 'ü'."""
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")
        yield
    finally:
        locale.setlocale(locale.LC_CTYPE, before)


@pytest.fixture
def crlf_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files opened by Path.open behave as on Windows: the pure-Python text layer (_pyio)
    with os.linesep = CRLF, so a text file opened without newline='' writes '\\n' as CRLF."""
    import _pyio

    def open_(self: Path, mode: str = "r", buffering: int = -1, encoding: str | None = None,
              errors: str | None = None, newline: str | None = None) -> Any:  # fmt: skip
        return _pyio.open(os.fspath(self), mode, buffering, encoding, errors, newline)

    monkeypatch.setattr(Path, "open", open_)
    monkeypatch.setattr(os, "linesep", "\r\n")


MAIN_PLAIN = """\
pipeline  n  coverage  hit@3    MRR  ctx tok mean  ctx tok p95  lat p50 ms  lat p95 ms  ingest s  LLM calls
-----------------------------------------------------------------------------------------------------------
baseline  2     0.000  1.000  0.500           300          318        20.0        29.0       1.5          0
window    2     1.000  1.000  1.000           600          690        50.0        59.0       3.5          4
far       1     0.000  0.000  0.000          2000         2000         5.0         5.0       0.0          0
silent    1         -      -      -            60           60           -           -       0.0          0"""

MAIN_MARKDOWN = """\
| pipeline | n | coverage | hit@3 | MRR | ctx tok mean | ctx tok p95 | lat p50 ms | lat p95 ms | ingest s | LLM calls |
|---|---|---|---|---|---|---|---|---|---|---|
| baseline | 2 | 0.000 | 1.000 | 0.500 | 300 | 318 | 20.0 | 29.0 | 1.5 | 0 |
| window | 2 | 1.000 | 1.000 | 1.000 | 600 | 690 | 50.0 | 59.0 | 3.5 | 4 |
| far | 1 | 0.000 | 0.000 | 0.000 | 2000 | 2000 | 5.0 | 5.0 | 0.0 | 0 |
| silent | 1 | - | - | - | 60 | 60 | - | - | 0.0 | 0 |"""

FRONTIER_PLAIN = """\
tokens  baseline  window  far      best
---------------------------------------
100        0.000       -    -  baseline
150        0.000       -    -  baseline
200        0.000   1.000    -    window
250        0.000   1.000    -    window
300        0.000   1.000    -    window"""

SWEEP_PLAIN = """\
pipeline  k  coverage  ctx tokens
---------------------------------
baseline  1     0.000         100
baseline  3     0.000         300
far       1     1.000        1000
far       3     0.000        2000
silent    1         -          50
silent    3         -          60
window    1     1.000         200
window    3     1.000         600"""

TOO_FEW = "too few questions to decide against baseline"
PAIRED_PLAIN = f"""\
pipeline  tokens  pipeline  baseline  difference      95% interval  better/worse/same                                       verdict
-----------------------------------------------------------------------------------------------------------------------------------
window       200     1.000     0.000      +1.000  [+1.000, +1.000]              2/0/0  {TOO_FEW}
window       250     1.000     0.000      +1.000  [+1.000, +1.000]              2/0/0  {TOO_FEW}
window       300     1.000     0.000      +1.000  [+1.000, +1.000]              2/0/0  {TOO_FEW}
far            -         -         -           -                 -                  -                           not comparable with"""

PAIRED_MARKDOWN = f"""\
| pipeline | tokens | pipeline | baseline | difference | 95% interval | better/worse/same | verdict |
|---|---|---|---|---|---|---|---|
| window | 200 | 1.000 | 0.000 | +1.000 | [+1.000, +1.000] | 2/0/0 | {TOO_FEW} |
| window | 250 | 1.000 | 0.000 | +1.000 | [+1.000, +1.000] | 2/0/0 | {TOO_FEW} |
| window | 300 | 1.000 | 0.000 | +1.000 | [+1.000, +1.000] | 2/0/0 | {TOO_FEW} |
| far | - | - | - | - | - | - | not comparable with |"""

INGEST_PLAIN = """\
index            nodes  seconds  texts embedded  reused
-------------------------------------------------------
sentence-window     12      1.5              12      no
prev-next            7      2.0               0     yes"""

INGEST_MARKDOWN = """\
| index | nodes | seconds | texts embedded | reused |
|---|---|---|---|---|
| sentence-window | 12 | 1.5 | 12 | no |
| prev-next | 7 | 2.0 | 0 | yes |"""


# --- the tables ----------------------------------------------------------------------------


def test_fmt_rounds_and_dashes_missing_values() -> None:
    assert _fmt(None) == "-"
    assert _fmt(float("nan")) == "-"
    assert _fmt(float("nan"), 1) == "-"
    assert _fmt(0.25) == "0.250"
    assert _fmt(3) == "3.000"  # an int is never NaN
    assert _fmt(1234.56, 0) == "1235"
    assert _fmt(2.25, 1) == "2.2"  # Python's rounding, half to even on exact binary halves


def test_table_aligns_plain_columns_and_writes_markdown() -> None:
    rows = [["a", "1.0"], ["longer", "22.50"]]
    assert _table(["name", "value"], rows, False) == (
        "name    value\n-------------\na         1.0\nlonger  22.50"
    )
    # a header wider than every value sets the width
    assert _table(["pipeline", "coverage"], [["a", "1"], ["b", "2"]], False) == (
        "pipeline  coverage\n------------------\na                1\nb                2"
    )
    assert _table(["name", "value"], rows, True) == (
        "| name | value |\n|---|---|\n| a | 1.0 |\n| longer | 22.50 |"
    )
    # no rows: the headers alone set the widths
    assert _table(["abc", "de", "f"], [], False) == "abc  de  f\n----------"
    assert _table(["abc", "de"], [], True) == "| abc | de |\n|---|---|"
    assert _table(["only"], [["x"]], False) == "only\n----\nx   "


def test_main_table_rows_at_the_main_k_with_ingest_seconds_per_pipeline() -> None:
    run = make_run()
    assert main_table(run) == MAIN_PLAIN
    assert main_table(run, markdown=True) == MAIN_MARKDOWN
    assert main_table(run, True) == MAIN_MARKDOWN
    # no pipeline_indexes setting: no ingest seconds counted
    bare = make_run(settings={})
    assert [line.split()[-2] for line in main_table(bare).splitlines()[2:]] == ["0.0"] * 4
    # the headers name the main k
    assert main_table(make_run(main_k=1)).splitlines()[0].split()[3] == "hit@1"


def test_frontier_table_and_its_budgets() -> None:
    run = make_run()
    # far shares no tokens with the others: the baseline's own range, five budgets
    assert table_budgets(run) == [100.0, 150.0, 200.0, 250.0, 300.0]
    assert table_budgets(run, count=3) == [100.0, 200.0, 300.0]
    assert frontier_table(run) == FRONTIER_PLAIN
    assert frontier_table(run, markdown=True) == (
        "| tokens | baseline | window | far | best |\n|---|---|---|---|---|\n"
        "| 100 | 0.000 | - | - | baseline |\n| 150 | 0.000 | - | - | baseline |\n"
        "| 200 | 0.000 | 1.000 | - | window |\n| 250 | 0.000 | 1.000 | - | window |\n"
        "| 300 | 0.000 | 1.000 | - | window |"
    )
    # without far the ranges meet: 200 to 300 tokens, five budgets by default
    near = make_run(results=[r for r in results() if r.pipeline != "far"])
    near = replace(near, summaries=summarize_all(near.results))
    assert table_budgets(near) == [200.0, 225.0, 250.0, 275.0, 300.0]
    assert table_budgets(near, count=2) == [200.0, 300.0]
    # a baseline without a curve: no budgets, and the table says so
    unscored = make_run(baseline="silent")
    assert table_budgets(unscored) == []
    assert frontier_table(unscored) == "(no token budget that the pipelines reach in common)"


def test_sweep_table_lists_every_k_of_the_whole_question_set() -> None:
    run = make_run()
    by_type = summarize_all([r for r in results() if r.k == 3], by_type=True)
    groups = [s for s in by_type if s.group != "all"]
    shuffled = replace(run, summaries=[*reversed(run.summaries), *groups])
    assert sweep_table(shuffled) == SWEEP_PLAIN
    assert sweep_table(run, markdown=True).splitlines()[:3] == [
        "| pipeline | k | coverage | ctx tokens |",
        "|---|---|---|---|",
        "| baseline | 1 | 0.000 | 100 |",
    ]
    # without answer strings the metric is hit@k
    hits = [replace(r, covered=None) for r in results()]
    by_hit = make_run(results=hits, summaries=summarize_all(hits))
    assert sweep_table(by_hit).splitlines()[0].split() == ["pipeline", "k", "hit", "ctx", "tokens"]
    assert sweep_table(by_hit).splitlines()[3].split() == ["baseline", "3", "1.000", "300"]


def test_paired_table_rows_and_the_incomparable_pipeline() -> None:
    run = make_run()
    assert paired_table(run) == PAIRED_PLAIN
    assert paired_table(run, markdown=True) == PAIRED_MARKDOWN
    alone = make_run(results=[r for r in results() if r.pipeline == "baseline"])
    alone = replace(alone, summaries=summarize_all(alone.results))
    assert paired_table(alone) == "(no pipeline to compare with baseline)"


def test_ingest_table_cuts_long_index_names() -> None:
    run = make_run()
    assert ingest_table(run) == INGEST_PLAIN
    assert ingest_table(run, markdown=True) == INGEST_MARKDOWN
    long = make_run(ingest=[IngestRecord("a" * 59, "c", 1, 0.25, True),
                            IngestRecord("b" * 60, "c", 2, 10.0, False, 3)])  # fmt: skip
    assert ingest_table(long, markdown=True).splitlines()[2:] == [
        f"| {'a' * 59} | 1 | 0.2 | 0 | yes |",
        f"| {'b' * 57}... | 2 | 10.0 | 3 | no |",
    ]


def test_answer_tables_with_and_without_differences() -> None:
    assert answer_tables(make_run()) == ""
    run = answered_run()
    found = answer_differences(run.answers, "baseline", resamples=2000, seed=7)
    # the run's resamples and seed reach the intervals (the defaults give others)
    assert found != answer_differences(run.answers, "baseline")
    assert found != answer_differences(run.answers, "baseline", resamples=2000)
    assert found != answer_differences(run.answers, "baseline", seed=7)
    headers, rows = answer_rows(summarize_answers(run.answers))
    d_headers, d_rows = difference_rows(found, "baseline")
    notes = answer_notes("baseline", {"llm": "tiny", "judge": "judge-x"}, 250.0)
    assert "250 context tokens" in notes and "judge-x" in notes
    for markdown in (False, True):
        assert answer_tables(run, markdown=markdown) == "\n\n".join([
            _table(headers, rows, markdown),
            "Against baseline, paired per question:",
            _table(d_headers, d_rows, markdown),
            notes,
        ])  # fmt: skip
    assert answer_tables(run, True).startswith("| pipeline | k | n | hallucination rate |")
    assert "| window | token F1 | 5 | +0.320 | [+0.000, +0.621] | 4/1/0 |" in answer_tables(
        run, True
    )
    # the baseline alone answered: no paired part
    alone = replace(run, answers=[a for a in run.answers if a.pipeline == "baseline"])
    headers, rows = answer_rows(summarize_answers(alone.answers))
    assert answer_tables(alone) == "\n\n".join([_table(headers, rows, False), notes])


def test_terminal_report_in_order() -> None:
    run = make_run()
    text = terminal_report(run)
    assert text == "\n".join([
        "advrag compare: test", "", "Pipelines at k=3:", MAIN_PLAIN, "",
        "Coverage at equal context tokens (interpolated over k=[1, 3]):", FRONTIER_PLAIN, "",
        "Against baseline, paired per question at equal tokens:", PAIRED_PLAIN, "",
        recommendation(run).replace("**", ""),
    ])  # fmt: skip
    assert "keep baseline until" in text and "**" not in text
    skipped = [SkippedQuestion("qa.jsonl:4", None, "empty question")]
    full = answered_run(skipped=skipped)
    assert terminal_report(full) == "\n".join([
        terminal_report(replace(full, answers=[], skipped=[])),
        "", "Answers (generated from each pipeline's context):", answer_tables(full),
        "", "Skipped 1 question row (not asked, not counted):\n  qa.jsonl:4: empty question",
    ])  # fmt: skip
    assert describe_skipped(skipped) in terminal_report(replace(full, answers=[]))


# --- the files -----------------------------------------------------------------------------

RESULTS_HEADER = (
    "pipeline,question_id,question_type,probe,k,covered,evidence_rank,context_tokens,nodes,"
    "latency_ms,llm_calls"
)


def test_write_csv_writes_the_main_k_rows_and_every_summary(tmp_path: Path) -> None:
    run = make_run()
    by_type = summarize_all([r for r in results() if r.k == 3], by_type=True)
    run = replace(run, summaries=[*run.summaries, *(s for s in by_type if s.group != "all")])
    assert write_csv(run, tmp_path) == (tmp_path / "results.csv", tmp_path / "frontier.csv")
    assert (tmp_path / "results.csv").read_bytes().decode("utf-8").split("\r\n") == [
        RESULTS_HEADER,
        "baseline,q1,fact,False,3,False,2,280,3,10.0,0",
        "baseline,q2,fact,False,3,False,2,320,3,30.0,0",
        "window,q1,fact,False,3,True,1,500,3,40.0,2",
        "window,q2,how,False,3,True,1,700,3,60.0,2",
        "far,q1,fact,False,3,False,0,2000,3,5.0,0",
        "silent,q1,fact,False,3,,,60,3,,0",
        "",
    ]
    lines = (tmp_path / "frontier.csv").read_bytes().decode("utf-8").split("\r\n")
    assert lines[0] == (
        "pipeline,k,group,questions,answerable,coverage,hit,mrr,mean_tokens,p95_tokens,"
        "p50_latency_ms,p95_latency_ms,llm_calls"
    )
    # sorted by pipeline, then group ("all" before "fact"/"how"), then k
    assert [tuple(line.split(",")[:3]) for line in lines[1:-1]] == [
        ("baseline", "1", "all"), ("baseline", "3", "all"), ("baseline", "3", "fact"),
        ("far", "1", "all"), ("far", "3", "all"), ("far", "3", "fact"),
        ("silent", "1", "all"), ("silent", "3", "all"), ("silent", "3", "fact"),
        ("window", "1", "all"), ("window", "3", "all"), ("window", "3", "fact"),
        ("window", "3", "how"),
    ]  # fmt: skip
    assert lines[2] == "baseline,3,all,2,2,0.0,1.0,0.5,300.0,318.0,20.0,29.0,0"
    assert lines[-1] == ""


def test_csv_files_end_rows_with_one_crlf_on_windows(tmp_path: Path, crlf_platform: None) -> None:
    with (tmp_path / "probe.txt").open("w") as handle:
        handle.write("a\n")
    assert (tmp_path / "probe.txt").read_bytes() == b"a\r\n"  # the emulation translates
    run = answered_run()
    files = write_report(run, tmp_path / "out")
    for name in ("results", "answers"):
        data = files[name].read_bytes()
        assert b"\r\r" not in data and data.count(b"\r\n") == data.count(b"\n") > 2, name
    assert (tmp_path / "out" / "results.csv").read_bytes().decode().split("\r\n")[1] == (
        "baseline,q1,fact,False,3,False,2,280,3,10.0,0"
    )
    frontier = (tmp_path / "out" / "frontier.csv").read_bytes()
    assert b"\r\r" not in frontier and frontier.count(b"\r\n") == 9


def test_write_csv_writes_utf8_whatever_the_locale(tmp_path: Path) -> None:
    rows = [replace(r, pipeline="泵站", question_id=f"问{r.question_id}") for r in results()]
    run = make_run(results=rows, summaries=summarize_all(rows))
    with ascii_locale():
        write_csv(run, tmp_path)
    text = (tmp_path / "results.csv").read_bytes().decode("utf-8")
    assert text.splitlines()[1].startswith("泵站,问q1,fact,False,3,")
    frontier = (tmp_path / "frontier.csv").read_bytes().decode("utf-8").splitlines()
    assert [line.split(",")[:2] for line in frontier[1:]] == [["泵站", "1"], ["泵站", "3"]]


# --- the charts ----------------------------------------------------------------------------


@pytest.fixture
def saved(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, Path, dict[str, Any]]]:
    """Every figure write_charts saves, with its file and the savefig keywords."""
    import matplotlib.figure

    calls: list[tuple[Any, Path, dict[str, Any]]] = []
    original = matplotlib.figure.Figure.savefig

    def record(self: Any, fname: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append((self, Path(fname), kwargs))
        return original(self, fname, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", record)
    return calls


def chart_run() -> CompareRun:
    """The summaries out of token order, far's latencies 0 ms (p50) and unknown (p95)."""
    run = make_run()
    summaries = [
        replace(s, p50_latency_ms=0.0, p95_latency_ms=None)
        if (s.pipeline, s.k) == ("far", 3)
        else s
        for s in reversed(run.summaries)
    ]
    return replace(run, summaries=summaries)


def test_write_charts_frontier_figure(tmp_path: Path, saved: list) -> None:
    import matplotlib.pyplot as plt
    from matplotlib.colors import to_rgba
    from matplotlib.text import Annotation

    paths = write_charts(chart_run(), tmp_path)
    assert paths == [tmp_path / "frontier.png", tmp_path / "latency.png"]
    assert [(p, kw) for _, p, kw in saved] == [(p, {"dpi": 110}) for p in paths]
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)
    assert plt.get_fignums() == []  # both closed
    figure = saved[0][0]
    assert tuple(figure.get_size_inches()) == (8.0, 5.5)
    [axes] = figure.axes
    lines = axes.get_lines()
    # one line per pipeline with a metric (silent has none), by name; the baseline dashed
    assert [line.get_label() for line in lines] == ["baseline", "far", "window"]
    assert [line.get_linestyle() for line in lines] == ["--", "-", "-"]
    assert [line.get_marker() for line in lines] == ["o", "s", "D"]
    assert [list(line.get_xdata()) for line in lines] == [[100, 300], [1000, 2000], [200, 600]]
    assert [list(line.get_ydata()) for line in lines] == [[0, 0], [1, 0], [1, 1]]
    notes = [t for t in axes.texts if isinstance(t, Annotation)]
    assert [(t.get_text(), tuple(t.xy)) for t in notes] == [
        ("1", (100.0, 0.0)), ("3", (300.0, 0.0)), ("1", (1000.0, 1.0)), ("3", (2000.0, 0.0)),
        ("1", (200.0, 1.0)), ("3", (600.0, 1.0)),
    ]  # fmt: skip
    assert {(t.get_fontsize(), tuple(t.xyann), t.anncoords) for t in notes} == {
        (7.0, (2, 2), "offset points")
    }
    assert axes.get_xscale() == "log"  # 50 to 2,000 tokens
    assert axes.get_xlabel() == "mean context tokens"
    assert axes.get_ylabel() == "coverage"
    assert axes.get_title() == "coverage vs context tokens (labels: k)"
    grid = axes.xaxis.get_gridlines()[0]
    assert grid.get_visible() and grid.get_alpha() == 0.3
    legend = axes.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["baseline", "far", "window"]
    assert {t.get_fontsize() for t in legend.get_texts()} == {8.0}
    assert legend._loc == 4  # "lower right"
    assert to_rgba(lines[0].get_color()) != to_rgba(lines[1].get_color())


def test_write_charts_latency_figure(tmp_path: Path, saved: list) -> None:
    from matplotlib.colors import to_rgba

    write_charts(chart_run(), tmp_path)
    figure = saved[1][0]
    # main k pipelines with a latency, in the main table's order (silent has none)
    assert tuple(figure.get_size_inches()) == pytest.approx((8.0, 0.45 * 3 + 1.5))
    [axes] = figure.axes
    p95, p50 = axes.containers
    assert (p95.get_label(), p50.get_label()) == ("p95", "p50")
    assert [bar.get_width() for bar in p95] == [0.0, 59.0, 29.0]  # far's unknown p95: 0
    assert [bar.get_width() for bar in p50] == [0.0, 50.0, 20.0]
    assert {bar.get_facecolor() for bar in p95} == {to_rgba("#c8d7ea")}
    assert {bar.get_facecolor() for bar in p50} == {to_rgba("#3a6ea5")}
    assert [t.get_text() for t in axes.get_yticklabels()] == ["far", "window", "baseline"]
    assert axes.yaxis_inverted()
    assert axes.get_xlabel() == "query latency at k=3 (ms)"
    assert [t.get_text() for t in axes.get_legend().get_texts()] == ["p95", "p50"]


def tokens_run(*tokens: float) -> CompareRun:
    summaries = [
        Summary("baseline", k, "all", 1, 1, 0.5, 1.0, 1.0, t, t, None, None, 0)
        for k, t in enumerate(tokens, start=1)
    ]
    return make_run(summaries=summaries, results=[], ks=list(range(1, len(tokens) + 1)))


@pytest.mark.parametrize(
    ("tokens", "scale"),
    [
        ((10.0, 200.0), "linear"),  # 20 times: not more than 20
        ((10.0, 205.0), "log"),  # 20.5 times
        ((0.5, 15.0), "log"),  # 30 times, counting a half-token mean
        ((0.0, 10.0, 150.0), "linear"),  # an empty context is left out: 15 times
        ((0.0, 0.0), "linear"),  # nothing but empty contexts
    ],
)
def test_write_charts_log_scale_beyond_twenty_times(
    tmp_path: Path, saved: list, tokens: tuple[float, ...], scale: str
) -> None:
    # no latency at the main k: the frontier chart alone
    assert write_charts(tokens_run(*tokens), tmp_path) == [tmp_path / "frontier.png"]
    [(figure, _, _)] = saved
    assert figure.axes[0].get_xscale() == scale


def test_write_charts_by_hit_and_without_matplotlib(
    tmp_path: Path, saved: list, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    hits = [replace(r, covered=None) for r in results()]
    write_charts(make_run(results=hits, summaries=summarize_all(hits)), tmp_path)
    axes = saved[0][0].axes[0]
    assert axes.get_ylabel() == "hit"
    assert axes.get_title() == "hit vs context tokens (labels: k)"
    assert [list(line.get_ydata()) for line in axes.get_lines()] == [[0, 1], [1, 0], [1, 1]]
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.evaluation.report"):
        assert write_charts(make_run(), tmp_path / "none") == []
    assert [(r.name, r.levelno, r.getMessage()) for r in caplog.records] == [
        (
            "llama_index_ext_advrag.evaluation.report",
            logging.WARNING,
            "matplotlib is not installed (extra 'report'); no charts written",
        )
    ]


# --- report.md -----------------------------------------------------------------------------

PAIRED_NOTE = (
    "Difference: the mean over the paired questions of (pipeline - baseline) per question at "
    "the budget; better/worse/same: how many questions the pipeline scored higher, lower or "
    "the same there."
)
MAIN_NOTE = (
    "Coverage: every gold answer part inside the context handed to the LLM (normalised). "
    "hit@3 / MRR: the first context node matching the gold evidence. Latency: retrieval and "
    "postprocessing per query, the question embedded beforehand."
)
FRONTIER_NOTE = (
    "Interpolated linearly between measured k (no extrapolation), at budgets every pipeline "
    "reaches (or, when the ranges do not all overlap, over the baseline's range; '-' where a "
    "pipeline does not reach the budget)."
)


def test_markdown_report_plain_run() -> None:
    run = make_run()
    assert markdown_report(run, []) == "\n\n".join([
        "# advrag compare: test", "## Recommendation", recommendation(run),
        "### Against baseline, paired per question at equal tokens", PAIRED_MARKDOWN,
        PAIRED_NOTE, "## Pipelines at k=3", MAIN_MARKDOWN, MAIN_NOTE,
        "## Coverage at equal context tokens", FRONTIER_NOTE, frontier_table(run, True),
        "### Every k", sweep_table(run, True), "## Ingest", INGEST_MARKDOWN,
        "## Pipelines",
        "- **baseline**: plain dense\n- **window**: sentence windows\n- **far**: long\n"
        "- **silent**: none",
        "## Settings", "- documents: 2 from a.md\n- k (table): 3",
    ]) + "\n"  # fmt: skip
    assert "**baseline**" in recommendation(run)


def test_markdown_report_with_answers_types_skips_and_charts() -> None:
    by_type = summarize_all([r for r in results() if r.k == 3], by_type=True)
    by_type += summarize_all([r for r in results() if r.k == 1], by_type=True)
    skipped = [
        SkippedQuestion("qa.jsonl:4", None, "empty question"),
        SkippedQuestion("qa.jsonl:9", "q|9", "answer | list empty"),
    ]
    run = answered_run(by_type=by_type, skipped=skipped)
    charts = [Path("out/frontier.png"), Path("out/latency.png")]
    text = markdown_report(run, charts)
    plain = markdown_report(replace(run, answers=[], by_type=[], skipped=[]), [])
    head, tail = plain.split("\n\n## Pipelines at k=3\n\n")
    assert text.startswith(head + "\n\n## Answers\n\n" + answer_tables(run, markdown=True))
    middle = text.split("\n\n### Every k\n\n")[1].split("\n\n## Ingest\n\n")[0]
    assert middle == "\n\n".join([
        sweep_table(run, True),
        "### By question type (k=3)",
        "| pipeline | type | n | coverage | ctx tokens |\n|---|---|---|---|---|\n"
        "| baseline | fact | 2 | 0.000 | 300 |\n| window | fact | 1 | 1.000 | 500 |\n"
        "| window | how | 1 | 1.000 | 700 |\n| far | fact | 1 | 0.000 | 2000 |\n"
        "| silent | fact | 1 | - | 60 |",
        "## Skipped questions",
        "2 question rows were read but not asked (not counted anywhere).",
        "| row | id | reason |\n|---|---|---|\n| qa.jsonl:4 | - | empty question |\n"
        "| qa.jsonl:9 | q\\|9 | answer \\| list empty |",
    ])  # fmt: skip
    assert text.endswith(
        "\n\n## Ingest\n\n" + INGEST_MARKDOWN
        + "\n\n## Charts\n\n![frontier](frontier.png)\n![latency](latency.png)\n\n## Pipelines"
        + tail.split("\n\n## Pipelines", 1)[1]
    )  # fmt: skip


# --- report.json ---------------------------------------------------------------------------


def test_finite_drops_nan_and_infinity_recursively() -> None:
    value = {1: (1.5, float("nan"), [float("inf"), -math.inf]), "s": {"x": None, "y": 2}}
    assert _finite(value) == {"1": [1.5, None, [None, None]], "s": {"x": None, "y": 2}}
    assert _finite(float("-inf")) is None
    assert _finite(0.0) == 0.0
    assert _finite("nan") == "nan"


def test_json_report_keys_and_values() -> None:
    skipped = [SkippedQuestion("qa.jsonl:4", None, "empty question")]
    run = answered_run(
        skipped=skipped, probe=True,
        embedding={"model": "bge", "scores": (0.5, float("nan"))},
        settings={"documents": "2", "ratio": float("inf"), 3: "three"},
    )  # fmt: skip
    differences = answer_differences(run.answers, "baseline", resamples=2000, seed=7)
    summaries = [asdict(s) for s in run.summaries]
    for s in summaries:  # silent's coverage, hit and mrr are None already; no NaN in summaries
        assert all(not (isinstance(v, float) and math.isnan(v)) for v in s.values())
    assert json_report(run) == {
        "title": "advrag compare: test",
        "baseline": "baseline",
        "pipelines": ["baseline", "window", "far", "silent"],
        "main_k": 3,
        "ks": [1, 3],
        "metric": "coverage",
        "probe": True,
        "settings": {"documents": "2", "ratio": None, "3": "three"},
        "embedding": {"model": "bge", "scores": [0.5, None]},
        "skipped_questions": [
            {"where": "qa.jsonl:4", "question_id": None, "reason": "empty question"}
        ],
        "summaries": summaries,
        "recommendation": recommendation(run),
        "answer_budget": 250.0,
        "answer_summaries": _finite([asdict(s) for s in summarize_answers(run.answers)]),
        "answer_differences": _finite([asdict(d) for d in differences]),
    }
    assert len(json_report(run)["answer_differences"]) == 3
    plain = json_report(make_run())
    assert (plain["answer_budget"], plain["answer_summaries"], plain["answer_differences"]) == (
        None, [], []
    )  # fmt: skip
    assert plain["probe"] is False


# --- write_report --------------------------------------------------------------------------


def test_write_report_writes_every_file(tmp_path: Path) -> None:
    run = answered_run(
        title="泵站 compare: test",
        settings={**make_run().settings, "questions file": Path("data") / "qa.jsonl"},
    )  # fmt: skip
    out = tmp_path / "deep" / "report"
    with ascii_locale():
        files = write_report(run, str(out))
        again = write_report(run, out)  # the folder exists: written over
    assert files == again
    assert files == {
        "report": out / "report.md",
        "json": out / "report.json",
        "results": out / "results.csv",
        "frontier": out / "frontier.csv",  # every file written is listed
        "frontier_chart": out / "frontier.png",
        "latency_chart": out / "latency.png",
        "answers": out / "answers.csv",
    }
    assert (out / "frontier.csv").is_file()
    charts = [out / "frontier.png", out / "latency.png"]
    assert (out / "report.md").read_text(encoding="utf-8") == markdown_report(run, charts)
    assert "\n\n## Charts\n\n![frontier](frontier.png)\n![latency](latency.png)\n\n" in (
        out / "report.md"
    ).read_text(encoding="utf-8")
    text = (out / "report.json").read_text(encoding="utf-8")
    assert text.startswith('{\n "title": "泵站 compare: test",\n "baseline": "baseline",\n')
    assert text.endswith("\n}\n") and not text.endswith("\n\n")
    assert '\n  "questions file": "data/qa.jsonl"\n' in text  # a Path as its text
    assert json.loads(text) == json.loads(json.dumps(json_report(run), default=str))
    with (out / "answers.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == list(AnswerResult.__dataclass_fields__)
    assert len(rows) == 11
    assert rows[6][:5] == ["window", "q0", "3", "an answer", "True"]
    assert rows[6][rows[0].index("context")] == "ctx | ünï"
    buffer = io.StringIO()
    csv.DictWriter(buffer, fieldnames=rows[0]).writerows(asdict(a) for a in run.answers)
    assert (out / "answers.csv").read_bytes().decode("utf-8").split("\r\n", 1)[1] == (
        buffer.getvalue()
    )


def test_write_report_without_answers_writes_no_answers_file(tmp_path: Path) -> None:
    files = write_report(make_run(), tmp_path)
    assert set(files) == {"report", "json", "results", "frontier", "frontier_chart",
                          "latency_chart"}  # fmt: skip
    assert not (tmp_path / "answers.csv").exists()
    assert (tmp_path / "results.csv").read_text(encoding="utf-8").startswith(RESULTS_HEADER)
