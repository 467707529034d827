"""The kernel's barrier (Landlock) of the pandas sandbox, with the allowlist off.

Every program here runs through the private ``_run_unchecked`` / ``_arun_unchecked`` (the
allowlist never sees it): the hostile corpus and writers and readers the audit hook cannot see
(pyarrow and numpy opening files in C, ``os.mkfifo``/``os.mknod`` which raise no audit event,
ctypes, mmap). None may create or change a file outside the child's working directory (every
file under the test's folder is hashed before and after) or bring back the secret.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from tables.hostile_corpus import c_level_programs, fill, fill_paths, programs

from llama_index_ext_advrag.tables import _landlock, pandas_sandbox
from llama_index_ext_advrag.tables.pandas_sandbox import (
    SandboxLimits,
    SandboxResult,
    _arun_unchecked,
    _run_unchecked,
    sandbox_barrier,
)

FORKED = SandboxLimits(timeout_seconds=30, cpu_seconds=2, memory_mb=256)
FRESH = FORKED.model_copy(update={"prefork": False})
BARRIER = sandbox_barrier()
needs_landlock = pytest.mark.skipif(
    BARRIER == "none",
    reason="this kernel has no Landlock (Linux >= 5.13, enabled at boot): no barrier to test",
)
HAS_PYARROW = importlib.util.find_spec("pyarrow") is not None


@dataclass
class Arena:
    root: Path
    paths: dict[str, str]
    token: str

    def snapshot(self) -> dict[str, str]:
        """Every entry under the root: a file's sha256, or its kind."""
        seen = {}
        for folder, dirs, files in os.walk(self.root):
            for name in dirs + files:
                path = Path(folder) / name
                mode = path.lstat().st_mode
                if stat.S_ISREG(mode):
                    seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
                else:
                    seen[str(path)] = stat.filemode(mode)
        return seen


@pytest.fixture
def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Arena:
    token = "SECRET-" + os.urandom(8).hex()
    for folder in ("sentinel", "vault", "victims", "cwd"):
        (tmp_path / folder).mkdir()
    secret = tmp_path / "vault" / "secret.csv"
    secret.write_text(f"{token},x\n{token},y\n")
    victim = tmp_path / "victims" / "victim.bin"
    victim.write_bytes(os.urandom(1500))
    paths = {"S": str(tmp_path / "sentinel"), "F": str(secret), "V": str(victim)}
    paths["P"] = str(tmp_path / "vault" / "secret.parquet")
    paths["Q"] = str(tmp_path / "vault" / "secret.feather")
    if HAS_PYARROW:
        pd.DataFrame({"secret": [token]}).to_parquet(paths["P"])
        pd.DataFrame({"secret": [token]}).to_feather(paths["Q"])
    monkeypatch.chdir(tmp_path / "cwd")
    return Arena(tmp_path, paths, token)


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]})


def check(arena: Arena, before: dict[str, str], code: str, result: SandboxResult) -> list[str]:
    """What went wrong with one run: a file changed outside, the secret came back."""
    problems = []
    after = arena.snapshot()
    if after != before:
        changed = sorted(set(after.items()) ^ set(before.items()))
        problems.append(f"{code!r} changed files outside: {changed}")
    if arena.token in repr(result):
        problems.append(f"{code!r} read the secret")
    if result.files_left:
        problems.append(f"{code!r} left {result.files_left} entries in its working directory")
    return problems


def run(mode: str, code: str, df: pd.DataFrame, limits: SandboxLimits) -> SandboxResult:
    if mode == "sync":
        return _run_unchecked(code, df, limits)
    return asyncio.run(_arun_unchecked(code, df, limits))


PATHS = [("sync", FORKED), ("sync", FRESH), ("async", FORKED), ("async", FRESH)]
PATH_IDS = ["sync-forked", "sync-fresh", "async-forked", "async-fresh"]
MKFIFO = "pd.io.common.os.mkfifo('{S}/fifo')"


@needs_landlock
@pytest.mark.parametrize(("mode", "limits"), PATHS, ids=PATH_IDS)
def test_the_barrier_is_on_in_every_child(
    mode: str, limits: SandboxLimits, arena: Arena, df: pd.DataFrame
) -> None:
    """``os.mkfifo`` raises no audit event and writes no byte (RLIMIT_FSIZE does not apply):
    only the kernel refuses it outside, and allows it in the working directory."""
    before = arena.snapshot()
    result = run(mode, fill_paths(MKFIFO, **arena.paths), df, limits)
    assert not result.ok and result.error == "PermissionError: [Errno 13] Permission denied"
    assert result.barrier == BARRIER and result.path == ("forked" if limits.prefork else "fresh")
    assert check(arena, before, MKFIFO, result) == []
    inside = run(
        mode, "pd.io.common.os.mkfifo('here')\npd.io.common.os.path.exists('here')", df, limits
    )
    assert inside.value is True and inside.barrier == BARRIER and inside.files_left == 1


@pytest.mark.parametrize(("mode", "limits"), PATHS[:2], ids=PATH_IDS[:2])
@pytest.mark.parametrize("kind", ["pyarrow", "numpy", "os and ctypes"])
@needs_landlock
def test_writers_and_readers_below_the_audit_hook_change_nothing_outside(
    kind: str, mode: str, limits: SandboxLimits, arena: Arena, df: pd.DataFrame
) -> None:
    if kind == "pyarrow" and not HAS_PYARROW:
        pytest.skip("pyarrow is not installed: its C writers and readers cannot be tried")
    problems, refused = [], 0
    for _, template in (p for p in c_level_programs() if p[0] == kind):
        code = fill_paths(template, **arena.paths)
        before = arena.snapshot()
        result = run(mode, code, df, limits)
        problems += check(arena, before, code, result)
        refused += not result.ok
        # the barrier the child reports; none when it died of a signal (pyarrow aborts on a
        # refused write) before it could answer
        assert result.barrier == BARRIER or result.limit == "signal", (code, result)
    assert problems == []
    assert refused == sum(1 for p in c_level_programs() if p[0] == kind)  # each one refused


