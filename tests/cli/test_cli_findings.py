"""The command line against what an outsider tried (issue #39): ``--llm-url`` without its extra,
bad ``--llm-*`` / ``--answer-budget`` values, bad ``--embed-model`` names, a ``--uri`` in a
folder that takes no files, ``ask`` without ``--docs`` and ``ask --json``: each a clear one-line
error naming the value (before any model loads) or a correct result."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus

from llama_index_ext_advrag import cli, cli_compare, models
from llama_index_ext_advrag.evaluation import session


@pytest.fixture
def no_loading(monkeypatch):
    """Any model load, document read or LLM construction fails the test."""
    calls: list[str] = []

    def refuse(*args, **kwargs):
        calls.append("loaded")
        raise AssertionError("a model, the LLM or the documents were loaded before the checks")

    for name in ("load_default_embed_model", "load_multilingual_embed_model",
                 "load_packaged_embed_model"):  # fmt: skip
        monkeypatch.setattr(models, name, refuse)
    monkeypatch.setattr(session, "load_corpus", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return calls


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err  # one line, no traceback
    assert err[0].startswith("advrag: error: ")
    return err[0]


def compare_argv(tmp_path: Path, *extra: str) -> list[str]:
    docs, qa = write_corpus(tmp_path)
    return ["compare", "--docs", str(docs), "--questions", str(qa), "--quiet",
            "--uri", str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "s"),
            "--out", str(tmp_path / "out"), *extra]  # fmt: skip


URL = ["--llm-url", "http://127.0.0.1:9/v1"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--answers", *URL, "--llm-timeout", "-1"],
         "--llm-timeout must be seconds in (0, 3600], got -1.0"),
        (["--answers", *URL, "--llm-timeout", "nan"],
         "--llm-timeout must be seconds in (0, 3600], got nan"),
        ([*URL, "--llm-timeout", "3601"], "--llm-timeout must be seconds in (0, 3600], got 3601.0"),
        (["--answers", *URL, "--answer-budget", "nan"],
         "--answer-budget must be a number of tokens > 0 (or left out), got nan"),
        (["--answers", *URL, "--llm-max-tokens", "0"], "--llm-max-tokens must be >= 1, got 0"),
    ],
)  # fmt: skip
def test_bad_llm_flags_are_named_before_the_llm_is_built(
    tmp_path: Path, capsys, monkeypatch, no_loading, extra: list[str], expected: str
) -> None:
    def refuse_llm(*args, **kwargs):
        no_loading.append("llm")
        raise AssertionError("the LLM was built before its flags were checked")

    monkeypatch.setattr(cli_compare, "openai_like_llm", refuse_llm)
    assert cli.main(compare_argv(tmp_path, *extra)) == 1
    assert expected in one_error_line(capsys)
    assert no_loading == []


def test_a_bad_llm_timeout_is_named_not_a_pydantic_error(tmp_path: Path, capsys) -> None:
    """With OpenAILike installed, -1 reached it first and failed as '1 validation error for
    OpenAILike', naming neither the flag nor the value."""
    pytest.importorskip("llama_index.llms.openai_like")
    assert cli.main(compare_argv(tmp_path, "--answers", *URL, "--llm-timeout", "-1")) == 1
    line = one_error_line(capsys)
    assert "--llm-timeout must be seconds in (0, 3600], got -1.0" in line
    assert "validation error" not in line


def test_llm_url_without_its_extra_names_the_extra(
    tmp_path: Path, capsys, monkeypatch, no_loading
) -> None:
    monkeypatch.setitem(sys.modules, "llama_index.llms.openai_like", None)  # not installed
    assert cli.main(compare_argv(tmp_path, "--answers", *URL)) == 1
    line = one_error_line(capsys)
    assert "--llm-url needs llama-index-llms-openai-like, which is not installed" in line
    assert line.endswith("pip install 'llama-index-ext-advrag[llm-server]'")
    assert "ModuleNotFoundError" not in line.split(":", 2)[1]
    assert no_loading == []
    with pytest.raises(models.ModelResolutionError, match=r"\[llm-server\]"):
        cli_compare.openai_like_llm("http://127.0.0.1:9/v1", None, 5.0)


