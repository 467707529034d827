"""The sandbox's pure parts, without starting a child: how a finished child's output, exit
status and timing become a ``SandboxResult`` (exact messages and limits), the record it leaves
in the trace, the request the child receives, and the limits' bounds (kills the mutants of
``interpret_child``, ``_signal_limit``, ``SandboxResult.to_dict``, ``_request`` and
``_entries`` in tables/pandas_sandbox.py)."""

from __future__ import annotations

import json
import logging
import pickle
import signal
import sys

import pandas as pd
import pytest

from llama_index_ext_advrag.tables.pandas_allowlist import BUILTIN_FUNCTIONS, BUILTIN_TYPES
from llama_index_ext_advrag.tables.pandas_sandbox import (
    CHILD_SCRIPT,
    DEFAULT_DISPLAY_OPTIONS,
    SandboxLimits,
    SandboxResult,
    _command,
    _entries,
    _request,
    interpret_child,
)

LIMITS = SandboxLimits(timeout_seconds=7.5)


def answer(payload: object) -> bytes:
    return (json.dumps(payload) + "\n").encode()


def interpret(stdout: bytes = b"", returncode: int | None = 0, **kwargs) -> SandboxResult:
    options = {"stderr": b"", "timed_out": False, "files_left": 0, "limits": LIMITS}
    options.update(kwargs)
    return interpret_child(stdout, returncode=returncode, **options)


def test_an_answer_comes_back_whole() -> None:
    out = b"noise printed first\n" + answer({"ok": True, "text": "3", "value": 3, "kind": "int"})
    assert interpret(out) == SandboxResult(True, text="3", value=3, kind="int")
    bare = interpret(answer({"ok": True}), files_left=2)
    assert bare == SandboxResult(True, text="", value=None, kind="", files_left=2)


def test_a_timeout_names_the_wall_clock_limit() -> None:
    result = interpret(answer({"ok": True}), returncode=None, timed_out=True, files_left=1)
    assert result == SandboxResult(
        False, error="the program exceeded the 7.5s wall-clock limit", limit="timeout", files_left=1
    )


@pytest.mark.parametrize(
    ("number", "limit", "error"),
    [
        (signal.SIGXCPU, "cpu", "the program exceeded its CPU time limit"),
        (signal.SIGKILL, "memory", "the child was killed (SIGKILL), most likely out of memory"),
        (signal.SIGSEGV, "signal", f"the child died of signal {int(signal.SIGSEGV)} (SIGSEGV)"),
        (200, "signal", "the child died of signal 200 (?)"),
    ],
)
def test_a_signal_names_the_limit(number: int, limit: str, error: str) -> None:
    result = interpret(answer({"ok": True}), returncode=-int(number), files_left=3)
    assert result == SandboxResult(False, error=error, limit=limit, files_left=3)


@pytest.mark.parametrize("stdout", [b"", b"\n\n", b"not json\n", b"\xff\xfe\n"])
def test_no_answer_names_the_exit_status(stdout: bytes) -> None:
    assert interpret(stdout, returncode=3, files_left=1) == SandboxResult(
        False, error="the child gave no answer (exit status 3)", files_left=1
    )


def test_a_refusal_or_failure_keeps_its_message() -> None:
    failed = interpret(answer({"ok": False, "error": "KeyError: 'x'"}), files_left=1)
    assert failed == SandboxResult(False, error="KeyError: 'x'", files_left=1)
    memory = interpret(answer({"ok": False, "error": "MemoryError: big"}))
    assert (memory.error, memory.limit) == ("MemoryError: big", "memory")
    assert interpret(answer({"ok": False, "error": "x" * 900})).error == "x" * 500
    assert interpret(answer([1, 2])).error == "[1, 2]"  # not a dict: its text, cut
    assert interpret(answer({"error": "NotMemoryError"})).limit is None


def test_stderr_and_files_left_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="llama_index_ext_advrag.tables.pandas_sandbox"):
        interpret(answer({"ok": True}), stderr=b"x" * 3000 + b"tail", files_left=2)
    debug = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert debug == ["pandas sandbox stderr: " + ("x" * 1996 + "tail")]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["pandas sandbox: 2 entries left in the working directory"]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="llama_index_ext_advrag.tables.pandas_sandbox"):
        interpret(answer({"ok": True}), stderr=b"bad \xff byte")
    assert caplog.messages == ["pandas sandbox stderr: bad \ufffd byte"]
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="llama_index_ext_advrag.tables.pandas_sandbox"):
        interpret(answer({"ok": True}))
    assert caplog.records == []


def test_the_child_runs_isolated_without_bytecode() -> None:
    # -I: no PYTHON* variables, no user site, no script folder on sys.path; -B: writes no .pyc
    assert _command() == [sys.executable, "-I", "-B", str(CHILD_SCRIPT)]
    assert CHILD_SCRIPT.is_file()


def test_the_trace_record() -> None:
    assert SandboxResult(True, kind="int").to_dict() == {"ok": True, "kind": "int"}
    assert SandboxResult(False, error="e", limit="cpu", files_left=2).to_dict() == {
        "ok": False,
        "kind": "",
        "error": "e",
        "limit": "cpu",
        "files_left": 2,
    }


def test_the_request_the_child_receives() -> None:
    frame = pd.DataFrame({"a": [1, 2]})
    limits = SandboxLimits(cpu_seconds=3, memory_mb=64, max_chars=150, display={"x": 1, "y": None})
    request = pickle.loads(_request("df.a.sum()", frame, limits))
    assert request.pop("frame").equals(frame)
    assert request == {
        "code": "df.a.sum()",
        "builtins": sorted(set(BUILTIN_FUNCTIONS) | BUILTIN_TYPES),
        "cpu_seconds": 3,
        "memory_bytes": 64 * 2**20,
        "max_chars": 150,
        "display": ("x", 1, "y", None),
    }


def test_limits_defaults_and_bounds() -> None:
    limits = SandboxLimits()
    assert (limits.timeout_seconds, limits.cpu_seconds, limits.memory_mb, limits.max_chars) == (
        30.0,
        10,
        512,
        20_000,
    )
    assert (
        limits.display == DEFAULT_DISPLAY_OPTIONS and limits.display is not DEFAULT_DISPLAY_OPTIONS
    )
    for field, low, high in (
        ("timeout_seconds", 1, 600),
        ("cpu_seconds", 1, 600),
        ("memory_mb", 32, 65_536),
        ("max_chars", 100, 10_000_000),
    ):
        SandboxLimits(**{field: low})
        SandboxLimits(**{field: high})
        for bad in (low - 1, high + 1):
            with pytest.raises(ValueError, match=field):
                SandboxLimits(**{field: bad})


def test_entries_counts_what_is_left(tmp_path) -> None:
    assert _entries(str(tmp_path)) == 0
    (tmp_path / "left.txt").write_text("x")
    (tmp_path / "dir").mkdir()
    assert _entries(str(tmp_path)) == 2
    assert _entries(str(tmp_path / "missing")) == 0
