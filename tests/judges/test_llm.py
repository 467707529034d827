"""The LLM judge: log-probabilities, reply parsing, and faults that must never raise."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    LogProb,
)
from llama_index.core.llms import MockLLM
from llama_index.core.prompts import PromptTemplate

from llama_index_ext_advrag.judges import GradeLabel, LLMRelevanceJudge
from llama_index_ext_advrag.judges.llm import parse_yes_no, yes_probability


class LogprobLLM(ScriptedLLM):
    """Replies 'yes' with first-token alternatives P(yes) = p_yes, P(no) = 1 - p_yes."""

    p_yes: float = 0.8

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._prompts.append(prompt)
        alternatives = [
            LogProb(token="Yes", logprob=math.log(self.p_yes), bytes=[]),
            LogProb(token=" no", logprob=math.log(1 - self.p_yes), bytes=[]),
        ]
        return CompletionResponse(text="Yes", logprobs=[alternatives])


class ChatLogprobLLM(ScriptedLLM):
    """A chat model: core's complete() would drop its log-probabilities."""

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="chat", is_chat_model=True)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._prompts.append(str(messages[-1].content))
        alternatives = [
            LogProb(token="No", logprob=math.log(0.9), bytes=[]),
            LogProb(token="Yes", logprob=math.log(0.1), bytes=[]),
        ]
        return ChatResponse(
            message=ChatMessage(role="assistant", content="No"), logprobs=[alternatives]
        )

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)


class SlowAsyncLLM(ScriptedLLM):
    """Native async LLM that sleeps ``delay`` seconds, counting calls in flight."""

    delay: float = 0.05
    in_flight: int = 0
    peak: int = 0

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return CompletionResponse(text="yes")


class FailingLLM(ScriptedLLM):
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise ConnectionError("server gone")

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        raise ConnectionError("server gone")


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("yes", True),
        ("No.", False),
        ("  YES, the passage says so", True),
        ("不相关", False),
        ("相关。", True),
        ("是", True),
        ("否", False),
        ("The answer is no", False),
        ("nothing useful", None),  # 'no' inside 'nothing' is not a word
        ("maybe", None),
        ("", None),
    ],
)
def test_parse_yes_no(reply: str, expected: bool | None) -> None:
    assert parse_yes_no(reply) is expected


def test_yes_probability_by_hand() -> None:
    score, log_odds = yes_probability([("yes", math.log(0.3)), ("No", math.log(0.1)), ("x", -0.1)])
    assert score == pytest.approx(0.75) and log_odds == pytest.approx(math.log(3))
    assert yes_probability([("maybe", -0.1)]) is None
    # a side missing from the alternatives is bounded, not zero: below every listed token and
    # within the mass the list leaves
    only_no = [("no", math.log(0.9)), ("No", math.log(0.05)), ("x", math.log(0.02)),
               ("y", math.log(0.01)), ("z", math.log(0.005))]  # fmt: skip
    score, log_odds = yes_probability(only_no)
    assert score == pytest.approx(0.005 / 0.955) and math.isfinite(log_odds)
    top1_yes, _ = yes_probability([("yes", math.log(0.7))])  # the other 0.3 may be "no"
    assert top1_yes == pytest.approx(0.7)
    certain, certain_log_odds = yes_probability([("Yes", 0.0)])  # all mass on yes: the floor
    assert 0.999 < certain < 1.0 and certain_log_odds == pytest.approx(math.log(1e6))


def test_logprobs_are_used_when_present() -> None:
    judge = LLMRelevanceJudge(llm=LogprobLLM(p_yes=0.8))
    grade = judge.judge("q", ["passage"])[0]
    assert grade.score == pytest.approx(0.8) and grade.raw == pytest.approx(math.log(4))
    assert grade.reason == "logprobs" and grade.label is GradeLabel.RELEVANT


async def test_chat_models_are_called_through_chat_to_keep_logprobs() -> None:
    llm = ChatLogprobLLM()
    judge = LLMRelevanceJudge(llm=llm)
    grade = judge.judge("q", ["passage"])[0]
    assert grade.score == pytest.approx(0.1) and grade.reason == "logprobs"
    assert "Passage: passage" in llm.prompts[0]
    assert await judge.ajudge("q", ["passage"]) == [grade]


def test_reply_is_parsed_without_logprobs() -> None:
    llm = ScriptedLLM(lambda p: "No" if "cats" in p else "Yes, it does.")
    grades = LLMRelevanceJudge(llm=llm).judge("q", ["dogs", "cats"])
    assert [g.score for g in grades] == [1.0, 0.0]
    assert all((g.reason or "").startswith("parsed reply: ") for g in grades)
    assert sorted(p.split("Passage: ")[1].split("\n")[0] for p in llm.prompts) == ["cats", "dogs"]
    assert all("Question: q\n" in p for p in llm.prompts)


