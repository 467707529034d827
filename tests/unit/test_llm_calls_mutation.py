"""Counting LLM calls: nested calls in one thread count once however many inner calls they
make, concurrent calls in two threads count twice, and an end seen without its start (the
counter opened mid-call) is harmless. Kills the mutants of llm_calls.py no selected test
noticed (mutation testing, issue #39)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.instrumentation.events.llm import LLMCompletionEndEvent
from llama_index.core.llms import CustomLLM, LLMMetadata
from llama_index.core.llms.callbacks import llm_completion_callback

from llama_index_ext_advrag.llm_calls import LLMCallCounter, counting_llm_calls

pytestmark = pytest.mark.unit


class Echo(CustomLLM):
    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata()

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=prompt)

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
        raise NotImplementedError


class TwoStep(Echo):
    """An LLM whose completion makes two completions of an inner LLM."""

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        inner = Echo()
        return CompletionResponse(text=inner.complete(prompt).text + inner.complete(prompt).text)


class Meeting(Echo):
    """Waits in its completion until the other thread's completion has started."""

    barrier: Any = None

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.barrier.wait(timeout=10)
        return CompletionResponse(text=prompt)


def test_a_call_making_inner_calls_counts_once_and_the_next_call_again() -> None:
    with counting_llm_calls() as counter:
        TwoStep().complete("a")
        assert counter.calls == 1
        Echo().complete("b")
    assert counter.calls == 2


def test_concurrent_calls_in_two_threads_count_twice() -> None:
    llm = Meeting(barrier=threading.Barrier(2))
    with counting_llm_calls() as counter:
        threads = [threading.Thread(target=llm.complete, args=(p,)) for p in "ab"]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert counter.calls == 2


def test_an_end_without_its_start_is_harmless() -> None:
    counter = LLMCallCounter()
    counter.handle(LLMCompletionEndEvent(prompt="p", response=CompletionResponse(text="")))
    assert counter.calls == 0
    assert counter.open_calls == {threading.get_ident(): 0}
    assert LLMCallCounter.class_name() == "AnswerLLMCallCounter"
