"""The answer cache: what makes an LLM's identity, the canonical JSON its keys hash (stable
across runs, so a committed cache keeps answering), and the JSON-lines file (nested folders,
hit and miss counts, blank, cut-short and undecodable lines, non-ASCII kept readable). Kills
the mutants of evaluation/answer_cache.py the answer tests leave alive (mutation testing,
issue #39)."""

from __future__ import annotations

import hashlib
import locale
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from llama_index_ext_advrag.evaluation.answer_cache import (
    CACHE_FILE,
    AnswerCache,
    cache_key,
    llm_identity,
)

pytestmark = pytest.mark.unit


class Server:
    def __str__(self) -> str:
        return "http://127.0.0.1:8080/v1"


class ServedLLM:
    model = "qwen2.5-1.5b"
    api_base = Server()
    temperature = 0.1
    max_tokens = None  # unset: left out
    metadata = SimpleNamespace(model_name="not read")


class NamedLLM:
    model_name = "gpt-x"
    metadata = SimpleNamespace(model_name="from metadata")


class BareLLM:
    metadata = SimpleNamespace(model_name="from metadata")


class NamelessLLM:
    metadata = SimpleNamespace()


def test_identity_is_the_class_and_the_set_generation_settings() -> None:
    assert llm_identity(ServedLLM()) == {
        "class": "ServedLLM",
        "model": "qwen2.5-1.5b",
        "api_base": "http://127.0.0.1:8080/v1",  # not a plain value: its str
        "temperature": 0.1,  # a plain value: kept as it is
    }


def test_the_model_name_comes_from_metadata_only_without_a_model_attribute() -> None:
    assert llm_identity(NamedLLM()) == {"class": "NamedLLM", "model_name": "gpt-x"}
    assert llm_identity(BareLLM()) == {"class": "BareLLM", "model_name": "from metadata"}
    assert llm_identity(NamelessLLM()) == {"class": "NamelessLLM", "model_name": ""}


def test_the_key_hashes_canonical_utf8_json() -> None:
    key = cache_key("北京", {"b": 1, "a": Path("x")})
    assert key == hashlib.sha256('["北京", {"a": "x", "b": 1}]'.encode()).hexdigest()
    assert cache_key({"a": 1, "b": 2}) == cache_key({"b": 2, "a": 1})


def test_a_nested_folder_is_created_and_hits_and_misses_are_counted(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path / "runs" / "one")
    assert (cache.hits, cache.misses, len(cache)) == (0, 0, 0)
    assert cache.get("k") is None
    assert (cache.hits, cache.misses) == (0, 1)
    cache.put("k", {"answer": "3.5 bar"})
    assert cache.get("k") == {"answer": "3.5 bar"}
    assert cache.get("k") == {"answer": "3.5 bar"}
    assert (cache.hits, cache.misses) == (2, 1)
    assert cache.get("j") is None and (cache.hits, cache.misses) == (2, 2)
    assert (tmp_path / "runs" / "one" / CACHE_FILE).is_file()


def test_non_ascii_values_are_written_as_readable_utf8(tmp_path: Path) -> None:
    cache = AnswerCache(tmp_path)
    cache.put("k", "北京")
    assert (tmp_path / CACHE_FILE).read_text(encoding="utf-8") == '{"key": "k", "value": "北京"}\n'
    assert AnswerCache(tmp_path).get("k") == "北京"


def test_an_empty_file_loads_and_a_complete_file_is_appended_to_line_by_line(
    tmp_path: Path,
) -> None:
    (tmp_path / CACHE_FILE).write_bytes(b"")
    assert len(AnswerCache(tmp_path)) == 0
    AnswerCache(tmp_path).put("a", 1)
    AnswerCache(tmp_path).put("b", 2)
    assert (tmp_path / CACHE_FILE).read_text(encoding="utf-8") == (
        '{"key": "a", "value": 1}\n{"key": "b", "value": 2}\n'
    )


def test_a_line_cut_short_is_skipped_and_the_next_entry_starts_a_new_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="llama_index_ext_advrag.evaluation.answer_cache")
    (tmp_path / CACHE_FILE).write_text('{"key": "a", "value": 1}\n{"key": "b", "va', "utf-8")
    cache = AnswerCache(tmp_path)
    assert (len(cache), cache.get("a")) == (1, 1)
    assert [r.getMessage() for r in caplog.records] == [
        "answer cache answers.jsonl line 2 is unreadable (a write cut short?): skipped"
    ]
    cache.put("c", 3)
    reloaded = AnswerCache(tmp_path)
    assert (reloaded.get("a"), reloaded.get("c"), len(reloaded)) == (1, 3, 2)


def test_blank_and_undecodable_lines_do_not_end_the_load(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILE).write_bytes(
        b'{"key": "a", "value": 1}\n\n{"key": "x", "value": "\xff\xfe"\n{"key": "b", "value": 2}\n'
    )
    cache = AnswerCache(tmp_path)
    assert (cache.get("a"), cache.get("b"), len(cache)) == (1, 2, 2)


def test_the_file_is_utf8_whatever_the_locale(tmp_path: Path) -> None:
    # under the C locale open() without an encoding is ASCII (unless Python runs in UTF-8
    # mode): writing 北京 would fail and reading it back would give replacement characters
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        AnswerCache(tmp_path).put("k", "北京")
        assert AnswerCache(tmp_path).get("k") == "北京"
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)
