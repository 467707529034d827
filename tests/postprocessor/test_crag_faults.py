"""CRAG and judge rerank under faulty judges, retrievers and web searches, sync and async,
through the public API (issue #31): NaN and out-of-range scores count as unknown (kept); a
label given as a plain string works and an unknown one is refused at the judge boundary; a
judge, corrective retriever or web search that hangs is cut off by its timeout and the nodes
come back as retrieved, with the step in the trace."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from advrag_testing import instrumented
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.bridge.pydantic import ValidationError
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade, GradeLabel
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor, JudgeRerankPostprocessor

QUERY = "Where is the Eiffel Tower?"
BOUND = 0.2  # every timeout under test
HANG = 5.0  # what a hung step would take; a run must end well before
FAST = 2.0  # seconds a timed-out run may take at most (the bound plus a loaded machine)


def nodes(*texts: str, prefix: str = "n") -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"{prefix}{i}"), score=0.5)
        for i, t in enumerate(texts)
    ]


RETRIEVED = ("The Eiffel Tower is in Paris.", "Cats sleep all day.", "Maybe in France.")


class HandBuiltJudge(BaseRelevanceJudge):
    """Grades built by hand from a function of the text (a custom judge)."""

    _make: Callable[[str], Grade]

    def __init__(self, make: Callable[[str], Grade], **data: Any) -> None:
        super().__init__(**data)
        object.__setattr__(self, "_make", make)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self._make(text) for text in texts]


class HangingJudge(BaseRelevanceJudge):
    """Hangs until released (sync: in the worker thread) or cancelled (async)."""

    _release: threading.Event

    def __init__(self, release: threading.Event, **data: Any) -> None:
        super().__init__(**data)
        object.__setattr__(self, "_release", release)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self._release.wait(HANG)
        return [self.grade(0.9) for _ in texts]

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        await asyncio.sleep(HANG)
        return [self.grade(0.9) for _ in texts]


class LowJudge(BaseRelevanceJudge):
    """Every text scores 0.1: Incorrect, so the corrective steps run."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.1) for _ in texts]


class HangingRetriever(BaseRetriever):
    """A corrective retriever that hangs; ``native_async`` gives it an ``_aretrieve``."""

    def __init__(self, release: threading.Event) -> None:
        super().__init__()
        self.release = release

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.release.wait(HANG)
        return nodes("Late result.", prefix="c")


class NativeAsyncHangingRetriever(HangingRetriever):
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        await asyncio.sleep(HANG)
        return nodes("Late result.", prefix="c")


@pytest.fixture
def release() -> threading.Event:
    event = threading.Event()
    yield event
    event.set()  # frees the worker threads a sync timeout abandoned


def run(post: Any, use_async: bool, retrieved: list[NodeWithScore]) -> list[NodeWithScore]:
    if use_async:
        return asyncio.run(post.apostprocess_nodes(retrieved, query_str=QUERY))
    return post.postprocess_nodes(retrieved, query_str=QUERY)


def crag_trace(node: NodeWithScore) -> dict[str, Any]:
    return node.node.metadata[TRACE_KEY]["crag"]


def grade_of(score: float, label: Any = GradeLabel.RELEVANT) -> Grade:
    return Grade(score=score, label=label, judge="hand")


# --- NaN and out-of-range scores ---------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("bad", [math.nan, 1.7, -0.2])
def test_bad_scores_everywhere_keep_every_node(bad: float, use_async: bool) -> None:
    """Before: NaN dropped every node (never >= lower), 1.7 made one node Correct and dropped
    the rest, -0.2 made all Incorrect."""
    crag = CRAGPostprocessor(judge=HandBuiltJudge(lambda t: grade_of(bad)), upper=0.7, lower=0.3)
    retrieved = nodes(*RETRIEVED)
    with instrumented() as (events, _):
        result = run(crag, use_async, retrieved)
    assert [n.node.node_id for n in result] == ["n0", "n1", "n2"]
    assert [n.node.text for n in result] == list(RETRIEVED)
    assert crag_trace(result[0]) == {
        "action": "keep_as_retrieved",
        "error": "every grade is unknown",
    }
    # the first (and only) decision is announced once, with why
    actions = [(e.action, e.error) for e in events if e.class_name() == "CRAGActionEvent"]
    assert actions == [("keep_as_retrieved", "every grade is unknown")]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_nan_score_beside_a_doubtful_one_is_kept_as_unknown(use_async: bool) -> None:
    def make(text: str) -> Grade:
        return grade_of(0.5) if "Maybe" in text else grade_of(math.nan if "Eiffel" in text else 0.1)

    crag = CRAGPostprocessor(judge=HandBuiltJudge(make), upper=0.7, lower=0.3, refine=False)
    result = run(crag, use_async, nodes(*RETRIEVED))
    # Ambiguous: the doubtful node and the unknown (NaN) one are kept, the low one dropped.
    assert [n.node.node_id for n in result] == ["n2", "n0"]
    unknown = crag_trace(result[1])["grade"]
    assert unknown["score"] is None and unknown["label"] == "unknown"
    assert unknown["reason"] == "score nan is not in [0, 1]"
    assert crag_trace(result[0])["action"] == "ambiguous"


