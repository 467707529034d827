"""LLM calls bounded in time: a hung LLM gives a ``TimeoutError``, never a hung query.

Most LLM clients have a timeout of their own, but not every one (a custom LLM, a local server
that accepted the connection and stalled). :func:`complete_within` and :func:`acomplete_within`
bound one ``complete`` call with the request runner's bounds
(:func:`~llama_index_ext_advrag.plan.run_within`: the sync call runs in a daemon thread, and a
call that never returns is abandoned, not joined, so it cannot hold the interpreter at exit).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)
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


class LLMCallCounter(BaseEventHandler):
    """Counts LLM calls seen by LlamaIndex's instrumentation: a chat or completion start that
    is not inside another call in the same thread (an LLM whose ``chat`` calls its own
    ``complete``, as ``CustomLLM`` does, counts once).

    Instrumentation rather than a callback handler on the LLM: a query engine (the one inside
    ``FaithfulnessEvaluator``) replaces its LLM's callback manager with the global one."""

    calls: int = 0
    open_calls: dict[int, int] = {}

    @classmethod
    def class_name(cls) -> str:
        return "AnswerLLMCallCounter"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        thread = threading.get_ident()
        if isinstance(event, (LLMCompletionStartEvent, LLMChatStartEvent)):
            if not self.open_calls.get(thread):
                self.calls += 1
            self.open_calls[thread] = self.open_calls.get(thread, 0) + 1
        elif isinstance(event, (LLMCompletionEndEvent, LLMChatEndEvent)):
            self.open_calls[thread] = max(0, self.open_calls.get(thread, 0) - 1)


@contextlib.contextmanager
def counting_llm_calls() -> Iterator[LLMCallCounter]:
    """Count every LLM call made inside the block (in any thread), then stop counting."""
    dispatcher = get_dispatcher()
    counter = LLMCallCounter()
    dispatcher.add_event_handler(counter)
    try:
        yield counter
    finally:
        # by identity: counters are pydantic models, equal when their counts are, and blocks nest
        # (a self-answering pipeline counts inside a scored row)
        handlers = dispatcher.event_handlers
        handlers[:] = [handler for handler in handlers if handler is not counter]


__all__ = [
    "LLMCallCounter",
    "acomplete_within",
    "call_within",
    "complete_within",
    "counting_llm_calls",
]
