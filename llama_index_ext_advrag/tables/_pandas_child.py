"""Child process of the pandas sandbox: run one accepted program on one table, answer in JSON.

Started by :mod:`.pandas_sandbox` as ``python -I <this file>`` in an empty temporary directory
with a minimal environment. It reads one pickled request that its parent wrote to stdin (the
program, the DataFrame, the limits), then, before running the program, closes itself in:

* CPU time (RLIMIT_CPU), address space (RLIMIT_AS, current size plus a headroom), file size 0
  (RLIMIT_FSIZE: no byte can be written to any file) and no core files;
* an audit hook (which cannot be removed) refusing process creation, sockets, ctypes, file
  writes, file reads and directory listings outside the Python installation, rlimit changes,
  new audit hooks, tracing and unpickling;
* the kernel's barrier (Landlock, Linux >= 5.13, see ``_landlock.py``): writes, file creation
  and removal only beneath its working directory, reads only beneath that directory, the Python
  installation and the system's libraries, no TCP bind or connect; where the kernel has it and
  the barrier cannot be applied, the program is not run;
* restricted builtins: only the ones the allowlist lets the program call.

The answer goes to stdout as one JSON object on one line (``ok``, ``text``, ``value``, ``kind``,
``barrier`` or ``error``): data, never a pickle. This file imports only the standard library,
numpy and pandas.

Started as ``python -I -B <this file> --zygote FD`` it is instead the waiting interpreter that
children are forked from (Linux): it loads numpy and pandas once, then waits on the control
socket FD (a ``SOCK_SEQPACKET`` socket its parent holds the other end of). Each message names a
working directory and carries three file descriptors; the zygote forks, and the child becomes
exactly the process above (its own session, those descriptors as stdin/stdout/stderr, every other
descriptor closed, that working directory) and runs :func:`main`. The zygote never reads a
request or runs a program: it only forks, reports each child's pid and exit status, and exits when
its parent closes the socket. So a child holds what a fresh interpreter would (numpy and pandas
loaded), and nothing of any other run.
"""

import ast
import builtins
import contextlib
import importlib.util
import json
import math
import os
import pickle
import resource
import select
import signal
import socket
import sys

MAX_VALUE_ITEMS = 1000
DENIED_EVENT_PREFIXES = (
    "os.",
    "subprocess.",
    "_posixsubprocess",
    "pty.",
    "socket.",
    "ctypes.",
    "shutil.",
    "sqlite3.",
    "urllib.",
    "http.",
    "ftplib.",
    "smtplib.",
    "poplib.",
    "imaplib.",
    "nntplib.",
    "telnetlib.",
    "webbrowser.",
    "resource.",
    "mmap.",
    "fcntl.",
    "signal.",
    "syslog.",
    "glob.",
    "tempfile.",
    "pickle.",
    "code.__new__",
    "function.__new__",
    "sys.addaudithook",
    "sys.settrace",
    "sys.setprofile",
    "builtins.input",
    "builtins.breakpoint",
    "cpython.",
)
LISTING_EVENTS = frozenset({"os.listdir", "os.scandir"})
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
# read (and load libraries) from these too under Landlock: what the dynamic loader and C
# libraries of numpy, pandas and pyarrow open
SYSTEM_READ_ROOTS = (
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/lib",
    "/lib64",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/dev/null",
    "/dev/urandom",
)


def read_roots() -> tuple[str, ...]:
    """Where lazy imports and time-zone data are read from: the Python installation."""
    import numpy
    import pandas

    places = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    for module in (numpy, pandas):
        places.add(os.path.dirname(os.path.dirname(str(module.__file__))))
    places.add("/usr/share/zoneinfo")
    return tuple(os.path.realpath(p).rstrip(os.sep) + os.sep for p in places if p)


def install_audit_hook(roots: tuple[str, ...]) -> None:
    def readable(path: object) -> bool:
        if isinstance(path, bytes):
            path = path.decode(errors="replace")
        if not isinstance(path, str):
            return False  # file descriptors, path-likes we cannot judge
        return (os.path.realpath(path) + os.sep).startswith(roots)

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = args
            writes = any(c in str(mode or "") for c in "wax+") or bool((flags or 0) & WRITE_FLAGS)
            if writes or not readable(path):
                raise PermissionError(f"sandbox: opening {path!r} is not allowed")
            return
        if event in LISTING_EVENTS:
            if not args or not readable(args[0]):
                raise PermissionError(f"sandbox: {event} is not allowed here")
            return
        if event.startswith(DENIED_EVENT_PREFIXES):
            raise PermissionError(f"sandbox: {event} is not allowed")

    sys.addaudithook(hook)


