"""The prefix support judge and the answer evaluator's error rows: the judge's prompt begins
with the generation's, yes/no from first-token log-probabilities, failures leave a sentence
unjudged; an empty completion is an error row; a truncated answer is marked."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from pathlib import Path
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
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.evaluation.answers import AnswerEvaluator, answer_questions
from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.evaluation.support_judge import (
    PrefixSupportJudge,
    generation_messages,
    judge_messages,
    verdict_from_response,
)

CONTEXT = "The Ferro pump runs at 3.5 bar in normal operation. The filter is cleaned weekly."
QUESTIONS = [
    Question("q1", "At what pressure does the Ferro pump run?", (("3.5 bar",),)),
    Question("q2", "How often is the filter cleaned?", (("weekly",),)),
]
ANSWERS = {
    "pressure": "The Ferro pump runs at 3.5 bar.",
    "filter": "The filter is cleaned weekly. It was designed in 1990.",  # 2nd: unsupported
}


def chatml(messages: Sequence[ChatMessage], generation_prompt: bool = True) -> str:
    """A ChatML rendering (Qwen's template without its default system turn)."""
    text = "".join(f"<|im_start|>{m.role.value}\n{m.content}<|im_end|>\n" for m in messages)
    return text + ("<|im_start|>assistant\n" if generation_prompt else "")


def alternatives(p_yes: float, p_no: float) -> list[list[LogProb]]:
    return [[LogProb(token="yes", logprob=math.log(p_yes), bytes=[]),
             LogProb(token="no", logprob=math.log(p_no), bytes=[])]]  # fmt: skip


class ChatScript(CustomLLM):
    """A chat model: answers from ``ANSWERS``; a judge turn gets P(yes) 0.9 when the sentence is
    in the context, else 0.1, as log-probabilities. Every call's messages and kwargs are kept."""

    max_tokens: int | None = 64
    answer_fn: Any = None
    finish: str = "stop"
    calls: list[tuple[list[ChatMessage], dict[str, Any]]] = []

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        self.calls = []

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="chat-script", is_chat_model=True)

    def _reply(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls.append((list(messages), dict(kwargs, max_tokens=self.max_tokens)))
        last = str(messages[-1].content)
        if messages[-1].role.value == "user" and last.startswith("Check one sentence"):
            sentence = last.split("Sentence: ", 1)[1].split("\n", 1)[0].rstrip(".")
            p_yes = 0.9 if sentence.lower() in CONTEXT.lower() else 0.1
            return ChatResponse(message=ChatMessage(role="assistant", content="yes"),
                                logprobs=alternatives(p_yes, 1 - p_yes))  # fmt: skip
        if self.answer_fn is not None:
            text = self.answer_fn(last)
        else:
            text = next((a for word, a in ANSWERS.items() if word in last), "No idea.")
        raw = {"choices": [{"finish_reason": self.finish}]}
        return ChatResponse(message=ChatMessage(role="assistant", content=text), raw=raw)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply(messages, **kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply(messages, **kwargs)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        raise AssertionError("the evaluator chats with a chat model")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("not streamed")


class FixedPipeline:
    name = "fixed"
    spec = "fixed-context"

    def retrieve(self, query: QueryBundle, k: int) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=CONTEXT), score=1.0)]


def run_all(evaluator: AnswerEvaluator) -> list[Any]:
    bundles = [QueryBundle(q.question) for q in QUESTIONS]
    return answer_questions(FixedPipeline(), QUESTIONS, bundles, 3, evaluator, False)


# --- the prompt -------------------------------------------------------------------------------


def test_the_judge_prompt_begins_with_the_generation_prompt() -> None:
    llm = ChatScript()
    messages = generation_messages(llm, DEFAULT_TEXT_QA_PROMPT, context_str=CONTEXT, query_str="Q?")
    judged = judge_messages(messages, "It runs at 3.5 bar.", "Is it supported?")
    generation_text = chatml(messages)
    judge_text = chatml(judged)
    # rendered, the judge's prompt is the generation prompt, the answer, then its own turn
    assert judge_text.startswith(generation_text + "It runs at 3.5 bar.<|im_end|>\n")
    assert judged[-1].content == "Is it supported?" and judged[-2].role.value == "assistant"
    # the LLM's system prompt comes first, as predict() sends it
    with_system = generation_messages(
        ChatScript(system_prompt="Be brief."),
        DEFAULT_TEXT_QA_PROMPT,
        context_str="c",
        query_str="q",
    )
    assert with_system[0].role.value == "system" and with_system[0].content == "Be brief."


