"""Support judgements and cache records of the answer evaluator, sync and async, through its
public methods: a prefix judgement is keyed by the question and the answer it continues (and
the default answer is the empty one), the generation chat carries the LLM's system prompt and
the context, the faithfulness path's verdict reasons are exact, and the records bench_answers
reads hold their milliseconds and LLM calls (kills the mutants of evaluation/answers.py that
the re-measure after the prefix judge found)."""

from __future__ import annotations

import asyncio
import json
import math
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
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.evaluation import EvaluationResult
from llama_index.core.llms import CustomLLM
from llama_index.core.llms.callbacks import llm_chat_callback, llm_completion_callback
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.evaluation.answer_cache import CACHE_FILE, cache_key, llm_identity
from llama_index_ext_advrag.evaluation.answers import (
    AnswerEvaluator,
    aanswer_questions,
    answer_questions,
)
from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.evaluation.support_judge import PrefixSupportJudge

CONTEXT = "The pump runs at 3.5 bar."
SENTENCE = "It runs at 3.5 bar."
Q1, Q2 = "At what pressure does the pump run?", "How hard does the pump push?"
A1, A2 = "It runs at 3.5 bar.", "The pump? It runs at 3.5 bar."


class JudgingChat(CustomLLM):
    """A chat model that answers ``A1`` and, asked for log-probabilities, says yes with 0.8.
    No ``max_tokens``: the prefix judge then calls this very object, so ``log`` has every call."""

    answer: str = A1
    raw_reply: Any = None
    _log: list[tuple[list[ChatMessage], dict[str, Any]]] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="judging-chat", is_chat_model=True)

    @property
    def log(self) -> list[tuple[list[ChatMessage], dict[str, Any]]]:
        return self._log

    def judgements(self) -> list[list[ChatMessage]]:
        return [messages for messages, kwargs in self._log if kwargs.get("logprobs")]

    def _reply(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._log.append((list(messages), kwargs))
        if kwargs.get("logprobs"):
            yes = [[LogProb(token="yes", logprob=math.log(0.8), bytes=[]),
                    LogProb(token="no", logprob=math.log(0.2), bytes=[])]]  # fmt: skip
            return ChatResponse(message=ChatMessage(role="assistant", content="yes"), logprobs=yes)
        reply = ChatMessage(role="assistant", content=self.answer)
        return ChatResponse(message=reply, raw=self.raw_reply)

    @llm_chat_callback()
    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply(messages, **kwargs)

    @llm_chat_callback()
    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self._reply(messages, **kwargs)

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        self._log.append(([ChatMessage(content=prompt)], kwargs))
        return CompletionResponse(text="ok")

    @llm_completion_callback()
    def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError("not streamed")


def judge(evaluator: AnswerEvaluator, mode: str, *args: str, verdict: bool = True) -> Any:
    """``judge_sentence`` / ``ajudge_sentence`` (``verdict=False``: ``supported`` /
    ``asupported``)."""
    if mode == "async":
        call = evaluator.ajudge_sentence if verdict else evaluator.asupported
        return asyncio.run(call(*args))
    return (evaluator.judge_sentence if verdict else evaluator.supported)(*args)


def records(folder: Path) -> list[dict[str, Any]]:
    lines = (folder / CACHE_FILE).read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["value"] for line in lines if line.strip()]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_prefix_judgement_is_keyed_by_its_question_and_answer(mode: str, tmp_path: Path) -> None:
    llm = JudgingChat()
    evaluator = AnswerEvaluator(llm, tmp_path, support_judge="prefix")
    first = judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1)
    assert (first.supported, first.p_yes, first.reason) == (True, pytest.approx(0.8), "logprobs")
    [asked] = llm.judgements()
    assert asked[-2].content == A1 and Q1 in str(asked[-3].content)  # the chat it continues
    assert judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1).reason == "logprobs"  # cached
    assert len(llm.judgements()) == 1
    judge(evaluator, mode, Q2, SENTENCE, CONTEXT, A1)  # another question: judged again
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A2)  # another answer: judged again
    assert len(llm.judgements()) == 3
    assert Q2 in str(llm.judgements()[1][-3].content) and llm.judgements()[2][-2].content == A2
    # the default answer is the empty one, as a sentence judged on its own
    assert judge(evaluator, mode, Q1, SENTENCE, CONTEXT).supported is True
    assert llm.judgements()[3][-2].content == ""
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, "")
    assert len(llm.judgements()) == 4


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_supported_asks_what_judge_sentence_asks(mode: str, tmp_path: Path) -> None:
    llm = JudgingChat()
    evaluator = AnswerEvaluator(llm, tmp_path, support_judge="prefix")
    assert judge(evaluator, mode, Q2, SENTENCE, CONTEXT, A2, verdict=False) is True
    [asked] = llm.judgements()
    assert asked[-2].content == A2 and Q2 in str(asked[-3].content)
    judge(evaluator, mode, Q2, SENTENCE, CONTEXT, A2)  # the same key: cached
    assert judge(evaluator, mode, Q1, SENTENCE, CONTEXT, verdict=False) is True
    assert llm.judgements()[1][-2].content == ""
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, "")
    assert len(llm.judgements()) == 2


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_prefix_records_hold_the_verdict_and_its_milliseconds(mode: str, tmp_path: Path) -> None:
    evaluator = AnswerEvaluator(JudgingChat(), tmp_path, support_judge="prefix")
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1)
    [record] = records(tmp_path)
    assert set(record) == {"supported", "p_yes", "reason", "ms"}
    assert (record["supported"], record["p_yes"], record["reason"]) == (True, 0.8, "logprobs")
    assert 0 <= record["ms"] < 60_000


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_generation_chat_has_the_system_prompt_and_the_context(
    mode: str, tmp_path: Path
) -> None:
    llm = JudgingChat(system_prompt="Answer in one sentence.")
    evaluator = AnswerEvaluator(llm, tmp_path, support_judge="prefix")
    if mode == "async":
        made = asyncio.run(evaluator.agenerate("p", Q1, CONTEXT))
    else:
        made = evaluator.generate("p", Q1, CONTEXT)
    assert made.answer == A1
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1)
    generated, judged = llm.log[0][0], llm.judgements()[0]
    assert (generated[0].role.value, generated[0].content) == ("system", "Answer in one sentence.")
    assert CONTEXT in str(generated[-1].content) and Q1 in str(generated[-1].content)
    assert "None" not in str(generated[-1].content)
    assert judged[: len(generated)] == generated


