"""The argument checks of ``advrag compare`` / ``advrag ask``, rule by rule: each bound at its
edge, each message as the user reads it, and nothing written to disk but the probe file."""

from __future__ import annotations

import errno
import os
from enum import Enum
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from llama_index_ext_advrag.evaluation import arguments
from llama_index_ext_advrag.evaluation.arguments import (
    check_answer_options,
    check_common,
    check_compare_options,
    check_document_paths,
    check_folder,
    check_milvus_uri,
    check_pipeline_names,
    folder_problem,
    new_file_problem,
)
from llama_index_ext_advrag.evaluation.compose import SpecError
from llama_index_ext_advrag.evaluation.registry import registered_pipelines


def options(tmp_path: Path, **changed: Any) -> SimpleNamespace:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    values: dict[str, Any] = {
        "docs": [str(docs)],
        "uri": str(tmp_path / "milvus.db"),
        "state_dir": str(tmp_path / "state"),
        "doc_type": "auto",
        "language": "auto",
        "embed_model": None,
        "k": 1,
        "ks": [1],
        "max_questions": None,
        "probes": 1,
        "out": str(tmp_path / "out"),
        "pipelines": None,
        "questions": None,
        "answer_budget": None,
        "llm_timeout": 3600,
        "answers": False,
        "answer_cache": None,
        "support_judge": "faithfulness",
    }
    values.update(changed)
    return SimpleNamespace(**values)


def message(error: pytest.ExceptionInfo) -> str:
    return str(error.value)


# --- folders ------------------------------------------------------------------------------------


def test_a_new_folder_under_a_writable_one_has_no_problem(tmp_path: Path) -> None:
    assert folder_problem(tmp_path / "new" / "deeper") is None
    assert folder_problem(tmp_path) is None
    assert not (tmp_path / "new").exists()  # nothing is created


def test_a_file_where_the_folder_should_be_is_named(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    assert folder_problem(tmp_path / "notes.txt") == (
        f"{str(tmp_path / 'notes.txt')!r} is a file, not a folder"
    )
    assert folder_problem(tmp_path / "notes.txt" / "a" / "b") == (
        f"it would be a folder under {str(tmp_path / 'notes.txt')!r}, but notes.txt is a file here"
    )


def test_the_home_folder_is_expanded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "taken").write_text("x", encoding="utf-8")
    assert folder_problem("~/taken") == f"{str(tmp_path / 'taken')!r} is a file, not a folder"


def test_no_existing_folder_above_is_named(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(Path, "exists", lambda self, **kwargs: False)  # not even the root
    assert folder_problem(tmp_path / "a") == f"no existing folder above {str(tmp_path / 'a')!r}"


def test_a_folder_this_user_cannot_write_is_named(tmp_path: Path, monkeypatch) -> None:
    asked: list[tuple[str, int]] = []

    def access(path: Any, mode: int) -> bool:
        asked.append((str(path), mode))
        return False

    monkeypatch.setattr(arguments.os, "access", access)
    assert folder_problem(tmp_path / "new" / "report") == (
        f"{str(tmp_path)!r} cannot be written by this user (permission denied)"
    )
    assert asked == [(str(tmp_path), os.W_OK | os.X_OK)]


def test_check_folder_names_the_option_the_path_and_the_problem(tmp_path: Path) -> None:
    check_folder(tmp_path / "fine", "--out")
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError) as caught:
        check_folder(str(tmp_path / "f"), "--state-dir")
    assert message(caught) == (
        f"--state-dir {str(tmp_path / 'f')!r} cannot be used as a folder: "
        f"{str(tmp_path / 'f')!r} is a file, not a folder"
    )


def test_new_file_problem_tries_the_nearest_existing_folder_and_cleans_up(
    tmp_path: Path, monkeypatch
) -> None:
    tried: list[Any] = []
    real = arguments.tempfile.mkstemp

    def mkstemp(**kwargs: Any):
        tried.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(arguments.tempfile, "mkstemp", mkstemp)
    assert new_file_problem(tmp_path / "a" / "b") is None
    assert tried == [{"prefix": ".advrag-check-", "dir": tmp_path}]
    assert list(tmp_path.iterdir()) == []  # the probe file is gone, no folder was made


