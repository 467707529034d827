"""Run accepted pandas code in a child process with limits; the result comes back as JSON data.

Defence in depth behind the allowlist (:mod:`.pandas_check`): even a program the allowlist
should not have accepted runs in a fresh ``python -I -B`` process (``subprocess`` of
``sys.executable``, its own session) that

* starts in an empty temporary working directory, removed afterwards, with a minimal
  environment (no API keys, one BLAS thread);
* receives the program and a pickle of the DataFrame that this process wrote, on stdin;
* limits its own CPU time (RLIMIT_CPU), address space (RLIMIT_AS: its size after loading plus
  ``memory_mb``) and file size (RLIMIT_FSIZE 0), and installs an audit hook refusing process
  creation, sockets, file writes and reads outside the Python installation (see
  ``_pandas_child.py``);
* is killed (its whole process group) when ``timeout_seconds`` of wall-clock time have passed;
* answers with one JSON object on stdout; nothing is ever unpickled from the child.

So a missed case still cannot keep state between questions, write into the host's working
directory, exhaust the host's memory or hang it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import pickle
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import BaseModel, ConfigDict, Field

from llama_index_ext_advrag.tables.pandas_allowlist import BUILTIN_FUNCTIONS, BUILTIN_TYPES
from llama_index_ext_advrag.tables.pandas_check import check_pandas_code

logger = logging.getLogger(__name__)

CHILD_SCRIPT = Path(__file__).with_name("_pandas_child.py")
DEFAULT_DISPLAY_OPTIONS: dict[str, int | None] = {
    "display.max_rows": 50,
    "display.max_columns": 50,
    "display.max_colwidth": 200,
    "display.width": 200,
}
MAX_CHILD_OUTPUT_BYTES = 4_000_000
_CHILD_ENV = {
    "PATH": os.defpath,
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "NUMEXPR_MAX_THREADS": "1",
}


class SandboxLimits(BaseModel):
    """Limits of one run (a frozen pydantic model: ``limits.model_copy(update=...)`` or
    ``SandboxLimits(**{**limits.model_dump(), ...})`` for a variant).

    Args:
        timeout_seconds: wall-clock time of the whole child (start, pandas import, the program);
            the process group is killed after it.
        cpu_seconds: CPU time the program may use (RLIMIT_CPU).
        memory_mb: address space the program may add to the loaded child (RLIMIT_AS).
        max_chars: the rendered answer is cut to this many characters.
        display: pandas display options used to render the answer.

    Raises:
        ValueError: a limit out of range (the message names it and the allowed range).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_seconds: float = Field(
        default=30.0, ge=1, le=600, description="Wall-clock seconds of the whole child."
    )
    cpu_seconds: int = Field(default=10, ge=1, le=600, description="CPU seconds (RLIMIT_CPU).")
    memory_mb: int = Field(
        default=512, ge=32, le=65_536, description="Address space added to the child (MB)."
    )
    max_chars: int = Field(
        default=20_000, ge=100, le=10_000_000, description="The answer is cut to this length."
    )
    display: dict[str, int | None] = Field(
        default_factory=lambda: dict(DEFAULT_DISPLAY_OPTIONS),
        description="pandas display options used to render the answer.",
    )


@dataclass(frozen=True)
class SandboxResult:
    """What a run gave: the answer as text and as JSON data, or why there is none.

    ``limit`` names a limit that stopped the program (``"timeout"``, ``"cpu"``, ``"memory"``,
    ``"signal"``); ``files_left`` counts entries found in the working directory afterwards
    (always 0 unless a sandbox layer failed).
    """

    ok: bool
    text: str = ""
    value: Any = None
    kind: str = ""
    error: str | None = None
    limit: str | None = None
    files_left: int = 0

    def as_record(self) -> dict[str, Any]:
        record: dict[str, Any] = {"ok": self.ok, "kind": self.kind}
        for key in ("error", "limit"):
            if getattr(self, key):
                record[key] = getattr(self, key)
        if self.files_left:
            record["files_left"] = self.files_left
        return record


def _request(code: str, df: Any, limits: SandboxLimits) -> bytes:
    display: list[Any] = []
    for key, value in limits.display.items():
        display.extend((key, value))
    return pickle.dumps(
        {
            "code": code,
            "frame": df,
            "builtins": sorted(set(BUILTIN_FUNCTIONS) | BUILTIN_TYPES),
            "cpu_seconds": limits.cpu_seconds,
            "memory_bytes": limits.memory_mb * 2**20,
            "max_chars": limits.max_chars,
            "display": tuple(display),
        },
        protocol=pickle.HIGHEST_PROTOCOL,
    )


def _command() -> list[str]:
    return [sys.executable, "-I", "-B", str(CHILD_SCRIPT)]


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _entries(directory: str) -> int:
    try:
        return len(os.listdir(directory))
    except OSError:
        return 0


