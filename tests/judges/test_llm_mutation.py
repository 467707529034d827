"""The LLM judge beyond test_llm.py, sync and async: completion_kwargs and the prompt reaching
chat and completion models, a chat reply parsed into a score of exactly 1.0, replies and errors
quoted cut to their bound, an unexpected response type, a non-finite log-probability skipped,
the sync thread bound, the log line and the unknown grades without an LLM (kills the module's
mutants those tests leave)."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
)
from llama_index.core.llms import MockLLM

from llama_index_ext_advrag.judges import Grade
from llama_index_ext_advrag.judges.llm import LLMRelevanceJudge, yes_probability

MODES = ["sync", "async"]


def judged(judge: LLMRelevanceJudge, mode: str, texts: list[str]) -> list[Grade]:
    if mode == "async":
        return asyncio.run(judge.ajudge("q", texts))
    return judge.judge("q", texts)


class KwargsLLM(ScriptedLLM):
    """A completion model recording the keyword arguments of each call."""

    seen: list = []

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self.seen.append(kwargs)
        return CompletionResponse(text=self._answer(prompt))

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        return self.complete(prompt, **kwargs)


class ChatLLM(ScriptedLLM):
    """A chat model replying with its script, recording the messages and keyword arguments."""

    seen: list = []
    content: Any = "yes"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="chat", is_chat_model=True)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.seen.append(([(m.role.value, m.content) for m in messages], kwargs))
        return ChatResponse(message=ChatMessage(role="assistant", content=self.content))

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)


@pytest.mark.parametrize("mode", MODES)
def test_completion_kwargs_reach_completion_and_chat_models(mode: str) -> None:
    plain = KwargsLLM(["yes"], seen=[])
    judged(LLMRelevanceJudge(llm=plain, completion_kwargs={"temperature": 0.0}), mode, ["a"])
    assert plain.seen == [{"temperature": 0.0}]
    chat = ChatLLM(seen=[])
    judge = LLMRelevanceJudge(llm=chat, completion_kwargs={"top_logprobs": 5})
    (grade,) = judged(judge, mode, ["a"])
    ((messages, kwargs),) = chat.seen
    assert kwargs == {"top_logprobs": 5}
    assert messages == [("user", judge._format("q", "a"))]
    # a chat reply without log-probabilities is parsed
    assert (grade.score, grade.reason) == (1.0, "parsed reply: 'yes'")


@pytest.mark.parametrize("mode", MODES)
def test_an_empty_chat_reply_is_unknown(mode: str) -> None:
    (grade,) = judged(LLMRelevanceJudge(llm=ChatLLM(seen=[], content=None)), mode, ["a"])
    assert grade == Grade.unknown("llm", "empty reply")


@pytest.mark.parametrize("mode", MODES)
def test_quoted_replies_are_cut_at_80_characters(mode: str) -> None:
    unsure = "maybe " * 20
    (grade,) = judged(LLMRelevanceJudge(llm=ScriptedLLM([unsure])), mode, ["a"])
    assert grade.reason == f"unparsable reply: {unsure.strip()[:80]!r}"
    sure = "yes " + "x" * 100
    (grade,) = judged(LLMRelevanceJudge(llm=ScriptedLLM([sure])), mode, ["a"])
    assert grade.reason == f"parsed reply: {sure[:80]!r}" and grade.score == 1.0


class OddLLM(ScriptedLLM):
    """Returns a plain string instead of a completion."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        return "yes"

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        return "yes"


@pytest.mark.parametrize("mode", MODES)
def test_an_unexpected_response_type_is_unknown(mode: str) -> None:
    (grade,) = judged(LLMRelevanceJudge(llm=OddLLM(), name="odd"), mode, ["a"])
    assert grade == Grade.unknown("odd", "unexpected response type str")


class LongFailure(ScriptedLLM):
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise ConnectionError("x" * 300)

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise ConnectionError("x" * 300)


@pytest.mark.parametrize("mode", MODES)
def test_an_error_is_logged_and_quoted_in_200_characters(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        (grade,) = judged(LLMRelevanceJudge(llm=LongFailure()), mode, ["a"])
    error = ConnectionError("x" * 300)
    assert grade.reason == f"LLM error: {error!r}"[:200] and len(grade.reason) == 200
    messages = [r.getMessage() for r in caplog.records if r.name.endswith("judges.llm")]
    assert messages == [f"LLM judge call failed: {error!r}"]


@pytest.mark.parametrize("mode", MODES)
def test_without_an_llm_every_grade_is_unknown(mode: str) -> None:
    grades = judged(LLMRelevanceJudge(llm=MockLLM(), name="mine"), mode, ["a", "b"])
    assert grades == [Grade.unknown("mine", "no LLM")] * 2


def test_a_non_finite_log_probability_is_skipped_not_the_end() -> None:
    found = yes_probability([("x", -math.inf), ("Yes", math.log(0.6)), ("no", math.log(0.4))])
    assert found is not None and found[0] == pytest.approx(0.6)


def test_the_class_name() -> None:
    assert LLMRelevanceJudge.class_name() == "LLMRelevanceJudge"


class CountingLLM(ScriptedLLM):
    """Sleeps in complete, counting the calls in flight (threads)."""

    peak: int = 0
    active: int = 0

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        with lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
        time.sleep(0.02)
        with lock:
            self.active -= 1
        return CompletionResponse(text="yes")


lock = threading.Lock()


def test_sync_calls_in_flight_stay_within_max_concurrency() -> None:
    llm = CountingLLM()
    LLMRelevanceJudge(llm=llm, max_concurrency=1).judge("q", list("abcd"))
    assert llm.peak == 1
