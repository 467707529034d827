"""``advrag compare`` / ``advrag ask`` from the command line; errors as one line."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus

from llama_index_ext_advrag import cli, models
from llama_index_ext_advrag.evaluation import session


@pytest.fixture
def hash_model(monkeypatch):
    """The offline default, English or multilingual (the test corpus is half Chinese)."""
    model = HashEmbedding(dim=64)
    monkeypatch.setattr("llama_index_ext_advrag.models.load_default_embed_model", lambda: model)
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_multilingual_embed_model", lambda: model
    )
    return model


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    assert err[0].startswith("advrag: error: ")
    return err[0]


def test_missing_document_path_is_one_line(tmp_path: Path, capsys) -> None:
    code = cli.main(["compare", "--docs", str(tmp_path / "nope"), "--no-llm"])
    assert code == 1
    line = one_error_line(capsys)
    assert "document path" in line and "nope' does not exist" in line


def test_errors_are_one_line(tmp_path: Path, capsys, hash_model) -> None:
    docs, qa = write_corpus(tmp_path)
    base = ["compare", "--docs", str(docs), "--no-llm", "--quiet", "--uri",
            str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "s")]  # fmt: skip
    assert cli.main([*base, "--questions", str(tmp_path / "missing.jsonl")]) == 1
    assert "missing.jsonl" in one_error_line(capsys)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "1", "question": "q", "answers": "3.5 bar"}\n', encoding="utf-8")
    assert cli.main([*base, "--questions", str(bad)]) == 1
    assert "bad.jsonl:1: 'answers' must be a list" in one_error_line(capsys)
    assert cli.main([*base, "--pipelines", "baseline,nope"]) == 1
    assert "unknown pipeline 'nope'" in one_error_line(capsys)
    spec = tmp_path / "spec.yaml"
    spec.write_text("pipelines:\n  - {name: x, retriever: sparse}\n", encoding="utf-8")
    assert cli.main([*base, "--spec", str(spec)]) == 1
    assert "unknown type 'sparse'" in one_error_line(capsys)
    (docs / "latin.md").write_bytes("caf\xe9 cr\xe8me".encode("latin-1"))
    assert cli.main([*base, "--questions", str(qa)]) == 1
    line = one_error_line(capsys)
    assert "latin.md: not UTF-8 text (byte 0xe9 at offset 3" in line


def test_verbose_shows_the_traceback(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        cli.main(["-v", "compare", "--docs", str(tmp_path / "nope"), "--no-llm"])


@pytest.fixture
def no_loading(monkeypatch):
    """Any model load or document read fails the test: arguments must be refused before."""
    calls: list[str] = []

    def refuse(what: str):
        def called(*args, **kwargs):
            calls.append(what)
            raise AssertionError(f"{what} was called before the arguments were checked")

        return called

    monkeypatch.setattr(models, "load_packaged_embed_model", refuse("the English model"))
    monkeypatch.setattr(models, "load_multilingual_embed_model", refuse("the multilingual model"))
    monkeypatch.setattr(session, "load_corpus", refuse("load_corpus"))
    return calls


def bad_arguments(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Each bad argument and the words its error must contain (the value and what is allowed)."""
    (tmp_path / "notes.txt").write_text("a file, not a folder", encoding="utf-8")
    under_file = str(tmp_path / "notes.txt" / "report")
    notes = repr(str(tmp_path / "notes.txt"))
    return {
        "out under a file": (["--out", under_file],
                             f"--out {under_file!r} cannot be used as a folder: it would be a "
                             f"folder under {notes}, but notes.txt is a file here"),
        "out is a file": (["--out", str(tmp_path / "notes.txt")], "is a file, not a folder"),
        "uri scheme": (["--uri", "ftp://milvus:19530"],
                       "--uri: unsupported Milvus uri scheme 'ftp' in 'ftp://milvus:19530': use "
                       "a Milvus Lite file path ending in '.db' or a server URL starting with "
                       "http://, https://"),
        "uri not .db": (["--uri", str(tmp_path / "m.sqlite")], "must end in '.db'"),
        "uri under a file": (["--uri", str(tmp_path / "notes.txt" / "m.db")],
                             f"the Milvus Lite file's folder: {notes} is a file, not a folder"),
        "state dir under a file": (["--state-dir", under_file], "--state-dir"),
        "unknown pipeline": (["--pipelines", "baseline,nope"],
                             "unknown pipeline 'nope'; registered: baseline, baseline-1024"),
        "questions missing": (["--questions", str(tmp_path / "nope.jsonl")],
                              "questions file"),
    }  # fmt: skip


def test_bad_arguments_are_refused_before_any_model_loads(
    tmp_path: Path, capsys, no_loading
) -> None:
    docs, qa = write_corpus(tmp_path)
    good = {"--uri": str(tmp_path / "m.db"), "--state-dir": str(tmp_path / "s"),
            "--out": str(tmp_path / "out"), "--questions": str(qa)}  # fmt: skip
    for case, (override, expected) in bad_arguments(tmp_path).items():
        options = {**good, override[0]: override[1]}
        argv = ["compare", "--docs", str(docs), "--no-llm", "--quiet",
                *(part for pair in options.items() for part in pair)]  # fmt: skip
        started = time.perf_counter()
        assert cli.main(argv) == 1, case
        seconds = time.perf_counter() - started
        assert expected in one_error_line(capsys), case
        assert no_loading == [], case  # no model loaded, no document read
        assert seconds < 10, (case, seconds)  # generous: the check itself takes milliseconds
    assert not (tmp_path / "out").exists() and not (tmp_path / "s").exists()


