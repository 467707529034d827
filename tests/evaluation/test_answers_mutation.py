"""Answer evaluation beyond test_answers.py: a pipeline that answers itself (Self-RAG) through the
cache, sync and async; the evaluator's identity; cache keys that separate what must be
separate; a failed row's exact fields; token counts; the pipeline key (kills the mutants of
evaluation/answers.py the scripted-LLM tests leave)."""

from __future__ import annotations

import asyncio
import logging
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


class Recording:
    """A retrieving pipeline that records what it is asked."""

    name = "rec"
    spec = "recording"

    def __init__(self) -> None:
        self.asked: list[tuple[str, int]] = []

    def retrieve(self, bundle: QueryBundle, k: int) -> list[NodeWithScore]:
        self.asked.append((bundle.query_str, k))
        return [NodeWithScore(node=TextNode(text=CONTEXT), score=1.0)]


class Judge:
    """A support evaluator that records its calls and passes every sentence."""

    def __init__(self, verdict: bool | None = True, result: bool = True) -> None:
        self.calls: list[dict[str, Any]] = []
        self.verdict, self.result = verdict, result

    def _result(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if not self.result:
            return None

        class Result:
            passing = self.verdict

        return Result()

    def evaluate(self, **kwargs: Any) -> Any:
        return self._result(**kwargs)

    async def aevaluate(self, **kwargs: Any) -> Any:
        return self._result(**kwargs)

    def get_prompts(self) -> dict:
        return {}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_what_the_pipeline_llm_and_judge_are_given(mode: str, tmp_path: Path) -> None:
    llm, judge, pipeline = ScriptedLLM(yes), Judge(), Recording()
    result = run(mode, pipeline, AnswerEvaluator(llm, tmp_path, support_evaluator=judge), k=2)
    assert pipeline.asked == [(QUESTION.question, 2)]
    assert judge.calls == [
        {"query": QUESTION.question, "response": "The pump runs at 3.5 bar.", "contexts": [CONTEXT]}
    ]
    assert (result.hallucinated, result.sentences, result.llm_calls) == (False, 1, 1)
    assert result.latency_ms is not None and result.latency_ms > 0
    # the same question and context from another pipeline: generated again, not cached
    other = Recording()
    other.name = "other"
    again = run(mode, other, AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=judge))
    assert again.cached is False


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_judge_without_a_result_leaves_the_sentence_unjudged(mode: str, tmp_path: Path) -> None:
    judge = Judge(result=False)
    result = run(
        mode, Recording(), AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=judge)
    )
    assert (result.hallucinated, result.unjudged, result.error) == (None, 1, None)


def test_judgements_are_cached_per_llm_and_judge(tmp_path: Path) -> None:
    first = Judge()
    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=first)
    assert evaluator.supported("q", "s", "c") is True and len(first.calls) == 1
    assert evaluator.supported("q", "s", "c") is True and len(first.calls) == 1  # cached

    class OtherJudge(Judge):
        pass

    other = OtherJudge(verdict=False)
    assert (
        AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=other).supported(
            "q", "s", "c"
        )
        is False
    )  # another judge: judged again

    class OtherLLM(ScriptedLLM):
        pass

    third = Judge(verdict=False)
    assert (
        AnswerEvaluator(OtherLLM(yes), tmp_path, support_evaluator=third).supported("q", "s", "c")
        is False
        and len(third.calls) == 1
    )  # another LLM: judged again
    # an answer and a judgement never share a key, even with the same texts
    assert evaluator._support_key("s", "c", "q", "a") != evaluator._answer_key("s", "c", "")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_timeouts_name_the_call(mode: str, tmp_path: Path, caplog) -> None:
    import time as clock

    class Slow(ScriptedLLM):
        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            await asyncio.sleep(2)
            return await super().acomplete(prompt, formatted, **kwargs)

        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any):
            clock.sleep(2)
            return super().complete(prompt, formatted, **kwargs)

    evaluator = AnswerEvaluator(Slow(yes), tmp_path, timeout=0.2)
    result = run(mode, Recording(), evaluator)
    assert result.error == "TimeoutError: the answer LLM gave no answer within 0.2 s"
    assert "pipeline rec, question q1: no answer (the answer LLM gave no answer" in caplog.text

    class SlowJudge(Judge):
        def evaluate(self, **kwargs: Any) -> Any:
            clock.sleep(2)

        async def aevaluate(self, **kwargs: Any) -> Any:
            await asyncio.sleep(2)

    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path / "j", timeout=0.2,
                                support_evaluator=SlowJudge())  # fmt: skip
    caplog.clear()
    result = run(mode, Recording(), evaluator)
    assert result.unjudged == 1
    assert "support judgement failed (the support judge gave no answer within 0.2 s)" in caplog.text


