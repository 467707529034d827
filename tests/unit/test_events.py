"""Instrumentation: an event handler on LlamaIndex's root dispatcher sees the pack's typed events
for a CRAG, a hybrid, a drift-window and a Self-RAG call, sync and async, inside the component's
span, carrying the same facts as the trace."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from advrag_testing import EventCollector, ScriptedLLM, self_rag_reply
from llama_index.core import Document
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.events import (
    CRAGActionEvent,
    CRAGResultEvent,
    CRAGRoundEvent,
    DriftWindowEvent,
    HybridFusionEvent,
    JudgeGradesEvent,
    JudgeRerankEvent,
    SelfRAGAnswerEvent,
    SelfRAGReflectionEvent,
    SelfRAGRouteEvent,
)
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.postprocessor import (
    CRAGPostprocessor,
    DriftAwareWindowPostprocessor,
    JudgeRerankPostprocessor,
)
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.retrievers import BM25Retriever, HybridFusionRetriever

MODES = ["sync", "async"]


@pytest.fixture
def events() -> Iterator[list[Any]]:
    root = get_dispatcher()
    handler = EventCollector()
    root.add_event_handler(handler)
    try:
        yield handler.events
    finally:
        root.event_handlers.remove(handler)


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def in_span(event: BaseEvent, component: str) -> bool:
    """The event was emitted inside a span the component's own method opened."""
    return bool(event.span_id) and event.span_id.startswith(component + "-")


