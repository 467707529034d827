"""``advrag compare`` / ``advrag ask`` from the command line; errors as one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus

from llama_index_ext_advrag import cli


@pytest.fixture
def hash_model(monkeypatch):
    model = HashEmbedding(dim=64)
    monkeypatch.setattr("llama_index_ext_advrag.models.load_default_embed_model", lambda: model)
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


@pytest.mark.milvus_lite
def test_compare_and_ask_end_to_end(tmp_path: Path, capsys, hash_model) -> None:
    docs, qa = write_corpus(tmp_path)
    common = ["--docs", str(docs), "--no-llm", "--quiet", "--uri", str(tmp_path / "m.db"),
              "--state-dir", str(tmp_path / "s")]  # fmt: skip
    code = cli.main(["compare", *common, "--questions", str(qa), "--pipelines", "baseline",
                     "--ks", "1,2", "--k", "2", "--out", str(tmp_path / "out")])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0
    assert "Pipelines at k=2:" in out and "baseline" in out
    assert (tmp_path / "out" / "report.md").is_file()
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
    out = capsys.readouterr().out
    assert code == 0
    assert "pipeline prev-next, k=1" in out
    assert "3.5 bar" in out
    assert '"prev_next"' in out  # the decision trace
    assert "answer: (no LLM set: context only)" in out
