"""Start and check a local OpenAI-compatible model server (llama-cpp-python), failing clearly.

Test and benchmark infrastructure (not part of the package): the test session's ``local_llm``
tier and the LLM benchmarks start their model servers with it.

A model server that answers ``GET /v1/models`` may still die at its first completion: a
llama.cpp build compiled for the build machine's CPU (``GGML_NATIVE=ON``, pip's default) crashes
in its AMX kernels on some CPUs, and a cached native wheel crashes on CPUs without the
instructions it was built for. :func:`check_llm_server` therefore asks for one real completion,
and :class:`LocalLLMServer` reports the last lines of the server's log when anything fails, so a
broken server is one clear error naming the URL instead of many connection errors later.

Example:
    >>> from model_server import LocalLLMServer
    >>> server = LocalLLMServer("model.gguf", chat_format="gemma")  # doctest: +SKIP
    >>> with server as base_url:  # doctest: +SKIP
    ...     llm = OpenAILike(model=server.alias, api_base=base_url, api_key="none", is_chat_model=True)
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

logger = logging.getLogger(__name__)

DEFAULT_STARTUP_TIMEOUT = 180.0
DEFAULT_REQUEST_TIMEOUT = 120.0
DEFAULT_LOG_TAIL_LINES = 25
PORTABLE_BUILD_HINT = (
    "if the process died at its first completion, rebuild llama-cpp-python portable: "
    'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir '
    "--no-deps llama-cpp-python"
)


class LocalLLMServerError(RuntimeError):
    """A local model server did not start or cannot generate; the message names the URL."""


def _post_json(url: str, payload: dict, timeout: float) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode("utf-8"),
        headers={"Content-Type": "application/json", "Authorization": "Bearer not-needed"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return json.loads(reply.read().decode("utf-8"))


def check_llm_server(
    base_url: str, model: str | None = None, timeout: float = DEFAULT_REQUEST_TIMEOUT
) -> str:
    """Prove that the OpenAI-compatible server at ``base_url`` generates: one short completion.

    Args:
        base_url: The API base, e.g. ``"http://127.0.0.1:8000/v1"``.
        model: The model name to ask for (llama-cpp-python ignores it when it serves one model).
        timeout: Seconds to wait for the completion.

    Returns:
        str: The generated text (possibly empty: a reply is what is checked, not its quality).

    Raises:
        LocalLLMServerError: The server is unreachable, answered an error, or sent no completion;
            the message names ``base_url`` and what to check.
    """
    url = base_url.rstrip("/") + "/completions"
    payload: dict = {"prompt": "Hello", "max_tokens": 2, "temperature": 0.0}
    if model:
        payload["model"] = model
    try:
        reply = _post_json(url, payload, timeout)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise LocalLLMServerError(
            f"the model server at {base_url} did not answer a completion request ({exc}); "
            f"check that it is running and that its model loaded; {PORTABLE_BUILD_HINT}"
        ) from exc
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices or not isinstance(choices, list) or "text" not in choices[0]:
        raise LocalLLMServerError(
            f"the model server at {base_url} answered a completion request without a completion: "
            f"{str(reply)[:300]}"
        )
    return str(choices[0]["text"])


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _models_answer(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url.rstrip("/") + "/models", timeout=2) as reply:
            return reply.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def tail(path: Path, lines: int = DEFAULT_LOG_TAIL_LINES) -> str:
    """The last ``lines`` lines of a text file (empty when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def stop_process_group(process: subprocess.Popen) -> None:
    """Stop a process started with ``start_new_session=True`` and its children: TERM, then KILL."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


class LocalLLMServer:
    """Run ``python -m llama_cpp.server`` on a GGUF file on 127.0.0.1 and prove it generates.

    Args:
        model_path: The GGUF file.
        chat_format: llama-cpp-python's chat format (``"gemma"`` for Gemma; ``None`` uses the GGUF's
            template).
        alias: The model name the server reports.
        n_ctx, n_threads: Context window and CPU threads of the server.
        port: A fixed port, or ``None`` for a free one.
        command: A whole command to run instead (``{port}`` is replaced by the port); for other
            servers.
        startup_timeout: Seconds to wait for the server to answer and complete.
        log_dir: Where ``server.log`` goes (a temporary folder by default, removed on :meth:`stop`).

    Raises:
        LocalLLMServerError: From :meth:`start` when the server exits, never answers, or cannot
            complete; the message names the URL, the exit status and the last lines of the server's
            log.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        chat_format: str | None = None,
        alias: str = "local-model",
        n_ctx: int = 4096,
        n_threads: int = 2,
        port: int | None = None,
        command: Sequence[str] | None = None,
        startup_timeout: float = DEFAULT_STARTUP_TIMEOUT,
        log_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if model_path is None and command is None:
            raise ValueError("LocalLLMServer needs model_path (a GGUF file) or a command")
        if startup_timeout <= 0:
            raise ValueError(f"startup_timeout must be > 0, got {startup_timeout!r}")
        self.model_path = None if model_path is None else Path(model_path)
        self.chat_format = chat_format
        self.alias = alias
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.port = port
        self.command = None if command is None else list(command)
        self.startup_timeout = startup_timeout
        self._own_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self._process: subprocess.Popen | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI API base of the server, ``http://127.0.0.1:<port>/v1``."""
        if self.port is None:
            raise LocalLLMServerError("the server has not been started")
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def pid(self) -> int:
        """The server's process id (also its process group's: it runs in a session of its own)."""
        if self._process is None:
            raise LocalLLMServerError("the server has not been started")
        return self._process.pid

    @property
    def log_path(self) -> Path | None:
        return None if self.log_dir is None else self.log_dir / "server.log"

    def _build_command(self) -> list[str]:
        assert self.port is not None  # set by start()
        if self.command is not None:
            return [part.replace("{port}", str(self.port)) for part in self.command]
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(self.model_path)]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        command += ["--n_ctx", str(self.n_ctx), "--n_threads", str(self.n_threads)]
        command += ["--model_alias", self.alias]
        if self.chat_format:
            command += ["--chat_format", self.chat_format]
        return command

    def _failure(self, what: str) -> LocalLLMServerError:
        if self._process is not None:
            # a server that just crashed may not be reaped yet; give its exit status a moment
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=5)
        status = None if self._process is None else self._process.poll()
        if status is not None and status < 0:
            with contextlib.suppress(ValueError):
                what += f" (the process was killed by {signal.Signals(-status).name})"
        elif status is not None:
            what += f" (the process exited with status {status})"
        log = tail(self.log_path) if self.log_path else ""
        self.stop()
        return LocalLLMServerError(
            f"local model server at http://127.0.0.1:{self.port}/v1: {what}.\n"
            f"Last lines of its log:\n{log or '(empty)'}"
        )

    def start(self) -> str:
        """Start the server, wait until it answers, prove one completion; return the base URL."""
        if self.model_path is not None and self.command is None and not self.model_path.is_file():
            raise LocalLLMServerError(f"model file {self.model_path} does not exist")
        if self.port is None:
            self.port = _free_port()
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="advrag-llm-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._log_file = open(self.log_dir / "server.log", "wb")  # noqa: SIM115 - closed in stop()
        self._process = subprocess.Popen(
            self._build_command(),
            stdin=subprocess.DEVNULL,  # not the starter's: under `make -j2` it is not readable
            stdout=self._log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + self.startup_timeout
        while not _models_answer(self.base_url):
            if self._process.poll() is not None:
                raise self._failure("the server exited before it answered")
            if time.monotonic() > deadline:
                raise self._failure(f"no answer within {self.startup_timeout:.0f} s")
            time.sleep(0.5)
        try:
            check_llm_server(self.base_url, model=self.alias, timeout=self.startup_timeout)
        except LocalLLMServerError as exc:
            raise self._failure(f"it answered but could not complete: {exc}") from exc
        if self._process.poll() is not None:
            raise self._failure("the server exited after its first completion")
        logger.info("local model server ready at %s", self.base_url)
        return self.base_url

    def stop(self) -> None:
        """Stop the server (its whole process group) and remove a temporary log folder."""
        process, self._process = self._process, None
        if process is not None:
            stop_process_group(process)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None
        if self._own_log_dir and self.log_dir is not None:
            import shutil

            shutil.rmtree(self.log_dir, ignore_errors=True)
            self.log_dir = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


__all__ = [
    "LocalLLMServer",
    "LocalLLMServerError",
    "check_llm_server",
    "stop_process_group",
    "tail",
]
