"""SelfRAGQueryEngine's records read back whole: each iteration's record (ISREL grades, relevant
passages, candidates and their critiques, failed generations, rewrites and their fallbacks, the
extractive sentences), the steps, the route and reflection events, and the passages an answer
rests on, through the public API on every path (mutation tests for query_engine/self_rag.py;
sync and async)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from advrag_testing import ScriptedLLM, instrumented
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.events import (
    SelfRAGAnswerEvent,
    SelfRAGReflectionEvent,
    SelfRAGRouteEvent,
)
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.query_engine.self_rag_critique import (
    DEFAULT_DIRECT_PROMPT,
    DEFAULT_GENERATE_PROMPT,
    DEFAULT_RETRIEVE_PROMPT,
    DEFAULT_REWRITE_PROMPT,
    DEFAULT_SUPPORT_PROMPT,
    DEFAULT_USEFULNESS_PROMPT,
)

FX = TextNode(text="The FX-40 syncs every 15 minutes.", id_="fx")
FX2 = TextNode(text="FX-40 sync uses port 7400.", id_="fx2")
CAT = TextNode(text="Cats purr when they are content.", id_="cat")
QUESTION = "How often does the FX-40 sync?"
ANSWER = "Every 15 minutes."
REFUSAL = "The retrieved evidence is insufficient to answer this question."
MODES = [False, True]  # use_async
HEADER = (
    "generation_mode", "retrieve_decision", "has_llm", "weights", "accept_support",
    "min_support", "max_retrievals", "isrel_threshold", "generation_passages",
    "critique_logprobs", "system_prompt",
)  # fmt: skip


class TableRetriever(BaseRetriever):
    """``table[query]`` (default: ``default``), every query kept."""

    def __init__(self, default: list[TextNode], table: dict[str, list[TextNode]] | None = None):
        super().__init__()
        self.default, self.table, self.queries = default, table or {}, []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        nodes = self.table.get(query_bundle.query_str, self.default)
        return [NodeWithScore(node=n, score=1.0) for n in nodes]


class GradedJudge(BaseRelevanceJudge):
    """0.9 for the sync interval, 0.6 for another FX-40 passage, else 0.1 (irrelevant)."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.9 if "every" in t else 0.6 if "FX-40" in t else 0.1) for t in texts]


class DownJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("judge down")


Reply = str | Callable[[str], str]


def script(
    retrieve: str = "yes",
    support: Reply = "partially",
    rating: str = "4",
    answer: Reply = ANSWER,
    rewrite: str = "FX-40 sync interval",
    direct: str = "42",
) -> ScriptedLLM:
    def reply(prompt: str) -> str:
        if "Does it need documents?" in prompt:
            return retrieve
        if "Support:" in prompt:
            return support(prompt) if callable(support) else support
        if "Rating:" in prompt:
            return rating
        if prompt.startswith("Context information"):
            return answer(prompt) if callable(answer) else answer
        if "Query:" in prompt:
            return rewrite
        return direct

    return ScriptedLLM(reply)


@pytest.fixture
def events() -> Iterator[list[Any]]:
    with instrumented() as (collected, _):
        yield collected


def run(engine: SelfRAGQueryEngine, use_async: bool) -> tuple[Any, dict[str, Any]]:
    """The response and its trace without timings or the header."""
    response = asyncio.run(engine.aquery(QUESTION)) if use_async else engine.query(QUESTION)
    trace = dict(response.metadata[TRACE_KEY]["self_rag"])
    for key in ("seconds", *HEADER):
        trace.pop(key)
    trace["steps"] = [{k: v for k, v in s.items() if k != "seconds"} for s in trace["steps"]]
    return response, trace


def sources(response: Any) -> list[str]:
    return [n.node.node_id for n in response.source_nodes]