def test_choose_k_without_a_k_says_so() -> None:
    with pytest.raises(ValueError) as error:
        choose_k({}, 10)
    assert str(error.value) == "choose_k needs at least one measured k"


@pytest.mark.parametrize("show", [True, False])
def test_the_progress_bar(show: bool, tmp_path: Path, monkeypatch) -> None:
    from llama_index_ext_advrag.evaluation import answers

    bars: list[dict[str, Any]] = []

    def fake_tqdm(items: Any, **kwargs: Any) -> Any:
        bars.append(kwargs)
        return items

    monkeypatch.setattr(answers, "tqdm", fake_tqdm)
    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=Judge())
    bundles = [QueryBundle(QUESTION.question)]
    answer_questions(Recording(), [QUESTION], bundles, 1, evaluator, show)
    asyncio.run(aanswer_questions(Recording(), [QUESTION], bundles, 1, evaluator, show))
    assert bars == [{"desc": "rec answers", "disable": not show, "leave": False}] * 2
    with pytest.raises(ValueError):
        answer_questions(Recording(), [QUESTION], [], 1, evaluator, show)


class PromptJudge(Judge):
    def __init__(self, prompt: str) -> None:
        super().__init__()
        self.prompt = prompt

    def get_prompts(self) -> dict:
        return {"eval_template": self.prompt}  # a plain string: no .template


def test_keys_separate_llms_prompts_and_judges(tmp_path: Path) -> None:
    from llama_index.core.prompts import PromptTemplate

    class OtherLLM(ScriptedLLM):
        pass

    first = ScriptedLLM(yes)
    AnswerEvaluator(first, tmp_path).generate("p", "q", "c")
    other = OtherLLM(yes)
    assert AnswerEvaluator(other, tmp_path).generate("p", "q", "c")[2] is False  # another LLM
    custom = PromptTemplate("Q={query_str} C={context_str}")
    again = ScriptedLLM(yes)
    evaluator = AnswerEvaluator(again, tmp_path, prompt=custom)
    assert evaluator.generate("p", "q", "c")[2] is False  # another prompt
    assert again.prompts == ["Q=q C=c"]  # the given prompt is the one used
    judge_a, judge_b = PromptJudge("judge A"), PromptJudge("judge B")
    AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=judge_a).supported("q", "s", "c")
    AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=judge_b).supported("q", "s", "c")
    assert (len(judge_a.calls), len(judge_b.calls)) == (1, 1)  # another judge prompt


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_self_answers_are_cached_per_pipeline_question_and_llm(mode: str, tmp_path: Path) -> None:
    class OtherLLM(ScriptedLLM):
        pass

    def ask(pipeline: SelfAnswering, question: Question, llm: Any) -> AnswerResult:
        evaluator = AnswerEvaluator(llm, tmp_path, support_evaluator=Judge())
        bundles = [QueryBundle(question.question)]
        if mode == "async":
            rows = asyncio.run(
                aanswer_questions(pipeline, [question], bundles, 3, evaluator, False)
            )
        else:
            rows = answer_questions(pipeline, [question], bundles, 3, evaluator, False)
        return rows[0]

    first, second = SelfAnswering(), SelfAnswering()
    second.name = "second"
    other_question = Question("q2", "How often is the filter cleaned?", (("weekly",),))
    assert ask(first, QUESTION, ScriptedLLM(yes)).pipeline == "self"
    assert ask(second, QUESTION, ScriptedLLM(yes)).cached is False  # another pipeline
    assert ask(first, other_question, ScriptedLLM(yes)).cached is False  # another question
    assert ask(first, QUESTION, OtherLLM(yes)).cached is False  # another LLM
    assert ask(first, QUESTION, ScriptedLLM(yes)).cached is True
    assert len(first.calls) == 3 and len(second.calls) == 1


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_slow_self_answering_pipeline_is_bounded(mode: str, tmp_path: Path) -> None:
    import time as clock

    class Slow(SelfAnswering):
        def answer(self, bundle: QueryBundle, k: int):
            clock.sleep(2)
            return super().answer(bundle, k)

    result = run(mode, Slow(), AnswerEvaluator(ScriptedLLM(yes), tmp_path, timeout=0.2))
    assert result.error == "TimeoutError: pipeline self gave no answer within 0.2 s"