def test_the_llm_server_extra_is_declared_and_in_the_readme() -> None:
    import tomllib

    root = Path(__file__).resolve().parents[2]
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extra = project["optional-dependencies"]["llm-server"]
    assert [r.split(">")[0] for r in extra] == ["llama-index-llms-openai-like"]
    readme = (root / "README.md").read_text(encoding="utf-8")
    install = readme.split("## Install into your own environment", 1)[1].split("\n## ", 1)[0]
    assert "pip install 'llama-index-ext-advrag[llm-server]'" in install
    assert "| `llm-server` |" in install


@pytest.mark.parametrize("command", ["compare", "ask"])
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("bogus", "--embed-model 'bogus' is not a model the pack knows: give bge-small, "),
        ("local:/nonexistent/model", "--embed-model 'local:/nonexistent/model': the folder "
                                     "'/nonexistent/model' does not exist"),
        ("local:", "--embed-model 'local:' names no model"),
    ],
)  # fmt: skip
def test_a_bad_embed_model_is_named_before_anything_loads(
    tmp_path: Path, capsys, no_loading, command: str, value: str, expected: str
) -> None:
    if command == "compare":
        argv = compare_argv(tmp_path, "--no-llm", "--embed-model", value)
    else:
        docs, _ = write_corpus(tmp_path)
        argv = ["ask", "pump?", "--docs", str(docs), "--no-llm", "--embed-model", value,
                "--uri", str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "s")]  # fmt: skip
    assert cli.main(argv) == 1
    line = one_error_line(capsys)
    assert expected in line
    assert "llama-index-embeddings-huggingface` package not found" not in line
    assert no_loading == []


def test_a_bad_embed_model_string_in_python_is_named(no_loading) -> None:
    with pytest.raises(ValueError, match=r"^embed_model 'bogus' is not a model the pack knows"):
        models.decide_embed_model("bogus")
    with pytest.raises(ValueError, match=r"the folder '/nonexistent' does not exist"):
        models.resolve_embed_model("local:/nonexistent")
    assert no_loading == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
@pytest.mark.parametrize("command", ["compare", "ask"])
def test_a_lite_file_in_a_folder_that_takes_no_files_is_refused_first(
    tmp_path: Path, capsys, no_loading, command: str
) -> None:
    docs, qa = write_corpus(tmp_path)
    argv = [command, *(["pump?"] if command == "ask" else ["--questions", str(qa)]),
            "--docs", str(docs), "--no-llm", "--uri", "/proc/x.db",
            "--state-dir", str(tmp_path / "s")]  # fmt: skip
    assert cli.main(argv) == 1
    line = one_error_line(capsys)  # no Milvus Lite traceback before it
    assert "--uri '/proc/x.db': the Milvus Lite file's folder: '/proc' does not accept new " in line
    assert no_loading == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".advrag-check")] == []


@pytest.mark.parametrize("command", [["ask", "pump?"], ["compare"]])
def test_without_docs_outside_the_repository_says_what_to_pass(
    tmp_path: Path, capsys, monkeypatch, no_loading, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no data/ folder here
    assert cli.main([*command, "--no-llm"]) == 1
    line = one_error_line(capsys)
    assert "no documents to read: pass them with --docs FOLDER_OR_FILE" in line
    assert f"in the current folder ({tmp_path})" in line
    assert no_loading == []
    (tmp_path / "data").mkdir()
    assert cli.build_parser().parse_args(command).docs is None
    assert cli_compare.document_paths(None) == ["data"]  # the default where it exists


@pytest.mark.milvus_lite
def test_ask_json_prints_json_alone_on_stdout(tmp_path: Path, capfd, monkeypatch) -> None:
    model = HashEmbedding(dim=64)
    monkeypatch.setattr(models, "load_default_embed_model", lambda: model)
    monkeypatch.setattr(models, "load_multilingual_embed_model", lambda: model)
    docs, _ = write_corpus(tmp_path)
    code = cli.main(["ask", "The Ferro pump runs at what in normal operation", "--json",
                     "--docs", str(docs), "--no-llm", "--quiet", "--k", "1",
                     "--uri", str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "s")])  # fmt: skip
    out, err = capfd.readouterr()
    assert code == 0, err[-2000:]
    result = json.loads(out)  # the whole of stdout is one JSON object
    assert result["pipeline"] == "baseline" and result["k"] == 1
    assert set(result["embedding_model"]) == {"model", "reason"}
    assert result["embedding_model"]["reason"]
    assert "embedding model:" not in out and "3.5 bar" in result["context"][0]["text"]