def graded(node_id: str, score: float | None, kept: bool, reason: str | None = None) -> dict:
    label = "unknown" if score is None else "relevant" if kept else "irrelevant"
    return {
        "node_id": node_id, "kept": kept, "score": score, "label": label, "judge": "judge",
        "raw": None, "reason": reason,
    }  # fmt: skip


def parsed(value: float, label: str) -> dict[str, Any]:
    return {"value": value, "method": "parsed", "label": label, "reply": label}


def candidate(
    passages: list[str], isrel: float, issup: dict, isuse: dict, score: float
) -> dict[str, Any]:
    return {
        "passages": passages, "answer": ANSWER, "isrel": isrel, "issup": issup,
        "isuse": isuse, "score": score,
    }  # fmt: skip


def llm_step(name: str, iteration: int, calls: int) -> dict[str, Any]:
    return {"step": name, "iteration": iteration, "llm_calls": calls, "failed_calls": 0}


def judge_step(name: str, iteration: int, texts: int) -> dict[str, Any]:
    return {"step": name, "iteration": iteration, "judged_texts": texts}


def retrieve_step(iteration: int) -> dict[str, Any]:
    return {"step": "retrieve", "iteration": iteration}


def reflections(events: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (e.iteration, e.reflection, e.subject, e.value, e.detail)
        for e in events
        if isinstance(e, SelfRAGReflectionEvent)
    ]


def routes(events: list[Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(e.query, e.decision) for e in events if isinstance(e, SelfRAGRouteEvent)]


def answers(events: list[Any]) -> list[tuple[Any, ...]]:
    return [
        (e.answer_kind, e.stop_reason, e.llm_calls, e.iterations)
        for e in events
        if isinstance(e, SelfRAGAnswerEvent)
    ]


# ----- the LLM's retrieve decision, a rewrite, the best partially supported answer -----


@pytest.mark.parametrize("use_async", MODES)
def test_two_retrievals_read_back_whole(use_async: bool, events: list[Any]) -> None:
    llm = script()
    retriever = TableRetriever([FX, CAT, FX2])
    engine = SelfRAGQueryEngine(
        retriever=retriever,
        llm=llm,
        judge=GradedJudge(),
        retrieve_decision="llm",
        corpus_description="FX manuals",
        max_retrievals=2,
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (ANSWER, ["fx"])
    assert retriever.queries == [QUESTION, "FX-40 sync interval"]
    assert llm.prompts[0] == DEFAULT_RETRIEVE_PROMPT.format(query=QUESTION, corpus=" (FX manuals)")
    assert llm.prompts[-1] == DEFAULT_REWRITE_PROMPT.format(
        query=QUESTION, avoid=f"Not: {QUESTION}\n"
    )
    partially, four = parsed(0.5, "partially"), parsed(0.5, "4")
    first_isrel = [graded("fx", 0.9, True), graded("cat", 0.1, False), graded("fx2", 0.6, True)]
    decision = {"value": 1.0, "method": "parsed", "label": "yes", "reply": "yes", "threshold": 0.2}
    assert trace == {
        "iterations": [
            {
                "iteration": 1,
                "query": QUESTION,
                "retrieved": 3,
                "isrel": first_isrel,
                "already_judged": 0,
                "relevant": ["fx", "fx2"],
                "candidates": [
                    candidate(["fx"], 0.9, partially, four, 1.65),
                    candidate(["fx2"], 0.6, partially, four, 1.35),
                ],
                "accepted": False,
                "rewrite": {"query": "FX-40 sync interval", "method": "llm"},
            },
            {
                "iteration": 2,
                "query": "FX-40 sync interval",
                "retrieved": 3,
                "isrel": [],
                "already_judged": 3,
                "relevant": [],
            },
        ],
        "steps": [
            llm_step("retrieve_decision", 0, 1),
            retrieve_step(1),
            judge_step("isrel", 1, 3),
            llm_step("generate", 1, 2),
            llm_step("critique", 1, 4),
            llm_step("rewrite", 1, 1),
            retrieve_step(2),
            judge_step("isrel", 2, 0),
        ],
        "defaults": [],
        "retrieve": decision,
        "stop_reason": "max_retrievals",
        "chosen_iteration": 1,
        "answer_kind": "partially_supported",
        "llm_calls": 8,
        "engine_llm_calls": 8,
        "judged_texts": 3,
        "judge_uses_llm": False,
    }
    assert routes(events) == [(QUESTION, decision)]
    assert reflections(events) == [
        (1, "isrel", "fx", 0.9, first_isrel[0]),
        (1, "isrel", "cat", 0.1, first_isrel[1]),
        (1, "isrel", "fx2", 0.6, first_isrel[2]),
        (1, "issup", ANSWER, 0.5, partially),
        (1, "isuse", ANSWER, 0.5, four),
        (1, "issup", ANSWER, 0.5, partially),
        (1, "isuse", ANSWER, 0.5, four),
    ]
    assert answers(events) == [("partially_supported", "max_retrievals", 8, 2)]


@pytest.mark.parametrize("use_async", MODES)
def test_without_a_corpus_description_the_collection_is_unnamed(use_async: bool) -> None:
    llm = script()
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]), llm=llm, judge=GradedJudge(), retrieve_decision="llm"
    )
    run(engine, use_async)
    assert llm.prompts[0] == DEFAULT_RETRIEVE_PROMPT.format(query=QUESTION, corpus="")


