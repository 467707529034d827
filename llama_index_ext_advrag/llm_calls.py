"""LLM calls bounded in time: a hung LLM gives a ``TimeoutError``, never a hung query.

Most LLM clients have a timeout of their own, but not every one (a custom LLM, a local server
that accepted the connection and stalled). :func:`complete_within` and :func:`acomplete_within`
bound one ``complete`` call; the sync one runs it in a daemon thread (a call that never returns
is abandoned, not joined, so it cannot hold the interpreter at exit).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

from llama_index.core.llms import LLM

T = TypeVar("T")


def call_within(fn: Callable[[], T], timeout: float | None, what: str = "the LLM") -> T:
    """``fn()`` run in a daemon thread of its own, or ``TimeoutError`` after ``timeout`` seconds
    (``None``: wait). ``fn``'s own errors are raised unchanged; a call that never returns is
    abandoned in its thread. The thread has no event loop, so ``fn`` may run one.

    >>> call_within(lambda: 2 + 2, timeout=5)
    4
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()

    def call() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # handed to the caller below
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=call, name="advrag-llm-call", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"{what} gave no answer within {timeout:g} s")
    if "error" in outcome:
        raise outcome["error"]
    return cast(T, outcome["value"])


def complete_within(llm: LLM, prompt: str, timeout: float | None) -> Any:
    """``llm.complete(prompt)``, or ``TimeoutError`` after ``timeout`` seconds (``None``: wait).

    >>> from llama_index.core.llms import MockLLM
    >>> complete_within(MockLLM(), "hi", timeout=5).text
    'hi'
    """
    if timeout is None:
        return llm.complete(prompt)
    return call_within(lambda: llm.complete(prompt), timeout)


async def acomplete_within(llm: LLM, prompt: str, timeout: float | None) -> Any:
    """``await llm.acomplete(prompt)``, or ``TimeoutError`` after ``timeout`` seconds (the
    LLM's own errors, a ``TimeoutError`` of its client included, are raised unchanged)."""

    async def guarded() -> tuple[Any, BaseException | None]:
        try:
            return await llm.acomplete(prompt), None
        except Exception as exc:
            return None, exc

    try:
        response, error = await asyncio.wait_for(guarded(), timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(f"the LLM gave no answer within {timeout:g} s") from None
    if error is not None:
        raise error
    return response


__all__ = ["acomplete_within", "call_within", "complete_within"]
