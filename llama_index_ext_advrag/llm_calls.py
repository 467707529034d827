"""LLM calls bounded in time: a hung LLM gives a ``TimeoutError``, never a hung query.

Most LLM clients have a timeout of their own, but not every one (a custom LLM, a local server
that accepted the connection and stalled). :func:`complete_within` and :func:`acomplete_within`
bound one ``complete`` call with the request runner's bounds
(:func:`~llama_index_ext_advrag.plan.run_within`: the sync call runs in a daemon thread, and a
call that never returns is abandoned, not joined, so it cannot hold the interpreter at exit).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from llama_index.core.llms import LLM

from llama_index_ext_advrag.plan import StepTimeoutError, arun_within, run_within

T = TypeVar("T")
NO_LIMIT_SECONDS = 10**9  # "wait": still run in a thread of its own, so fn may run an event loop


def call_within(fn: Callable[[], T], timeout: float | None, what: str = "the LLM") -> T:
    """``fn()`` run in a daemon thread of its own, or ``TimeoutError`` after ``timeout`` seconds
    (``None``: wait). ``fn``'s own errors are raised unchanged; a call that never returns is
    abandoned in its thread. The thread has no event loop, so ``fn`` may run one.

    >>> call_within(lambda: 2 + 2, timeout=5)
    4
    """
    try:
        return run_within(fn, NO_LIMIT_SECONDS if timeout is None else timeout, what)
    except StepTimeoutError as exc:
        raise TimeoutError(str(exc)) from None


def complete_within(llm: LLM, prompt: str, timeout: float | None) -> Any:
    """``llm.complete(prompt)``, or ``TimeoutError`` after ``timeout`` seconds (``None``: wait).

    >>> from llama_index.core.llms import MockLLM
    >>> complete_within(MockLLM(), "hi", timeout=5).text
    'hi'
    """
    try:
        return run_within(lambda: llm.complete(prompt), timeout, "the LLM")
    except StepTimeoutError as exc:
        raise TimeoutError(str(exc)) from None


async def acomplete_within(llm: LLM, prompt: str, timeout: float | None) -> Any:
    """``await llm.acomplete(prompt)``, or ``TimeoutError`` after ``timeout`` seconds (the
    LLM's own errors, a ``TimeoutError`` of its client included, are raised unchanged)."""
    try:
        return await arun_within(lambda: llm.acomplete(prompt), timeout, "the LLM")
    except StepTimeoutError as exc:
        raise TimeoutError(str(exc)) from None


__all__ = ["acomplete_within", "call_within", "complete_within"]