def _signal_limit(returncode: int) -> tuple[str, str]:
    number = -returncode
    name = signal.Signals(number).name if number in signal.Signals._value2member_map_ else "?"
    if number == signal.SIGXCPU:
        return "cpu", "the program exceeded its CPU time limit"
    if number == signal.SIGKILL:
        return "memory", "the child was killed (SIGKILL), most likely out of memory"
    return "signal", f"the child died of signal {number} ({name})"


def interpret_child(
    stdout: bytes,
    stderr: bytes,
    returncode: int | None,
    timed_out: bool,
    files_left: int,
    limits: SandboxLimits,
) -> SandboxResult:
    """The :class:`SandboxResult` of a finished (or killed) child: pure, shared by sync/async."""
    if stderr:
        logger.debug("pandas sandbox stderr: %s", stderr[-2000:].decode(errors="replace"))
    if files_left:
        logger.warning("pandas sandbox: %d entries left in the working directory", files_left)
    if timed_out:
        error = f"the program exceeded the {limits.timeout_seconds:g}s wall-clock limit"
        return SandboxResult(False, error=error, limit="timeout", files_left=files_left)
    if returncode is not None and returncode < 0:
        limit, error = _signal_limit(returncode)
        return SandboxResult(False, error=error, limit=limit, files_left=files_left)
    try:
        answer = json.loads(stdout.decode("utf-8").strip().splitlines()[-1])
    except (UnicodeDecodeError, IndexError, ValueError):
        error = f"the child gave no answer (exit status {returncode})"
        return SandboxResult(False, error=error, files_left=files_left)
    if not isinstance(answer, dict) or not answer.get("ok"):
        message = str(answer.get("error") if isinstance(answer, dict) else answer)[:500]
        memory = "memory" if message.startswith("MemoryError") else None
        return SandboxResult(False, error=message, limit=memory, files_left=files_left)
    return SandboxResult(
        True,
        text=str(answer.get("text", "")),
        value=answer.get("value"),
        kind=str(answer.get("kind", "")),
        files_left=files_left,
    )


def run_pandas_code(code: str, df: Any, limits: SandboxLimits | None = None) -> SandboxResult:
    """Check ``code`` (deny by default) and run it on ``df`` in the sandbox.

    Returns the :class:`SandboxResult`; a program that fails or hits a limit is a result with
    ``ok=False``, not an exception.

    Raises:
        UnsafeCodeError: the code was refused; nothing was started.
    """
    check_pandas_code(code)
    return _run_unchecked(code, df, limits or SandboxLimits())


def _run_unchecked(code: str, df: Any, limits: SandboxLimits) -> SandboxResult:
    """The sandbox alone, without the allowlist (tests prove each layer on its own)."""
    payload = _request(code, df, limits)
    with tempfile.TemporaryDirectory(prefix="advrag-pandas-") as workdir:
        process = subprocess.Popen(
            _command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=workdir,
            env=_CHILD_ENV,
            start_new_session=True,
        )
        timed_out = False
        try:
            stdout, stderr = process.communicate(payload, timeout=limits.timeout_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(process.pid)
            stdout, stderr = process.communicate()
        files_left = _entries(workdir)
    return interpret_child(
        stdout[:MAX_CHILD_OUTPUT_BYTES], stderr, process.returncode, timed_out, files_left, limits
    )


async def arun_pandas_code(
    code: str, df: Any, limits: SandboxLimits | None = None
) -> SandboxResult:
    """:func:`run_pandas_code` with the child awaited instead of waited for."""
    check_pandas_code(code)
    return await _arun_unchecked(code, df, limits or SandboxLimits())


async def _arun_unchecked(code: str, df: Any, limits: SandboxLimits) -> SandboxResult:
    payload = _request(code, df, limits)
    with tempfile.TemporaryDirectory(prefix="advrag-pandas-") as workdir:
        process = await asyncio.create_subprocess_exec(
            *_command(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=workdir,
            env=_CHILD_ENV,
            start_new_session=True,
        )
        timed_out = False
        try:
            stdout, stderr = await asyncio.wait_for(
                process.communicate(payload), timeout=limits.timeout_seconds
            )
        except asyncio.TimeoutError:
            timed_out = True
            _kill_group(process.pid)
            await process.wait()
            stdout, stderr = b"", b""
        files_left = _entries(workdir)
    return interpret_child(
        stdout[:MAX_CHILD_OUTPUT_BYTES], stderr, process.returncode, timed_out, files_left, limits
    )


__all__ = [
    "DEFAULT_DISPLAY_OPTIONS",
    "SandboxLimits",
    "SandboxResult",
    "arun_pandas_code",
    "interpret_child",
    "run_pandas_code",
]