@pytest.mark.parametrize(
    ("error", "shown"),
    [
        (OSError(errno.EROFS, "Read-only file system"), "Read-only file system"),
        (OSError("no reason given"), "no reason given"),
    ],
)
def test_a_folder_that_refuses_new_files_is_named(
    tmp_path: Path, monkeypatch, error: OSError, shown: str
) -> None:
    def refuse(**kwargs: Any):
        raise error

    monkeypatch.setattr(arguments.tempfile, "mkstemp", refuse)
    assert new_file_problem(tmp_path) == f"{str(tmp_path)!r} does not accept new files ({shown})"
    with pytest.raises(ValueError) as caught:
        check_milvus_uri(str(tmp_path / "m.db"), "--milvus")
    assert message(caught) == (
        f"--milvus {str(tmp_path / 'm.db')!r}: the Milvus Lite file's folder: "
        f"{str(tmp_path)!r} does not accept new files ({shown})"
    )


# --- the Milvus uri -----------------------------------------------------------------------------


def test_a_server_url_touches_no_folder(monkeypatch) -> None:
    def refuse(*args: Any, **kwargs: Any):
        raise AssertionError("a server URL needs no folder check")

    monkeypatch.setattr(arguments, "folder_problem", refuse)
    monkeypatch.setattr(arguments, "new_file_problem", refuse)
    check_milvus_uri("http://127.0.0.1:19530")


def test_a_bad_uri_is_named_with_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        check_milvus_uri("grpc://host:1")
    assert message(caught).startswith("--uri: unsupported Milvus uri scheme 'grpc'")
    with pytest.raises(ValueError) as caught:
        check_milvus_uri(str(tmp_path / "m.sqlite"), "--store")
    assert message(caught).startswith("--store: ")