# ----- a generation that gives nothing -----


@pytest.mark.parametrize("use_async", MODES)
def test_an_empty_generation_is_recorded_and_the_other_answers(
    use_async: bool, events: list[Any]
) -> None:
    llm = script(support="fully", rating="5", answer=lambda p: "" if "7400" in p else ANSWER)
    engine = SelfRAGQueryEngine(retriever=TableRetriever([FX2, FX]), llm=llm, judge=GradedJudge())
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (ANSWER, ["fx"])
    fully, five = parsed(1.0, "fully"), parsed(1.0, "5")
    decision = {"value": 0.9, "method": "scores", "label": "yes", "passed": 2, "graded": 2}
    assert trace["iterations"] == [
        {
            "iteration": 1,
            "query": QUESTION,
            "retrieved": 2,
            "isrel": [graded("fx2", 0.6, True), graded("fx", 0.9, True)],
            "already_judged": 0,
            "relevant": ["fx2", "fx"],
            "candidates": [candidate(["fx"], 0.9, fully, five, 2.4)],
            "failed_generations": [{"passages": ["fx2"], "error": "empty reply"}],
            "accepted": True,
        }
    ]
    assert trace["steps"] == [
        retrieve_step(1),
        judge_step("isrel", 1, 2),
        llm_step("generate", 1, 2),
        llm_step("critique", 1, 2),
    ]
    assert (trace["retrieve"], trace["stop_reason"], trace["answer_kind"]) == (
        decision,
        "supported",
        "supported",
    )
    assert "chosen_iteration" not in trace
    assert routes(events) == [(QUESTION, decision)]
    assert [r[:4] for r in reflections(events)] == [
        (1, "isrel", "fx2", 0.6),
        (1, "isrel", "fx", 0.9),
        (1, "issup", ANSWER, 1.0),
        (1, "isuse", ANSWER, 1.0),
    ]
    assert answers(events) == [("supported", "supported", 4, 1)]


# ----- rewrites the LLM did not give -----


