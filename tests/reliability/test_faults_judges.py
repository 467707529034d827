"""Faults at the LLM call sites of the relevance judge, CRAG (grading and rewrite),
judge-rerank, Self-RAG (retrieve decision, ISREL, generation, ISSUP, ISUSE, rewrite) and the
probe questions of ``advrag compare``: an LLM that raises a timeout, raises an error, answers
nothing, answers garbage, or hangs. Each is a result whose trace shows the fallback; nothing
is silently wrong. Outcomes are counted (``reliability_outcomes``, suite ``faults``).

Fixed on the way (failing before): an LLM that hangs hung Self-RAG, the CRAG rewrite and the
probe questions for ever (now ``llm_timeout`` / ``rewrite_timeout``); the probe questions
raised the LLM's error; Self-RAG dropped a failed generation without a word, and neither it
nor CRAG recorded why an LLM rewrite was not used; the LLM judge reported an LLM client's own
``TimeoutError`` (raised at once) as its own "timeout after N s".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Document
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from reliability_outcomes import record

from llama_index_ext_advrag.evaluation.probes import make_probe_questions
from llama_index_ext_advrag.judges import (
    BaseRelevanceJudge,
    EmbeddingRelevanceJudge,
    LLMRelevanceJudge,
)
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor, JudgeRerankPostprocessor
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.trace import TRACE_KEY

pytestmark = pytest.mark.timeout(300)

HANG = "<hang>"
HANG_SECONDS = 3.0
TIMEOUT = 0.3  # every bounded call site is given this; a hang lasts HANG_SECONDS


def _raise(error: Exception) -> Callable[[str], str]:
    def answer(prompt: str) -> str:
        raise error

    return answer


FAULTS: dict[str, Callable[[str], str]] = {
    "timeout-error": _raise(TimeoutError("the LLM did not answer within 30 s")),
    "exception": _raise(RuntimeError("LLM server returned 500")),
    "empty": lambda prompt: "",
    "garbage": lambda prompt: "\x00%%%}{#@ ### \ufffd" * 20,
    "hang": lambda prompt: HANG,
}
# What the trace must show for each fault (any one of the words).
SHOWN = {
    "timeout-error": ("TimeoutError",),
    "exception": ("500",),
    "empty": ("empty",),
    "garbage": ("unparsable", "%%%"),
    "hang": ("timeout", "no answer within"),
}


class FaultyLLM(ScriptedLLM):
    """A scripted LLM whose reply ``HANG`` sleeps (natively in async) instead of answering."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = self._answer(prompt)
        if text == HANG:
            time.sleep(HANG_SECONDS)
            text = "yes, too late"
        return CompletionResponse(text=text)

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        text = self._answer(prompt)
        if text == HANG:
            await asyncio.sleep(HANG_SECONDS)
            text = "yes, too late"
        return CompletionResponse(text=text)


def _shows(fault: str, *texts: Any) -> bool:
    joined = " ".join(str(t) for t in texts)
    return any(word in joined for word in SHOWN[fault])


# --- the LLM relevance judge -------------------------------------------------------------------


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_llm_judge_faults_give_unknown_grades_with_the_reason(fault: str, mode: str) -> None:
    judge = LLMRelevanceJudge(llm=FaultyLLM(FAULTS[fault]), timeout=TIMEOUT)
    texts = ["Cats purr.", "Dogs bark."]

    def run() -> list:
        if mode == "sync":
            return judge.judge("cats", texts)
        return asyncio.run(judge.ajudge("cats", texts))

    outcome, grades = record(
        "faults",
        f"llm-judge/{mode}/{fault}",
        run,
        check=lambda grades: (
            None
            if len(grades) == 2 and all(not g.known and _shows(fault, g.reason) for g in grades)
            else f"grades {grades}"
        ),
    )
    assert outcome == "result", grades


# --- CRAG and judge-rerank ---------------------------------------------------------------------


class RaisingJudge(BaseRelevanceJudge):
    """A judge whose model fails (e.g. the cross-encoder's ONNX session)."""

    def _judge(self, query: str, texts: list[str]) -> list:
        raise RuntimeError("onnxruntime: session failed")


