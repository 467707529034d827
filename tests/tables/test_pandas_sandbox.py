"""The sandbox on its own: each layer proven with code the allowlist would never accept."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
import time
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
from tables.hostile_corpus import fill, programs

from llama_index_ext_advrag.tables import (
    SandboxLimits,
    UnsafeCodeError,
    arun_pandas_code,
    pandas_sandbox,
    run_pandas_code,
)
from llama_index_ext_advrag.tables.pandas_check import refusal_reason
from llama_index_ext_advrag.tables.pandas_sandbox import (
    MAX_CHILD_OUTPUT_BYTES,
    ZygoteError,
    _arun_unchecked,
    _run_unchecked,
    _Zygote,
    interpret_child,
    stop_pandas_zygote,
)

FAST = SandboxLimits(timeout_seconds=60, cpu_seconds=2, memory_mb=256)
FRESH = FAST.model_copy(update={"prefork": False})  # a fresh interpreter per run
BOTH = pytest.mark.parametrize("limits", [FAST, FRESH], ids=["forked", "fresh"])


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]})


def test_accepted_code_runs_and_returns_data(df: pd.DataFrame) -> None:
    result = run_pandas_code("df.groupby('Name')['Age'].sum().nlargest(2)", df, FAST)
    assert result.ok and result.kind == "Series"
    assert result.value == {"index": ["Ann", "Cy"], "values": [70, 65]}
    assert "Ann" in result.text and result.files_left == 0


def test_refused_code_starts_nothing(df: pd.DataFrame, tmp_path: Path) -> None:
    with pytest.raises(UnsafeCodeError):
        run_pandas_code(f"df.to_csv('{tmp_path}/x.csv')", df, FAST)
    assert not list(tmp_path.iterdir())


def _run(mode: str, code: str, df: pd.DataFrame, limits: SandboxLimits | None = None):
    """``run_pandas_code`` (sync) or ``arun_pandas_code`` awaited in a fresh loop (async)."""
    if mode == "sync":
        return run_pandas_code(code, df, limits)
    return asyncio.run(arun_pandas_code(code, df, limits))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_hostile_program_the_allowlist_refuses_starts_nothing(
    mode: str, df: pd.DataFrame, tmp_path: Path
) -> None:
    """Each public entry point checks the code itself (the engine checks it too, so a runner
    that skipped the check would go unnoticed through the engine)."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    refused = 0
    for _, template in programs():
        code = fill(template, str(tmp_path), str(secret))
        reason = refusal_reason(code)
        if reason is None:
            continue
        with pytest.raises(UnsafeCodeError) as raised:
            _run(mode, code, df, FAST)
        assert raised.value.reason == reason, code
        refused += 1
    assert refused >= 200
    assert sorted(os.listdir(tmp_path)) == ["secret.txt"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_allocation_between_the_memory_limit_and_host_ram_is_refused(
    mode: str, df: pd.DataFrame
) -> None:
    """Three times the default limit (1.5 GB): refused by the child's RLIMIT_AS with a
    MemoryError, where a host with a few GB free would have served it. Allowed code, so the
    sandbox alone stops it; with the limit in place nothing is allocated."""
    limits = SandboxLimits(timeout_seconds=60, cpu_seconds=5)
    size = 3 * limits.memory_mb * 2**20
    result = _run(mode, f"s = 'a'\nx = s * {size}\nlen(x)", df, limits)
    assert not result.ok and result.limit == "memory", result
    assert (result.error or "").startswith("MemoryError")


def test_an_allocation_under_the_memory_limit_is_served(df: pd.DataFrame) -> None:
    limits = SandboxLimits(timeout_seconds=60, cpu_seconds=5)
    size = limits.memory_mb * 2**20 // 4
    result = run_pandas_code(f"s = 'a'\nx = s * {size}\nlen(x)", df, limits)
    assert result.ok and result.value == size


def test_the_callers_frame_is_not_modified(df: pd.DataFrame) -> None:
    before = df.copy()
    result = _run_unchecked("df['Age'] = 0\ndf['Age'].sum()", df, FAST)
    assert result.ok and result.value == 0
    pd.testing.assert_frame_equal(df, before)


@BOTH
def test_no_state_survives_between_runs(df: pd.DataFrame, limits: SandboxLimits) -> None:
    assert _run_unchecked("pd.set_option('display.max_rows', 1)", df, limits).ok
    result = _run_unchecked("pd.get_option('display.max_rows')", df, limits)
    assert result.value == 60  # pandas' default in a fresh process, not 1
    assert pd.get_option("display.max_rows") == 60  # the host's untouched


@pytest.mark.parametrize(
    "template",
    [
        "df.to_csv('{d}/a.csv')",
        "df.to_pickle('{d}/a.pkl')",
        "pd.DataFrame({{'a': [1]}}).to_parquet('{d}/a.parquet')",
        "np.save('{d}/a.npy', df['Age'].values)",
        "pd.io.common.os.system('touch {d}/b')",
        "pd.io.common.os.mkdir('{d}/c')",
    ],
)
def test_writes_are_stopped_by_the_sandbox_alone(
    template: str, df: pd.DataFrame, tmp_path: Path
) -> None:
    result = _run_unchecked(template.format(d=tmp_path), df, FAST)
    assert not result.ok and "sandbox" in (result.error or "")
    assert not list(tmp_path.iterdir())


@BOTH
def test_relative_writes_land_nowhere(
    df: pd.DataFrame, tmp_path, monkeypatch, limits: SandboxLimits
) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run_unchecked("df.to_csv('relative.csv')", df, limits)
    assert not result.ok and not list(tmp_path.iterdir()) and result.files_left == 0


def test_reads_outside_the_installation_are_stopped(df: pd.DataFrame, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    for code in (f"pd.read_csv('{secret}')", f"pd.io.common.os.listdir('{tmp_path}')"):
        result = _run_unchecked(code, df, FAST)
        assert not result.ok and "TOPSECRET" not in str(result)
        assert "sandbox" in (result.error or "")


def test_builtins_are_restricted(df: pd.DataFrame) -> None:
    result = _run_unchecked("open('/etc/hostname').read()", df, FAST)
    assert not result.ok and "NameError" in (result.error or "")


@BOTH
def test_memory_bomb_is_a_memory_error(df: pd.DataFrame, limits: SandboxLimits) -> None:
    result = _run_unchecked("np.ones((100000, 100000))", df, limits)
    assert not result.ok and result.limit == "memory"


@BOTH
def test_cpu_bomb_is_killed(df: pd.DataFrame, limits: SandboxLimits) -> None:
    result = _run_unchecked("while True:\n    pass", df, limits)
    assert not result.ok and result.limit == "cpu"


def path_of(limits: SandboxLimits) -> str:
    return "forked" if limits.prefork else "fresh"


@pytest.fixture
def killed(monkeypatch: pytest.MonkeyPatch):
    """The pids whose process group the sandbox killed; each is checked gone afterwards (and
    killed by the test itself if not, so a failing run leaves no orphan)."""
    pids: list[int] = []
    kill = pandas_sandbox._kill_group

    def spy(pid: int) -> None:
        pids.append(pid)
        kill(pid)

    monkeypatch.setattr(pandas_sandbox, "_kill_group", spy)
    yield pids
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def assert_gone(pids: list[int]) -> None:
    """The killed child and its whole process group are gone (reaped, not orphaned)."""
    assert len(pids) == 1, pids
    with pytest.raises(ProcessLookupError):
        os.kill(pids[0], 0)
    with pytest.raises(ProcessLookupError):
        os.killpg(pids[0], 0)


SLEEPER = "pd._libs.parsers.time.sleep(600)"
DEADLINE = 4.0


def within_the_deadline(elapsed: float) -> bool:
    """Killed at the deadline, not before, and well before twice it (a doubled deadline fails)."""
    return DEADLINE <= elapsed < 1.6 * DEADLINE


@BOTH
def test_sleeping_program_is_killed_at_the_wall_clock_limit(
    df: pd.DataFrame, limits: SandboxLimits, killed: list[int]
) -> None:
    assert _run_unchecked("len(df)", df, limits).ok  # the waiting interpreter is up
    limits = limits.model_copy(update={"timeout_seconds": DEADLINE, "cpu_seconds": 2})
    start = time.monotonic()
    result = _run_unchecked(SLEEPER, df, limits)
    elapsed = time.monotonic() - start
    assert not result.ok and result.limit == "timeout" and result.path == path_of(limits)
    assert result.error == "the program exceeded the 4s wall-clock limit"
    assert within_the_deadline(elapsed), elapsed
    assert_gone(killed)


@BOTH
async def test_async_gives_the_same_result(df: pd.DataFrame, limits: SandboxLimits) -> None:
    code = "df[df['Age'] > 60]['Name'].tolist()"
    sync = _run_unchecked(code, df, limits)
    asynchronous = await _arun_unchecked(code, df, limits)
    assert sync == asynchronous and sync.value == ["Ann", "Cy"]
    assert asynchronous.path == path_of(limits)  # the async path uses the waiting interpreter


@BOTH
async def test_async_wall_clock_limit(
    df: pd.DataFrame, limits: SandboxLimits, killed: list[int]
) -> None:
    assert (await _arun_unchecked("len(df)", df, limits)).ok
    limits = limits.model_copy(update={"timeout_seconds": DEADLINE, "cpu_seconds": 2})
    start = time.monotonic()
    result = await _arun_unchecked(SLEEPER, df, limits)
    elapsed = time.monotonic() - start
    assert result.limit == "timeout" and result.path == path_of(limits)
    assert within_the_deadline(elapsed), elapsed
    assert_gone(killed)


async def test_a_cancelled_async_run_kills_its_child(df: pd.DataFrame, killed: list[int]) -> None:
    task = asyncio.ensure_future(_arun_unchecked(SLEEPER, df, FRESH))
    await asyncio.sleep(2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert_gone(killed)


@BOTH
def test_the_child_environment_holds_no_secrets(
    df: pd.DataFrame, monkeypatch, limits: SandboxLimits
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    stop_pandas_zygote()  # the next one starts with the key in this process's environment
    result = _run_unchecked("str(pd.io.common.os.environ)", df, limits)
    assert result.ok and "LANG" in result.text
    assert "sk-should-not-leak" not in str(result) and "OPENAI_API_KEY" not in result.text


# --- interpreting the child (pure) -------------------------------------------------------


def test_interpret_child_outcomes() -> None:
    limits = SandboxLimits()
    ok = interpret_child(
        b'{"ok": true, "text": "2", "value": 2, "kind": "int"}\n', b"", 0, False, 0, limits
    )
    assert ok.ok and ok.value == 2 and ok.text == "2"
    assert interpret_child(b"", b"", None, True, 0, limits).limit == "timeout"
    assert interpret_child(b"", b"", -24, False, 0, limits).limit == "cpu"  # SIGXCPU
    assert interpret_child(b"", b"", -9, False, 0, limits).limit == "memory"
    broken = interpret_child(b"not json", b"", 1, False, 0, limits)
    assert not broken.ok and "no answer" in (broken.error or "")
    memory = interpret_child(b'{"ok": false, "error": "MemoryError: x"}', b"", 0, False, 0, limits)
    assert memory.limit == "memory"
    left = interpret_child(b'{"ok": true, "text": "", "value": null}', b"", 0, False, 2, limits)
    assert left.files_left == 2 and left.to_dict()["files_left"] == 2


@pytest.mark.parametrize(
    ("field", "value"),
    [("timeout_seconds", 0.5), ("timeout_seconds", 601), ("cpu_seconds", 0), ("memory_mb", 16),
     ("max_chars", 10)],
)  # fmt: skip
def test_limits_out_of_range_name_the_value(field: str, value: float) -> None:
    with pytest.raises(ValueError, match=field):
        SandboxLimits(**{field: value})


def test_limits_at_the_bounds_are_accepted() -> None:
    SandboxLimits(timeout_seconds=1, cpu_seconds=1, memory_mb=32, max_chars=100)
    SandboxLimits(timeout_seconds=600, cpu_seconds=600, memory_mb=65_536)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_long_answers_are_cut(mode: str, df: pd.DataFrame) -> None:
    limits = FAST.model_copy(update={"max_chars": 100})
    separator = "-" * 60
    full = separator.join(["Ann", "Bo", "Cy"])  # 128 characters
    result = _run(mode, f"df['Name'].str.cat(sep='{separator}')", df, limits)
    assert result.ok and len(full) > 100
    assert result.text == full[:100] + " ..." and result.value == full  # the value is whole


def test_sandbox_temp_dirs_are_removed(df: pd.DataFrame, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert run_pandas_code("len(df)", df, FAST).value == 3
    assert os.listdir(tmp_path) == []


# --- the zygote: children forked from a waiting interpreter ------------------------------

FD_PROGRAM = (
    "paths = pd.Series(np.arange(256)).astype(str).radd('/proc/self/fd/')\n"
    "paths[paths.map(pd.io.common.os.path.exists)].tolist()"
)


@BOTH
def test_a_child_holds_only_its_three_descriptors(df: pd.DataFrame, limits: SandboxLimits) -> None:
    """The zygote's control socket and wake-up pipe are closed in every forked child."""
    result = _run_unchecked(FD_PROGRAM, df, limits)
    assert result.value == [f"/proc/self/fd/{fd}" for fd in (0, 1, 2)], result


def test_forked_children_come_from_the_zygote_and_fresh_ones_from_here(df: pd.DataFrame) -> None:
    forked = _run_unchecked("pd.io.common.os.getppid()", df, FAST).value
    zygote = pandas_sandbox._ZYGOTE
    assert zygote is not None and forked == zygote.process.pid != os.getpid()
    assert _run_unchecked("pd.io.common.os.getppid()", df, FRESH).value == os.getpid()


def test_forked_children_draw_fresh_random_numbers(df: pd.DataFrame) -> None:
    """Not the zygote's random state, copied into every child: a fresh interpreter's entropy."""
    draws = {_run_unchecked("np.random.randint(2**62)", df, FAST).value for _ in range(3)}
    assert len(draws) == 3, draws


def test_a_dead_zygote_is_replaced(df: pd.DataFrame, caplog) -> None:
    assert _run_unchecked("len(df)", df, FAST).value == 3
    first = pandas_sandbox._ZYGOTE
    assert first is not None
    first.process.kill()
    first.process.wait(timeout=10)
    with caplog.at_level("WARNING", logger=pandas_sandbox.__name__):
        assert _run_unchecked("len(df)", df, FAST).value == 3
    second = pandas_sandbox._ZYGOTE
    assert second is not None and second.process.pid != first.process.pid
    assert any("waiting interpreter" in r.getMessage() for r in caplog.records)


def test_a_zygote_that_cannot_start_is_named_and_runs_start_afresh(
    df: pd.DataFrame, monkeypatch, caplog
) -> None:
    broken = [sys.executable, "-I", "-c", "import sys; sys.exit('no pandas here')"]
    monkeypatch.setattr(pandas_sandbox, "_command", lambda: broken)
    with pytest.raises(ZygoteError, match="did not start.*no pandas here"):
        _Zygote()
    monkeypatch.undo()
    stop_pandas_zygote()

    def refuse() -> None:
        raise ZygoteError("refused for the test")

    monkeypatch.setattr(pandas_sandbox, "_Zygote", refuse)
    monkeypatch.setattr(pandas_sandbox, "_ZYGOTE_UNAVAILABLE", None)
    with caplog.at_level("WARNING", logger=pandas_sandbox.__name__):
        result = _run_unchecked("pd.io.common.os.getppid()", df, FAST)
    assert result.value == os.getpid()  # a fresh interpreter, a child of this process
    assert any("refused for the test" in r.getMessage() for r in caplog.records)


@BOTH
def test_a_child_that_closes_its_stdout_is_still_bounded(
    df: pd.DataFrame, limits: SandboxLimits, killed: list[int]
) -> None:
    assert _run_unchecked("len(df)", df, limits).ok
    limits = limits.model_copy(update={"timeout_seconds": DEADLINE})
    code = "pd.io.common.os.close(1)\n" + SLEEPER
    start = time.monotonic()
    result = _run_unchecked(code, df, limits)
    elapsed = time.monotonic() - start
    assert not result.ok and result.limit == "timeout", result
    assert within_the_deadline(elapsed), elapsed
    assert_gone(killed)


FLOOD_MB = 200
FLOOD = f"for i in np.arange({FLOOD_MB}):\n    pd.io.common.os.write(1, b'x' * 1_000_000)\n1"
# what the parent may hold for a child's output: the cap, one read, stderr's tail, and the
# request and bookkeeping of one run (well under the flood's 200 MB)
OUTPUT_BOUND = MAX_CHILD_OUTPUT_BYTES + 2_000_000


def _peak_while(run) -> tuple[object, int]:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = run()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@BOTH
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_flood_of_output_costs_the_parent_at_most_the_cap(
    mode: str, df: pd.DataFrame, limits: SandboxLimits
) -> None:
    """200 MB on stdout: the parent reads it all but keeps at most the cap (every path: forked
    and fresh, sync and async); the error names the cap, not a missing answer."""
    assert _run_unchecked("len(df)", df, limits).ok  # the waiting interpreter is up
    if mode == "sync":
        result, peak = _peak_while(lambda: _run_unchecked(FLOOD, df, limits))
    else:
        result, peak = _peak_while(lambda: asyncio.run(_arun_unchecked(FLOOD, df, limits)))
    assert isinstance(result, pandas_sandbox.SandboxResult)
    assert not result.ok and result.limit == "output", result
    assert "4,000,000 bytes" in (result.error or "") and result.path == path_of(limits)
    assert peak < OUTPUT_BOUND, f"the parent held {peak:,} bytes"


def test_an_answer_under_the_cap_after_other_output_is_read(df: pd.DataFrame) -> None:
    """Output before the answer line (C-level writes to fd 1) does not hide the answer."""
    code = "pd.io.common.os.write(1, b'noise\\n' * 1000)\nlen(df)"
    result = _run_unchecked(code, df, FAST)
    assert result.ok and result.value == 3, result


def test_a_frame_larger_than_a_pipe_buffer_reaches_the_child() -> None:
    """A 32 MB pickle is written in pieces as the child reads it (non-blocking writes)."""
    import numpy as np

    big = pd.DataFrame({"a": np.arange(2_000_000), "b": np.ones(2_000_000)})
    result = run_pandas_code("df['b'].sum()", big, FAST)
    assert result.ok and result.value == 2_000_000, result


@pytest.mark.parametrize(
    "code",
    [
        "pd.io.common.os.kill(pd.io.common.os.getppid(), 9)",
        "pd.io.common.os.killpg(pd.io.common.os.getpgid(pd.io.common.os.getppid()), 9)",
        "pd.io.common.os.fork()",
        "pd.io.common.os.open(f'/proc/{pd.io.common.os.getppid()}/environ', 0)",
        "pd.read_csv(f'/proc/{pd.io.common.os.getppid()}/cmdline')",
    ],
)
def test_a_forked_child_cannot_touch_the_zygote(code: str, df: pd.DataFrame) -> None:
    """Signals, forks and /proc reads aimed at the waiting interpreter are refused by the
    child's audit hook; the same zygote then serves the next run."""
    assert _run_unchecked("len(df)", df, FAST).ok
    zygote = pandas_sandbox._ZYGOTE
    assert zygote is not None
    result = _run_unchecked(code, df, FAST)
    assert not result.ok and "sandbox" in (result.error or ""), result
    assert zygote.process.poll() is None and pandas_sandbox._ZYGOTE is zygote
    assert _run_unchecked("len(df)", df, FAST).value == 3


@pytest.mark.parametrize("separator", ["\u0085", "\u2028", "\u2029", "\r", "\x0b", "\x1c"])
def test_an_answer_holding_a_unicode_line_break_is_one_line(separator: str) -> None:
    """Only a ``\\n`` byte ends the child's answer; str.splitlines' other breaks are text."""
    text = f"Kettle{separator}steel"
    line = json.dumps(
        {"ok": True, "text": text, "value": [text], "kind": "list"}, ensure_ascii=False
    )
    stdout = f"noise\n{line}\n".encode()
    result = interpret_child(stdout, b"", 0, False, 0, SandboxLimits(), path="fresh")
    assert result.ok and result.value == [text] and result.text == text and result.path == "fresh"


def test_an_output_over_the_cap_names_the_cap() -> None:
    stdout = b'{"ok": true, "text": "x", "value": 1}\n'
    result = interpret_child(stdout, b"", 0, False, 0, SandboxLimits(), truncated=True)
    assert not result.ok and result.limit == "output"
    assert "cap of 4,000,000 bytes (MAX_CHILD_OUTPUT_BYTES)" in (result.error or "")


def test_a_stopped_zygote_is_replaced_without_waiting(df: pd.DataFrame, caplog) -> None:
    """SIGSTOP: the next run sees it stopped, kills it and forks from a new one at once (not
    after the fork timeout, then a fresh interpreter, question after question)."""
    assert _run_unchecked("len(df)", df, FAST).path == "forked"
    first = pandas_sandbox._ZYGOTE
    assert first is not None
    os.kill(first.process.pid, signal.SIGSTOP)
    try:
        for _ in range(100):  # the kernel stops it as the signal is delivered
            if first.stopped():
                break
            time.sleep(0.02)
        start = time.monotonic()
        with caplog.at_level("WARNING", logger=pandas_sandbox.__name__):
            result = _run_unchecked("len(df)", df, FAST)
        elapsed = time.monotonic() - start
    finally:
        with contextlib.suppress(OSError):
            os.kill(first.process.pid, signal.SIGCONT)
    assert result.value == 3 and result.path == "forked", result
    second = pandas_sandbox._ZYGOTE
    assert second is not None and second is not first
    assert first.process.poll() is not None  # killed, not left stopped
    assert elapsed < pandas_sandbox.ZYGOTE_SPAWN_SECONDS, elapsed
    assert any("is stopped" in r.getMessage() for r in caplog.records)


def test_an_unresponsive_zygote_costs_one_short_wait_then_is_replaced(
    df: pd.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A zygote that stops answering without looking stopped: that run waits the fork timeout
    and starts a fresh interpreter; the next run forks from a new zygote."""
    assert _run_unchecked("len(df)", df, FAST).path == "forked"
    first = pandas_sandbox._ZYGOTE
    assert first is not None
    monkeypatch.setattr(pandas_sandbox, "ZYGOTE_SPAWN_SECONDS", 1.0)
    monkeypatch.setattr(type(first), "stopped", lambda self: False)
    os.kill(first.process.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        waited = _run_unchecked("len(df)", df, FAST)
        elapsed = time.monotonic() - start
        assert waited.value == 3 and waited.path == "fresh" and elapsed < 15, (waited, elapsed)
        assert not first.alive
        again = _run_unchecked("len(df)", df, FAST)
    finally:
        with contextlib.suppress(OSError):
            os.kill(first.process.pid, signal.SIGCONT)
    assert again.value == 3 and again.path == "forked"
    assert pandas_sandbox._ZYGOTE is not first and first.process.poll() is not None