@pytest.mark.parametrize("use_async", MODES)
def test_a_repeated_rewrite_falls_back_to_keywords_then_runs_out(
    use_async: bool, events: list[Any]
) -> None:
    llm = script(support="no", rewrite=QUESTION)
    retriever = TableRetriever([FX])
    engine = SelfRAGQueryEngine(retriever=retriever, llm=llm, judge=GradedJudge())
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (REFUSAL, [])
    keywords = "how often does fx 40 sync"
    assert retriever.queries == [QUESTION, keywords]
    first, second = trace["iterations"]
    assert first["candidates"] == [
        candidate(["fx"], 0.9, parsed(0.0, "no"), parsed(0.5, "4"), 1.15)
    ]
    assert first["accepted"] is False
    assert first["rewrite"] == {
        "query": keywords,
        "method": "keywords",
        "llm_fallback": f"the LLM repeated a tried query {QUESTION!r}",
    }
    assert second == {
        "iteration": 2,
        "query": keywords,
        "retrieved": 1,
        "isrel": [],
        "already_judged": 1,
        "relevant": [],
        "rewrite": {"query": None, "method": "exhausted"},
    }
    assert trace["stop_reason"] == "no_new_query" and "chosen_iteration" not in trace
    assert [s["step"] for s in trace["steps"]][-2:] == ["isrel", "rewrite"]
    assert answers(events) == [("insufficient_evidence", "no_new_query", 5, 2)]


@pytest.mark.parametrize("use_async", MODES)
def test_a_long_repeated_rewrite_is_named_in_200_characters(use_async: bool) -> None:
    long_query = "How often does the FX-40 sync " + "and why " * 40 + "?"
    llm = script(support="no", rewrite=long_query)
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]), llm=llm, judge=GradedJudge(), max_retrievals=2
    )
    response = asyncio.run(engine.aquery(long_query)) if use_async else engine.query(long_query)
    rewrite = response.metadata[TRACE_KEY]["self_rag"]["iterations"][0]["rewrite"]
    assert rewrite["method"] == "keywords"
    assert rewrite["llm_fallback"] == f"the LLM repeated a tried query {long_query!r}"[:200]
    assert len(rewrite["llm_fallback"]) == 200


@pytest.mark.parametrize("use_async", MODES)
def test_an_empty_rewrite_is_named_as_the_fallback_s_reason(use_async: bool) -> None:
    llm = script(support="no", rewrite="")
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]), llm=llm, judge=GradedJudge(), max_retrievals=2
    )
    response, trace = run(engine, use_async)
    assert str(response) == REFUSAL
    first, second = trace["iterations"]
    assert first["rewrite"] == {
        "query": "how often does fx 40 sync",
        "method": "keywords",
        "llm_fallback": "empty reply",
    }
    assert "rewrite" not in second and trace["stop_reason"] == "max_retrievals"
    assert [s["step"] for s in trace["steps"]] == [
        "retrieve", "isrel", "generate", "critique", "rewrite", "retrieve", "isrel",
    ]  # fmt: skip


# ----- joint generation -----


@pytest.mark.parametrize("use_async", MODES)
def test_joint_generation_averages_isrel_over_its_passages(use_async: bool) -> None:
    llm = script(support="fully", rating="5")
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX, CAT, FX2]),
        llm=llm,
        judge=GradedJudge(),
        generation_mode="joint",
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (ANSWER, ["fx", "fx2"])
    [iteration] = trace["iterations"]
    assert iteration["candidates"] == [
        candidate(["fx", "fx2"], 0.75, parsed(1.0, "fully"), parsed(1.0, "5"), 2.25)
    ]
    assert [s for s in trace["steps"] if "llm_calls" in s] == [
        llm_step("generate", 1, 1),
        llm_step("critique", 1, 2),
    ]
    [generation] = [p for p in llm.prompts if p.endswith("Answer: ")]
    assert f"{FX.text}\n\n{FX2.text}" in generation


