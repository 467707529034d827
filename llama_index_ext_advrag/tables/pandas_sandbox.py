"""Run accepted pandas code in a child process with limits; the result comes back as JSON data.

Defence in depth behind the allowlist (:mod:`.pandas_check`): even a program the allowlist
should not have accepted runs in a fresh ``python -I -B`` process (``subprocess`` of
``sys.executable``, its own session; on Linux forked from a waiting interpreter of that kind
that has numpy and pandas loaded, see below) that

* starts in an empty temporary working directory, removed afterwards, with a minimal
  environment (no API keys, one BLAS thread);
* receives the program and a pickle of the DataFrame that this process wrote, on stdin;
* limits its own CPU time (RLIMIT_CPU), address space (RLIMIT_AS: its size after loading plus
  ``memory_mb``) and file size (RLIMIT_FSIZE 0), and installs an audit hook refusing process
  creation, sockets, file writes and reads outside the Python installation (see
  ``_pandas_child.py``);
* then applies the kernel's barrier (Landlock, Linux >= 5.13, ``_landlock.py``): files created
  or changed only beneath its working directory, reads only beneath the Python installation and
  the system's libraries, no TCP; this holds for C code (pyarrow, numpy) the audit hook cannot
  see; without Landlock one warning is logged and the layers above remain;
* is killed (its whole process group) when ``timeout_seconds`` of wall-clock time have passed
  (a deadline of its own, not :func:`~llama_index_ext_advrag.plan.run_within`: that one bounds a
  call and abandons it, this one ends a process and reads what it wrote until then);
* answers with one JSON object on one line of stdout; nothing is ever unpickled from the child.
  On every path stdout is read up to MAX_CHILD_OUTPUT_BYTES and the rest dropped, so a child's
  output costs this process at most that, one read and MAX_CHILD_STDERR_BYTES.

So a missed case still cannot keep state between questions, write into the host's working
directory, exhaust the host's memory or hang it.

Importing pandas costs a fresh interpreter about a CPU-second, more than most programs. So on
Linux (``SandboxLimits(prefork=True)``, the default) each child is forked from one waiting
interpreter per process (the *zygote*, ``_pandas_child.py --zygote``): started the same way
(``python -I -B``, the minimal environment, its own session), it loads numpy and pandas and then
only forks on request. It never reads a request or runs a program, so a child starts with what a
fresh interpreter would have, and nothing of another run; each child still gets its own empty
working directory, session, limits and audit hook. The zygote is started on first use, started
again if it dies, and stopped when this process exits. Where it cannot run (another OS, or it
fails to start) each run starts a fresh interpreter, as with ``prefork=False``.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import json
import logging
import os
import pickle
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import BaseModel, ConfigDict, Field

from llama_index_ext_advrag._lazy import warn_renamed
from llama_index_ext_advrag.tables import _landlock
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
MAX_CHILD_OUTPUT_BYTES = 4_000_000  # the child's answer (stdout) is read up to this
MAX_CHILD_STDERR_BYTES = 4000  # only the last bytes of its stderr are kept (for the debug log)
READ_CHUNK_BYTES = 65536
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
        timeout_seconds: wall-clock time of the whole child (start, the program); the process
            group is killed after it.
        cpu_seconds: CPU time the program may use (RLIMIT_CPU).
        memory_mb: address space the program may add to the loaded child (RLIMIT_AS).
        max_chars: the rendered answer is cut to this many characters.
        display: pandas display options used to render the answer.
        prefork: fork the child from a waiting interpreter with pandas loaded (Linux) instead of
            starting a fresh one, which spends about a CPU-second importing pandas.

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
    prefork: bool = Field(
        default=True,
        description="Fork each child from a waiting interpreter with pandas loaded (Linux).",
    )


@dataclass(frozen=True)
class SandboxResult:
    """What a run gave: the answer as text and as JSON data, or why there is none.

    ``limit`` names a limit that stopped the program (``"timeout"``, ``"cpu"``, ``"memory"``,
    ``"signal"``, ``"output"``); ``files_left`` counts entries found in the working directory
    afterwards (always 0 unless a sandbox layer failed); ``barrier`` is the kernel barrier the
    child applied (``"landlock ABI 7"``, ``"none"`` without Landlock, ``""`` when the child gave
    no answer); ``path`` how the child started (``"forked"`` from the waiting interpreter or
    ``"fresh"``).
    """

    ok: bool
    text: str = ""
    value: Any = None
    kind: str = ""
    error: str | None = None
    limit: str | None = None
    files_left: int = 0
    barrier: str = ""
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        record: dict[str, Any] = {"ok": self.ok, "kind": self.kind}
        for key in ("error", "limit", "barrier", "path"):
            if getattr(self, key):
                record[key] = getattr(self, key)
        if self.files_left:
            record["files_left"] = self.files_left
        return record

    def as_record(self) -> dict[str, Any]:
        """Deprecated: use :meth:`to_dict`."""
        warn_renamed(self, "as_record", "to_dict")
        return self.to_dict()


@dataclass
class ChildOutput:
    """What was read from a child: stdout up to MAX_CHILD_OUTPUT_BYTES (``truncated`` when it
    wrote more), the last MAX_CHILD_STDERR_BYTES of stderr; shared by every path."""

    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    returncode: int | None = None
    timed_out: bool = False

    def add_stdout(self, chunk: bytes) -> None:
        room = MAX_CHILD_OUTPUT_BYTES - len(self.stdout)
        if len(chunk) > room:
            self.truncated = True
        self.stdout += chunk[: max(room, 0)]

    def add_stderr(self, chunk: bytes) -> None:
        self.stderr += chunk
        del self.stderr[:-MAX_CHILD_STDERR_BYTES]


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


def answer_line(stdout: bytes | bytearray) -> bytes | bytearray:
    """The child's answer: the last line of its stdout, split on ``\\n`` bytes only (a cell's
    U+2028, U+2029 or U+0085 inside the JSON is text, not a line break)."""
    return stdout.rstrip(b"\r\n").rsplit(b"\n", 1)[-1]


def interpret_child(
    stdout: bytes | bytearray,
    stderr: bytes | bytearray,
    returncode: int | None,
    timed_out: bool,
    files_left: int,
    limits: SandboxLimits,
    *,
    truncated: bool = False,
    path: str = "",
) -> SandboxResult:
    """The :class:`SandboxResult` of a finished (or killed) child: pure, shared by sync/async.
    ``truncated``: the child wrote more than MAX_CHILD_OUTPUT_BYTES (the rest was not read)."""
    if stderr:
        logger.debug("pandas sandbox stderr: %s", bytes(stderr[-2000:]).decode(errors="replace"))
    if files_left:
        logger.warning("pandas sandbox: %d entries left in the working directory", files_left)

    def failed(error: str, limit: str | None = None, barrier: str = "") -> SandboxResult:
        return SandboxResult(
            False, error=error, limit=limit, files_left=files_left, barrier=barrier, path=path
        )

    if timed_out:
        return failed(
            f"the program exceeded the {limits.timeout_seconds:g}s wall-clock limit", "timeout"
        )
    if returncode is not None and returncode < 0:
        limit, error = _signal_limit(returncode)
        return failed(error, limit)
    if truncated:
        return failed(
            f"the child's output passed the sandbox's cap of {MAX_CHILD_OUTPUT_BYTES:,} bytes "
            "(MAX_CHILD_OUTPUT_BYTES) and was cut there, so its answer was lost: ask for a "
            "smaller result (e.g. .head(), one column, an aggregate)",
            "output",
        )
    try:
        answer = json.loads(answer_line(stdout))
    except (UnicodeDecodeError, ValueError):
        return failed(f"the child gave no answer (exit status {returncode})")
    if not isinstance(answer, dict):
        return failed(str(answer)[:500])
    barrier = str(answer.get("barrier") or "")
    if not answer.get("ok"):
        message = str(answer.get("error"))[:500]
        return failed(message, "memory" if message.startswith("MemoryError") else None, barrier)
    return SandboxResult(
        True,
        text=str(answer.get("text", "")),
        value=answer.get("value"),
        kind=str(answer.get("kind", "")),
        files_left=files_left,
        barrier=barrier,
        path=path,
    )


def sandbox_barrier() -> str:
    """The kernel barrier each sandbox child applies on this machine: ``"landlock ABI n"``,
    or ``"none"`` (no Landlock: the child's rlimits, audit hook and builtins only)."""
    abi = _landlock.abi_version()
    return f"landlock ABI {abi}" if abi > 0 else "none"


_BARRIER_CHECKED = False


def _warn_once_without_barrier() -> None:
    global _BARRIER_CHECKED
    if _BARRIER_CHECKED:
        return
    _BARRIER_CHECKED = True
    if sandbox_barrier() == "none":
        logger.warning(
            "pandas sandbox: this kernel has no Landlock (Linux >= 5.13 with it enabled): the "
            "child runs without the kernel's write barrier, behind its rlimits (RLIMIT_FSIZE 0), "
            "audit hook and restricted builtins only"
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
    _warn_once_without_barrier()
    payload = _request(code, df, limits)
    with tempfile.TemporaryDirectory(prefix="advrag-pandas-") as workdir:
        zygote = _zygote() if limits.prefork else None
        output = _run_forked(zygote, payload, workdir, limits) if zygote else None
        path = "forked"
        if output is None:
            output, path = _run_fresh(payload, workdir, limits), "fresh"
        files_left = _entries(workdir)
    return _interpret(output, files_left, limits, path)


def _interpret(
    output: ChildOutput, files_left: int, limits: SandboxLimits, path: str
) -> SandboxResult:
    return interpret_child(
        output.stdout,
        output.stderr,
        output.returncode,
        output.timed_out,
        files_left,
        limits,
        truncated=output.truncated,
        path=path,
    )


def _run_fresh(payload: bytes, workdir: str, limits: SandboxLimits) -> ChildOutput:
    """A fresh interpreter, driven like a forked child (bounded reads, one deadline)."""
    deadline = time.monotonic() + limits.timeout_seconds
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    errors_from_child, child_err = os.pipe()
    ours = [to_child, from_child, errors_from_child]
    try:
        try:
            process = subprocess.Popen(
                _command(),
                stdin=child_in,
                stdout=child_out,
                stderr=child_err,
                cwd=workdir,
                env=_CHILD_ENV,
                start_new_session=True,
            )
        finally:
            for fd in (child_in, child_out, child_err):
                os.close(fd)

        def wait(timeout: float) -> int:
            try:
                return process.wait(timeout=timeout)
            except subprocess.TimeoutExpired as exc:
                raise TimeoutError from exc

        return _drive(process.pid, wait, ours, payload, deadline)
    finally:
        for fd in ours:
            with contextlib.suppress(OSError):
                os.close(fd)


def _drive(pid: int, wait: Any, fds: list[int], payload: bytes, deadline: float) -> ChildOutput:
    """Exchange with a started child until it ends or ``deadline`` passes, then kill its
    process group if it is still there; ``wait(timeout)`` gives its exit status or raises
    TimeoutError (ZygoteError: the status was lost)."""
    output = _exchange(fds, payload, deadline)
    if not output.timed_out:  # the outputs are closed; the child ends within what time is left
        try:
            output.returncode = wait(max(deadline - time.monotonic(), 0.1))
        except TimeoutError:
            output.timed_out = True
        except ZygoteError:
            logger.warning("pandas sandbox: the exit status of child %d was lost", pid)
    if output.timed_out:
        _kill_group(pid)
        with contextlib.suppress(TimeoutError, ZygoteError):
            output.returncode = wait(5)
    return output


async def arun_pandas_code(
    code: str, df: Any, limits: SandboxLimits | None = None
) -> SandboxResult:
    """:func:`run_pandas_code` with the child awaited instead of waited for."""
    check_pandas_code(code)
    return await _arun_unchecked(code, df, limits or SandboxLimits())


async def _arun_unchecked(code: str, df: Any, limits: SandboxLimits) -> SandboxResult:
    if limits.prefork and _PREFORK_PLATFORM:
        # the forked child is driven by blocking pipe I/O with a deadline: in a worker thread
        return await asyncio.to_thread(_run_unchecked, code, df, limits)
    _warn_once_without_barrier()
    payload = _request(code, df, limits)
    with tempfile.TemporaryDirectory(prefix="advrag-pandas-") as workdir:
        output = await _arun_fresh(payload, workdir, limits)
        files_left = _entries(workdir)
    return _interpret(output, files_left, limits, "fresh")


async def _arun_fresh(payload: bytes, workdir: str, limits: SandboxLimits) -> ChildOutput:
    """A fresh interpreter awaited: stdout read in chunks up to the cap (the rest is read and
    dropped), stderr's tail kept; the process group is killed at the deadline or when the
    awaiting task is cancelled."""
    process = await asyncio.create_subprocess_exec(
        *_command(),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=workdir,
        env=_CHILD_ENV,
        start_new_session=True,
    )
    output = ChildOutput()
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    assert stdin is not None and stdout is not None and stderr is not None  # noqa: S101 - PIPEs

    async def feed() -> None:
        try:
            stdin.write(payload)
            await stdin.drain()
        except (BrokenPipeError, ConnectionResetError):  # the child is gone; its outputs say why
            pass
        finally:
            stdin.close()

    async def read(stream: asyncio.StreamReader, keep: Any) -> None:
        while chunk := await stream.read(READ_CHUNK_BYTES):
            keep(chunk)

    try:
        await asyncio.wait_for(
            asyncio.gather(
                feed(),
                read(stdout, output.add_stdout),
                read(stderr, output.add_stderr),
                process.wait(),
            ),
            timeout=limits.timeout_seconds,
        )
    except asyncio.TimeoutError:
        output.timed_out = True
    finally:
        if process.returncode is None:
            _kill_group(process.pid)
            await process.wait()
    output.returncode = process.returncode
    return output


# --- the zygote: children forked from a waiting interpreter with pandas loaded --------------

_PREFORK_PLATFORM = sys.platform.startswith("linux") and hasattr(socket, "send_fds")
ZYGOTE_START_SECONDS = 120.0  # a fresh interpreter importing pandas, on a loaded machine
ZYGOTE_SPAWN_SECONDS = 10.0  # one fork (milliseconds when healthy); longer: it is replaced


class ZygoteError(RuntimeError):
    """The waiting interpreter could not start, fork, or stopped (each run then starts afresh)."""


class _Zygote:
    """One waiting interpreter and the thread that reads its messages (pids, exit statuses)."""

    def __init__(self) -> None:
        control, remote = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # its own stderr, read if it fails to start; open for the zygote's life, closed by close()
        self._errors = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.process = subprocess.Popen(
                [*_command(), "--zygote", str(remote.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=self._errors,
                cwd="/",
                env=_CHILD_ENV,
                start_new_session=True,
                pass_fds=(remote.fileno(),),
            )
        except BaseException:
            control.close()
            self._errors.close()
            raise
        finally:
            remote.close()
        self.control = control
        self.owner = os.getpid()
        self.alive = True
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count()
        self._ready: Future[int] = Future()
        self._spawns: dict[int, Future[tuple[int, Future[int]]]] = {}
        self._exits: dict[int, Future[int]] = {}
        threading.Thread(target=self._read, name="advrag-pandas-zygote", daemon=True).start()
        try:
            self._ready.result(timeout=ZYGOTE_START_SECONDS)
        except BaseException as exc:
            self._errors.seek(0)
            tail = self._errors.read()[-1000:].decode(errors="replace").strip()
            self.close()
            raise ZygoteError(f"the waiting interpreter did not start ({exc!r}): {tail}") from exc

    def _read(self) -> None:
        try:
            while True:
                data = self.control.recv(65536)
                if not data:
                    break
                self._dispatch(json.loads(data))
        except (OSError, ValueError, TypeError, KeyError) as exc:
            logger.debug("pandas sandbox: zygote channel closed: %r", exc)
        finally:
            with self._lock:
                self.alive = False
                pending: list[Future[Any]] = [*self._spawns.values(), *self._exits.values()]
                pending.append(self._ready)
                self._spawns.clear()
                self._exits.clear()
            for future in pending:
                if not future.done():
                    future.set_exception(ZygoteError("the waiting interpreter stopped"))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if message.get("ready"):
            self._ready.set_result(int(message["pid"]))
        elif "returncode" in message:
            with self._lock:
                exited = self._exits.pop(int(message["pid"]), None)
            if exited is not None:
                exited.set_result(int(message["returncode"]))
        elif "id" in message:
            with self._lock:
                spawned = self._spawns.pop(message["id"], None)  # None: a request it refused
                if spawned is None or "pid" not in message:
                    exit_future = None
                else:
                    exit_future = self._exits[int(message["pid"])] = Future()
            if spawned is None:
                return
            if exit_future is None:
                spawned.set_exception(ZygoteError(str(message.get("error"))))
            else:
                spawned.set_result((int(message["pid"]), exit_future))

    def spawn(self, fds: list[int], workdir: str, timeout: float) -> tuple[int, Future[int]]:
        """Fork a child with ``fds`` as its stdin/stdout/stderr in ``workdir``: (pid, exit)."""
        spawned: Future[tuple[int, Future[int]]] = Future()
        with self._lock:
            if not self.alive:
                raise ZygoteError("the waiting interpreter stopped")
            ident = next(self._ids)
            self._spawns[ident] = spawned
        message = json.dumps({"id": ident, "cwd": workdir}).encode("utf-8")
        try:
            with self._send_lock:
                socket.send_fds(self.control, [message], fds)
            return spawned.result(timeout=timeout)
        except (OSError, TimeoutError) as exc:
            with self._lock:
                self._spawns.pop(ident, None)
                self.alive = False  # unresponsive: the next run replaces it (see _zygote)
            raise ZygoteError(f"no child was forked within {timeout:g}s: {exc!r}") from exc

    def stopped(self) -> bool:
        """Stopped (SIGSTOP, a debugger) or gone: it would never answer a fork request."""
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as stat:
                state = stat.read().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            return self.process.poll() is not None
        return state in (b"T", b"t", b"Z", b"X")

    def close(self, kill: bool = False) -> None:
        """Stop it: close its channel and wait for it to exit (``kill``: kill it at once)."""
        self.alive = False
        if kill:
            with contextlib.suppress(OSError):
                self.process.kill()
        with contextlib.suppress(OSError):
            self.control.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.control.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)
        self._errors.close()


_ZYGOTE: _Zygote | None = None
_ZYGOTE_LOCK = threading.Lock()
_ZYGOTE_UNAVAILABLE: str | None = None


def _zygote() -> _Zygote | None:
    """This process's zygote, started (again) when needed; ``None`` where it cannot run."""
    global _ZYGOTE, _ZYGOTE_UNAVAILABLE
    if not _PREFORK_PLATFORM or _ZYGOTE_UNAVAILABLE is not None:
        return None
    with _ZYGOTE_LOCK:
        current = _ZYGOTE
        if current is not None and current.owner == os.getpid():
            stopped = current.stopped()
            if current.alive and not stopped:
                return current
            logger.warning(
                "pandas sandbox: the waiting interpreter (pid %d) %s; starting another",
                current.process.pid,
                "is stopped" if stopped else "stopped answering",
            )
            current.close(kill=True)
        try:
            _ZYGOTE = _Zygote()
        except (OSError, ZygoteError) as exc:
            _ZYGOTE = None
            _ZYGOTE_UNAVAILABLE = str(exc)
            logger.warning("pandas sandbox: %s; each run starts a fresh interpreter instead", exc)
            return None
        return _ZYGOTE


def stop_pandas_zygote() -> None:
    """Stop this process's waiting interpreter (started again by the next run that needs it)."""
    global _ZYGOTE
    with _ZYGOTE_LOCK:
        current, _ZYGOTE = _ZYGOTE, None
    if current is not None and current.owner == os.getpid():
        current.close()


atexit.register(stop_pandas_zygote)


def _run_forked(
    zygote: _Zygote, payload: bytes, workdir: str, limits: SandboxLimits
) -> ChildOutput | None:
    """Run one child forked by ``zygote``; ``None`` when no child could be forked."""
    deadline = time.monotonic() + limits.timeout_seconds
    child_in, to_child = os.pipe()
    from_child, child_out = os.pipe()
    errors_from_child, child_err = os.pipe()
    ours = [to_child, from_child, errors_from_child]
    try:
        try:
            pid, exited = zygote.spawn(
                [child_in, child_out, child_err],
                workdir,
                min(ZYGOTE_SPAWN_SECONDS, max(deadline - time.monotonic(), 0.1)),
            )
        except ZygoteError as exc:
            logger.warning("pandas sandbox: %s; this run starts a fresh interpreter", exc)
            return None
        finally:
            for fd in (child_in, child_out, child_err):
                os.close(fd)
        return _drive(pid, lambda timeout: exited.result(timeout=timeout), ours, payload, deadline)
    finally:
        for fd in ours:
            with contextlib.suppress(OSError):
                os.close(fd)


def _exchange(fds: list[int], payload: bytes, deadline: float) -> ChildOutput:
    """Write ``payload`` to the child and read its stdout and stderr until both close or the
    deadline passes (``timed_out``), keeping what :class:`ChildOutput` keeps."""
    to_child, from_child, errors_from_child = fds
    output = ChildOutput()
    view, sent = memoryview(payload), 0
    with selectors.DefaultSelector() as selector:
        os.set_blocking(to_child, False)
        selector.register(to_child, selectors.EVENT_WRITE)
        selector.register(from_child, selectors.EVENT_READ)
        selector.register(errors_from_child, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                output.timed_out = True
                return output
            for key, _ in selector.select(remaining):
                fd = key.fd
                if fd == to_child:
                    try:
                        sent += os.write(fd, view[sent : sent + READ_CHUNK_BYTES])
                    except BlockingIOError:  # the pipe filled up since select: wait again
                        continue
                    except BrokenPipeError:  # the child is gone; its outputs say why
                        sent = len(view)
                    if sent >= len(view):
                        selector.unregister(fd)
                        os.close(fd)
                        fds[0] = -1
                    continue
                chunk = os.read(fd, READ_CHUNK_BYTES)
                if not chunk:
                    selector.unregister(fd)
                elif fd == from_child:
                    output.add_stdout(chunk)
                else:
                    output.add_stderr(chunk)
    return output


__all__ = [
    "DEFAULT_DISPLAY_OPTIONS",
    "SandboxLimits",
    "SandboxResult",
    "ZygoteError",
    "ChildOutput",
    "arun_pandas_code",
    "answer_line",
    "interpret_child",
    "run_pandas_code",
    "sandbox_barrier",
    "stop_pandas_zygote",
]
