"""The sandbox on its own: each layer proven with code the allowlist would never accept."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pandas as pd
import pytest
from tables.hostile_corpus import fill, programs

from llama_index_ext_advrag.tables import (
    SandboxLimits,
    UnsafeCodeError,
    arun_pandas_code,
    run_pandas_code,
)
from llama_index_ext_advrag.tables.pandas_check import refusal_reason
from llama_index_ext_advrag.tables.pandas_sandbox import (
    _arun_unchecked,
    _run_unchecked,
    interpret_child,
)

FAST = SandboxLimits(timeout_seconds=60, cpu_seconds=2, memory_mb=256)


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


def test_no_state_survives_between_runs(df: pd.DataFrame) -> None:
    assert _run_unchecked("pd.set_option('display.max_rows', 1)", df, FAST).ok
    result = _run_unchecked("pd.get_option('display.max_rows')", df, FAST)
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


def test_relative_writes_land_nowhere(df: pd.DataFrame, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = _run_unchecked("df.to_csv('relative.csv')", df, FAST)
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


def test_memory_bomb_is_a_memory_error(df: pd.DataFrame) -> None:
    result = _run_unchecked("np.ones((100000, 100000))", df, FAST)
    assert not result.ok and result.limit == "memory"


def test_cpu_bomb_is_killed(df: pd.DataFrame) -> None:
    result = _run_unchecked("while True:\n    pass", df, FAST)
    assert not result.ok and result.limit == "cpu"


def test_sleeping_program_is_killed_at_the_wall_clock_limit(df: pd.DataFrame) -> None:
    limits = SandboxLimits(timeout_seconds=8, cpu_seconds=5, memory_mb=256)
    result = _run_unchecked("pd._libs.parsers.time.sleep(600)", df, limits)
    assert not result.ok and result.limit == "timeout"


async def test_async_gives_the_same_result(df: pd.DataFrame) -> None:
    code = "df[df['Age'] > 60]['Name'].tolist()"
    sync = _run_unchecked(code, df, FAST)
    asynchronous = await _arun_unchecked(code, df, FAST)
    assert sync == asynchronous and sync.value == ["Ann", "Cy"]


async def test_async_wall_clock_limit(df: pd.DataFrame) -> None:
    limits = SandboxLimits(timeout_seconds=8, cpu_seconds=5, memory_mb=256)
    result = await _arun_unchecked("pd._libs.parsers.time.sleep(600)", df, limits)
    assert result.limit == "timeout"


def test_the_child_environment_holds_no_secrets(df: pd.DataFrame, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    result = _run_unchecked("str(pd.io.common.os.environ)", df, FAST)
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
    assert left.files_left == 2 and left.as_record()["files_left"] == 2


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


def test_long_answers_are_cut(df: pd.DataFrame) -> None:
    limits = SandboxLimits(timeout_seconds=60, max_chars=100)
    result = run_pandas_code(
        "df['Name'].str.cat(sep='-----------------------------------')", df, limits
    )
    assert result.ok and len(result.text) <= 104


def test_sandbox_temp_dirs_are_removed(df: pd.DataFrame, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert run_pandas_code("len(df)", df, FAST).value == 3
    assert os.listdir(tmp_path) == []