@pytest.mark.parametrize("use_async", MODES)
@pytest.mark.parametrize("mode", ["joint", "per_passage"])
def test_a_later_retrieval_generates_from_its_new_passages_only(
    use_async: bool, mode: str, events: list[Any]
) -> None:
    llm = script(support=lambda p: "fully" if "7400" in p else "no")
    retriever = TableRetriever([FX, CAT], {"FX-40 sync interval": [FX2, FX, CAT]})
    engine = SelfRAGQueryEngine(
        retriever=retriever, llm=llm, judge=GradedJudge(), generation_mode=mode
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (ANSWER, ["fx2"])
    [source] = response.source_nodes
    assert source.node.metadata[TRACE_KEY]["self_rag"] == {
        "isrel": {
            k: v for k, v in graded("fx2", 0.6, True).items() if k not in ("node_id", "kept")
        },
        "iteration": 2,
    }
    first, second = trace["iterations"]
    assert first["candidates"] == [
        candidate(["fx"], 0.9, parsed(0.0, "no"), parsed(0.5, "4"), 1.15)
    ]
    assert second["isrel"] == [graded("fx2", 0.6, True)] and second["already_judged"] == 2
    assert second["candidates"] == [
        candidate(["fx2"], 0.6, parsed(1.0, "fully"), parsed(0.5, "4"), 1.85)
    ]
    assert second["accepted"] is True and trace["stop_reason"] == "supported"
    generations = [p for p in llm.prompts if p.endswith("Answer: ")]
    assert FX2.text in generations[1] and FX.text not in generations[1]
    assert [r[:3] for r in reflections(events)][-3:] == [
        (2, "isrel", "fx2"),
        (2, "issup", ANSWER),
        (2, "isuse", ANSWER),
    ]
    assert answers(events) == [("supported", "supported", 7, 2)]


# ----- a judge that fails -----


@pytest.mark.parametrize("use_async", MODES)
def test_a_failing_judge_keeps_every_passage_unknown(use_async: bool, events: list[Any]) -> None:
    llm = script(support="fully", rating="5")
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX, FX2]), llm=llm, judge=DownJudge(), generation_mode="joint"
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (ANSWER, ["fx", "fx2"])
    error = "judge failed: RuntimeError('judge down')"
    unknown = [graded("fx", None, True, error), graded("fx2", None, True, error)]
    [iteration] = trace["iterations"]
    assert iteration["judge_error"] == error and iteration["isrel"] == unknown
    assert iteration["relevant"] == ["fx", "fx2"]
    assert iteration["candidates"] == [
        candidate(["fx", "fx2"], 0.5, parsed(1.0, "fully"), parsed(1.0, "5"), 2.0)
    ]
    decision = {"value": 0.5, "method": "scores", "label": "yes", "passed": 2, "graded": 2}
    assert trace["retrieve"] == decision and routes(events) == [(QUESTION, decision)]
    assert trace["steps"][1] == judge_step("isrel", 1, 2)
    assert reflections(events)[:2] == [
        (1, "isrel", "fx", None, unknown[0]),
        (1, "isrel", "fx2", None, unknown[1]),
    ]


# ----- without an LLM -----


@pytest.mark.parametrize("use_async", MODES)
def test_the_extractive_answer_rests_on_the_passages_it_quotes(
    use_async: bool, events: list[Any]
) -> None:
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([CAT, FX2, FX]),
        llm=None,
        judge=GradedJudge(),
        extractive_sentences=1,
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (f"[extractive] {FX.text}", ["fx"])
    [iteration] = trace["iterations"]
    assert iteration["relevant"] == ["fx2", "fx"]
    assert iteration["extractive"] == [{"passage": 1, "sentence": FX.text, "score": 0.9}]
    assert trace["steps"] == [
        retrieve_step(1),
        judge_step("isrel", 1, 3),
        judge_step("isrel_sentences", 1, 2),
    ]
    assert trace["retrieve"] == {"value": 1.0, "method": "no_llm", "label": "yes"}
    assert (trace["stop_reason"], trace["judged_texts"], trace["llm_calls"]) == (
        "extractive",
        5,
        0,
    )
    assert routes(events) == [(QUESTION, {"value": 1.0, "method": "no_llm", "label": "yes"})]
    assert answers(events) == [("extractive", "extractive", 0, 1)]