class Faithfulness:
    """A support evaluator: ``passing`` as given, or an error."""

    def __init__(self, passing: bool | None = True, error: Exception | None = None) -> None:
        self.passing, self.error, self.calls = passing, error, 0

    def _result(self) -> EvaluationResult:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return EvaluationResult(passing=self.passing)

    def evaluate(self, **kwargs: Any) -> EvaluationResult:
        return self._result()

    async def aevaluate(self, **kwargs: Any) -> EvaluationResult:
        return self._result()


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_faithfulness_verdicts_give_their_exact_reason(mode: str, tmp_path: Path) -> None:
    silent = Faithfulness(passing=None)
    evaluator = AnswerEvaluator(JudgingChat(), tmp_path / "a", support_evaluator=silent)
    verdict = judge(evaluator, mode, Q1, SENTENCE, CONTEXT)
    assert (verdict.supported, verdict.p_yes, verdict.reason) == (
        None, None, "the evaluator gave no verdict"
    )  # fmt: skip
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT)
    assert silent.calls == 2  # no verdict: not cached
    kept = AnswerEvaluator(JudgingChat(), tmp_path / "d", support_evaluator=Faithfulness(True))
    assert judge(kept, mode, Q1, SENTENCE, CONTEXT).reason == "Faithfulness"
    cached = judge(kept, mode, Q1, SENTENCE, CONTEXT)  # its record holds no reason
    assert (cached.supported, cached.p_yes, cached.reason) == (True, None, "cached")
    passing = Faithfulness(passing=False)
    evaluator = AnswerEvaluator(JudgingChat(), tmp_path / "b", support_evaluator=passing)
    verdict = judge(evaluator, mode, Q1, SENTENCE, CONTEXT)
    assert (verdict.supported, verdict.p_yes, verdict.reason) == (False, None, "Faithfulness")
    error = RuntimeError("judge down: " + "x" * 300)
    failing = Faithfulness(error=error)
    evaluator = AnswerEvaluator(JudgingChat(), tmp_path / "c", support_evaluator=failing)
    verdict = judge(evaluator, mode, Q1, SENTENCE, CONTEXT)
    assert verdict.supported is None and verdict.reason == f"judge error: {error!r}"[:200]
    assert len(verdict.reason) == 200


