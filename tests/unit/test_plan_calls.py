"""The one sync/async pattern and the one time limit: a plan of ``Call`` requests driven sync and
async gives the same result; an I/O error is thrown into the plan where it yielded; the bound is
applied (the default ``StepTimeoutError`` or the ``TimeoutError`` of ``plain_timeout``), a call
may be put in a thread of its own without a bound, and a cancellation is re-raised, never turned
into a timeout or a result."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Generator
from typing import Any

import pytest

from llama_index_ext_advrag.plan import (
    Call,
    StepTimeoutError,
    adrive,
    arun_call,
    arun_within,
    drive,
    plain_timeout,
    run_call,
    run_within,
)

BOUND = 0.1
HANG = 5.0  # never reached: a hung call is released (sync) or cancelled (async) at teardown


@pytest.fixture
def release() -> Generator[threading.Event, None, None]:
    event = threading.Event()
    yield event
    event.set()  # frees the abandoned worker thread


async def _value(value: Any) -> Any:
    return value


def _broken() -> None:
    raise ConnectionError("index down")


async def _abroken() -> None:
    raise ConnectionError("index down")


def _plan() -> Generator[Call, Any, list[Any]]:
    first = yield Call(lambda: 1, lambda: _value(1))
    try:
        yield Call(_broken, _abroken)
    except ConnectionError as exc:
        caught = f"caught {exc}"
    return [first, caught]


def test_a_plan_of_calls_gives_the_same_result_sync_and_async() -> None:
    assert drive(_plan(), run_call) == [1, "caught index down"]
    assert asyncio.run(adrive(_plan(), arun_call)) == [1, "caught index down"]


def test_an_error_the_plan_does_not_catch_leaves_drive_unchanged() -> None:
    def plan() -> Generator[Call, Any, None]:
        yield Call(_broken, _abroken)

    with pytest.raises(ConnectionError, match="index down"):
        drive(plan(), run_call)
    with pytest.raises(ConnectionError, match="index down"):
        asyncio.run(adrive(plan(), arun_call))


def test_a_call_is_bounded_sync(release: threading.Event) -> None:
    started = time.perf_counter()
    with pytest.raises(StepTimeoutError, match="^the store gave no answer within 0.1 s$"):
        run_call(Call(lambda: release.wait(HANG), lambda: _value(0), BOUND, "the store"))
    assert time.perf_counter() - started < HANG / 2


async def test_a_call_is_bounded_async() -> None:
    started = time.perf_counter()
    with pytest.raises(StepTimeoutError, match="^the store gave no answer within 0.1 s$"):
        await arun_call(Call(lambda: 0, lambda: asyncio.sleep(HANG), BOUND, "the store"))
    assert time.perf_counter() - started < HANG / 2


def test_plain_timeout_is_a_plain_timeout_error_sync(release: threading.Event) -> None:
    with pytest.raises(TimeoutError) as caught:
        run_within(lambda: release.wait(HANG), BOUND, "the LLM", error=plain_timeout)
    assert type(caught.value) is TimeoutError
    assert repr(caught.value) == "TimeoutError('the LLM gave no answer within 0.1 s')"


async def test_plain_timeout_is_a_plain_timeout_error_async() -> None:
    with pytest.raises(TimeoutError) as caught:
        await arun_within(lambda: asyncio.sleep(HANG), BOUND, "the LLM", error=plain_timeout)
    assert type(caught.value) is TimeoutError
    assert repr(caught.value) == "TimeoutError('the LLM gave no answer within 0.1 s')"


def test_thread_runs_an_unbounded_call_in_a_thread_of_its_own() -> None:
    here = threading.current_thread()
    assert run_within(threading.current_thread, None) is here
    elsewhere = run_within(threading.current_thread, None, thread=True)
    assert elsewhere is not here and elsewhere.daemon
    assert run_call(Call(threading.current_thread, lambda: _value(0), thread=True)) is not here


def test_a_cancellation_inside_the_call_is_re_raised_sync() -> None:
    async def cancelled() -> None:
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await asyncio.sleep(0)

    for thread in (False, True):
        with pytest.raises(asyncio.CancelledError):
            run_within(lambda: asyncio.run(cancelled()), BOUND, thread=thread)


async def test_cancelling_the_caller_cancels_the_call_and_is_re_raised() -> None:
    call_cancelled = asyncio.Event()

    async def slow() -> None:
        try:
            await asyncio.sleep(HANG)
        except asyncio.CancelledError:
            call_cancelled.set()
            raise

    task = asyncio.create_task(arun_within(slow, HANG, "the store"))
    await asyncio.sleep(BOUND)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert call_cancelled.is_set()
