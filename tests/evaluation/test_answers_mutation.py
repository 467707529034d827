"""Answer evaluation beyond test_answers.py: a pipeline that answers itself (Self-RAG) through the
cache, sync and async; the evaluator's identity; cache keys that separate what must be
separate; a failed row's exact fields; token counts; the pipeline key (kills the mutants of
evaluation/answers.py the scripted-LLM tests leave)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.evaluation.answers import (
    AnswerEvaluator,
    AnswerResult,
    aanswer_questions,
    answer_questions,
    choose_k,
    pipeline_key,
)
from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.text import count_tokens

QUESTION = Question("q1", "At what pressure does the pump run?", (("3.5 bar",),))
CONTEXT = "The pump runs at 3.5 bar."


def yes(prompt: str) -> str:
    return "YES" if prompt.startswith("Please tell if") else "The pump runs at 3.5 bar."


class SelfAnswering:
    """A pipeline that generates its own answer (as Self-RAG does)."""

    name = "self"
    spec = "self-rag"
    generates = True

    def __init__(self, answer: str = "It runs at 3.5 bar.") -> None:
        self.answer_text = answer
        self.calls: list[tuple[str, int]] = []

    def answer(self, bundle: QueryBundle, k: int) -> tuple[str, list[NodeWithScore]]:
        self.calls.append((bundle.query_str, k))
        return self.answer_text, [NodeWithScore(node=TextNode(text=CONTEXT), score=1.0)]

    def retrieve(self, bundle: QueryBundle, k: int) -> list[NodeWithScore]:
        raise AssertionError("a generating pipeline is not retrieved from")


def run(mode: str, pipeline: Any, evaluator: AnswerEvaluator, k: int = 3) -> AnswerResult:
    bundles = [QueryBundle(QUESTION.question)]
    if mode == "async":
        [result] = asyncio.run(
            aanswer_questions(pipeline, [QUESTION], bundles, k, evaluator, False)
        )
    else:
        [result] = answer_questions(pipeline, [QUESTION], bundles, k, evaluator, False)
    return result


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_pipeline_that_answers_itself_is_scored_and_cached(mode: str, tmp_path: Path) -> None:
    llm = ScriptedLLM(yes)
    pipeline = SelfAnswering()
    first = run(mode, pipeline, AnswerEvaluator(llm, tmp_path))
    assert pipeline.calls == [(QUESTION.question, 3)]
    assert (first.answer, first.fact_recall, first.hallucinated, first.cached) == (
        "It runs at 3.5 bar.",
        True,
        False,
        False,
    )
    assert first.context_tokens == count_tokens(CONTEXT)  # the pipeline's own context
    assert first.answer_tokens == count_tokens("It runs at 3.5 bar.")
    assert first.latency_ms is not None and first.latency_ms >= 0 and first.error is None
    assert [p for p in llm.prompts if not p.startswith("Please tell if")] == []
    # again: answer and context from the cache, the pipeline not asked
    second = run(mode, pipeline, AnswerEvaluator(ScriptedLLM([]), tmp_path))
    assert pipeline.calls == [(QUESTION.question, 3)]
    assert (second.answer, second.cached, second.llm_calls) == (first.answer, True, 0)
    assert second.latency_ms == first.latency_ms and second.context_tokens == first.context_tokens
    # another k is another answer
    run(mode, pipeline, AnswerEvaluator(ScriptedLLM(yes), tmp_path), k=5)
    assert pipeline.calls == [(QUESTION.question, 3), (QUESTION.question, 5)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_self_answering_pipeline_that_fails_gives_an_error_row(mode: str, tmp_path: Path) -> None:
    class Broken(SelfAnswering):
        def answer(self, bundle: QueryBundle, k: int):
            raise RuntimeError("judge server down")

    result = run(mode, Broken(), AnswerEvaluator(ScriptedLLM(yes), tmp_path), k=4)
    assert result == AnswerResult(
        "self", "q1", 4, "", None, None, None, 0, 0, 0, 0, 0, None, False, 0,
        "RuntimeError: judge server down",
    )  # fmt: skip


def test_the_evaluators_identity_names_the_llm_and_the_judge(tmp_path: Path) -> None:
    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path)
    identity = evaluator.identity()
    assert identity["judge"] == "FaithfulnessEvaluator"
    assert identity["llm"]["class"] == "ScriptedLLM"


def test_answers_are_cached_per_question_context_and_pipeline(tmp_path: Path) -> None:
    llm = ScriptedLLM(yes)
    evaluator = AnswerEvaluator(llm, tmp_path)
    evaluator.generate("p", "question", "context")
    for args in (
        ("p", "question", "other"),
        ("p", "other", "context"),
        ("o", "question", "context"),
    ):
        assert evaluator.generate(*args)[2] is False, args  # a new call, not the cached one
    assert evaluator.generate("p", "question", "context")[2] is True
    assert len(llm.prompts) == 4
    prompt = llm.prompts[0]
    assert "context" in prompt and "question" in prompt


def test_a_judgement_without_a_verdict_is_not_cached(tmp_path: Path) -> None:
    class NoVerdict:
        def evaluate(self, **kwargs: Any) -> Any:
            class Result:
                passing = None

            return Result()

        def get_prompts(self) -> dict:
            return {}

    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=NoVerdict())
    assert evaluator.supported("q", "s", "c") is None
    assert len(evaluator.cache) == 0
    assert evaluator.identity()["judge"] == "NoVerdict"


def test_pipeline_key_and_choose_k() -> None:
    class Plain:
        name = "p"

    class Configured:
        name = "c"
        spec = {"parser": "window"}
        settings = "judge=x"

    assert pipeline_key(Plain()) == "Plain:p:None:"
    assert pipeline_key(Configured()) == "Configured:c:{'parser': 'window'}:judge=x"
    assert choose_k({5: 500.0, 1: 100.0, 3: 300.0}, 200.0) == 1  # a tie: the smaller k
    assert choose_k({1: 100.0, 3: 300.0}, 260.0) == 3