def test_verdicts_from_log_probabilities_and_replies() -> None:
    def response(text: str, logprobs: Any = None) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role="assistant", content=text), logprobs=logprobs)

    supported = verdict_from_response(response("no", alternatives(0.6, 0.2)))
    assert supported.supported is True and supported.p_yes == pytest.approx(0.75)
    assert supported.reason == "logprobs"  # the probabilities decide, not the greedy reply
    assert verdict_from_response(response("yes", alternatives(0.2, 0.6))).supported is False
    assert verdict_from_response(response("x", alternatives(0.6, 0.4)), 0.65).supported is False
    assert verdict_from_response(response("No, it is not.")).supported is False
    assert verdict_from_response(response("")).supported is None
    assert verdict_from_response(response("maybe")).reason.startswith("unparsable reply")
    assert verdict_from_response(CompletionResponse(text="yes")).supported is None


def test_invalid_arguments_name_the_value() -> None:
    llm = ChatScript()
    with pytest.raises(ValueError, match=r"needs a \{sentence\} variable"):
        PrefixSupportJudge(llm, question="Is it supported?")
    for threshold in (0.0, 1.0):
        with pytest.raises(ValueError, match=f"threshold must be in \\(0, 1\\), got {threshold}"):
            PrefixSupportJudge(llm, threshold=threshold)
    with pytest.raises(ValueError, match="timeout must be > 0 seconds, got 0"):
        PrefixSupportJudge(llm, timeout=0)
    for top in (0, 21):
        with pytest.raises(ValueError, match=f"top_logprobs must be in 1..20, got {top}"):
            PrefixSupportJudge(llm, top_logprobs=top)


def test_each_judgement_asks_for_one_token_with_its_log_probabilities() -> None:
    llm = ChatScript(max_tokens=64)
    judge = PrefixSupportJudge(llm, top_logprobs=3)
    messages = generation_messages(llm, DEFAULT_TEXT_QA_PROMPT, context_str=CONTEXT, query_str="Q?")
    verdict = judge.judge(messages, "It runs at 3.5 bar.", "The filter is cleaned weekly.")
    assert verdict.supported is True and verdict.p_yes == pytest.approx(0.9)
    assert llm.max_tokens == 64  # the caller's LLM keeps its limit; the judge's copy has 1
    sent, kwargs = judge._judge_llm.calls[-1]
    assert kwargs == {"logprobs": True, "top_logprobs": 3, "max_tokens": 1}
    assert sent[: len(messages)] == messages
    assert judge.judge(messages, "x", "It was designed in 1990.").supported is False