@pytest.mark.parametrize(
    ("reply", "reason"), [("", "empty reply"), ("   ", "empty reply"), ("%%%&&", "unparsable")]
)
def test_empty_and_garbage_replies_are_unknown(reply: str, reason: str) -> None:
    grade = LLMRelevanceJudge(llm=ScriptedLLM([reply])).judge("q", ["t"])[0]
    assert grade.label is GradeLabel.UNKNOWN and reason in (grade.reason or "")


def test_exceptions_are_unknown_grades_sync_and_async() -> None:
    judge = LLMRelevanceJudge(llm=FailingLLM())
    grades = judge.judge("q", ["a", "b"])
    assert all(not g.known and "server gone" in (g.reason or "") for g in grades)
    assert asyncio.run(judge.ajudge("q", ["a"]))[0].reason == grades[0].reason


def test_sync_timeout_gives_unknown_without_waiting_for_the_llm() -> None:
    release = threading.Event()

    def slow(prompt: str) -> str:
        release.wait(5)
        return "yes"

    judge = LLMRelevanceJudge(llm=ScriptedLLM(slow), timeout=0.1, max_concurrency=2)
    grades = judge.judge("q", ["a", "b"])
    release.set()
    assert [g.reason for g in grades] == ["timeout after 0.1 s"] * 2


async def test_async_timeout_and_concurrency_bound() -> None:
    slow = SlowAsyncLLM(delay=5.0)
    grades = await LLMRelevanceJudge(llm=slow, timeout=0.05).ajudge("q", ["a"])
    assert grades[0].reason == "timeout after 0.05 s"
    bounded = SlowAsyncLLM(delay=0.02)
    grades = await LLMRelevanceJudge(llm=bounded, max_concurrency=2).ajudge("q", list("abcdef"))
    assert bounded.peak == 2 and all(g.score == 1.0 for g in grades)


async def test_sync_equals_async() -> None:
    judge = LLMRelevanceJudge(
        llm=ScriptedLLM(lambda p: "no" if "b" in p.split("Passage:")[1] else "yes")
    )
    texts = ["a", "b", "c"]
    assert await judge.ajudge("q", texts) == judge.judge("q", texts)


def test_mock_llm_or_none_means_no_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for llm in (MockLLM(), None):
        grades = LLMRelevanceJudge(llm=llm).judge("q", ["a"])
        assert grades[0].reason == "no LLM"


def test_prompt_must_have_query_and_text() -> None:
    with pytest.raises(ValueError, match="\\['text'\\]"):
        LLMRelevanceJudge(prompt=PromptTemplate("{query}?"))


def test_passage_is_cut_in_the_prompt() -> None:
    llm = ScriptedLLM(["yes"])
    LLMRelevanceJudge(llm=llm, max_passage_chars=5).judge("q", ["abcdefghij"])
    assert "abcde" in llm.prompts[0] and "abcdef" not in llm.prompts[0]


# ----- prompts (PromptMixin) -----


@pytest.mark.parametrize("use_async", [False, True])
def test_the_prompt_is_listed_and_updates_what_the_llm_receives(use_async: bool) -> None:
    from llama_index_ext_advrag.judges import LanguageRoutedJudge
    from llama_index_ext_advrag.judges.llm import DEFAULT_RELEVANCE_PROMPT

    llm = ScriptedLLM(["yes"])
    judge = LLMRelevanceJudge(llm=llm)
    assert list(judge.get_prompts()) == ["prompt"]
    assert judge.get_prompts()["prompt"].get_template() == DEFAULT_RELEVANCE_PROMPT.get_template()
    judge.update_prompts({"prompt": PromptTemplate("Q={query} T={text} yes/no?")})
    if use_async:
        grades = asyncio.run(judge.ajudge("cats", ["Cats purr."]))
    else:
        grades = judge.judge("cats", ["Cats purr."])
    assert llm.prompts == ["Q=cats T=Cats purr. yes/no?"] and grades[0].score == 1.0
    routed = LanguageRoutedJudge({"zh": judge})
    assert list(routed.get_prompts()) == ["zh:prompt"]


def test_a_prompt_without_its_variables_is_refused_on_update() -> None:
    judge = LLMRelevanceJudge(llm=ScriptedLLM(["yes"]))
    with pytest.raises(ValueError, match=r"lacks the variables \['text'\]"):
        judge.update_prompts({"prompt": PromptTemplate("Q={query}")})
    with pytest.raises(TypeError, match="prompt template, got str"):
        judge.update_prompts({"prompt": "Q={query} T={text}"})
    assert "{text}" in judge.prompt.get_template()