class RaisingRetriever(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise ConnectionError("Milvus at http://127.0.0.1:19530 is unreachable")


class FixedRetriever(BaseRetriever):
    def __init__(self, texts: list[str]) -> None:
        super().__init__()
        self._texts = texts

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(text=t, id_=f"fixed-{i}"), score=0.5)
            for i, t in enumerate(self._texts)
        ]


def _hits() -> list[NodeWithScore]:
    texts = ["Cats purr when content.", "Dogs bark at strangers.", "Birds sing at dawn."]
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.5) for i, t in enumerate(texts)
    ]


def _kept_as_retrieved(output: list[NodeWithScore], *words: str) -> str | None:
    if [n.node.node_id for n in output] != ["n0", "n1", "n2"]:
        return f"not the nodes as retrieved: {[n.node.node_id for n in output]}"
    for node in output:
        trace = node.node.metadata[TRACE_KEY]["crag"]
        if trace["action"] != "keep_as_retrieved" or not any(w in trace["error"] for w in words):
            return f"trace {trace}"
    return None


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_crag_llm_judge_faults_keep_the_nodes_as_retrieved(fault: str, mode: str) -> None:
    llm = FaultyLLM(FAULTS[fault])
    crag = CRAGPostprocessor(
        judge=LLMRelevanceJudge(llm=llm, timeout=TIMEOUT),
        corrective_retriever=FixedRetriever(["Cats sleep."]),
        llm=llm,
        rewrite_timeout=TIMEOUT,
    )

    def run() -> list[NodeWithScore]:
        if mode == "sync":
            return crag.postprocess_nodes(_hits(), query_str="cats")
        return asyncio.run(crag.apostprocess_nodes(_hits(), query_str="cats"))

    outcome, output = record(
        "faults",
        f"crag/llm-judge/{mode}/{fault}",
        run,
        check=lambda output: _kept_as_retrieved(output, "every grade is unknown"),
    )
    assert outcome == "result", output


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_crag_rewrite_faults_fall_back_to_keywords_and_say_so(fault: str, mode: str) -> None:
    judge = EmbeddingRelevanceJudge(embed_model=HashEmbedding())
    retriever = FixedRetriever(["Parrots talk and mimic sounds."])
    crag = CRAGPostprocessor(
        judge=judge,
        upper=0.9,
        lower=0.5,
        refine=False,
        corrective_retriever=retriever,
        llm=FaultyLLM(FAULTS[fault]),
        rewrite_timeout=TIMEOUT,
    )

    def run() -> list[NodeWithScore]:
        if mode == "sync":
            return crag.postprocess_nodes(_hits(), query_str="do parrots talk")
        return asyncio.run(crag.apostprocess_nodes(_hits(), query_str="do parrots talk"))

    def wrong(output: list[NodeWithScore]) -> str | None:
        if not output:
            return "no node"
        (round_,) = output[0].node.metadata[TRACE_KEY]["crag"]["rounds"]
        if fault == "garbage":  # a reply is a reply: used, and shown as the query
            return None if round_["rewrite"] == "llm" and "%%%" in round_["query"] else str(round_)
        if round_["rewrite"] != "keywords" or not _shows(fault, round_.get("rewrite_fallback")):
            return f"round {round_}"
        return None

    outcome, output = record("faults", f"crag/rewrite/{mode}/{fault}", run, check=wrong)
    assert outcome == "result", output


CRAG_COMPONENT_FAULTS: dict[str, tuple[Callable[[], CRAGPostprocessor], tuple[str, ...]]] = {
    "judge-raises": (
        lambda: CRAGPostprocessor(judge=RaisingJudge()),
        ("judge failed", "session failed"),
    ),
    "corrective-retriever-raises": (
        lambda: CRAGPostprocessor(
            judge=EmbeddingRelevanceJudge(embed_model=HashEmbedding()),
            upper=0.9,
            lower=0.5,
            corrective_retriever=RaisingRetriever(),
        ),
        ("unreachable",),
    ),
    "web-search-raises": (
        lambda: CRAGPostprocessor(
            judge=EmbeddingRelevanceJudge(embed_model=HashEmbedding()),
            upper=0.9,
            lower=0.5,
            web_search=_raise(ConnectionError("search API: 429 too many requests")),
        ),
        ("429",),
    ),
}


