"""An Arize Phoenix server for the ``phoenix`` tier, from its own environment (``.venv-phoenix``,
made by the Makefile's test-deps step, so Phoenix's many pins stay out of the test environment).

The server listens on 127.0.0.1 on free ports, keeps its SQLite database in its own temporary
working directory (``PHOENIX_WORKING_DIR``), sends no telemetry, and is stopped (its process
group) when the context ends. Every wait is bounded.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
# ADVRAG_PHOENIX_VENV points at another environment holding arize-phoenix.
PHOENIX_VENV = Path(os.environ.get("ADVRAG_PHOENIX_VENV", REPO_ROOT / ".venv-phoenix"))
START_TIMEOUT = 180.0
STOP_GRACE = 15.0


class PhoenixUnavailable(RuntimeError):
    """Phoenix is not installed or did not start (the message says which and why)."""


@dataclass
class PhoenixServer:
    base_url: str
    working_dir: Path
    log_path: Path
    pid: int

    def get_json(self, path: str, timeout: float = 30) -> Any:
        with urllib.request.urlopen(self.base_url + path, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))

    def post_json(self, path: str, body: dict[str, Any], timeout: float = 30) -> Any:
        request = urllib.request.Request(
            self.base_url + path,
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read().decode("utf-8"))

    def spans(self, project: str, limit: int = 1000) -> list[dict[str, Any]]:
        """Every span of ``project`` through Phoenix's REST API (cursor pages)."""
        spans: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = self.get_json(f"/v1/projects/{project}/spans?limit={limit}{cursor}")
            spans.extend(page["data"])
            if not page.get("next_cursor"):
                return spans
            cursor = f"&cursor={page['next_cursor']}"


def phoenix_executable() -> Path:
    executable = PHOENIX_VENV / "bin" / "phoenix"
    if not executable.is_file():
        raise PhoenixUnavailable(
            f"arize-phoenix not installed in {PHOENIX_VENV} (the Makefile's test-deps step makes it; or set "
            "ADVRAG_PHOENIX_VENV to an environment holding arize-phoenix)"
        )
    return executable


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _healthy(base_url: str) -> bool:
    try:
        with urllib.request.urlopen(base_url + "/healthz", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_GRACE)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=STOP_GRACE)


@contextlib.contextmanager
def running_phoenix() -> Iterator[PhoenixServer]:
    """Start ``phoenix serve`` and yield it once ``/healthz`` answers; stop it afterwards."""
    executable = phoenix_executable()
    working_dir = Path(tempfile.mkdtemp(prefix="advrag-phoenix-"))
    log_path = working_dir / "server.log"
    port = free_port()
    env = {
        **os.environ,
        "PHOENIX_WORKING_DIR": str(working_dir),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(free_port()),
        "PHOENIX_TELEMETRY_ENABLED": "false",
    }
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [str(executable), "serve"],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    base_url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _healthy(base_url):
            if process.poll() is not None or time.monotonic() > deadline:
                raise PhoenixUnavailable(
                    f"phoenix serve did not answer {base_url}/healthz within {START_TIMEOUT:.0f} s "
                    f"(exit status {process.poll()}); last lines of its log:\n{tail(log_path)}"
                )
            time.sleep(0.5)
        yield PhoenixServer(base_url, working_dir, log_path, process.pid)
    finally:
        _stop(process)
        shutil.rmtree(working_dir, ignore_errors=True)


def chromium_executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def screenshot(url: str, out: Path, tab: str = "Attributes") -> None:
    """A PNG of ``url`` with the selected span's ``tab`` open, from headless Chromium driven by
    ``phoenix_screenshot.py`` under the Phoenix environment's Python (bounded: 120 s)."""
    chromium = chromium_executable()
    if chromium is None:
        raise PhoenixUnavailable("no chromium on PATH (apt-get install chromium)")
    script = Path(__file__).with_name("phoenix_screenshot.py")
    python = PHOENIX_VENV / "bin" / "python"
    subprocess.run(
        [str(python), str(script), chromium, url, str(out), tab],
        check=True,
        capture_output=True,
        timeout=120,
    )