@needs_landlock
@pytest.mark.timeout(900)
def test_the_hostile_corpus_with_the_allowlist_off_changes_nothing_outside(
    arena: Arena, df: pd.DataFrame
) -> None:
    problems, barriers = [], set()
    corpus = programs()
    for _, template in corpus:
        code = fill(template, arena.paths["S"], arena.paths["F"])
        before = arena.snapshot()
        result = _run_unchecked(code, df, FORKED)
        problems += check(arena, before, code, result)
        barriers.add(result.barrier)
    assert problems == [] and len(corpus) == 252
    assert barriers <= {BARRIER, ""}  # "" only where the child gave no answer (a limit)


def test_without_landlock_one_warning_at_start(
    df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_landlock, "abi_version", lambda: 0)
    monkeypatch.setattr(pandas_sandbox, "_BARRIER_CHECKED", False)
    assert sandbox_barrier() == "none"
    with caplog.at_level(logging.WARNING, logger=pandas_sandbox.__name__):
        for _ in range(2):
            assert _run_unchecked("len(df)", df, FORKED).value == 3
    warnings = [r.getMessage() for r in caplog.records if "Landlock" in r.getMessage()]
    assert len(warnings) == 1 and "without the kernel's write barrier" in warnings[0]


def test_every_right_of_each_abi_is_handled() -> None:
    assert _landlock.fs_rights(1) == (1 << 13) - 1
    assert _landlock.fs_rights(2) == (1 << 14) - 1
    assert _landlock.fs_rights(3) == _landlock.fs_rights(4) == (1 << 15) - 1
    assert _landlock.fs_rights(5) == _landlock.fs_rights(7) == (1 << 16) - 1


@needs_landlock
def test_the_kernel_reports_an_abi() -> None:
    assert _landlock.abi_version() >= 1 and f"landlock ABI {_landlock.abi_version()}" == BARRIER


RULES_PROBE = """
import json, os, socket, sys
sys.path.insert(0, sys.argv[1])
from llama_index_ext_advrag.tables import _landlock
work, readable, other = sys.argv[2:5]
listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen()
abi = _landlock.restrict_self(work, (readable,) + tuple(sys.argv[5:]))
def attempt(action):
    try:
        action()
        return "ok"
    except PermissionError:
        return "denied"
print(json.dumps({
    "abi": abi,
    "write in work": attempt(lambda: open(os.path.join(work, "w"), "w").write("x")),
    "fifo in work": attempt(lambda: os.mkfifo(os.path.join(work, "f"))),
    "read readable": attempt(lambda: open(os.path.join(readable, "r.txt")).read()),
    "write readable": attempt(lambda: open(os.path.join(readable, "new"), "w")),
    "append readable": attempt(lambda: open(os.path.join(readable, "r.txt"), "a")),
    "fifo readable": attempt(lambda: os.mkfifo(os.path.join(readable, "f"))),
    "remove readable": attempt(lambda: os.remove(os.path.join(readable, "r.txt"))),
    "read other": attempt(lambda: open(os.path.join(other, "s.txt")).read()),
    "list root": attempt(lambda: os.listdir("/")),
    "tcp connect": attempt(lambda: socket.create_connection(listener.getsockname(), timeout=5)),
    "tcp bind": attempt(lambda: socket.socket().bind(("127.0.0.1", 0))),
}))
"""


@needs_landlock
def test_the_rules_allow_writes_only_in_the_work_folder_and_reads_only_in_the_roots(
    tmp_path: Path,
) -> None:
    """``restrict_self`` on its own, in a throwaway interpreter (a restriction is for life)."""
    import json
    import subprocess
    import sys
    import sysconfig

    work, readable, other = (tmp_path / name for name in ("work", "readable", "other"))
    for folder in (work, readable, other):
        folder.mkdir()
    (readable / "r.txt").write_text("r")
    (other / "s.txt").write_text("s")
    package_root = str(Path(pandas_sandbox.__file__).parents[2])
    python_roots = {sys.prefix, sys.base_prefix, sysconfig.get_paths()["purelib"]}
    command = [sys.executable, "-I", "-c", RULES_PROBE, package_root, str(work), str(readable)]
    command += [str(other), package_root, *sorted(python_roots), "/usr/lib", "/lib", "/lib64"]
    outcome = json.loads(subprocess.run(command, capture_output=True, check=True).stdout)
    assert outcome.pop("abi") >= 1
    assert outcome == {
        "write in work": "ok",
        "fifo in work": "ok",
        "read readable": "ok",
        "write readable": "denied",
        "append readable": "denied",
        "fifo readable": "denied",
        "remove readable": "denied",
        "read other": "denied",
        "list root": "denied",
        "tcp connect": "denied" if _landlock.abi_version() >= 4 else "ok",
        "tcp bind": "denied" if _landlock.abi_version() >= 4 else "ok",
    }
    assert sorted(os.listdir(readable)) == ["r.txt"] and (readable / "r.txt").read_text() == "r"