@pytest.mark.parametrize("case", sorted(CRAG_COMPONENT_FAULTS))
def test_crag_component_faults_are_recorded(case: str) -> None:
    make, words = CRAG_COMPONENT_FAULTS[case]

    def wrong(output: list[NodeWithScore]) -> str | None:
        if case == "judge-raises":
            return _kept_as_retrieved(output, *words)
        if not output:  # everything graded low, nothing found again: must have been warned
            return None
        rounds = output[0].node.metadata[TRACE_KEY]["crag"]["rounds"]
        return (
            None
            if any(any(w in r.get("error", "") for w in words) for r in rounds)
            else str(rounds)
        )

    outcome, output = record(
        "faults",
        f"crag/{case}",
        lambda: make().postprocess_nodes(_hits(), query_str="do parrots talk"),
        check=wrong,
    )
    assert outcome == "result", output


@pytest.mark.parametrize("fault", [*sorted(FAULTS), "judge-raises"])
def test_judge_rerank_faults_keep_the_retrieval_order(fault: str) -> None:
    judge = (
        RaisingJudge()
        if fault == "judge-raises"
        else LLMRelevanceJudge(llm=FaultyLLM(FAULTS[fault]), timeout=TIMEOUT)
    )
    rerank = JudgeRerankPostprocessor(judge=judge, top_n=3)

    def wrong(output: list[NodeWithScore]) -> str | None:
        if [n.node.node_id for n in output] != ["n0", "n1", "n2"]:
            return f"order {[n.node.node_id for n in output]}"
        trace = output[0].node.metadata[TRACE_KEY]["judge_rerank"]
        if fault == "judge-raises":
            return None if "session failed" in trace.get("error", "") else str(trace)
        return None if _shows(fault, trace["grade"]["reason"]) else str(trace)

    outcome, output = record(
        "faults",
        f"judge-rerank/{fault}",
        lambda: rerank.postprocess_nodes(_hits(), query_str="cats"),
        check=wrong,
    )
    assert outcome == "result", output


# --- Self-RAG ----------------------------------------------------------------------------------

SITES = ("retrieve", "isrel", "generate", "issup", "isuse", "rewrite")
NORMAL = {
    "retrieve": "yes",
    "isrel": "yes",
    "generate": "Cats purr when content.",
    "issup": "partially",  # below accept_support: the engine retrieves again (a rewrite)
    "isuse": "4",
    "rewrite": "cats purring",
}


def _site(prompt: str) -> str:
    if "Does it need documents?" in prompt:
        return "retrieve"
    if "Does the passage contain" in prompt:
        return "isrel"
    if "Is the answer above supported" in prompt:
        return "issup"
    if "Rate how useful" in prompt:
        return "isuse"
    if "Rewrite the question" in prompt:
        return "rewrite"
    return "generate"


def _self_rag_llm(faulty_site: str, fault: str) -> FaultyLLM:
    def answer(prompt: str) -> str:
        site = _site(prompt)
        return FAULTS[fault](prompt) if site == faulty_site else NORMAL[site]

    return FaultyLLM(answer)


def _self_rag_fallback_wrong(response: Any, site: str, fault: str) -> str | None:
    """Why the trace does not show the fallback at ``site``."""
    trace = response.metadata[TRACE_KEY]["self_rag"]
    if not str(response).strip() or trace["answer_kind"] not in {
        "supported",
        "partially_supported",
        "insufficient_evidence",
    }:
        return f"answer {str(response)!r}, kind {trace['answer_kind']!r}"
    iterations = trace["iterations"]
    if site == "retrieve":
        ok = trace["retrieve"]["method"] == "default" and _shows(fault, trace["retrieve"])
    elif site == "isrel":
        grades = [g for i in iterations for g in i["isrel"]]
        ok = grades and all(g["label"] == "unknown" and _shows(fault, g["reason"]) for g in grades)
    elif site == "generate":
        if fault == "garbage":  # a reply is a reply: it is critiqued like any answer
            ok = any("%%%" in c["answer"] for i in iterations for c in i.get("candidates", []))
        else:
            failed = [f for i in iterations for f in i.get("failed_generations", [])]
            ok = failed and all(_shows(fault, f["error"]) or fault == "empty" for f in failed)
    elif site in ("issup", "isuse"):
        defaults = [d for d in trace["defaults"] if d["critique"] == site]
        ok = bool(defaults) and (
            fault == "garbage" or all(_shows(fault, d["reason"]) for d in defaults)
        )
    else:  # rewrite
        rewrites = [i["rewrite"] for i in iterations if "rewrite" in i]
        if fault == "garbage":
            ok = rewrites and rewrites[0]["method"] == "llm"
        else:
            ok = rewrites and all(
                r["method"] != "llm" and _shows(fault, r.get("llm_fallback")) for r in rewrites
            )
    return None if ok else f"{site} fallback not traced: {trace}"[:800]