class WordJudge(BaseRelevanceJudge):
    """0.9 when the text shares a word with the query, else 0.1."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        words = set(query.lower().split())
        return [
            self.grade(0.9, reason="a shared word")
            if words & set(t.lower().split())
            else self.grade(0.1, reason="no shared word")
            for t in texts
        ]


class ListRetriever(BaseRetriever):
    def __init__(self, texts: list[str], prefix: str) -> None:
        super().__init__()
        self.texts, self.prefix = texts, prefix

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=t, id_=f"{self.prefix}{i}"), score=0.5)
            for i, t in enumerate(self.texts)
        ]


def postprocess(post: Any, mode: str, hits: list[NodeWithScore], query: str) -> list[Any]:
    if mode == "async":
        return asyncio.run(post.apostprocess_nodes(hits, query_str=query))
    return post.postprocess_nodes(hits, query_str=query)


@pytest.mark.parametrize("mode", MODES)
def test_crag_events_match_its_trace(events: list[Any], mode: str) -> None:
    crag = CRAGPostprocessor(
        judge=WordJudge(name="words"),
        upper=0.6,
        lower=0.3,
        refine=False,
        corrective_retriever=ListRetriever(["Paris weather is mild."], "c"),
    )
    hits = ListRetriever(["Cats sleep.", "Dogs bark."], "n").retrieve("x")
    result = postprocess(crag, mode, hits, "paris weather")
    trace = result[0].node.metadata[TRACE_KEY]["crag"]
    (action,) = of_type(events, CRAGActionEvent)
    assert action.action == trace["action"] == "incorrect" and action.query == "paris weather"
    assert [(g["node_id"], g["score"]) for g in action.grades] == [("n0", 0.1), ("n1", 0.1)]
    assert [(g["label"], g["judge"]) for g in action.grades] == [("irrelevant", "words")] * 2
    assert [g["reason"] for g in action.grades] == ["no shared word"] * 2
    (round_,) = of_type(events, CRAGRoundEvent)
    assert round_.round == trace["rounds"][0] and round_.round["kept"] == 1
    (outcome,) = of_type(events, CRAGResultEvent)
    assert [k["node_id"] for k in outcome.kept] == [n.node.node_id for n in result] == ["c0"]
    assert outcome.dropped == trace["dropped"] and outcome.error is None
    method = "_apostprocess_nodes" if mode == "async" else "_postprocess_nodes"
    assert all(in_span(e, f"CRAGPostprocessor.{method}") for e in (action, round_, outcome))
    graded = of_type(events, JudgeGradesEvent)
    assert [len(e.grades) for e in graded] == [2, 1] and {e.judge for e in graded} == {"words"}
    assert all(e.class_name() == type(e).__name__ for e in events)


@pytest.mark.parametrize("mode", MODES)
def test_judge_rerank_event_matches_its_trace(events: list[Any], mode: str) -> None:
    hits = ListRetriever(["Cats sleep.", "Paris weather is mild."], "n").retrieve("x")
    result = postprocess(JudgeRerankPostprocessor(judge=WordJudge(), top_n=1), mode, hits, "paris")
    (event,) = of_type(events, JudgeRerankEvent)
    assert [(o["node_id"], o["retrieval_rank"], o["rank"]) for o in event.order] == [("n1", 1, 0)]
    assert event.order[0]["score"] == result[0].score == 0.9


CORPUS = [
    TextNode(text="The FX-40 syncs every 15 minutes.", id_="fx"),
    TextNode(text="Receipts are needed from 25 euros.", id_="receipts"),
    TextNode(text="The FX-40 sync port is 7400.", id_="port"),
]


@pytest.mark.parametrize("mode", MODES)
def test_hybrid_fusion_event_matches_its_trace(events: list[Any], mode: str) -> None:
    hybrid = HybridFusionRetriever(
        [BM25Retriever(CORPUS), ListRetriever(["Receipts are needed from 25 euros."], "r")],
        leg_names=["bm25", "fixed"],
        weights=[1.0, 0.5],
        similarity_top_k=2,
    )
    query = "FX-40 sync"
    result = asyncio.run(hybrid.aretrieve(query)) if mode == "async" else hybrid.retrieve(query)
    (event,) = of_type(events, HybridFusionEvent)
    assert event.mode == "rrf"
    assert [(leg["leg"], leg["weight"], leg["degraded"]) for leg in event.legs] == [
        ("bm25", 1.0, None),
        ("fixed", 0.5, None),
    ]
    assert [f["node_id"] for f in event.fused] == [n.node.node_id for n in result]
    assert [f["score"] for f in event.fused] == [n.score for n in result]
    traces = [n.node.metadata[TRACE_KEY]["hybrid_fusion"] for n in result]
    assert [f["ranks"] for f in event.fused] == [[leg["rank"] for leg in t["legs"]] for t in traces]
    method = "_aretrieve" if mode == "async" else "_retrieve"
    assert in_span(event, f"HybridFusionRetriever.{method}")
    # a BM25 leg given by hand is the lexical backend, recorded with why
    given = {"backend": "bm25s", "reason": "given: JiebaBM25Retriever"}
    assert hybrid.lexical_choice.to_dict() == event.lexical == given
    assert all(t["lexical"] == given for t in traces)


class FailingRetriever(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise RuntimeError("leg down")


@pytest.mark.parametrize("mode", MODES)
def test_hybrid_fusion_event_names_the_degraded_legs(events: list[Any], mode: str) -> None:
    hybrid = HybridFusionRetriever(
        [FailingRetriever(), BM25Retriever(CORPUS), ListRetriever([], "e")],
        leg_names=["broken", "bm25", "empty"],
        similarity_top_k=2,
    )
    query = "FX-40 sync"
    result = asyncio.run(hybrid.aretrieve(query)) if mode == "async" else hybrid.retrieve(query)
    assert [n.node.node_id for n in result] == ["port", "fx"]
    (event,) = of_type(events, HybridFusionEvent)
    assert [(leg["leg"], leg["hits"], leg["degraded"]) for leg in event.legs] == [
        ("broken", 0, "error: RuntimeError('leg down')"),
        ("bm25", 2, None),
        ("empty", 0, "empty"),
    ]
    degraded = result[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["degraded"]
    assert degraded == [
        {"leg": "broken", "reason": "error: RuntimeError('leg down')"},
        {"leg": "empty", "reason": "empty"},
    ]
    assert event.lexical == {"backend": "bm25s", "reason": "given: JiebaBM25Retriever"}


class FailingJudge(BaseRelevanceJudge):
    """Grades the first call, fails every later one (``fail_from=0``: every call)."""

    fail_from: int = 0
    calls: int = 0

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self.calls += 1
        if self.calls > self.fail_from:
            raise RuntimeError("judge down")
        return [self.grade(0.9) for _ in texts]


@pytest.mark.parametrize("mode", MODES)
def test_crag_events_when_the_judge_fails_at_once(events: list[Any], mode: str) -> None:
    crag = CRAGPostprocessor(judge=FailingJudge(), refine=False)
    hits = ListRetriever(["Cats sleep.", "Dogs bark."], "n").retrieve("x")
    result = postprocess(crag, mode, hits, "cats")
    assert [n.node.node_id for n in result] == ["n0", "n1"]
    error = "judge failed: RuntimeError('judge down')"
    (action,) = of_type(events, CRAGActionEvent)
    assert (action.action, action.error, action.grades) == ("keep_as_retrieved", error, [])
    (outcome,) = of_type(events, CRAGResultEvent)
    assert (outcome.action, outcome.error) == ("keep_as_retrieved", error)
    assert [k["node_id"] for k in outcome.kept] == ["n0", "n1"]
    assert result[0].node.metadata[TRACE_KEY]["crag"] == {
        "action": "keep_as_retrieved",
        "error": error,
    }


@pytest.mark.parametrize("mode", MODES)
def test_crag_events_when_the_judge_fails_at_refinement(events: list[Any], mode: str) -> None:
    """The action was decided (one action event); the refinement's failure keeps the nodes
    as retrieved, said by the result event, with no second action event."""
    crag = CRAGPostprocessor(judge=FailingJudge(fail_from=1), upper=0.6, lower=0.3, refine=True)
    hits = ListRetriever(["Cats sleep. They purr.", "Dogs bark."], "n").retrieve("x")
    result = postprocess(crag, mode, hits, "cats")
    assert [n.node.node_id for n in result] == ["n0", "n1"]
    (action,) = of_type(events, CRAGActionEvent)
    assert action.action == "correct" and action.error is None
    (outcome,) = of_type(events, CRAGResultEvent)
    assert (outcome.action, outcome.error) == (
        "keep_as_retrieved",
        "judge failed: RuntimeError('judge down')",
    )


@pytest.mark.parametrize("mode", MODES)
def test_drift_window_event_matches_its_trace(events: list[Any], mode: str) -> None:
    parser = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1)
    units = parser.get_nodes_from_documents([Document(text="A a. B b. C c. D d.", id_="doc")])
    docstore = SimpleDocumentStore()
    docstore.add_documents(units)
    window = DriftAwareWindowPostprocessor(
        docstore=docstore, embed_model=MockEmbedding(embed_dim=8), max_expand_steps=1
    )
    hits = [NodeWithScore(node=units[1], score=0.8)]
    result = postprocess(window, mode, hits, "B?")
    trace = result[0].node.metadata[TRACE_KEY]["drift_window"]
    (event,) = of_type(events, DriftWindowEvent)
    assert event.windows == trace["records"] and event.windows[0]["stop"] == "max_expand_steps"
    assert event.thresholds == trace["thresholds"]
    assert event.round_trips == trace["round_trips"]
    method = "_apostprocess_nodes" if mode == "async" else "_postprocess_nodes"
    assert in_span(event, f"DriftAwareWindowPostprocessor.{method}")


@pytest.mark.parametrize("mode", MODES)
def test_self_rag_events_match_its_trace(events: list[Any], mode: str) -> None:
    engine = SelfRAGQueryEngine(
        retriever=ListRetriever(["The FX-40 syncs every 15 minutes.", "Cats purr."], "n"),
        llm=ScriptedLLM(self_rag_reply),
        judge=WordJudge(),
    )
    query = "How often does the FX-40 sync?"
    response = asyncio.run(engine.aquery(query)) if mode == "async" else engine.query(query)
    trace = response.metadata[TRACE_KEY]["self_rag"]
    (route,) = of_type(events, SelfRAGRouteEvent)
    assert route.decision == trace["retrieve"] and route.query == query
    reflections = of_type(events, SelfRAGReflectionEvent)
    isrel = [(r.subject, r.value) for r in reflections if r.reflection == "isrel"]
    assert isrel == [(g["node_id"], g["score"]) for g in trace["iterations"][0]["isrel"]]
    assert isrel == [("n0", 0.9), ("n1", 0.1)]
    candidate = trace["iterations"][0]["candidates"][0]
    critiques = [(r.reflection, r.subject, r.value) for r in reflections if r.reflection != "isrel"]
    assert critiques == [
        ("issup", candidate["answer"], candidate["issup"]["value"]),
        ("isuse", candidate["answer"], candidate["isuse"]["value"]),
    ]
    (answer,) = of_type(events, SelfRAGAnswerEvent)
    assert (answer.answer_kind, answer.stop_reason) == (trace["answer_kind"], trace["stop_reason"])
    assert answer.llm_calls == trace["llm_calls"] and answer.iterations == 1
    method = "acustom_query" if mode == "async" else "custom_query"
    assert all(in_span(e, f"SelfRAGQueryEngine.{method}") for e in (route, *reflections, answer))


def test_no_handler_no_cost_and_events_serialise() -> None:
    """Events are plain pydantic models (what tracers export)."""
    grade = {"node_id": "a", "score": 0.9, "label": "relevant", "judge": "j", "raw": None}
    event = CRAGActionEvent(query="q", action="correct", grades=[{**grade, "reason": None}])
    data = event.model_dump()
    assert data["action"] == "correct" and data["component"] == "crag"
    assert CRAGActionEvent.class_name() == "CRAGActionEvent"