class CallingPipeline:
    """Answers itself with two LLM calls, as Self-RAG does."""

    name, spec, generates = "self", "self-rag", True

    def __init__(self, llm: JudgingChat) -> None:
        self.llm = llm

    def answer(self, bundle: QueryBundle, k: int) -> tuple[str, list[NodeWithScore]]:
        self.llm.complete("retrieve?")
        self.llm.complete("critique?")
        return A1, [NodeWithScore(node=TextNode(text=CONTEXT), score=1.0)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_self_answer_record_holds_its_llm_calls(mode: str, tmp_path: Path) -> None:
    llm = JudgingChat()
    evaluator = AnswerEvaluator(llm, tmp_path, support_judge="prefix")
    if mode == "async":
        made = asyncio.run(evaluator.agenerate_with(CallingPipeline(llm), "p", QueryBundle(Q1), 3))
    else:
        made = evaluator.generate_with(CallingPipeline(llm), "p", QueryBundle(Q1), 3)
    assert made[:2] == (A1, CONTEXT) and made[3] is False
    [record] = records(tmp_path)
    assert (record["answer"], record["context"], record["calls"]) == (A1, CONTEXT, 2)
    assert set(record) == {"answer", "context", "ms", "calls"}


class Fixed:
    name, spec = "fixed", "fixed"

    def retrieve(self, bundle: QueryBundle, k: int) -> list[NodeWithScore]:
        return [NodeWithScore(node=TextNode(text=CONTEXT), score=1.0)]


def rows(mode: str, evaluator: AnswerEvaluator) -> Any:
    question, bundles = [Question("q1", Q1, (("3.5 bar",),))], [QueryBundle(Q1)]
    if mode == "async":
        [row] = asyncio.run(aanswer_questions(Fixed(), question, bundles, 3, evaluator, False))
    else:
        [row] = answer_questions(Fixed(), question, bundles, 3, evaluator, False)
    return row


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_scored_row_keeps_its_context_and_judges_in_its_answer_chat(
    mode: str, tmp_path: Path
) -> None:
    llm = JudgingChat()
    row = rows(mode, AnswerEvaluator(llm, tmp_path, support_judge="prefix"))
    assert (row.answer, row.hallucinated, row.sentences, row.truncated) == (A1, False, 1, False)
    assert CONTEXT in row.context and llm.judgements()[0][-2].content == A1


class Choice:
    def __init__(self, finish_reason: str) -> None:
        self.finish_reason = finish_reason


class Completion:
    """An OpenAI client's response object: ``choices`` as attributes, not a dict."""

    def __init__(self, finish_reason: str) -> None:
        self.choices = [Choice(finish_reason)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_cut_answer_is_marked_from_a_response_object_too(mode: str, tmp_path: Path) -> None:
    cut = rows(mode, AnswerEvaluator(JudgingChat(raw_reply=Completion("length")), tmp_path / "a"))
    assert (cut.answer, cut.truncated, cut.error) == (A1, True, None)
    whole = rows(mode, AnswerEvaluator(JudgingChat(raw_reply=Completion("stop")), tmp_path / "b"))
    assert (whole.truncated, whole.error) == (False, None)


class NoneLLM(ScriptedLLM):
    """A completion model whose ``predict`` gives ``None``."""

    def predict(self, prompt: Any, **kwargs: Any) -> Any:
        return None

    async def apredict(self, prompt: Any, **kwargs: Any) -> Any:
        return None


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_completion_models_no_answer_and_an_answer(mode: str, tmp_path: Path) -> None:
    empty = rows(mode, AnswerEvaluator(NoneLLM(["YES"]), tmp_path / "a"))
    assert empty.error == "EmptyAnswerError: the LLM returned an empty answer"
    assert (empty.answer, empty.hallucinated, empty.truncated) == ("", None, False)
    blank = rows(mode, AnswerEvaluator(JudgingChat(answer=" "), tmp_path / "b"))
    assert blank.error == "EmptyAnswerError: the LLM returned an empty answer"

    def script(prompt: str) -> str:
        return "YES" if prompt.startswith("Please tell if") else A1

    row = rows(mode, AnswerEvaluator(ScriptedLLM(script), tmp_path / "c"))
    assert (row.answer, row.truncated, row.hallucinated, row.error) == (A1, False, False, None)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_cache_keys_stay_readable_by_the_next_version(mode: str, tmp_path: Path) -> None:
    """The keys of self-answers and faithfulness judgements, spelt out (the committed answer
    cache of the long LLM run is read by them)."""
    llm = JudgingChat()
    evaluator = AnswerEvaluator(llm, tmp_path, support_evaluator=Faithfulness(True))
    if mode == "async":
        asyncio.run(evaluator.agenerate_with(CallingPipeline(llm), "p", QueryBundle(Q1), 3))
    else:
        evaluator.generate_with(CallingPipeline(llm), "p", QueryBundle(Q1), 3)
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1)
    if mode == "async":
        asyncio.run(evaluator.agenerate("p", Q1, CONTEXT))
    else:
        evaluator.generate("p", Q1, CONTEXT)
    lines = (tmp_path / CACHE_FILE).read_text(encoding="utf-8").splitlines()
    keys = [json.loads(line)["key"] for line in lines]
    identity = llm_identity(llm)
    template = DEFAULT_TEXT_QA_PROMPT.template
    assert keys == [
        cache_key("self-answer", identity, "p", 3, Q1),
        cache_key("support", identity, {"evaluator": "Faithfulness", "prompts": {}}, SENTENCE,
                  CONTEXT),
        cache_key("answer", identity, template, "p", Q1, CONTEXT),
    ]  # fmt: skip
    # a faithfulness judgement does not depend on the question or the answer: cached
    judge(evaluator, mode, Q2, SENTENCE, CONTEXT, A2)
    assert evaluator.support_evaluator.calls == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_prefix_judgement_keys_name_the_whole_chat(mode: str, tmp_path: Path) -> None:
    """A prefix judgement reads the prompt, the question, the answer so far and the context: its
    key names each of them (spelt out: the committed answer cache is read by it)."""
    llm = JudgingChat()
    evaluator = AnswerEvaluator(llm, tmp_path, support_judge="prefix")
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1)
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT + " It is blue.", A1)  # another context
    assert len(llm.judgements()) == 2
    lines = (tmp_path / CACHE_FILE).read_text(encoding="utf-8").splitlines()
    judge_identity = {"evaluator": "PrefixSupportJudge", **evaluator.prefix_judge.identity()}
    template = DEFAULT_TEXT_QA_PROMPT.template
    assert json.loads(lines[0])["key"] == cache_key(
        "support", llm_identity(llm), judge_identity, template, Q1, A1, SENTENCE, CONTEXT
    )
    other_prompt = PromptTemplate("Context: {context_str}\nQ: {query_str}\nA: ")
    again = AnswerEvaluator(llm, tmp_path, support_judge="prefix", prompt=other_prompt)
    judge(again, mode, Q1, SENTENCE, CONTEXT, A1)  # another prompt: judged again
    assert len(llm.judgements()) == 3


def test_the_prefix_judge_is_the_one_given_or_one_with_the_evaluators_timeout(
    tmp_path: Path,
) -> None:
    llm = JudgingChat()
    made = AnswerEvaluator(llm, tmp_path / "a", timeout=7.0, support_judge="prefix")
    assert made.prefix_judge is not None and made.prefix_judge.timeout == 7.0
    assert made.prefix_judge.llm is llm and made.support_evaluator is None
    given = PrefixSupportJudge(llm, threshold=0.9)
    evaluator = AnswerEvaluator(llm, tmp_path / "b", support_judge=given)
    assert evaluator.prefix_judge is given
    assert evaluator.judge_sentence(Q1, SENTENCE, CONTEXT, A1).supported is False  # 0.8 < 0.9
