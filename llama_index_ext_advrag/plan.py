"""The one request runner: a decision generator, the requests it yields, and bounded execution.

A component writes its decisions as a generator that yields I/O requests and receives their
results (``result = yield request``), and returns its outcome. :func:`drive` answers the requests
with a sync function, :func:`adrive` with an async one; the decisions are written once.

The requests several components share are defined here (:class:`Judge`, :class:`Retrieve`,
:class:`Completions`), with :class:`Failed`, what a plan receives in place of a result when the
request raised or took longer than its timeout. :func:`attempt` and :func:`aattempt` run one
request that way; :func:`run_within` and :func:`arun_within` bound one call in time.

>>> def plan():
...     doubled = yield 21
...     return doubled + 0
>>> drive(plan(), lambda request: request * 2)
42
>>> attempt("judge", lambda: 1 / 0, timeout=None).error
"judge failed: ZeroDivisionError('division by zero')"
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Judge:
    """Grade ``texts`` against ``query`` with a relevance judge."""

    query: str
    texts: list[str]


@dataclass(frozen=True)
class Retrieve:
    """Retrieve for ``query``."""

    query: str


@dataclass(frozen=True)
class Completions:
    """One LLM completion per prompt, in order."""

    prompts: list[str]


@dataclass(frozen=True)
class Failed:
    """What a plan receives for a request that raised (``error``) or timed out (``timed_out``);
    ``step`` names the request (``"judge"``, ``"retrieve"``...)."""

    error: str
    timed_out: bool = False
    step: str | None = None
    exception: BaseException | None = field(default=None, compare=False, repr=False)


def drive(plan: Generator[Any, Any, T], execute: Callable[[Any], Any]) -> T:
    """Run ``plan`` to its end, answering each yielded request with ``execute(request)``."""
    result: Any = None
    try:
        while True:
            result = execute(plan.send(result))
    except StopIteration as stop:
        return stop.value


async def adrive(plan: Generator[Any, Any, T], execute: Callable[[Any], Awaitable[Any]]) -> T:
    """:func:`drive` with an async ``execute``."""
    result: Any = None
    try:
        while True:
            result = await execute(plan.send(result))
    except StopIteration as stop:
        return stop.value


class StepTimeoutError(TimeoutError):
    """A bounded call gave no answer in time (a ``TimeoutError`` the call itself raised is
    re-raised unchanged, so this type says the bound was hit)."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} gave no answer within {seconds:g} s")
        self.what = what
        self.seconds = seconds


def run_within(call: Callable[[], T], timeout: float | None, what: str = "the call") -> T:
    """``call()``, or :class:`StepTimeoutError` after ``timeout`` seconds (``None``: wait).

    The call runs in a daemon thread (with the caller's context variables, so instrumentation
    spans nest): a call that never returns is abandoned, not joined, and cannot hold the
    interpreter at exit.

    >>> run_within(lambda: 42, timeout=5)
    42
    """
    if timeout is None:
        return call()
    outcome: dict[str, Any] = {}
    done = threading.Event()
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(call)
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="advrag-bounded-call", daemon=True).start()
    if not done.wait(timeout):
        raise StepTimeoutError(what, timeout)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def in_daemon_thread(call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread, awaited without blocking the event loop.

    Like ``asyncio.to_thread`` (the caller's context variables included), except that a call
    abandoned after a timeout does not hold ``asyncio.run``'s exit, which joins the default
    executor's threads.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()
    context = contextvars.copy_context()

    def settle(value: Any, error: BaseException | None) -> None:
        if future.cancelled():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def target() -> None:
        try:
            value, error = context.run(call), None
        except BaseException as exc:  # handed to the awaiting task
            value, error = None, exc
        # RuntimeError: the loop closed meanwhile, nobody waits for the result.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    threading.Thread(target=target, name="advrag-async-call", daemon=True).start()
    return await future


async def arun_within(
    call: Callable[[], Awaitable[T]], timeout: float | None, what: str = "the call"
) -> T:
    """``await call()``, or :class:`StepTimeoutError` after ``timeout`` seconds (the call's own
    errors, a ``TimeoutError`` of its own included, are raised unchanged)."""

    async def guarded() -> tuple[Any, BaseException | None]:
        try:
            return await call(), None
        except Exception as exc:
            return None, exc

    try:
        value, error = await asyncio.wait_for(guarded(), timeout)
    except asyncio.TimeoutError:
        raise StepTimeoutError(what, timeout or 0.0) from None
    if error is not None:
        raise error
    return value


def as_failed(what: str, exc: BaseException) -> Failed:
    """The :class:`Failed` for ``exc`` raised by the request ``what`` (``"judge"``, ...)."""
    if isinstance(exc, StepTimeoutError):
        error = f"{what} timed out after {exc.seconds:g} s"
        return Failed(error, timed_out=True, step=what, exception=exc)
    return Failed(f"{what} failed: {exc!r}", step=what, exception=exc)


def attempt(what: str, call: Callable[[], T], timeout: float | None) -> T | Failed:
    """``call()`` bounded by ``timeout``; an exception or a timeout becomes a :class:`Failed`
    naming ``what`` (the caller logs it: it knows what the failure costs)."""
    try:
        return run_within(call, timeout, f"the {what}")
    except Exception as exc:
        return as_failed(what, exc)


async def aattempt(
    what: str, call: Callable[[], Awaitable[T]], timeout: float | None
) -> T | Failed:
    """Async :func:`attempt`."""
    try:
        return await arun_within(call, timeout, f"the {what}")
    except Exception as exc:
        return as_failed(what, exc)


__all__ = [
    "Completions",
    "Failed",
    "Judge",
    "Retrieve",
    "StepTimeoutError",
    "aattempt",
    "adrive",
    "arun_within",
    "as_failed",
    "attempt",
    "drive",
    "in_daemon_thread",
    "run_within",
]