def test_unsupported_sentences_are_counted(tmp_path: Path) -> None:
    class PerSentence(Judge):
        def _result(self, **kwargs: Any) -> Any:
            self.calls.append(kwargs)

            class Result:
                passing = "blue" not in kwargs["response"]

            return Result()

    class Three(Recording):
        name = "three"

    llm = ScriptedLLM(
        lambda p: (
            "The pump runs at 3.5 bar. It is blue. It is quiet."
            if not p.startswith("Please")
            else "YES"
        )
    )
    result = run("sync", Three(), AnswerEvaluator(llm, tmp_path, support_evaluator=PerSentence()))
    assert (result.pipeline, result.sentences, result.unsupported, result.unjudged) == (
        "three",
        3,
        1,
        0,
    )
    assert result.hallucinated is True


def test_latency_is_in_milliseconds(tmp_path: Path) -> None:
    import time as clock

    class SlowRetrieval(Recording):
        def retrieve(self, bundle: QueryBundle, k: int) -> list[NodeWithScore]:
            clock.sleep(0.05)
            return super().retrieve(bundle, k)

    result = run("sync", SlowRetrieval(), AnswerEvaluator(ScriptedLLM(yes), tmp_path))
    assert result.latency_ms >= 50  # 50 ms of retrieval, counted in milliseconds


def test_failures_are_logged_in_words(tmp_path: Path, caplog) -> None:
    class Broken(Recording):
        def retrieve(self, bundle: QueryBundle, k: int) -> list[NodeWithScore]:
            raise RuntimeError("store down")

    class Failing(Judge):
        def evaluate(self, **kwargs: Any) -> Any:
            raise RuntimeError("judge down")

    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.evaluation.answers"):
        run("sync", Broken(), AnswerEvaluator(ScriptedLLM(yes), tmp_path))
        AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=Failing()).supported(
            "q", "s", "c"
        )
    assert caplog.messages == [
        "pipeline rec, question q1: no answer (store down)",
        "support judgement failed (judge down): sentence left unjudged",
    ]


def test_the_progress_bar_is_shown_by_default(tmp_path: Path, monkeypatch) -> None:
    from llama_index_ext_advrag.evaluation import answers

    bars: list[bool] = []
    monkeypatch.setattr(answers, "tqdm", lambda items, **kw: bars.append(kw["disable"]) or items)
    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=Judge())
    bundles = [QueryBundle(QUESTION.question)]
    answer_questions(Recording(), [QUESTION], bundles, 1, evaluator)
    asyncio.run(aanswer_questions(Recording(), [QUESTION], bundles, 1, evaluator))
    assert bars == [False, False]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_row_names_its_k_and_a_plausible_latency(mode: str, tmp_path: Path) -> None:
    result = run(mode, Recording(), AnswerEvaluator(ScriptedLLM(yes), tmp_path), k=7)
    assert result.k == 7
    assert 0 < result.latency_ms < 60_000  # milliseconds since the call started


