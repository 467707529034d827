"""Counting LLM calls through LlamaIndex's instrumentation.

Bounding an LLM call in time is the request runner's one bound:
:func:`~llama_index_ext_advrag.plan.run_within` / :func:`~llama_index_ext_advrag.plan.arun_within`
with ``error=plain_timeout``, so that a hung LLM gives a ``TimeoutError``, never a hung query
(most LLM clients have a timeout of their own, but not every one: a custom LLM, a local server
that accepted the connection and stalled).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.events.llm import (
    LLMChatEndEvent,
    LLMChatStartEvent,
    LLMCompletionEndEvent,
    LLMCompletionStartEvent,
)


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
    "counting_llm_calls",
]