@pytest.mark.parametrize("use_async", [False, True])
def test_rerank_puts_bad_scores_last_as_unknown(use_async: bool) -> None:
    def make(text: str) -> Grade:
        return grade_of(math.nan if "Eiffel" in text else 0.4 if "Cats" in text else 2.0)

    rerank = JudgeRerankPostprocessor(judge=HandBuiltJudge(make), top_n=3)
    result = run(rerank, use_async, nodes(*RETRIEVED))
    assert [n.node.node_id for n in result] == ["n1", "n0", "n2"]
    assert [n.score for n in result] == [0.4, 0.5, 0.5]  # unknown: the retrieval score stays


# --- labels given as strings -------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_a_plain_string_label_works_in_crag_and_rerank(use_async: bool) -> None:
    def make(text: str) -> Grade:
        if "Eiffel" in text:
            return grade_of(0.9, "relevant")
        return grade_of(0.1, "irrelevant")

    crag = CRAGPostprocessor(judge=HandBuiltJudge(make), upper=0.7, lower=0.3, refine=False)
    kept = run(crag, use_async, nodes(*RETRIEVED))
    assert [n.node.node_id for n in kept] == ["n0"]
    assert crag_trace(kept[0])["grade"]["label"] == "relevant"
    assert [d["grade"]["label"] for d in crag_trace(kept[0])["dropped"]] == ["irrelevant"] * 2
    rerank = JudgeRerankPostprocessor(judge=HandBuiltJudge(make), top_n=2)
    top = run(rerank, use_async, nodes(*RETRIEVED))
    assert [n.node.node_id for n in top] == ["n0", "n1"]
    assert top[0].node.metadata[TRACE_KEY]["judge_rerank"]["grade"]["label"] == "relevant"


@pytest.mark.parametrize("use_async", [False, True])
def test_an_unknown_label_is_refused_and_recorded(use_async: bool) -> None:
    judge = HandBuiltJudge(lambda t: grade_of(0.9, "yes"), name="mine")
    result = run(CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3), use_async, nodes(*RETRIEVED))
    assert [n.node.node_id for n in result] == ["n0", "n1", "n2"]
    error = crag_trace(result[0])["error"]
    assert error.startswith("judge failed: TypeError(") and "HandBuiltJudge" in error
    assert "'yes'" in error and "GradeLabel" in error
    top = run(JudgeRerankPostprocessor(judge=judge, top_n=2), use_async, nodes(*RETRIEVED))
    assert [n.node.node_id for n in top] == ["n0", "n1"]
    assert "HandBuiltJudge" in top[0].node.metadata[TRACE_KEY]["judge_rerank"]["error"]


# --- timeouts -----------------------------------------------------------------------------------


def timed(post: Any, use_async: bool, retrieved: list[NodeWithScore]) -> list[NodeWithScore]:
    started = time.perf_counter()
    result = run(post, use_async, retrieved)
    assert time.perf_counter() - started < FAST, "the step was not cut off by its timeout"
    return result


def assert_as_retrieved(result: list[NodeWithScore], step: str, what: str) -> None:
    assert [n.node.node_id for n in result] == ["n0", "n1", "n2"]
    assert [n.node.text for n in result] == list(RETRIEVED)
    assert [n.score for n in result] == [0.5] * 3
    assert crag_trace(result[0]) == {
        "action": "keep_as_retrieved",
        "error": f"{what} timed out after 0.2 s",
        "timed_out": step,
    }