def test_a_failing_or_slow_judge_leaves_the_sentence_unjudged() -> None:
    class Failing(ChatScript):
        def _reply(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            raise ConnectionError("server gone")

    class Slow(ChatScript):
        def _reply(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            time.sleep(2)
            return super()._reply(messages, **kwargs)

    messages = [ChatMessage(role="user", content="c")]
    failed = PrefixSupportJudge(Failing()).judge(messages, "a", "a")
    assert failed.supported is None and "server gone" in failed.reason
    started = time.perf_counter()
    slow = PrefixSupportJudge(Slow(), timeout=0.2).judge(messages, "a", "a")
    assert slow.supported is None and time.perf_counter() - started < 1.5
    failed_async = asyncio.run(PrefixSupportJudge(Failing()).ajudge(messages, "a", "a"))
    assert failed_async.supported is None and "server gone" in failed_async.reason

    class SlowAsync(ChatScript):
        @llm_chat_callback()
        async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            await asyncio.sleep(2)
            return self._reply(messages, **kwargs)

    slow_async = asyncio.run(
        PrefixSupportJudge(SlowAsync(), timeout=0.2).ajudge(messages, "a", "a")
    )
    assert slow_async.supported is None and slow_async.reason == "timeout after 0.2 s"


def test_a_clients_own_timeout_is_its_error_sync_and_async() -> None:
    """A TimeoutError the LLM client raises is the LLM's error on both paths, never taken for
    the judge's own bound (the async path used to call it "timeout after 120 s")."""

    class ClientTimeout(ChatScript):
        def _reply(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
            raise TimeoutError("read timed out")

    messages = [ChatMessage(role="user", content="c")]
    judge = PrefixSupportJudge(ClientTimeout())
    verdicts = [
        judge.judge(messages, "a", "a"),
        asyncio.run(judge.ajudge(messages, "a", "a")),
    ]
    expected = "LLM error: TimeoutError('read timed out')"
    assert [(v.supported, v.reason) for v in verdicts] == [(None, expected)] * 2


# --- the evaluator with the prefix judge ------------------------------------------------------


def test_the_evaluator_judges_in_the_generation_chat(tmp_path: Path) -> None:
    llm = ChatScript()
    evaluator = AnswerEvaluator(llm, tmp_path / "c", support_judge="prefix")
    q1, q2 = run_all(evaluator)
    assert (q1.hallucinated, q1.sentences, q1.fact_recall) == (False, 1, True)
    assert (q2.hallucinated, q2.unsupported) == (True, 1)
    assert [v.p_yes for v in q2.verdicts] == pytest.approx([0.9, 0.1])
    judge_llm = evaluator.prefix_judge._judge_llm
    generated = next(m for m, kwargs in llm.calls if "logprobs" not in kwargs)
    judged = next(m for m, kwargs in judge_llm.calls if kwargs.get("logprobs"))
    assert judged[: len(generated)] == generated  # the same chat, continued
    assert judged[len(generated)].content == q1.answer
    assert (q1.llm_calls, q2.llm_calls) == (2, 3)
    # a re-run reads everything from the cache: no call
    again = ChatScript()
    cached = run_all(AnswerEvaluator(again, tmp_path / "c", support_judge="prefix"))
    assert again.calls == [] and [r.hallucinated for r in cached] == [False, True]
    assert all(r.cached and r.llm_calls == 0 for r in cached)
    assert [v.p_yes for v in cached[1].verdicts] == pytest.approx([0.9, 0.1])


def test_sync_and_async_prefix_judging_agree(tmp_path: Path) -> None:
    from llama_index_ext_advrag.evaluation.answers import aanswer_questions

    sync_llm, async_llm = ChatScript(), ChatScript()
    sync = run_all(AnswerEvaluator(sync_llm, tmp_path / "s", support_judge="prefix"))
    evaluator = AnswerEvaluator(async_llm, tmp_path / "a", support_judge="prefix")
    bundles = [QueryBundle(q.question) for q in QUESTIONS]
    asynchronous = asyncio.run(
        aanswer_questions(FixedPipeline(), QUESTIONS, bundles, 3, evaluator, False)
    )

    def comparable(r: Any) -> tuple:
        return (r.answer, r.hallucinated, r.unsupported, r.llm_calls, r.verdicts)

    assert [comparable(r) for r in asynchronous] == [comparable(r) for r in sync]
    assert async_llm.calls == sync_llm.calls  # the same messages, in the same order


def test_an_empty_completion_is_an_error_row_in_async_too(tmp_path: Path) -> None:
    from llama_index_ext_advrag.evaluation.answers import aanswer_questions

    llm = ChatScript(answer_fn=lambda prompt: "")
    evaluator = AnswerEvaluator(llm, tmp_path / "c", support_judge="prefix")
    bundles = [QueryBundle(q.question) for q in QUESTIONS]
    rows = asyncio.run(aanswer_questions(FixedPipeline(), QUESTIONS, bundles, 3, evaluator, False))
    assert all(r.error and r.error.startswith("EmptyAnswerError") for r in rows)
    assert all(r.hallucinated is None for r in rows)


def test_the_judge_choice_is_checked(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs a chat model, and ScriptedLLM is not one"):
        AnswerEvaluator(ScriptedLLM(["x"]), tmp_path, support_judge="prefix")
    with pytest.raises(ValueError, match="support_judge must be one of .* got 'nli'"):
        AnswerEvaluator(ChatScript(), tmp_path, support_judge="nli")


# --- error rows -------------------------------------------------------------------------------


@pytest.mark.parametrize("judge", ["prefix", "faithfulness"])
def test_an_empty_completion_is_an_error_row(tmp_path: Path, judge: str) -> None:
    def blank(prompt: str) -> str:
        return "  " if "pressure" in prompt else ANSWERS["filter"]

    evaluator = AnswerEvaluator(ChatScript(answer_fn=blank), tmp_path / "c", support_judge=judge)
    empty, other = run_all(evaluator)
    assert empty.error is not None and empty.error.startswith("EmptyAnswerError")
    assert (empty.hallucinated, empty.fact_recall, empty.sentences) == (None, None, 0)
    assert other.error is None
    # kept in the cache: a re-run gives the same error row without asking again
    again = ChatScript(answer_fn=blank)
    rerun = run_all(AnswerEvaluator(again, tmp_path / "c", support_judge=judge))
    assert rerun[0].error == empty.error and again.calls == []


def test_a_completion_model_answering_nothing_is_an_error_row_too(tmp_path: Path) -> None:
    def blank(prompt: str) -> str:
        return "" if "Query:" in prompt else "YES"

    (empty, _) = run_all(AnswerEvaluator(ScriptedLLM(blank), tmp_path / "c"))
    assert empty.error is not None and empty.error.startswith("EmptyAnswerError")


def test_an_answer_cut_at_the_token_limit_is_marked(tmp_path: Path) -> None:
    results = run_all(AnswerEvaluator(ChatScript(finish="length"), tmp_path / "c",
                                      support_judge="prefix"))  # fmt: skip
    assert all(r.truncated for r in results)
    again = ChatScript()
    cached = run_all(AnswerEvaluator(again, tmp_path / "c", support_judge="prefix"))
    assert all(r.truncated for r in cached) and again.calls == []
    fine = run_all(AnswerEvaluator(ChatScript(), tmp_path / "d", support_judge="prefix"))
    assert not any(r.truncated for r in fine)