@pytest.mark.parametrize("fault", sorted(FAULTS))
@pytest.mark.parametrize("site", SITES)
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_self_rag_llm_faults_fall_back_visibly(site: str, fault: str, mode: str) -> None:
    llm = _self_rag_llm(site, fault)
    engine = SelfRAGQueryEngine(
        retriever=FixedRetriever(["Cats purr when content. They sleep a lot."]),
        llm=llm,
        judge=LLMRelevanceJudge(llm=llm, timeout=TIMEOUT),
        max_retrievals=2,
        llm_timeout=TIMEOUT,
        retrieve_decision="llm",  # the LLM's retrieve decision is one of the faulted sites
    )

    def run() -> Any:
        if mode == "sync":
            return engine.query("Why do cats purr?")
        return asyncio.run(engine.aquery("Why do cats purr?"))

    outcome, response = record(
        "faults",
        f"self-rag/{mode}/{site}/{fault}",
        run,
        check=lambda response: _self_rag_fallback_wrong(response, site, fault),
    )
    assert outcome == "result", response


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_self_rag_survives_every_call_failing(fault: str) -> None:
    llm = FaultyLLM(FAULTS[fault])
    engine = SelfRAGQueryEngine(
        retriever=FixedRetriever(["Cats purr when content."]),
        llm=llm,
        judge=LLMRelevanceJudge(llm=llm, timeout=TIMEOUT),
        max_retrievals=2,
        llm_timeout=TIMEOUT,
    )
    outcome, response = record(
        "faults",
        f"self-rag/all-sites/{fault}",
        lambda: engine.query("Why do cats purr?"),
        check=lambda r: (
            None
            if r.metadata[TRACE_KEY]["self_rag"]["answer_kind"]
            in ("insufficient_evidence", "partially_supported")
            else f"kind {r.metadata[TRACE_KEY]['self_rag']['answer_kind']}: {r}"
        ),
    )
    assert outcome == "result", response


def test_self_rag_judge_failure_is_recorded() -> None:
    engine = SelfRAGQueryEngine(
        retriever=FixedRetriever(["Cats purr when content."]),
        llm=ScriptedLLM(lambda p: NORMAL[_site(p)]),
        judge=RaisingJudge(),
        max_retrievals=1,
    )
    outcome, response = record(
        "faults",
        "self-rag/judge-raises",
        lambda: engine.query("Why do cats purr?"),
        check=lambda r: (
            None
            if "session failed"
            in r.metadata[TRACE_KEY]["self_rag"]["iterations"][0].get("judge_error", "")
            else str(r.metadata)
        ),
    )
    assert outcome == "result", response


# --- advrag compare: probe questions -----------------------------------------------------------


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_probe_question_llm_faults_fall_back_to_offline_probes(fault: str) -> None:
    documents = [
        Document(
            text="Cats purr when they are content and warm, and sometimes when they are hurt "
            "or frightened, which surprises many of the people who keep them as pets.",
            id_="cats",
        )
    ]
    llm = FaultyLLM(FAULTS[fault])

    def wrong(probes: list) -> str | None:
        if not probes:
            return "no probe question"
        extra = probes[0].extra
        if fault == "garbage":  # a reply is a reply: used, and marked as the LLM's
            return None if extra["probe_kind"] == "llm" else str(extra)
        if extra["probe_kind"] == "llm" or (
            fault != "empty" and not _shows(fault, extra.get("llm_fallback"))
        ):
            return f"extra {extra}"
        return None

    outcome, probes = record(
        "faults",
        f"probe-questions/{fault}",
        lambda: make_probe_questions(documents, 1, llm=llm, llm_timeout=TIMEOUT),
        check=wrong,
    )
    assert outcome == "result", probes
