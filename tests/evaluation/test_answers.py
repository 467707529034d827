"""Answer-level evaluation: metrics on hand cases, the scripted-LLM evaluator, the cache, resume
after an interrupt, bounded waits, and the error without an LLM."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.evaluation.answer_metrics import (
    answer_tokens,
    fact_recall,
    hallucinated,
    token_f1,
)
from llama_index_ext_advrag.evaluation.answer_report import answer_differences, summarize_answers
from llama_index_ext_advrag.evaluation.answers import (
    AnswerEvaluator,
    AnswerResult,
    NoLLMError,
    answer_questions,
    choose_k,
)
from llama_index_ext_advrag.evaluation.paired import paired_bootstrap_intervals
from llama_index_ext_advrag.evaluation.questions import Question

# --- metrics ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "groups", "expected"),
    [
        ("The pump runs at 3.5 bar.", [["3.5 bar"]], True),
        ("The pump runs at 35 bars.", [["3.5 bar"]], False),  # "bars" is not "bar"
        ("It starts at 40 degrees; the lamp is red.", [["40 degrees"], ["red"]], True),
        ("It starts at 40 degrees.", [["40 degrees"], ["red"]], False),  # every group needed
        ("It starts at forty degrees.", [["40 degrees", "forty degrees"]], True),
        ("渡灯节在七月初七举行。", [["七月初七"]], True),
        ("渡灯节在七月举行。", [["七月初七"]], False),
        ("anything", [], None),
    ],
)
def test_fact_recall_hand_cases(answer: str, groups, expected) -> None:
    assert fact_recall(answer, groups) is expected


def test_token_f1_hand_cases() -> None:
    assert token_f1("3.5 bar", [["3.5 bar"]]) == 1.0
    # prediction [pump, runs, at, 35, bar], gold [35, bar]: P 2/5, R 1, F1 = 0.8 / 1.4
    assert token_f1("The pump runs at 3.5 bar", [["3.5 bar"]]) == pytest.approx(4 / 7)
    # the best alternative counts; groups are averaged
    assert token_f1("red lamp", [["blue", "red lamp"], ["green"]]) == pytest.approx(0.5)
    # characters for CJK: 3 of 4 in common both ways
    assert token_f1("七月初七", [["七月初八"]]) == pytest.approx(0.75)
    # bags, not sets: a repeated token counts as often as it occurs in both
    assert token_f1("七月初七", [["七月初七"]]) == 1.0
    # prediction [七, 七], gold [七, 月, 初, 七]: 2 in common, P 2/2, R 2/4
    assert token_f1("七七", [["七月初七"]]) == pytest.approx(2 / 3)
    # prediction [bar, bar, bar], gold [bar]: 1 in common, P 1/3, R 1
    assert token_f1("bar bar bar", [["bar"]]) == pytest.approx(0.5)
    assert token_f1("", [["x"]]) == 0.0
    assert token_f1("x", []) is None
    assert answer_tokens("An apple, the pie.") == ["apple", "pie"]


def test_hallucinated_and_the_rate() -> None:
    assert hallucinated([True, True]) is False
    assert hallucinated([True, False, None]) is True
    assert hallucinated([True, None]) is None

    def row(q: str, flag: bool | None, error: str | None = None) -> AnswerResult:
        return AnswerResult("p", q, 3, "a", True, 1.0, flag, 1, int(bool(flag)), 0, 10, 2,
                            5.0, False, 1, error)  # fmt: skip

    rows = [row("1", False), row("2", True), row("3", None), row("4", True, "TimeoutError")]
    (summary,) = summarize_answers(rows)
    assert summary.hallucination_rate == 0.5  # 1 of the 2 judged answers; errors left out
    assert (summary.judged, summary.errors, summary.questions) == (2, 1, 4)


def test_paired_differences_reuse_the_bootstrap() -> None:
    def row(pipeline: str, q: int, recall: bool) -> AnswerResult:
        return AnswerResult(pipeline, str(q), 3, "a", recall, float(recall), False, 1, 0, 0,
                            10, 2, 5.0, False, 1)  # fmt: skip

    base = [row("baseline", q, q % 3 == 0) for q in range(40)]
    cand = [row("cand", q, q % 3 != 1) for q in range(40)]
    diffs = {d.metric: d for d in answer_differences(base + cand, "baseline", resamples=2000)}
    recall = diffs["fact recall"]
    order = sorted(range(40), key=str)  # questions are paired by id, in id order
    reference = np.array([float(q % 3 != 1) - float(q % 3 == 0) for q in order])
    assert recall.interval == paired_bootstrap_intervals(reference, resamples=2000)[0]
    assert recall.questions == 40 and recall.changes.better == 13  # q % 3 == 2
    assert diffs["hallucination rate"].interval.mean == 0.0


def test_choose_k_takes_the_nearest_budget() -> None:
    assert choose_k({1: 100.0, 2: 200.0, 5: 500.0}, 180) == 2
    assert choose_k({1: 100.0, 3: 300.0}, 200) == 1  # a tie: the smaller k
    with pytest.raises(ValueError, match="at least one"):
        choose_k({}, 10)


# --- the evaluator with a scripted LLM --------------------------------------------------------

CONTEXT = "The Ferro pump runs at 3.5 bar in normal operation. The filter is cleaned weekly."
QUESTIONS = [
    Question("q1", "At what pressure does the Ferro pump run?", (("3.5 bar",),)),
    Question("q2", "How often is the filter cleaned?", (("weekly",),)),
    Question("q3", "Who designed the pump?", (("Ada",),)),
    Question("q4", "What colour is the pump?", (("blue",),)),
]
ANSWERS = {
    "pressure": "The Ferro pump runs at 3.5 bar.",
    "filter": "The filter is cleaned weekly. It was designed in 1990.",  # 2nd: unsupported
    "designed": "I do not know.",
    "colour": "The pump is blue.",  # unsupported
}


def support_or_answer(prompt: str) -> str:
    """YES/NO for FaithfulnessEvaluator's prompt, else the scripted answer of the question."""
    if prompt.startswith("Please tell if"):
        information = re.findall(r"Information: (.*)\n", prompt)[-1].strip().rstrip(".").lower()
        context = prompt.rsplit("Context:", 1)[1].lower()
        return "YES" if information in context or information == "i do not know" else "NO"
    query = prompt.rsplit("Query:", 1)[1]
    return next((a for word, a in ANSWERS.items() if word in query), "No idea.")


