"""The request runner: drive/adrive, bounded calls and attempts (a timeout is a Failed, a call's
own TimeoutError is its error), context variables reaching the worker thread."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import pytest

from llama_index_ext_advrag.plan import (
    Failed,
    Judge,
    StepTimeoutError,
    aattempt,
    adrive,
    arun_within,
    attempt,
    drive,
    run_within,
)

BOUND = 0.2
HANG = 5.0  # never reached: a hung call is released (sync) or cancelled (async) at teardown
_REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")


@pytest.fixture
def release() -> threading.Event:
    event = threading.Event()
    yield event
    event.set()  # frees the abandoned worker thread


def test_drive_and_adrive_answer_every_request_in_order() -> None:
    def plan():
        first = yield Judge("q", ["a"])
        second = yield Judge("q", ["b", "c"])
        return [first, second]

    assert drive(plan(), lambda r: len(r.texts)) == [1, 2]

    async def count(request: Judge) -> int:
        return len(request.texts)

    assert asyncio.run(adrive(plan(), count)) == [1, 2]


def test_run_within_returns_and_raises_the_calls_own_errors() -> None:
    assert run_within(lambda: 42, BOUND) == 42
    assert run_within(lambda: 42, None) == 42

    def own_timeout() -> None:
        raise TimeoutError("client timeout")

    with pytest.raises(TimeoutError, match="client timeout") as caught:
        run_within(own_timeout, BOUND)
    assert not isinstance(caught.value, StepTimeoutError)  # not mistaken for the bound


def test_run_within_gives_up_after_the_bound(release: threading.Event) -> None:
    started = time.perf_counter()
    with pytest.raises(StepTimeoutError, match="the judge gave no answer within 0.2 s") as caught:
        run_within(lambda: release.wait(HANG), BOUND, "the judge")
    assert time.perf_counter() - started < HANG / 2
    assert caught.value.seconds == BOUND and caught.value.what == "the judge"


def test_run_within_carries_context_variables_into_the_thread() -> None:
    token = _REQUEST_ID.set("r-7")
    try:
        assert run_within(_REQUEST_ID.get, BOUND) == "r-7"
    finally:
        _REQUEST_ID.reset(token)


async def test_arun_within_gives_up_after_the_bound_and_keeps_own_errors() -> None:
    with pytest.raises(StepTimeoutError, match="within 0.2 s"):
        await arun_within(lambda: asyncio.sleep(HANG), BOUND, "the retriever")

    async def own_timeout() -> None:
        raise TimeoutError("client timeout")

    with pytest.raises(TimeoutError, match="client timeout") as caught:
        await arun_within(own_timeout, BOUND)
    assert not isinstance(caught.value, StepTimeoutError)

    async def value() -> int:
        return 7

    assert await arun_within(value, None) == 7


def test_attempt_turns_errors_and_timeouts_into_failed(release: threading.Event) -> None:
    failed = attempt("judge", lambda: 1 / 0, BOUND)
    assert isinstance(failed, Failed) and not failed.timed_out
    assert failed.error == "judge failed: ZeroDivisionError('division by zero')"
    assert failed.step == "judge" and isinstance(failed.exception, ZeroDivisionError)
    slow = attempt("retrieve", lambda: release.wait(HANG), BOUND)
    assert slow == Failed("retrieve timed out after 0.2 s", timed_out=True, step="retrieve")
    assert attempt("judge", lambda: [1], BOUND) == [1]


async def test_aattempt_turns_errors_and_timeouts_into_failed() -> None:
    slow = await aattempt("websearch", lambda: asyncio.sleep(HANG), BOUND)
    assert slow == Failed("websearch timed out after 0.2 s", timed_out=True, step="websearch")

    async def broken() -> None:
        raise ConnectionError("index down")

    failed = await aattempt("retrieve", broken, None)
    assert failed == Failed("retrieve failed: ConnectionError('index down')", step="retrieve")