def test_a_judge_without_prompts_is_named_by_its_class(tmp_path: Path) -> None:
    class Bare:
        def evaluate(self, **kwargs: Any) -> Any:
            class Result:
                passing = True

            return Result()

    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=Bare())
    assert evaluator.identity()["judge"] == "Bare" and evaluator.supported("q", "s", "c") is True


def test_async_answers_are_cached_per_context(tmp_path: Path) -> None:
    llm = ScriptedLLM(yes)
    evaluator = AnswerEvaluator(llm, tmp_path)
    asyncio.run(evaluator.agenerate("p", "question", "context"))
    assert asyncio.run(evaluator.agenerate("p", "question", "other"))[2] is False
    assert asyncio.run(evaluator.agenerate("p", "question", "context"))[2] is True
    assert len(llm.prompts) == 2


def test_async_judge_failures_are_logged_in_words(tmp_path: Path, caplog) -> None:
    class Failing(Judge):
        async def aevaluate(self, **kwargs: Any) -> Any:
            raise RuntimeError("judge down")

    evaluator = AnswerEvaluator(ScriptedLLM(yes), tmp_path, support_evaluator=Failing())
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.evaluation.answers"):
        assert asyncio.run(evaluator.asupported("q", "s", "c")) is None
    assert caplog.messages == ["support judgement failed (judge down): sentence left unjudged"]


class Refusing(SelfAnswering):
    """A generating pipeline whose answer here is its own refusal."""

    REFUSAL = "The retrieved evidence is insufficient to answer this question."

    def __init__(self) -> None:
        super().__init__(self.REFUSAL)

    @staticmethod
    def refused(answer: str, question: str) -> bool:
        return answer == Refusing.REFUSAL and question == QUESTION.question


def no(prompt: str) -> str:
    return "NO"  # every sentence judged unsupported


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_pipelines_own_refusal_is_no_hallucination_and_not_judged(
    mode: str, tmp_path: Path
) -> None:
    llm = ScriptedLLM(no)
    result = run(mode, Refusing(), AnswerEvaluator(llm, tmp_path))
    assert (result.refused, result.hallucinated, result.fact_recall) == (True, False, False)
    assert (result.sentences, result.unsupported, result.verdicts) == (0, 0, ())
    assert llm.prompts == []  # no support judgement asked
    # the same text from a pipeline that does not call it a refusal is judged as any answer
    judged = run(mode, SelfAnswering(Refusing.REFUSAL), AnswerEvaluator(ScriptedLLM(no), tmp_path))
    assert (judged.refused, judged.hallucinated, judged.unsupported) == (False, True, 1)
    # and a pipeline that can refuse, answering, is judged
    answering = Refusing()
    answering.answer_text = "It runs at 3.5 bar."
    judged = run(mode, answering, AnswerEvaluator(ScriptedLLM(no), tmp_path / "answering"))
    assert (judged.refused, judged.hallucinated, judged.unsupported) == (False, True, 1)


def test_refusals_are_counted_in_the_summary_and_kept_in_the_hallucination_rate(
    tmp_path: Path,
) -> None:
    from llama_index_ext_advrag.evaluation.answer_report import summarize_answers

    refused = run("sync", Refusing(), AnswerEvaluator(ScriptedLLM(no), tmp_path))
    answered = run("sync", SelfAnswering(), AnswerEvaluator(ScriptedLLM(no), tmp_path / "b"))
    [summary] = summarize_answers([refused, answered])
    assert (summary.refused, summary.judged, summary.hallucination_rate) == (1, 2, 0.5)