class Clock:
    """``time.perf_counter`` of the answer evaluator, moved on by hand: latencies are exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    import importlib

    answers = importlib.import_module("llama_index_ext_advrag.evaluation.answers")
    fake = Clock()
    monkeypatch.setattr(answers, "time", fake)
    return fake


RETRIEVAL_S, GENERATION_S = 0.25, 0.5  # what retrieval and one answer take on the clock


def timed_answers(clock: Clock):
    """:func:`support_or_answer`, an answer taking ``GENERATION_S`` on ``clock``."""

    def reply(prompt: str) -> str:
        if not prompt.startswith("Please tell if"):
            clock.advance(GENERATION_S)
        return support_or_answer(prompt)

    return reply


class FixedPipeline:
    name = "fixed"
    spec = "fixed-context"

    def __init__(self, fail_on: int | None = None, clock: Clock | None = None) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.clock = clock

    def retrieve(self, query: QueryBundle, k: int) -> list[NodeWithScore]:
        self.calls += 1
        if self.clock is not None:
            self.clock.advance(RETRIEVAL_S)
        if self.fail_on is not None and self.calls == self.fail_on:
            raise KeyboardInterrupt  # the user pressed Ctrl-C halfway
        return [NodeWithScore(node=TextNode(text=CONTEXT), score=1.0)]


def answer_all(tmp_path: Path, llm: ScriptedLLM, pipeline=None) -> list[AnswerResult]:
    evaluator = AnswerEvaluator(llm, tmp_path / "cache", timeout=30)
    bundles = [QueryBundle(q.question) for q in QUESTIONS]
    return answer_questions(pipeline or FixedPipeline(), QUESTIONS, bundles, 3, evaluator, False)


def test_the_evaluator_scores_each_answer(tmp_path: Path, clock: Clock) -> None:
    llm = ScriptedLLM(timed_answers(clock))
    results = {r.question_id: r for r in answer_all(tmp_path, llm, FixedPipeline(clock=clock))}
    assert results["q1"].answer == "The Ferro pump runs at 3.5 bar."
    assert (results["q1"].fact_recall, results["q1"].hallucinated) == (True, False)
    assert (results["q2"].fact_recall, results["q2"].hallucinated) == (True, True)
    assert (results["q2"].sentences, results["q2"].unsupported) == (2, 1)
    assert (results["q3"].fact_recall, results["q3"].hallucinated) == (False, False)
    assert (results["q4"].fact_recall, results["q4"].hallucinated) == (True, True)
    assert results["q1"].token_f1 == pytest.approx(0.5)  # P 2/6 ([ferro pump runs at 35 bar]), R 1
    # 4 generations + 5 sentences judged (one call each), every call counted
    assert len(llm.prompts) == 9 and sum(r.llm_calls for r in results.values()) == 9
    # latency is retrieval plus generation
    assert [r.latency_ms for r in results.values()] == [(RETRIEVAL_S + GENERATION_S) * 1000] * 4
    assert not any(r.cached for r in results.values())


def test_a_cache_hit_does_not_call_the_llm(tmp_path: Path) -> None:
    first = answer_all(tmp_path, ScriptedLLM(support_or_answer))
    again = ScriptedLLM(support_or_answer)  # a new object, same model: same cache keys
    second = answer_all(tmp_path, again)
    assert again.prompts == []
    assert [r.answer for r in second] == [r.answer for r in first]
    assert [r.hallucinated for r in second] == [r.hallucinated for r in first]
    assert all(r.cached and r.llm_calls == 0 for r in second)


def test_resume_after_an_interrupt(tmp_path: Path, caplog) -> None:
    llm = ScriptedLLM(support_or_answer)
    with pytest.raises(KeyboardInterrupt):
        answer_all(tmp_path, llm, FixedPipeline(fail_on=3))
    generated = [p for p in llm.prompts if not p.startswith("Please tell if")]
    assert len(generated) == 2  # questions 1 and 2 answered before the interrupt
    cache_file = tmp_path / "cache" / "answers.jsonl"
    with cache_file.open("a", encoding="utf-8") as handle:
        handle.write('{"key": "cut sho')  # a write cut short by the interrupt
    resumed = ScriptedLLM(support_or_answer)
    results = answer_all(tmp_path, resumed)
    assert [r.cached for r in results] == [True, True, False, False]
    assert len([p for p in resumed.prompts if not p.startswith("Please tell if")]) == 2
    assert "line 6 is unreadable" in caplog.text  # 2 answers + 3 judgements, then the cut line
    lines = cache_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 6 + 2 + 2  # the cut line kept apart; q3 and q4 with 1 sentence each
    assert all(json.loads(line) for line in lines[6:])


def test_every_llm_wait_is_bounded(tmp_path: Path) -> None:
    def slow_answers(prompt: str) -> str:
        if not prompt.startswith("Please tell if"):
            time.sleep(3)
        return "YES"

    evaluator = AnswerEvaluator(ScriptedLLM(slow_answers), tmp_path / "c", timeout=0.3)
    started = time.perf_counter()
    result = evaluator.score(FixedPipeline(), QUESTIONS[0], QueryBundle("q"), 3, "key")
    assert time.perf_counter() - started < 2.5
    assert result.error is not None and "TimeoutError" in result.error
    assert result.fact_recall is None and len(evaluator.cache) == 0  # not cached: retried later

    def slow_judge(prompt: str) -> str:
        if prompt.startswith("Please tell if"):
            time.sleep(3)
        return "The pump runs at 3.5 bar."

    evaluator = AnswerEvaluator(ScriptedLLM(slow_judge), tmp_path / "d", timeout=0.3)
    result = evaluator.score(FixedPipeline(), QUESTIONS[0], QueryBundle("q"), 3, "key")
    assert (result.error, result.hallucinated, result.unjudged) == (None, None, 1)
    assert result.fact_recall is True


def test_no_llm_is_a_clear_error(tmp_path: Path, monkeypatch) -> None:
    from llama_index.core.llms import MockLLM

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for llm in (None, MockLLM()):
        with pytest.raises(NoLLMError, match="needs an LLM and none is set: set OPENAI_API_KEY"):
            AnswerEvaluator(llm, tmp_path)
    with pytest.raises(ValueError, match="timeout must be > 0 seconds, got 0"):
        AnswerEvaluator(ScriptedLLM(["x"]), tmp_path, timeout=0)


def test_sync_and_async_give_the_same_results(tmp_path: Path, clock: Clock) -> None:
    import asyncio

    from llama_index_ext_advrag.evaluation.answers import aanswer_questions

    sync_llm, async_llm = ScriptedLLM(timed_answers(clock)), ScriptedLLM(timed_answers(clock))
    bundles = [QueryBundle(q.question) for q in QUESTIONS]
    sync = answer_questions(FixedPipeline(clock=clock), QUESTIONS, bundles, 3,
                            AnswerEvaluator(sync_llm, tmp_path / "s"), False)  # fmt: skip
    evaluator = AnswerEvaluator(async_llm, tmp_path / "a")
    run = aanswer_questions(FixedPipeline(clock=clock), QUESTIONS, bundles, 3, evaluator, False)
    asynchronous = asyncio.run(run)

    def comparable(r: AnswerResult) -> tuple:
        return (r.answer, r.fact_recall, r.token_f1, r.hallucinated, r.unsupported, r.llm_calls,
                r.latency_ms, r.context_tokens, r.answer_tokens, r.sentences, r.unjudged)  # fmt: skip

    assert [comparable(r) for r in asynchronous] == [comparable(r) for r in sync]
    assert {r.latency_ms for r in sync} == {(RETRIEVAL_S + GENERATION_S) * 1000}
    assert async_llm.prompts == sync_llm.prompts
    cached = asyncio.run(aanswer_questions(FixedPipeline(), QUESTIONS, bundles, 3,
                                           AnswerEvaluator(ScriptedLLM([]), tmp_path / "a"),
                                           False))  # fmt: skip
    assert all(r.cached and r.llm_calls == 0 for r in cached)


def test_async_waits_are_bounded_too(tmp_path: Path) -> None:
    import asyncio

    class SlowLLM(ScriptedLLM):
        async def acomplete(self, prompt: str, formatted: bool = False, **kwargs):
            await asyncio.sleep(3)
            return await super().acomplete(prompt, formatted, **kwargs)

    evaluator = AnswerEvaluator(SlowLLM(support_or_answer), tmp_path / "c", timeout=0.3)
    started = time.perf_counter()
    result = asyncio.run(
        evaluator.ascore(FixedPipeline(), QUESTIONS[0], QueryBundle("q"), 3, "key")
    )
    assert time.perf_counter() - started < 2.5
    assert result.error is not None and result.error.startswith("TimeoutError")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_sentence_is_judged_against_each_context_on_its_own(tmp_path: Path, mode: str) -> None:
    """The support cache is keyed by the context too: a verdict is never reused for another."""
    import asyncio

    llm = ScriptedLLM(support_or_answer)
    evaluator = AnswerEvaluator(llm, tmp_path / mode)
    sentence, question = "The filter is cleaned weekly.", QUESTIONS[1].question
    contexts = [CONTEXT, "The pump is red.", CONTEXT]

    def judge(context: str) -> bool | None:
        if mode == "async":
            return asyncio.run(evaluator.asupported(question, sentence, context))
        return evaluator.supported(question, sentence, context)

    assert [judge(c) for c in contexts] == [True, False, True]
    assert len(llm.prompts) == 2  # the third is the first's cached verdict