def test_ask_refuses_a_bad_store_before_any_model_loads(tmp_path: Path, capsys, no_loading) -> None:
    docs, _ = write_corpus(tmp_path)
    (tmp_path / "notes.txt").write_text("a file", encoding="utf-8")
    for option, value, expected in [
        ("--uri", "grpc://milvus:19530", "--uri: unsupported Milvus uri scheme 'grpc'"),
        ("--state-dir", str(tmp_path / "notes.txt" / "s"), "--state-dir"),
    ]:
        assert cli.main(["ask", "pump?", "--docs", str(docs), "--no-llm", option, value]) == 1
        assert expected in one_error_line(capsys)
    assert no_loading == []


@pytest.mark.parametrize("value", [",,", " , ", ""])
def test_pipelines_naming_nothing_is_refused_with_the_names(value: str, capsys, no_loading) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(["compare", "--docs", "data", "--no-llm", "--pipelines", value])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"--pipelines takes comma-separated names, got {value!r} (no name)" in err
    assert "registered: baseline, baseline-1024" in err
    assert no_loading == []


def test_the_python_api_refuses_an_empty_pipeline_list(tmp_path: Path, no_loading) -> None:
    docs, _ = write_corpus(tmp_path)
    options = session.CompareOptions(docs=[str(docs)], pipelines=[], uri=str(tmp_path / "m.db"),
                                     out=str(tmp_path / "o"), state_dir=str(tmp_path / "s"))  # fmt: skip
    with pytest.raises(
        ValueError, match=r"pipelines \[\] names no pipeline: give one or more of baseline"
    ):
        session.run_compare(options)
    assert no_loading == []


def report_pipelines(out: Path) -> tuple[list[str], set[str], set[str]]:
    """Which pipelines ran, from report.json, results.csv and frontier.csv."""
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    with (out / "results.csv").open(encoding="utf-8") as handle:
        results = {row["pipeline"] for row in csv.DictReader(handle)}
    with (out / "frontier.csv").open(encoding="utf-8") as handle:
        frontier = {row["pipeline"] for row in csv.DictReader(handle)}
    return report["pipelines"], results, frontier


@pytest.mark.milvus_lite
def test_compare_and_ask_end_to_end(tmp_path: Path, capfd, hash_model) -> None:
    docs, qa = write_corpus(tmp_path)
    with qa.open("a", encoding="utf-8") as handle:  # rows that are skipped, each with its reason
        handle.write('\n{"id": "empty", "question": "", "answers": ["x"]}')
        handle.write('\n{"id": "surrogate", "question": "Why \\ud800?", "answers": ["x"]}')
        handle.write('\n{"id": "no-answer", "question": "Who?", "answers": []}\n')
    common = ["--docs", str(docs), "--no-llm", "--quiet", "--uri", str(tmp_path / "m.db"),
              "--state-dir", str(tmp_path / "s")]  # fmt: skip
    code = cli.main(["compare", *common, "--questions", str(qa), "--pipelines", "baseline",
                     "--ks", "1,2", "--k", "2", "--out", str(tmp_path / "out")])  # fmt: skip
    out, err = capfd.readouterr()
    assert code == 0
    assert "Pipelines at k=2:" in out
    assert report_pipelines(tmp_path / "out") == (["baseline"], {"baseline"}, {"baseline"})
    # --quiet: no progress bar (tqdm draws "|" bars with "it/s") on either stream
    assert "it/s" not in err + out and "%|" not in err + out, err[-2000:]
    assert (
        "Skipped 3 question rows (not asked, not counted):\n  qa.jsonl:5 (id empty): empty question\n"
        in out
    )
    assert "  qa.jsonl:6 (id surrogate): question holds a lone surrogate U+D800" in out
    assert "  qa.jsonl:7 (id no-answer): no answer: the row is not marked unanswerable" in out
    report = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert [row["question_id"] for row in report["skipped_questions"]] == [
        "empty", "surrogate", "no-answer"]  # fmt: skip
    main = [s for s in report["summaries"] if s["k"] == 2 and s["group"] == "all"]
    assert [s["questions"] for s in main] == [4]  # the four good questions, no more
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "## Skipped questions" in markdown and "| qa.jsonl:6 | surrogate |" in markdown
    code = cli.main(
        [
            "ask",
            "The Ferro pump runs at what in normal operation",
            "--pipeline",
            "prev-next",
            "--k",
            "1",
            *common,
        ]
    )
    out = capfd.readouterr().out
    assert code == 0
    assert "pipeline prev-next, k=1" in out
    assert "3.5 bar" in out
    assert '"prev_next"' in out  # the decision trace
    assert "answer: (no LLM set: context only)" in out
