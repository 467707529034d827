"""The one request runner: a decision generator, the requests it yields, and bounded execution.

A component writes its decisions as a generator that yields I/O requests and receives their
results (``result = yield request``), and returns its outcome. :func:`drive` answers the requests
with a sync function, :func:`adrive` with an async one; the decisions are written once.

The requests several components share are defined here (:class:`Judge`, :class:`Retrieve`,
:class:`Completions`), with :class:`Failed`, what a plan receives in place of a result when the
request raised or took longer than its timeout. :class:`Call` is the request of a component
whose I/O needs no executor of its own: it names the sync and the async flavour of one call,
which :func:`run_call` and :func:`arun_call` run (``drive(plan, run_call)``). An exception
raised by a request is thrown into the plan at its ``yield``, so a plan may catch it there.

Time limits: :func:`run_within` and :func:`arun_within` are the package's one bound on a call
(sync and async flavours); :func:`attempt` and :func:`aattempt` turn a bounded call's failure
into a :class:`Failed`. The table sandbox's deadline is not one of them: it kills a child
process (:mod:`~llama_index_ext_advrag.tables.pandas_sandbox`), it does not bound a call.

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
    """One LLM completion per prompt, in order; ``system``: a system message before each
    prompt when the LLM is a chat model (see :func:`llm_completion`); ``logprobs``: one output
    token with its first-token log-probabilities (a label read from them)."""

    prompts: list[str]
    system: str | None = None
    logprobs: bool = False


@dataclass(frozen=True)
class Failed:
    """What a plan receives for a request that raised (``error``) or timed out (``timed_out``);
    ``step`` names the request (``"judge"``, ``"retrieve"``...)."""

    error: str
    timed_out: bool = False
    step: str | None = None
    exception: BaseException | None = field(default=None, compare=False, repr=False)


def drive(plan: Generator[Any, Any, T], execute: Callable[[Any], Any]) -> T:
    """Run ``plan`` to its end, answering each yielded request with ``execute(request)``; an
    exception ``execute`` raises is thrown into the plan where it yielded the request."""
    try:
        request = plan.send(None)
        while True:
            try:
                result = execute(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(result)
    except StopIteration as stop:
        return stop.value


async def adrive(plan: Generator[Any, Any, T], execute: Callable[[Any], Awaitable[Any]]) -> T:
    """:func:`drive` with an async ``execute``."""
    try:
        request = plan.send(None)
        while True:
            try:
                result = await execute(request)
            except Exception as exc:
                request = plan.throw(exc)
            else:
                request = plan.send(result)
    except StopIteration as stop:
        return stop.value


class StepTimeoutError(TimeoutError):
    """A bounded call gave no answer in time (a ``TimeoutError`` the call itself raised is
    re-raised unchanged, so this type says the bound was hit)."""

    def __init__(self, what: str, seconds: float) -> None:
        super().__init__(f"{what} gave no answer within {seconds:g} s")
        self.what = what
        self.seconds = seconds


def plain_timeout(what: str, seconds: float) -> TimeoutError:
    """The ``TimeoutError`` an LLM client would raise, worded as :class:`StepTimeoutError`: for
    callers whose errors and traces name ``TimeoutError`` (an answer row, a rewrite fallback)."""
    return TimeoutError(f"{what} gave no answer within {seconds:g} s")


TimeoutFactory = Callable[[str, float], TimeoutError]


def run_within(
    call: Callable[[], T],
    timeout: float | None,
    what: str = "the call",
    *,
    thread: bool = False,
    error: TimeoutFactory = StepTimeoutError,
) -> T:
    """``call()``, or ``error(what, timeout)`` (:class:`StepTimeoutError`) after ``timeout``
    seconds (``None``: wait; the call runs in the caller's thread unless ``thread``).

    The call runs in a daemon thread (with the caller's context variables, so instrumentation
    spans nest): a call that never returns is abandoned, not joined, and cannot hold the
    interpreter at exit. The thread has no event loop, so ``call`` may run one. The call's own
    errors (a ``TimeoutError`` of its own included) are raised unchanged.

    >>> run_within(lambda: 42, timeout=5)
    42
    """
    if timeout is None and not thread:
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
        raise error(what, timeout or 0.0)
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
    call: Callable[[], Awaitable[T]],
    timeout: float | None,
    what: str = "the call",
    *,
    error: TimeoutFactory = StepTimeoutError,
) -> T:
    """``await call()``, or ``error(what, timeout)`` (:class:`StepTimeoutError`) after
    ``timeout`` seconds (``None``: wait). The call's own errors, a ``TimeoutError`` of its own
    included, are raised unchanged; a cancellation of the caller cancels the call and is
    re-raised."""

    async def guarded() -> tuple[Any, BaseException | None]:
        try:
            return await call(), None
        except Exception as exc:
            return None, exc

    try:
        value, failure = await asyncio.wait_for(guarded(), timeout)
    except asyncio.TimeoutError:
        raise error(what, timeout or 0.0) from None
    if failure is not None:
        raise failure
    return value


@dataclass(frozen=True)
class Call:
    """One I/O call in its two flavours: :func:`run_call` runs ``sync()``, :func:`arun_call`
    awaits ``async_()``, each bounded by ``timeout`` (:func:`run_within`, :func:`arun_within`,
    with ``what``, ``thread`` and ``error`` as there)."""

    sync: Callable[[], Any]
    async_: Callable[[], Awaitable[Any]]
    timeout: float | None = None
    what: str = "the call"
    thread: bool = False
    error: TimeoutFactory = StepTimeoutError


def run_call(request: Call) -> Any:
    """Answer a :class:`Call` request on the sync path (``drive(plan, run_call)``)."""
    return run_within(
        request.sync, request.timeout, request.what, thread=request.thread, error=request.error
    )


async def arun_call(request: Call) -> Any:
    """Answer a :class:`Call` request on the async path (``adrive(plan, arun_call)``)."""
    return await arun_within(request.async_, request.timeout, request.what, error=request.error)


def llm_completion(
    llm: Any,
    prompt: str,
    timeout: float | None,
    system: str | None = None,
    call_kwargs: dict[str, Any] | None = None,
) -> Call:
    """``llm.complete(prompt)`` / ``llm.acomplete(prompt)`` bounded by ``timeout``; a timeout is
    the ``TimeoutError`` an LLM client would raise (:func:`plain_timeout`, "the LLM ...").

    With ``system`` or ``call_kwargs`` and a chat model (``llm.metadata.is_chat_model``) the
    call is ``llm.chat([system, user: prompt])`` instead (the system message only with
    ``system``), read back as a ``CompletionResponse`` (text, log-probabilities, raw reply):
    a chat model's ``complete`` would drop the log-probabilities. A completion model gets the prompt alone. ``call_kwargs`` go to the call as they
    are (e.g. ``logprobs=True``)."""
    extra = dict(call_kwargs or {})
    chat_model = getattr(getattr(llm, "metadata", None), "is_chat_model", False)
    # a chat model's complete() answers through chat() but drops its log-probabilities
    if not chat_model or not (system or extra):
        return Call(
            lambda: llm.complete(prompt, **extra),
            lambda: llm.acomplete(prompt, **extra),
            timeout,
            "the LLM",
            error=plain_timeout,
        )
    from llama_index.core.base.llms.types import ChatMessage, MessageRole

    messages = [ChatMessage(role=MessageRole.USER, content=prompt)]
    if system:
        messages.insert(0, ChatMessage(role=MessageRole.SYSTEM, content=system))

    async def achat() -> Any:
        return chat_as_completion(await llm.achat(messages, **extra))

    return Call(
        lambda: chat_as_completion(llm.chat(messages, **extra)),
        achat,
        timeout,
        "the LLM",
        error=plain_timeout,
    )


def chat_as_completion(response: Any) -> Any:
    """A ``ChatResponse`` as the ``CompletionResponse`` a completion call returns (text,
    log-probabilities, raw reply, extra fields)."""
    from llama_index.core.base.llms.types import CompletionResponse

    return CompletionResponse(
        text=str(response.message.content or ""),
        raw=response.raw,
        logprobs=response.logprobs,
        additional_kwargs=dict(response.additional_kwargs or {}),
    )


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
    "Call",
    "Completions",
    "Failed",
    "Judge",
    "Retrieve",
    "StepTimeoutError",
    "aattempt",
    "adrive",
    "arun_call",
    "arun_within",
    "as_failed",
    "chat_as_completion",
    "attempt",
    "drive",
    "in_daemon_thread",
    "llm_completion",
    "plain_timeout",
    "run_call",
    "run_within",
]