def _load_landlock():  # noqa: ANN202 - the module, loaded by path (no package under -I)
    spec = importlib.util.spec_from_file_location(
        "_advrag_landlock", os.path.join(os.path.dirname(os.path.abspath(__file__)), "_landlock.py")
    )
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


LANDLOCK = _load_landlock()  # loaded once (in the zygote: inherited by every child)


def apply_barrier(roots: tuple[str, ...]) -> str:
    """Close this process in with Landlock (see ``_landlock.py``): ``"landlock ABI n"`` once
    the kernel is seen refusing a read outside (``/``), ``"none"`` without Landlock.

    Raises:
        PermissionError: the kernel has Landlock but the barrier could not be applied.
    """
    try:
        abi = LANDLOCK.restrict_self(os.getcwd(), roots + SYSTEM_READ_ROOTS)
    except OSError as exc:
        raise PermissionError(f"sandbox: the Landlock barrier could not be applied: {exc}") from exc
    if abi <= 0:
        return "none"
    try:  # the barrier holds: listing / is not allowed any more
        probe = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    except PermissionError:
        return f"landlock ABI {abi}"
    os.close(probe)
    raise PermissionError("sandbox: the Landlock barrier was applied but does not hold")


def set_limits(cpu_seconds: int, memory_bytes: int) -> None:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = int(math.ceil(usage.ru_utime + usage.ru_stime)) + cpu_seconds
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write fails with EFBIG instead of killing
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    try:
        with open("/proc/self/statm") as statm:
            current = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        current = 0
    if current:
        limit = current + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def jsonable(value: object, pd: object, np: object) -> object:
    """Plain JSON data for a result, ``None`` where it cannot be said simply."""
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, np.generic):  # type: ignore[attr-defined]
        return jsonable(value.item(), pd, np)
    if value is pd.NaT or value is pd.NA:  # type: ignore[attr-defined]
        return None
    if hasattr(value, "isoformat") and not isinstance(value, type):
        return value.isoformat()
    if isinstance(value, pd.DataFrame):  # type: ignore[attr-defined]
        if value.size > MAX_VALUE_ITEMS:
            return None
        return {
            "columns": [jsonable(c, pd, np) for c in value.columns],
            "index": [jsonable(i, pd, np) for i in value.index],
            "data": [[jsonable(v, pd, np) for v in row] for row in value.itertuples(index=False)],
        }
    if isinstance(value, pd.Series):  # type: ignore[attr-defined]
        if len(value) > MAX_VALUE_ITEMS:
            return None
        return {
            "index": [jsonable(i, pd, np) for i in value.index],
            "values": [jsonable(v, pd, np) for v in value.tolist()],
        }
    if isinstance(value, np.ndarray | pd.Index):  # type: ignore[attr-defined]
        value = value.tolist()
    if isinstance(value, list | tuple | set):
        items = list(value)
        if len(items) > MAX_VALUE_ITEMS:
            return None
        return [jsonable(v, pd, np) for v in items]
    if isinstance(value, dict):
        if len(value) > MAX_VALUE_ITEMS:
            return None
        return {str(k): jsonable(v, pd, np) for k, v in value.items()}
    return None