@pytest.mark.parametrize("use_async", [False, True])
def test_a_hanging_judge_times_out_to_the_nodes_as_retrieved(
    release: threading.Event, use_async: bool
) -> None:
    crag = CRAGPostprocessor(judge=HangingJudge(release), judge_timeout=BOUND)
    assert_as_retrieved(timed(crag, use_async, nodes(*RETRIEVED)), "judge", "judge")


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("retriever_type", [HangingRetriever, NativeAsyncHangingRetriever])
def test_a_hanging_corrective_retriever_times_out(
    release: threading.Event, use_async: bool, retriever_type: type[HangingRetriever]
) -> None:
    """A retriever without native async would block the event loop: it runs in a thread."""
    crag = CRAGPostprocessor(
        judge=LowJudge(), corrective_retriever=retriever_type(release), retrieve_timeout=BOUND
    )
    assert_as_retrieved(timed(crag, use_async, nodes(*RETRIEVED)), "retrieve", "retrieve")


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("search_kind", ["sync", "async"])
def test_a_hanging_web_search_times_out(
    release: threading.Event, use_async: bool, search_kind: str
) -> None:
    if search_kind == "async" and not use_async:
        pytest.skip("an async web_search is refused in sync postprocessing (tested elsewhere)")

    def search(query: str) -> list[str]:
        release.wait(HANG)
        return ["Late page."]

    async def asearch(query: str) -> list[str]:
        await asyncio.sleep(HANG)
        return ["Late page."]

    crag = CRAGPostprocessor(
        judge=LowJudge(),
        web_search=asearch if search_kind == "async" else search,
        web_search_timeout=BOUND,
    )
    assert_as_retrieved(timed(crag, use_async, nodes(*RETRIEVED)), "websearch", "websearch")


@pytest.mark.parametrize("use_async", [False, True])
def test_steps_within_their_timeouts_are_unaffected(use_async: bool) -> None:
    retriever = HangingRetriever(threading.Event())
    retriever.release.set()  # answers at once
    crag = CRAGPostprocessor(
        judge=HandBuiltJudge(lambda t: grade_of(0.9 if "Late" in t else 0.1)),
        corrective_retriever=retriever,
        upper=0.7,
        lower=0.3,
        judge_timeout=BOUND * 10,
        retrieve_timeout=BOUND * 10,
        refine=False,
    )
    result = run(crag, use_async, nodes(*RETRIEVED))
    assert [n.node.node_id for n in result] == ["c0"]
    assert crag_trace(result[0])["action"] == "incorrect"


@pytest.mark.parametrize("field", ["judge_timeout", "retrieve_timeout", "web_search_timeout"])
def test_timeouts_are_bounded_fields(field: str) -> None:
    for bad in (0, -1, 3601):
        with pytest.raises(ValidationError, match=field):
            CRAGPostprocessor(judge=LowJudge(), **{field: bad})
    assert getattr(CRAGPostprocessor(judge=LowJudge(), **{field: None}), field) is None
    assert CRAGPostprocessor.model_fields[field].description
    assert getattr(CRAGPostprocessor(judge=LowJudge()), field) > 0


class SlowJudge(BaseRelevanceJudge):
    """Answers every call after ``SLOW`` seconds, all texts relevant."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        time.sleep(SLOW)
        return [self.grade(0.9) for _ in texts]

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        await asyncio.sleep(SLOW)
        return [self.grade(0.9) for _ in texts]


SLOW = 0.4  # one judge call: within the bound below, two are not


@pytest.mark.parametrize("use_async", [False, True])
def test_the_judge_timeout_bounds_all_judge_calls_of_one_crag_call(use_async: bool) -> None:
    """The retrieved nodes (0.4 s) and the refinement's strips (0.4 s more) are graded in two
    calls: 0.6 s bounds them together, so the second is cut off after the 0.2 s left."""
    crag = CRAGPostprocessor(judge=SlowJudge(), judge_timeout=0.6, refine=True)
    started = time.perf_counter()
    result = run(crag, use_async, nodes(*RETRIEVED))
    assert time.perf_counter() - started < FAST
    assert [n.node.node_id for n in result] == ["n0", "n1", "n2"]
    assert crag_trace(result[0]) == {
        "action": "keep_as_retrieved",
        "error": "judge timed out after 0.6 s",
        "timed_out": "judge",
    }
    # twice the bound: both calls fit, and the same object starts each call afresh
    crag.judge_timeout = 1.2
    for _ in range(2):
        graded = run(crag, use_async, nodes(*RETRIEVED))
        assert crag_trace(graded[0])["action"] == "correct"