def test_a_lite_file_under_a_file_is_named(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    uri = str(tmp_path / "f" / "sub" / "m.db")
    with pytest.raises(ValueError) as caught:
        check_milvus_uri(uri)
    assert message(caught) == (
        f"--uri {uri!r}: the Milvus Lite file's folder: it would be a folder under "
        f"{str(tmp_path / 'f')!r}, but f is a file here"
    )


def test_a_lite_file_path_is_expanded_before_its_folder_is_checked(
    tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        check_milvus_uri("~/f/m.db")
    check_milvus_uri("~/new/m.db")


# --- documents and pipelines --------------------------------------------------------------------


def test_document_paths(tmp_path: Path) -> None:
    check_document_paths([tmp_path])
    with pytest.raises(ValueError) as caught:
        check_document_paths([])
    assert message(caught) == "no document path given: pass folders or files with --docs"
    with pytest.raises(FileNotFoundError) as missing:
        check_document_paths([tmp_path, tmp_path / "gone"])
    assert message(missing) == f"document path {str(tmp_path / 'gone')!r} does not exist"


def test_pipeline_names() -> None:
    names = list(registered_pipelines())
    check_pipeline_names(None)
    check_pipeline_names(names[:2])
    for empty in ([], ["  "]):
        with pytest.raises(ValueError) as caught:
            check_pipeline_names(empty)
        assert message(caught) == (
            f"pipelines {empty!r} names no pipeline: give one or more of "
            f"{', '.join(names)} (or leave it out for all)"
        )
    with pytest.raises(SpecError, match="unknown pipeline 'nope'"):
        check_pipeline_names([names[0], "nope"])


# --- the shared and the compare options ---------------------------------------------------------


def test_valid_options_at_every_edge_pass(tmp_path: Path) -> None:
    check_compare_options(options(tmp_path, max_questions=1))
    check_common(options(tmp_path, doc_type="article", language="multi", embed_model="bge-small"))


def test_common_options_are_checked_in_turn(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="gone"):
        check_common(options(tmp_path, docs=[str(tmp_path / "gone")]))
    with pytest.raises(ValueError, match=r"^--uri: "):
        check_common(options(tmp_path, uri="grpc://h:1"))
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^--state-dir "):
        check_common(options(tmp_path, state_dir=str(tmp_path / "f")))
    with pytest.raises(ValueError) as caught:
        check_common(options(tmp_path, doc_type="poem"))
    assert message(caught) == (
        "--doc-type must be one of auto, general, technical, legal, qa, article, got 'poem'"
    )
    with pytest.raises(ValueError) as caught:
        check_common(options(tmp_path, language="fr"))
    assert message(caught) == "language 'fr' is not one of ['auto', 'en', 'multi']"
    with pytest.raises(ValueError) as caught:
        check_common(options(tmp_path, embed_model="bogus"))
    assert message(caught).startswith("--embed-model 'bogus' is not a model the pack knows: ")
    check_common(options(tmp_path, embed_model=object()))  # a model object is not checked here


def test_a_language_enum_is_read_by_its_value(tmp_path: Path) -> None:
    class Language(Enum):
        EN = "en"
        FR = "fr"

    check_common(options(tmp_path, language=Language.EN))
    with pytest.raises(ValueError, match="is not one of"):
        check_common(options(tmp_path, language=Language.FR))


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        ({"k": 0}, "k must be >= 1, got k=0, ks=[1]"),
        ({"ks": [1, 0]}, "k must be >= 1, got k=1, ks=[1, 0]"),
        ({"max_questions": 0}, "--max-questions must be >= 1 (or left out for all), got 0"),
        ({"probes": 0}, "--probes must be >= 1, got 0"),
    ],
)
def test_numbers_below_one_are_named(tmp_path: Path, changed: dict, expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        check_compare_options(options(tmp_path, **changed))
    assert message(caught) == expected


def test_compare_checks_the_common_options_the_output_and_the_pipelines(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        check_compare_options(options(tmp_path, docs=[str(tmp_path / "gone")]))
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=r"^--out "):
        check_compare_options(options(tmp_path, out=str(tmp_path / "f")))
    with pytest.raises(ValueError, match="names no pipeline"):
        check_compare_options(options(tmp_path, pipelines=[]))
    with pytest.raises(ValueError, match="--llm-timeout"):
        check_compare_options(options(tmp_path, llm_timeout=0))


def test_the_questions_file(tmp_path: Path) -> None:
    questions = tmp_path / "qa.jsonl"
    questions.write_text("{}", encoding="utf-8")
    check_compare_options(options(tmp_path, questions=str(questions)))
    with pytest.raises(ValueError) as caught:
        check_compare_options(options(tmp_path, questions=str(tmp_path)))
    assert message(caught) == f"questions file {str(tmp_path)!r} is not a file"
    with pytest.raises(FileNotFoundError) as missing:
        check_compare_options(options(tmp_path, questions=tmp_path / "gone.jsonl"))
    assert message(missing) == f"questions file {str(tmp_path / 'gone.jsonl')!r} does not exist"


# --- answer options -----------------------------------------------------------------------------


@pytest.mark.parametrize("budget", [0, -1, "5", float("nan")])
def test_a_bad_answer_budget_is_named(tmp_path: Path, budget: Any) -> None:
    with pytest.raises(ValueError) as caught:
        check_answer_options(options(tmp_path, answers=True, answer_budget=budget))
    assert message(caught) == (
        f"--answer-budget must be a number of tokens > 0 (or left out), got {budget!r}"
    )


@pytest.mark.parametrize("budget", [None, 1, 0.5])
def test_a_good_answer_budget_passes(tmp_path: Path, budget: Any) -> None:
    check_answer_options(options(tmp_path, answers=True, answer_budget=budget))


@pytest.mark.parametrize("timeout", [0, -1, 3600.5, "5", None])
def test_a_bad_llm_timeout_is_named(tmp_path: Path, timeout: Any) -> None:
    with pytest.raises(ValueError) as caught:
        check_answer_options(options(tmp_path, llm_timeout=timeout))
    assert message(caught) == f"--llm-timeout must be seconds in (0, 3600], got {timeout!r}"


@pytest.mark.parametrize("timeout", [0.001, 1, 3600, 3600.0])
def test_a_good_llm_timeout_passes(tmp_path: Path, timeout: Any) -> None:
    check_answer_options(options(tmp_path, llm_timeout=timeout))


def test_the_answer_cache_folder_is_checked_only_with_answers(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x", encoding="utf-8")
    cache = str(tmp_path / "f")
    check_answer_options(options(tmp_path, answers=False, answer_cache=cache))
    with pytest.raises(ValueError, match=r"^--answer-cache "):
        check_answer_options(options(tmp_path, answers=True, answer_cache=cache))
    check_answer_options(options(tmp_path, answers=True, answer_cache=str(tmp_path / "cache")))


def test_answer_settings_without_answers_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        check_answer_options(options(tmp_path, answer_budget=100))
    assert message(caught) == (
        "--answer-budget is a setting of --answers: add --answers or drop it"
    )
    with pytest.raises(ValueError) as caught:
        check_answer_options(options(tmp_path, support_judge="prefix"))
    assert message(caught) == (
        "--support-judge is a setting of --answers: add --answers or drop it"
    )


def test_the_support_judge(tmp_path: Path) -> None:
    check_answer_options(options(tmp_path, answers=True, support_judge="prefix"))
    check_answer_options(options(tmp_path, answers=True, support_judge="faithfulness"))
    with pytest.raises(ValueError) as caught:
        check_answer_options(options(tmp_path, answers=True, support_judge="bogus"))
    assert message(caught) == "--support-judge must be faithfulness or prefix, got 'bogus'"
    judge_object = object()  # a judge given as an object is not a name to check
    check_answer_options(options(tmp_path, answers=True, support_judge=judge_object))
    without = options(tmp_path)
    del without.support_judge  # an older options object: faithfulness by default
    check_answer_options(without)