def run(request: dict, state: dict) -> dict:
    import numpy as np
    import pandas as pd

    frame = request["frame"]
    allowed = request["builtins"]
    namespace = {"df": frame, "pd": pd, "np": np}
    scope = {"__builtins__": {name: getattr(builtins, name) for name in allowed}}
    set_limits(request["cpu_seconds"], request["memory_bytes"])
    roots = read_roots()
    state["barrier"] = apply_barrier(roots)  # before the audit hook, which refuses ctypes
    install_audit_hook(roots)
    body = ast.parse(request["code"]).body
    value = None
    for index, statement in enumerate(body):
        if index == len(body) - 1 and isinstance(statement, ast.Expr):
            expression = ast.Expression(statement.value)
            value = eval(compile(expression, "<generated>", "eval"), scope, namespace)
        else:
            module = ast.Module([statement], type_ignores=[])
            exec(compile(module, "<generated>", "exec"), scope, namespace)
            if isinstance(statement, ast.Assign) and index == len(body) - 1:
                value = namespace[statement.targets[0].id]  # type: ignore[attr-defined]
    with pd.option_context(*request["display"]):
        text = str(value)
    limit = request["max_chars"]
    return {
        "ok": True,
        "kind": type(value).__name__,
        "text": text if len(text) <= limit else text[:limit] + " ...",
        "value": jsonable(value, pd, np),
    }


def main() -> None:
    out = sys.stdout
    sys.stdout = sys.stderr  # only the answer goes to the real stdout
    request = pickle.loads(sys.stdin.buffer.read())  # written by our parent, never by the program
    state: dict = {}
    try:
        answer = run(request, state)
    except BaseException as exc:  # the program's failure is the answer, as data
        answer = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:500]}
    if "barrier" in state:
        answer["barrier"] = state["barrier"]
    try:
        payload = json.dumps(answer, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        failure = {"ok": False, "error": f"unencodable result: {exc}"[:500], **state}
        payload = json.dumps(failure)
    out.write(payload + "\n")
    out.flush()


def _child_of_zygote(fds: list[int], workdir: str) -> None:
    """In the forked child: become a fresh sandbox child, run :func:`main`, never return."""
    status = 1
    try:
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, max(resource.getrlimit(resource.RLIMIT_NOFILE)[0], 256))
        os.chdir(workdir)
        import random

        import numpy

        random.seed()  # fresh entropy, as a fresh interpreter would have, not the zygote's state
        numpy.random.seed()
        main()
        status = 0
    except BaseException as exc:  # noqa: BLE001 - the status says it; nothing may escape a fork
        with contextlib.suppress(BaseException):
            os.write(2, f"sandbox child: {type(exc).__name__}: {exc}\n".encode(errors="replace"))
    finally:
        for stream in (sys.__stdout__, sys.__stderr__):
            with contextlib.suppress(BaseException):
                if stream is not None:
                    stream.flush()
        os._exit(status)


def _send(control: socket.socket, message: dict) -> None:
    try:
        control.send(json.dumps(message).encode("ascii"))
    except OSError:  # the parent is gone: nothing waits for this any more
        os._exit(0)


def _reap(control: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _send(control, {"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})


def zygote(control_fd: int) -> None:
    """Wait for fork requests on ``control_fd`` until the parent closes it (see the docstring)."""
    import numpy  # noqa: F401 - loaded once here, inherited by every child
    import pandas  # noqa: F401

    control = socket.socket(fileno=control_fd)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C in the parent's terminal is its own
    _send(control, {"ready": True, "pid": os.getpid()})
    while True:
        readable, _, _ = select.select([control.fileno(), wake_read], [], [])
        if wake_read in readable:
            with contextlib.suppress(OSError):
                os.read(wake_read, 512)
            _reap(control)
        if control.fileno() not in readable:
            continue
        try:
            data, fds, _, _ = socket.recv_fds(control, 65536, 3)
        except OSError:
            return
        if not data:
            return  # the parent closed the socket (or died): children keep their own limits
        request = None
        try:
            request = json.loads(data)
            ident, workdir = int(request["id"]), str(request["cwd"])
            if len(fds) != 3:
                raise ValueError(f"{len(fds)} descriptors, expected 3")
        except (ValueError, KeyError, TypeError) as exc:
            for fd in fds:
                os.close(fd)
            named = request.get("id") if isinstance(request, dict) else None
            _send(control, {"id": named, "error": f"bad request: {exc}"[:200]})
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            for fd in fds:
                os.close(fd)
            _send(control, {"id": ident, "error": f"fork failed: {exc}"[:200]})
            continue
        if pid == 0:
            _child_of_zygote(fds, workdir)
        for fd in fds:
            os.close(fd)
        _send(control, {"id": ident, "pid": pid})


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--zygote":
        zygote(int(sys.argv[2]))
    else:
        main()
