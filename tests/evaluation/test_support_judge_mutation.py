"""The prefix support judge beyond test_support_judge.py: exact verdict reasons, the threshold's
edge and the judge's own threshold on both paths, the rounding of P(yes), its identity (the
answer cache's keys name it), and a failing call logged with its error, sync and async (kills
the mutants of evaluation/support_judge.py those tests leave)."""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Sequence
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    LogProb,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate
from llama_index.core.prompts.default_prompt_selectors import DEFAULT_TEXT_QA_PROMPT_SEL

from llama_index_ext_advrag.evaluation.support_judge import (
    DEFAULT_SUPPORT_QUESTION,
    PrefixSupportJudge,
    generation_messages,
    verdict_from_response,
)

MESSAGES = [ChatMessage(role="user", content="Context: the pump runs at 3.5 bar. Q: pressure?")]


def logprobs(p_yes: float) -> list[list[LogProb]]:
    return [[LogProb(token="yes", logprob=math.log(p_yes), bytes=[]),
             LogProb(token="no", logprob=math.log(1 - p_yes), bytes=[])]]  # fmt: skip


def reply(text: str | None, p_yes: float | None = None) -> ChatResponse:
    probabilities = logprobs(p_yes) if p_yes is not None else None
    return ChatResponse(message=ChatMessage(role="assistant", content=text), logprobs=probabilities)


class Judging(CustomLLM):
    """A chat model that replies ``response`` (or raises ``error``) to every call."""

    response: Any = None
    error: Any = None
    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="judging", is_chat_model=True)

    def _reply(self, **kwargs: Any) -> ChatResponse:
        self._calls.append(kwargs)
        if self.error is not None:
            raise self.error
        return self.response

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply(**kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply(**kwargs)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("the judge chats")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("not streamed")


def judged(mode: str, judge: PrefixSupportJudge) -> Any:
    if mode == "async":
        return asyncio.run(judge.ajudge(MESSAGES, "It runs at 3.5 bar.", "It runs at 3.5 bar."))
    return judge.judge(MESSAGES, "It runs at 3.5 bar.", "It runs at 3.5 bar.")


def test_verdict_reasons_are_exact() -> None:
    odd = verdict_from_response(CompletionResponse(text="yes"))
    assert (odd.supported, odd.p_yes, odd.reason) == (
        None,
        None,
        "unexpected response type CompletionResponse",
    )
    for empty in (None, "", "  "):
        assert verdict_from_response(reply(empty)).reason == "empty reply", empty
    rambling = "Perhaps, it depends on " + "the context and the question asked " * 4
    unsure = verdict_from_response(reply(rambling))
    assert unsure.reason == f"unparsable reply: {rambling.strip()[:80]!r}"
    long_yes = "Yes, " + "every part of it is stated in the context above " * 3
    sure = verdict_from_response(reply(long_yes))
    assert (sure.supported, sure.reason) == (True, f"parsed reply: {long_yes.strip()[:80]!r}")


def test_the_threshold_edge_and_the_rounding_of_p_yes() -> None:
    at_edge = verdict_from_response(reply("no", 0.5))
    assert (at_edge.supported, at_edge.p_yes, at_edge.reason) == (True, 0.5, "logprobs")
    # P(yes) 0.6: log-odds 0.41, below the threshold if they were read instead
    assert verdict_from_response(reply("no", 0.6)).supported is True
    assert verdict_from_response(reply("yes", 0.4)).supported is False
    assert verdict_from_response(reply("yes", 0.1234567)).p_yes == 0.123457


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_judge_uses_its_own_threshold(mode: str) -> None:
    strict = PrefixSupportJudge(Judging(response=reply("yes", 0.8)), threshold=0.9)
    assert judged(mode, strict).supported is False
    lenient = PrefixSupportJudge(Judging(response=reply("no", 0.3)), threshold=0.25)
    verdict = judged(mode, lenient)
    assert (verdict.supported, verdict.p_yes) == (True, pytest.approx(0.3))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_call_is_logged_and_its_reason_cut_at_200(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    error = ConnectionError("server gone: " + "x" * 300)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.evaluation.support_judge"):
        verdict = judged(mode, PrefixSupportJudge(Judging(error=error)))
    assert verdict.supported is None and verdict.reason == f"LLM error: {error!r}"[:200]
    assert len(verdict.reason) == 200
    assert [r.getMessage() for r in caplog.records] == [f"support judgement failed: {error!r}"]


def test_the_identity_names_the_judge_question_and_threshold() -> None:
    judge = PrefixSupportJudge(Judging(), threshold=0.7)
    assert PrefixSupportJudge.class_name() == "PrefixSupportJudge"
    assert judge.identity() == {
        "judge": "PrefixSupportJudge",
        "question": DEFAULT_SUPPORT_QUESTION.template,
        "threshold": 0.7,
    }
    custom = PrefixSupportJudge(Judging(), question="Is '{sentence}' backed? yes/no")
    assert custom.identity()["question"] == "Is '{sentence}' backed? yes/no"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_call_asks_for_one_token_and_its_alternatives(mode: str) -> None:
    llm = Judging(response=reply("yes", 0.8))
    judge = PrefixSupportJudge(llm)
    assert judge.llm is llm and judge.timeout == 120.0 and judge.top_logprobs == 5
    judged(mode, judge)
    assert llm._calls == [{"logprobs": True, "top_logprobs": 5, "max_tokens": 1}]


def test_top_logprobs_accepts_its_bounds() -> None:
    assert [PrefixSupportJudge(Judging(), top_logprobs=n).top_logprobs for n in (1, 20)] == [1, 20]


def test_a_slow_sync_judgement_names_the_support_judge() -> None:
    class Slow(Judging):
        def _reply(self, **kwargs: Any) -> ChatResponse:
            time.sleep(1.0)
            return reply("yes", 0.9)

    verdict = judged("sync", PrefixSupportJudge(Slow(), timeout=0.1))
    assert verdict.supported is None
    assert (
        verdict.reason == "LLM error: TimeoutError('the support judge gave no answer within 0.1 s')"
    )


def test_generation_messages_follow_the_llm() -> None:
    chat = Judging()
    selector = DEFAULT_TEXT_QA_PROMPT_SEL
    messages = generation_messages(chat, selector, context_str="C", query_str="Q")
    # a prompt selector gives a chat model its chat prompt: a system turn, then the question
    assert [m.role.value for m in messages] == ["system", "user"]
    assert "C" in str(messages[1].content) and "Q" in str(messages[1].content)
    plain = generation_messages(None, PromptTemplate("Say {word}."), word="hi")
    assert [(m.role.value, m.content) for m in plain] == [("user", "Say hi.")]


def test_a_chat_prompt_question_is_named_by_its_text() -> None:
    question = ChatPromptTemplate(
        message_templates=[ChatMessage(role="user", content="Is '{sentence}' backed? yes/no")]
    )
    identity = PrefixSupportJudge(Judging(), question=question).identity()
    assert identity["question"] == str(question) and "{sentence}" in identity["question"]