@pytest.mark.parametrize("use_async", MODES)
def test_a_failing_sentence_judge_still_answers_extractively(use_async: bool) -> None:
    calls: list[int] = []

    class FirstOnly(GradedJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            calls.append(len(texts))
            if len(calls) > 1:
                raise RuntimeError("judge down")
            return super()._judge(query, texts)

    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX2, FX]), llm=None, judge=FirstOnly(), extractive_sentences=1
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == (f"[extractive] {FX2.text}", ["fx2"])
    assert trace["iterations"][0]["extractive"] == [
        {"passage": 0, "sentence": FX2.text, "score": None}
    ]


# ----- answering directly -----


@pytest.mark.parametrize("use_async", MODES)
def test_a_direct_answer_read_back_whole(use_async: bool, events: list[Any]) -> None:
    llm = script(retrieve="no")
    retriever = TableRetriever([FX])
    engine = SelfRAGQueryEngine(
        retriever=retriever, llm=llm, judge=GradedJudge(), retrieve_decision="llm"
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response), retriever.queries) == ("42", [], [])
    decision = {"value": 0.0, "method": "parsed", "label": "no", "reply": "no", "threshold": 0.2}
    assert trace == {
        "iterations": [],
        "steps": [llm_step("retrieve_decision", 0, 1), llm_step("generate_direct", 0, 1)],
        "defaults": [],
        "retrieve": decision,
        "stop_reason": "no_retrieval",
        "answer_kind": "direct",
        "llm_calls": 2,
        "engine_llm_calls": 2,
        "judged_texts": 0,
        "judge_uses_llm": False,
    }
    assert llm.prompts[1] == DEFAULT_DIRECT_PROMPT.format(query=QUESTION)
    assert routes(events) == [(QUESTION, decision)] and reflections(events) == []
    assert answers(events) == [("direct", "no_retrieval", 2, 0)]


@pytest.mark.parametrize("use_async", MODES)
def test_a_direct_answer_without_evidence_read_back_whole(
    use_async: bool, events: list[Any]
) -> None:
    llm = script()
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([CAT]),
        llm=llm,
        judge=GradedJudge(),
        without_evidence="direct",
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == ("42", [])
    decision = {
        "value": 0.1, "method": "scores", "label": "no", "passed": 0, "graded": 1,
        "without_evidence": "direct",
    }  # fmt: skip
    assert trace["iterations"] == [
        {
            "iteration": 1,
            "query": QUESTION,
            "retrieved": 1,
            "isrel": [graded("cat", 0.1, False)],
            "already_judged": 0,
            "relevant": [],
        }
    ]
    assert trace["steps"] == [
        retrieve_step(1),
        judge_step("isrel", 1, 1),
        llm_step("generate_direct", 1, 1),
    ]
    assert (trace["retrieve"], trace["stop_reason"], trace["answer_kind"]) == (
        decision,
        "no_retrieval",
        "direct",
    )
    assert routes(events) == [(QUESTION, decision)]
    assert answers(events) == [("direct", "no_retrieval", 1, 1)]


@pytest.mark.parametrize("use_async", MODES)
def test_a_streamed_direct_answer_is_traced_as_direct(use_async: bool) -> None:
    llm = script(retrieve="no")
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]),
        llm=llm,
        judge=GradedJudge(),
        retrieve_decision="llm",
        streaming=True,
    )

    async def read_async() -> tuple[str, Any]:
        response = await engine.aquery(QUESTION)
        return "".join([chunk async for chunk in response.response_gen]), response

    if use_async:
        text, response = asyncio.run(read_async())
    else:
        response = engine.query(QUESTION)
        text = "".join(response.response_gen)
    trace = response.metadata[TRACE_KEY]["self_rag"]
    assert (text, sources(response)) == ("42", [])
    assert (trace["answer_kind"], trace["stop_reason"]) == ("direct", "no_retrieval")
    assert llm.prompts[-1] == DEFAULT_DIRECT_PROMPT.format(query=QUESTION)


