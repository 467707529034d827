"""``advrag compare --answers``: bad configurations are one error line before anything loads,
and the answer table end to end on the local Gemma 270M server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus

from llama_index_ext_advrag import cli, models
from llama_index_ext_advrag.cli_compare import openai_like_llm
from llama_index_ext_advrag.evaluation import session


@pytest.fixture
def no_loading(monkeypatch):
    """Any model load or document read fails the test: arguments must be refused before."""
    calls: list[str] = []

    def refuse(*args, **kwargs):
        calls.append("loaded")
        raise AssertionError("a model or the documents were loaded before the checks")

    monkeypatch.setattr(models, "load_default_embed_model", refuse)
    monkeypatch.setattr(models, "load_multilingual_embed_model", refuse)
    monkeypatch.setattr(session, "load_corpus", refuse)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return calls


def bad_configurations(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    return {
        "no LLM": (["--answers"], "needs an LLM and none is set: set OPENAI_API_KEY (OpenAI; "),
        "no LLM names the server flags": (["--answers"], "pass --llm-url http://HOST:PORT/v1"),
        "no-llm with answers": (["--answers", "--no-llm"], "--no-llm contradicts --answers"),
        "model without url": (["--llm-model", "qwen"], "--llm-model 'qwen' needs --llm-url"),
        "url scheme": (["--answers", "--llm-url", "127.0.0.1:8080"],
                       "--llm-url must start with http:// or https://, got '127.0.0.1:8080'"),
        "timeout": (["--answers", "--llm-url", "http://127.0.0.1:9/v1", "--llm-timeout", "0"],
                    "--llm-timeout must be seconds in (0, 3600], got 0.0"),
        "budget without answers": (["--answer-budget", "300"],
                                   "--answer-budget is a setting of --answers"),
        "support judge without answers": (["--support-judge", "prefix"],
                                          "--support-judge is a setting of --answers"),
        "budget": (["--answers", "--llm-url", "http://127.0.0.1:9/v1", "--answer-budget", "-5"],
                   "--answer-budget must be a number of tokens > 0"),
        "self-rag without answers": (["--pipelines", "baseline,self-rag", "--llm-url",
                                      "http://127.0.0.1:9/v1"],
                                     "['self-rag'] generate their own answer: run them with "
                                     "--answers"),
        "cache under a file": (["--answers", "--llm-url", "http://127.0.0.1:9/v1",
                                "--answer-cache", str(tmp_path / "notes.txt" / "c")],
                               "--answer-cache"),
    }  # fmt: skip


def test_bad_answer_configurations_are_one_line_before_loading(
    tmp_path: Path, capsys, no_loading
) -> None:
    docs, qa = write_corpus(tmp_path)
    (tmp_path / "notes.txt").write_text("a file", encoding="utf-8")
    common = ["compare", "--docs", str(docs), "--questions", str(qa), "--quiet",
              "--uri", str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "s"),
              "--out", str(tmp_path / "out")]  # fmt: skip
    for case, (extra, expected) in bad_configurations(tmp_path).items():
        assert cli.main([*common, *extra]) == 1, case
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("advrag: error: "), (case, err)
        assert expected in err[0], (case, err[0])
        assert no_loading == [], case  # refused before any model or document was loaded
    assert not (tmp_path / "out").exists()


def test_mock_llm_counts_as_no_llm_in_python(tmp_path: Path, no_loading) -> None:
    from llama_index.core.llms import MockLLM

    docs, qa = write_corpus(tmp_path)
    options = session.CompareOptions(docs=[str(docs)], questions=str(qa), answers=True,
                                     llm=MockLLM(), uri=str(tmp_path / "m.db"),
                                     state_dir=str(tmp_path / "s"), out=str(tmp_path / "o"))  # fmt: skip
    with pytest.raises(ValueError, match="core's MockLLM counts as no LLM"):
        session.run_compare(options)
    assert no_loading == []


def test_openai_like_llm_is_bounded() -> None:
    llm = openai_like_llm("http://127.0.0.1:8080/v1", None, 7.5, max_tokens=32)
    assert (llm.model, llm.api_base, llm.timeout, llm.temperature, llm.max_tokens) == (
        "local", "http://127.0.0.1:8080/v1", 7.5, 0.0, 32)  # fmt: skip
    with pytest.raises(ValueError, match="--llm-max-tokens must be >= 1, got 0"):
        openai_like_llm("http://127.0.0.1:8080/v1", None, 7.5, max_tokens=0)


@pytest.mark.local_llm
@pytest.mark.milvus_lite
def test_answers_end_to_end_on_the_local_gemma_server(
    tmp_path: Path, local_llm_server: str, capfd, monkeypatch
) -> None:
    model = HashEmbedding(dim=64)
    monkeypatch.setattr("llama_index_ext_advrag.models.load_default_embed_model", lambda: model)
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_multilingual_embed_model", lambda: model
    )
    docs, qa = write_corpus(tmp_path)
    # one question, short answers: a tiny model on a loaded 2-core machine takes seconds per
    # call, and the judge makes one call per answer sentence
    argv = ["compare", "--docs", str(docs), "--questions", str(qa), "--quiet",
            "--uri", str(tmp_path / "m.db"), "--state-dir", str(tmp_path / "s"),
            "--out", str(tmp_path / "out"), "--pipelines", "baseline", "--ks", "1,2", "--k", "1",
            "--max-questions", "1", "--answers", "--llm-url", local_llm_server,
            "--llm-model", "gemma3-270m", "--llm-timeout", "300", "--llm-max-tokens", "24",
            ]  # fmt: skip
    assert cli.main(argv) == 0
    out = capfd.readouterr().out
    assert "Answers (generated from each pipeline's context):" in out
    assert "hallucination rate" in out and "fact recall (EM)" in out
    data = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    (summary,) = data["answer_summaries"]
    assert (summary["pipeline"], summary["questions"], summary["errors"]) == ("baseline", 1, 0)
    assert summary["llm_calls"] >= 1 and summary["mean_context_tokens"] > 0
    assert "gemma3-270m" in data["settings"]["answers"]
    # a second run scores from the cache: no LLM call at all
    assert cli.main(argv) == 0
    (summary,) = json.loads((tmp_path / "out" / "report.json").read_text())["answer_summaries"]
    assert (summary["llm_calls"], summary["cached"]) == (0, 1)