# ----- the refusal after the last retrieval, the rewrite prompts, passages cut -----


@pytest.mark.parametrize("use_async", MODES)
def test_a_given_refusal_is_said_after_the_last_retrieval(use_async: bool) -> None:
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]),
        llm=script(support="no"),
        judge=GradedJudge(),
        max_retrievals=2,
        insufficient_answer="Not in the manuals.",
    )
    response, trace = run(engine, use_async)
    assert (str(response), sources(response)) == ("Not in the manuals.", [])
    assert trace["stop_reason"] == "max_retrievals"
    assert trace["answer_kind"] == "insufficient_evidence"


@pytest.mark.parametrize("use_async", MODES)
def test_each_rewrite_prompt_names_every_query_tried(use_async: bool) -> None:
    llm = script(support="no", rewrite="FX-40 sync interval")
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]), llm=llm, judge=GradedJudge(), max_retrievals=3
    )
    run(engine, use_async)
    rewrites = [p for p in llm.prompts if p.startswith("Rewrite the question")]
    assert rewrites == [
        DEFAULT_REWRITE_PROMPT.format(query=QUESTION, avoid=f"Not: {QUESTION}\n"),
        DEFAULT_REWRITE_PROMPT.format(
            query=QUESTION, avoid=f"Not: {QUESTION}\nNot: FX-40 sync interval\n"
        ),
    ]


@pytest.mark.parametrize("use_async", MODES)
def test_passages_are_cut_to_max_passage_chars_in_every_prompt(use_async: bool) -> None:
    llm = script(support="fully", rating="5")
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX]), llm=llm, judge=GradedJudge(), max_passage_chars=10
    )
    run(engine, use_async)
    cut = FX.text[:10]
    assert sorted(llm.prompts) == sorted(
        [
            DEFAULT_GENERATE_PROMPT.format(query=QUESTION, passages=cut),
            DEFAULT_SUPPORT_PROMPT.format(query=QUESTION, passages=cut, answer=ANSWER),
            DEFAULT_USEFULNESS_PROMPT.format(query=QUESTION, passages=cut, answer=ANSWER),
        ]
    )


@pytest.mark.parametrize("use_async", MODES)
def test_per_passage_candidates_follow_the_passages_in_retrieval_order(use_async: bool) -> None:
    third = TextNode(text="The FX-40 manual covers syncing.", id_="fx3")
    llm = script(support="no", answer=lambda p: p.split("---------------------\n")[1][:12])
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([FX, FX2, third]), llm=llm, judge=GradedJudge(), max_retrievals=1
    )
    _, trace = run(engine, use_async)
    [iteration] = trace["iterations"]
    assert [(c["passages"], c["answer"]) for c in iteration["candidates"]] == [
        (["fx"], FX.text[:12]),
        (["fx2"], FX2.text[:12]),
        (["fx3"], third.text[:12]),
    ]


@pytest.mark.parametrize("use_async", MODES)
def test_every_blank_passage_is_counted(use_async: bool) -> None:
    blanks = [TextNode(text=text, id_=f"blank{i}") for i, text in enumerate(["", "  ", "\n"])]
    engine = SelfRAGQueryEngine(
        retriever=TableRetriever([blanks[0], FX, blanks[1], blanks[2]]),
        llm=script(support="no"),
        judge=GradedJudge(),
        max_retrievals=2,
    )
    _, trace = run(engine, use_async)
    first, second = trace["iterations"]
    assert (first["retrieved"], first["without_text"], first["already_judged"]) == (4, 3, 0)
    assert (second["retrieved"], second["without_text"], second["already_judged"]) == (4, 3, 1)
    assert [g["node_id"] for g in first["isrel"]] == ["fx"]
