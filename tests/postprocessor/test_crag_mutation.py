"""CRAG decisions pinned exactly (found by mutation testing, issue #20): failure paths, traces,
log messages, rewrite notes and the order of the returned nodes."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import CompletionResponse, MockLLM
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor

QUERY = "Where is the Eiffel Tower?"
LOGGER = "llama_index_ext_advrag.postprocessor.crag"
Scores = Callable[[int, list[str]], list[float | None]]


class CallJudge(BaseRelevanceJudge):
    """Scores from a function of (call number, texts); it may raise to fail one call."""

    _fn: Scores

    def __init__(self, fn: Scores, **data: Any) -> None:
        super().__init__(**data)
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "_calls", 0)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        call = self._calls
        object.__setattr__(self, "_calls", call + 1)
        scores = self._fn(call, texts)
        return [Grade.unknown(self.name, "n/a") if s is None else self.grade(s) for s in scores]


class ShortJudge(BaseRelevanceJudge):
    """Breaks the one-grade-per-text contract (overrides judge itself) on batches of two+."""

    def judge(self, query: str, texts: Sequence[str]) -> list[Grade]:
        grades = [self.grade(0.5) for _ in texts]
        return grades[:-1] if len(grades) > 1 else grades

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:  # pragma: no cover
        raise AssertionError("not used")


def by_text(table: dict[str, float | None], default: float | None = 0.0) -> Scores:
    def scores(call: int, texts: list[str]) -> list[float | None]:
        return [next((v for k, v in table.items() if k in t), default) for t in texts]

    return scores


def failing_on(call_number: int, table: dict[str, float | None]) -> Scores:
    inner = by_text(table)

    def scores(call: int, texts: list[str]) -> list[float | None]:
        if call == call_number:
            raise RuntimeError("judge down")
        return inner(call, texts)

    return scores


class ListRetriever(BaseRetriever):
    def __init__(self, hits: list[NodeWithScore]) -> None:
        super().__init__()
        self.hits, self.queries = hits, []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        return list(self.hits)


def nodes(*texts: str, prefix: str = "n") -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"{prefix}{i}"), score=1.0)
        for i, t in enumerate(texts)
    ]


def trace(node: NodeWithScore) -> dict[str, Any]:
    return node.node.metadata["advrag_trace"]["crag"]


def crag(fn: Scores, **kwargs: Any) -> CRAGPostprocessor:
    kwargs.setdefault("upper", 0.7)
    kwargs.setdefault("lower", 0.3)
    kwargs.setdefault("refine", False)
    return CRAGPostprocessor(judge=CallJudge(fn), **kwargs)


# --- failures degrade to the nodes as retrieved --------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_judge_failing_in_the_corrective_round_keeps_the_nodes_as_retrieved(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    post = crag(
        failing_on(1, {"Maybe": 0.5}),
        corrective_retriever=ListRetriever(nodes("New text.", prefix="c")),
    )
    retrieved = nodes("Maybe here.", "Other.")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        if use_async:
            result = await post.apostprocess_nodes(retrieved, query_str=QUERY)
        else:
            result = post.postprocess_nodes(retrieved, query_str=QUERY)
    error = "judge failed: RuntimeError('judge down')"
    assert [n.node.node_id for n in result] == ["n0", "n1"]
    assert [trace(n) for n in result] == [{"action": "keep_as_retrieved", "error": error}] * 2
    assert "CRAG Judge failed: RuntimeError('judge down')" in caplog.messages
    assert f"CRAG keeps the nodes as retrieved: {error}" in caplog.messages


def test_a_judge_failing_in_refinement_keeps_the_nodes_as_retrieved() -> None:
    post = crag(failing_on(1, {"Paris": 0.9}), refine=True)
    result = post.postprocess_nodes(nodes("Paris has it.", "Cats."), query_str=QUERY)
    assert [n.node.node_id for n in result] == ["n0", "n1"]
    assert trace(result[1]) == {
        "action": "keep_as_retrieved",
        "error": "judge failed: RuntimeError('judge down')",
    }


def test_a_judge_failing_on_web_results_keeps_the_nodes_as_retrieved() -> None:
    post = crag(failing_on(1, {"Maybe": 0.5}), web_search=lambda q: ["Web page."])
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert trace(result[0]) == {
        "action": "keep_as_retrieved",
        "error": "judge failed: RuntimeError('judge down')",
    }


def test_a_judge_returning_too_few_grades_is_an_error_not_a_truncation() -> None:
    post = CRAGPostprocessor(judge=ShortJudge(), upper=0.7, lower=0.3, refine=False)
    with pytest.raises(ValueError, match="zip"):
        post.postprocess_nodes(nodes("A.", "B."), query_str=QUERY)


def test_too_few_grades_for_corrective_hits_is_an_error_too() -> None:
    retriever = ListRetriever(nodes("C one.", "C two.", prefix="c"))
    post = CRAGPostprocessor(
        judge=ShortJudge(), upper=0.7, lower=0.3, refine=False, corrective_retriever=retriever
    )
    with pytest.raises(ValueError, match="zip"):
        post.postprocess_nodes(nodes("A."), query_str=QUERY)


# --- the trace of dropped nodes, refinement, order ------------------------------------------------


def test_dropped_nodes_are_traced_with_source_grade_and_why() -> None:
    post = crag(by_text({"Paris": 0.9, "Cats": 0.1}))
    result = post.postprocess_nodes(nodes("Paris has it.", "Cats."), query_str=QUERY)
    assert [n.node.node_id for n in result] == ["n0"]
    (dropped,) = trace(result[0])["dropped"]
    assert dropped["node_id"] == "n1" and dropped["source"] == "retrieved"
    assert dropped["why"] == "grade" and dropped["grade"]["score"] == 0.1
    assert trace(result[0])["refinement"] is None


def test_without_refine_kept_nodes_are_not_cut_into_strips() -> None:
    judge = CallJudge(by_text({"Paris": 0.9}))
    post = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False)
    text = "Paris has it. Cats sleep all day long. Dogs bark at night."
    result = post.postprocess_nodes(nodes(text), query_str=QUERY)
    assert result[0].node.text == text
    assert trace(result[0])["refinement"] is None
    assert judge._calls == 1  # type: ignore[attr-defined]


def test_refinement_keeping_every_strip_leaves_the_text_untouched() -> None:
    text = "  Paris has it.  \n"
    post = crag(by_text({"Paris": 0.9}), refine=True)
    result = post.postprocess_nodes(nodes(text), query_str=QUERY)
    assert result[0].node.text == text
    assert trace(result[0])["refinement"]["dropped"] == []


def test_strip_threshold_overrides_lower_for_strips() -> None:
    text = "Paris has the tower. The tower is tall."
    table = {"Paris has": 0.9, "tall": 0.5}
    post = crag(by_text(table), refine=True, strip_tokens=5, strip_threshold=0.8)
    result = post.postprocess_nodes(nodes(text), query_str=QUERY)
    assert result[0].node.text == "Paris has the tower."
    refinement = trace(result[0])["refinement"]
    assert refinement["strips"] == 2 and refinement["kept"] == [0]
    assert refinement["dropped"] == [{"text": "The tower is tall.", "score": 0.5}]


def test_kept_nodes_come_best_grade_first_then_zero_then_unknown() -> None:
    post = crag(by_text({"Unknown": None, "Zero": 0.0, "Half": 0.5}), lower=0.0, upper=0.9)
    result = post.postprocess_nodes(nodes("Unknown.", "Zero.", "Half."), query_str=QUERY)
    assert [n.node.text for n in result] == ["Half.", "Zero.", "Unknown."]
    assert [n.score for n in result] == [0.5, 0.0, 1.0]


# --- log messages -------------------------------------------------------------------------------


def test_the_decision_is_logged_at_debug(caplog: pytest.LogCaptureFixture) -> None:
    post = crag(by_text({"Paris": 0.9}))
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        post.postprocess_nodes(nodes("Paris has it.", "Cats."), query_str=QUERY)
    assert "CRAG correct: kept 1, dropped 1" in caplog.messages
    assert not any("returns no nodes" in m for m in caplog.messages)


def test_no_node_left_is_a_warning_naming_the_action_and_rounds(
    caplog: pytest.LogCaptureFixture,
) -> None:
    post = crag(by_text({}), corrective_retriever=ListRetriever([]), min_kept=0)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        assert post.postprocess_nodes(nodes("Cats.", "Dogs."), query_str=QUERY) == []
    rounds = [{"query": "where eiffel tower", "rewrite": "keywords", "retrieved": 0, "new": 0,
               "kept": 0}]  # fmt: skip
    assert caplog.messages == [
        "CRAG (incorrect) returns no nodes: all 2 retrieved nodes graded below the thresholds "
        f"and corrective retrieval kept none (rounds: {rounds})"
    ]


# --- corrective rounds --------------------------------------------------------------------------


def test_without_a_retriever_there_is_no_corrective_round() -> None:
    post = crag(by_text({"Maybe": 0.5}), max_rounds=3)
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert trace(result[0])["rounds"] == []
    assert trace(result[0])["action"] == "ambiguous"


def test_web_search_runs_after_the_rewrites_run_out() -> None:
    searched: list[str] = []

    def web(query: str) -> list[str]:
        searched.append(query)
        return ["Web page."]

    post = crag(
        by_text({"Maybe": 0.5}), max_rounds=4, corrective_retriever=ListRetriever([]),
        web_search=web,
    )  # fmt: skip
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert searched == ["where eiffel tower"]
    rounds = trace(result[0])["rounds"]
    assert [r.get("rewrite") for r in rounds] == ["keywords", "original", None]
    assert rounds[-1]["source"] == "web_search"


def test_a_second_round_follows_an_unconfident_first_one() -> None:
    retriever = ListRetriever(nodes("Maybe there.", prefix="c"))
    post = crag(by_text({"Maybe": 0.5}), max_rounds=2, corrective_retriever=retriever)
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert retriever.queries == ["where eiffel tower", QUERY]
    assert [r["new"] for r in trace(result[0])["rounds"]] == [1, 0]


def test_duplicates_of_retrieved_nodes_are_not_graded_again() -> None:
    retriever = ListRetriever(
        [
            NodeWithScore(node=TextNode(text="Fresh text.", id_="c0")),
            NodeWithScore(node=TextNode(text="maybe   HERE.", id_="c1")),
            NodeWithScore(node=TextNode(text="Other.", id_="n0")),
        ]
    )
    post = crag(by_text({"aybe": 0.5, "Fresh": 0.4}), corrective_retriever=retriever)
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    (record,) = trace(result[0])["rounds"]
    assert record == {"query": "where eiffel tower", "rewrite": "keywords", "retrieved": 3,
                      "new": 1, "kept": 1}  # fmt: skip
    assert sorted(n.node.node_id for n in result) == ["c0", "n0"]


def test_a_round_with_only_duplicates_keeps_zero() -> None:
    retriever = ListRetriever(nodes("Maybe here."))
    post = crag(by_text({"Maybe": 0.5}), corrective_retriever=retriever)
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert trace(result[0])["rounds"] == [
        {"query": "where eiffel tower", "rewrite": "keywords", "retrieved": 1, "new": 0, "kept": 0}
    ]


def test_web_results_given_as_nodes_are_kept_as_nodes() -> None:
    page = NodeWithScore(node=TextNode(text="Web node.", id_="w1"), score=0.2)
    post = crag(by_text({"Maybe": 0.5, "Web": 0.9}), web_search=lambda q: [page])
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert [n.node.node_id for n in result] == ["w1", "n0"]
    assert trace(result[0])["source"] == "web_search"


def test_an_async_web_search_in_sync_use_is_closed_and_explained() -> None:
    made: list[Any] = []

    async def page(query: str) -> list[str]:
        return ["Page."]

    def web(query: str) -> Any:
        made.append(page(query))
        return made[-1]

    post = crag(by_text({"Maybe": 0.5}), web_search=web)
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    assert inspect.getcoroutinestate(made[0]) == inspect.CORO_CLOSED
    assert trace(result[0])["rounds"][0]["error"] == (
        "websearch failed: TypeError('web_search is async and cannot run in sync postprocessing: "
        "use apostprocess_nodes (an async query engine) or pass a sync callable')"
    )


# --- rewrites -----------------------------------------------------------------------------------


def crag_rounds(llm: Any, max_rounds: int, **kwargs: Any) -> list[dict[str, Any]]:
    found: list[list[dict[str, Any]]] = []
    post = crag(by_text({"Maybe": 0.5}), max_rounds=max_rounds,
                corrective_retriever=ListRetriever([]), llm=llm, **kwargs)  # fmt: skip
    result = post.postprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    found.append(trace(result[0])["rounds"])
    return found[0]


async def acrag_rounds(llm: Any, max_rounds: int, **kwargs: Any) -> list[dict[str, Any]]:
    post = crag(by_text({"Maybe": 0.5}), max_rounds=max_rounds,
                corrective_retriever=ListRetriever([]), llm=llm, **kwargs)  # fmt: skip
    result = await post.apostprocess_nodes(nodes("Maybe here."), query_str=QUERY)
    return trace(result[0])["rounds"]


async def both(use_async: bool, llm: Any, max_rounds: int, **kw: Any) -> list[dict[str, Any]]:
    if use_async:
        return await acrag_rounds(llm, max_rounds, **kw)
    return crag_rounds(llm, max_rounds, **kw)


def test_mock_llm_counts_as_no_llm() -> None:
    rounds = crag_rounds(MockLLM(), 1)
    assert [(r["query"], r["rewrite"]) for r in rounds] == [("where eiffel tower", "keywords")]


def test_rewrites_without_llm_are_keywords_then_original() -> None:
    rounds = crag_rounds(None, 3)
    assert [(r["query"], r["rewrite"]) for r in rounds] == [
        ("where eiffel tower", "keywords"),
        (QUERY, "original"),
    ]
    assert all("rewrite_fallback" not in r for r in rounds)


@pytest.mark.parametrize("use_async", [False, True])
async def test_llm_rewrites_quotes_stripped_and_prompt_lists_tried_queries(use_async: bool) -> None:
    llm = ScriptedLLM(['"XML tower X"', "first", "second"])
    rounds = await both(use_async, llm, 3)
    assert [(r["query"], r["rewrite"]) for r in rounds] == [
        ("XML tower X", "llm"),
        ("first", "llm"),
        ("second", "llm"),
    ]
    assert llm.prompts[0].endswith(f"Question: {QUERY}\nQuery:")
    assert f"Not: XML tower X\nNot: first\nQuestion: {QUERY}\nQuery:" in llm.prompts[2]


@pytest.mark.parametrize("use_async", [False, True])
async def test_an_empty_llm_reply_falls_back_with_a_note(use_async: bool) -> None:
    rounds = await both(use_async, ScriptedLLM(["  \n"]), 1)
    assert rounds[0]["query"] == "where eiffel tower" and rounds[0]["rewrite"] == "keywords"
    assert rounds[0]["rewrite_fallback"] == "empty LLM reply"


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_repeated_llm_reply_falls_back_with_a_note_cut_at_200(use_async: bool) -> None:
    long = "tower " * 50
    rounds = await both(use_async, ScriptedLLM([long, long, "tower"]), 2)
    assert [(r["query"], r["rewrite"]) for r in rounds] == [
        (long.strip(), "llm"),
        ("where eiffel tower", "keywords"),
    ]
    note = rounds[1]["rewrite_fallback"]
    assert note == f"LLM repeated a tried query {long.strip()!r}"[:200] and len(note) == 200
    short = await both(use_async, ScriptedLLM(["tower", "tower"]), 2)
    assert short[1]["rewrite_fallback"] == "LLM repeated a tried query 'tower'"


class _Raising(ScriptedLLM):
    def _answer(self, prompt: str) -> str:
        self.prompts.append(prompt)
        raise ValueError("x" * 300)


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_failing_llm_falls_back_with_a_logged_note_cut_at_200(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    llm = _Raising()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        rounds = await both(use_async, llm, 1)
    error = ValueError("x" * 300)
    assert rounds[0]["rewrite"] == "keywords"
    assert rounds[0]["rewrite_fallback"] == f"LLM error: {error!r}"[:200]
    assert len(rounds[0]["rewrite_fallback"]) == 200
    assert f"CRAG rewrite failed, using keywords: {error!r}" in caplog.messages
    assert llm.prompts[0].endswith(f"Question: {QUERY}\nQuery:")


class _Slow(ScriptedLLM):
    def _answer(self, prompt: str) -> str:
        time.sleep(1.0)
        return "slow answer"

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        await asyncio.sleep(1.0)
        return CompletionResponse(text="slow answer")


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_slow_llm_rewrite_times_out_to_keywords(use_async: bool) -> None:
    rounds = await both(use_async, _Slow(), 1, rewrite_timeout=0.01)
    assert rounds[0]["rewrite"] == "keywords"
    assert rounds[0]["rewrite_fallback"].startswith("LLM error: TimeoutError(")


def test_a_reply_without_text_counts_as_empty() -> None:
    from llama_index_ext_advrag.postprocessor.crag import _Rewrite
    from llama_index_ext_advrag.postprocessor.crag_io import accept_rewrite

    assert accept_rewrite(_Rewrite(QUERY, ()), object()) == (
        "where eiffel tower",
        "keywords",
        "empty LLM reply",
    )


def test_refinement_joins_adjacent_kept_strips_with_the_source_text_between() -> None:
    text = "Paris has the tower.  Paris is in France. Cats are tall."
    post = crag(by_text({"Paris": 0.9, "Cats": 0.1}), refine=True, strip_tokens=5)
    result = post.postprocess_nodes(nodes(text), query_str=QUERY)
    assert result[0].node.text == "Paris has the tower.  Paris is in France."
    refinement = trace(result[0])["refinement"]
    assert refinement["strips"] == 3 and refinement["kept"] == [0, 1]


def test_keep_back_respects_the_floor_with_real_scores() -> None:
    from llama_index_ext_advrag.postprocessor.crag import keep_back

    # the best dropped node above the floor comes back; one below the floor never does
    assert keep_back([0.2, 0.05, 0.9], [False, False, True], 2, 0.1) == [0]
    assert keep_back([0.3, 0.2], [False, False], 2, 0.25) == [0]
    assert keep_back([0.05], [False], 1, 0.1) == []


def test_a_score_exactly_at_upper_passes_the_margin_rule() -> None:
    from llama_index_ext_advrag.postprocessor.crag import within_margin

    # 0.9 is far below the best's log-odds (6.9 - 1.0 > 2.2) but sits exactly on upper
    assert within_margin([0.999, 0.9], 0.9, 1.0) == [True, True]
    assert within_margin([0.999, 0.89], 0.9, 1.0) == [True, False]


def test_the_margin_rule_keeps_a_score_exactly_at_its_floor() -> None:
    from llama_index_ext_advrag.postprocessor.crag import within_margin

    assert within_margin([0.7, 0.7], 0.9, 0.0) == [True, True]  # log-odds equal to the floor


def test_keep_retrieved_applies_the_margin_below_upper() -> None:
    from llama_index_ext_advrag.postprocessor.crag import CRAGAction, keep_retrieved

    # 0.5 passes lower but is more than 1 log-odds below the best (0.95), which is above upper
    kept = keep_retrieved([0.95, 0.5], CRAGAction.AMBIGUOUS, 0.9, 0.3, keep_within=1.0)
    assert kept == [True, False]
    assert keep_retrieved([0.95, 0.5], CRAGAction.AMBIGUOUS, 0.9, 0.3) == [True, True]


def test_keep_back_counts_what_is_kept_and_reads_zero_scores_as_zero() -> None:
    from llama_index_ext_advrag.postprocessor.crag import keep_back

    assert keep_back([0.5, 0.4, 0.9], [False, False, True], 2, 0.0) == [0]  # one is missing
    assert keep_back([0.0, 0.5], [False, False], 1, 0.0) == [1]  # 0.0 ranks last
    assert keep_back([0.0], [False], 1, 0.1) == []  # 0.0 is below the floor
    assert keep_back([0.1], [False], 1, 0.1) == [0]  # at the floor: kept back
    with pytest.raises(ValueError):
        keep_back([0.5, 0.4], [False], 1, 0.0)  # one flag per score


def test_crag_without_a_judge_uses_the_offline_judge_and_names_a_bad_one() -> None:
    from llama_index_ext_advrag.postprocessor.crag import CRAGPostprocessor

    assert CRAGPostprocessor().judge.name == "offline"  # built lazily: no model is loaded here
    with pytest.raises(TypeError, match="judge must be a BaseRelevanceJudge .* got str"):
        CRAGPostprocessor(judge="cross-encoder")


def test_a_given_keep_within_wins_over_the_judges_even_none() -> None:
    from llama_index_ext_advrag.postprocessor.crag import CRAGPostprocessor

    default = CRAGPostprocessor()
    assert default.keep_within == default.judge.default_keep_within is not None
    assert CRAGPostprocessor(keep_within=None).keep_within is None
    assert CRAGPostprocessor(keep_within=2.5).keep_within == 2.5


def test_update_prompts_names_the_optional_avoid_variable_in_its_error() -> None:
    from llama_index.core.prompts import PromptTemplate

    post = crag(by_text({}))
    with pytest.raises(ValueError, match=r"\(and may use \{avoid\}, the queries already tried\)"):
        post.update_prompts({"rewrite_prompt": PromptTemplate("Rewrite: {question}")})


@pytest.mark.parametrize("use_async", [False, True])
async def test_min_kept_keeps_back_a_retrieved_node_never_a_dropped_corrective_one(
    use_async: bool,
) -> None:
    # Incorrect: the retrieved node (0.2) and the corrective hit (0.25) are both below lower;
    # min_kept brings back the retrieved one although the corrective one graded higher.
    post = crag(
        by_text({"Maybe": 0.2, "Corrective": 0.25}),
        corrective_retriever=ListRetriever(nodes("Corrective text.", prefix="c")),
        min_kept=1,
    )
    retrieved = nodes("Maybe here.")
    if use_async:
        result = await post.apostprocess_nodes(retrieved, query_str=QUERY)
    else:
        result = post.postprocess_nodes(retrieved, query_str=QUERY)
    assert [n.node.node_id for n in result] == ["n0"]
    assert trace(result[0])["kept_by"] == "min_kept"
    assert [(d["node_id"], d["source"]) for d in trace(result[0])["dropped"]] == [
        ("c0", "corrective")
    ]


class HangingJudge(BaseRelevanceJudge):
    """Answers after ``release`` is set (sync, in the worker thread) or never (async)."""

    _release: Any

    def __init__(self, release: Any, **data: Any) -> None:
        super().__init__(**data)
        object.__setattr__(self, "_release", release)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self._release.wait(5.0)
        return [self.grade(0.9) for _ in texts]

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        await asyncio.sleep(5.0)
        return [self.grade(0.9) for _ in texts]


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_timed_out_judge_is_named_in_the_result_event_with_the_retrieved_nodes(
    use_async: bool,
) -> None:
    import threading

    from advrag_testing import instrumented

    from llama_index_ext_advrag.events import CRAGResultEvent

    release = threading.Event()
    post = CRAGPostprocessor(judge=HangingJudge(release), judge_timeout=0.2, refine=False)
    try:
        with instrumented() as (events, _):
            if use_async:
                await post.apostprocess_nodes(nodes("A.", "B."), query_str=QUERY)
            else:
                post.postprocess_nodes(nodes("A.", "B."), query_str=QUERY)
    finally:
        release.set()
    (outcome,) = [e for e in events if isinstance(e, CRAGResultEvent)]
    assert (outcome.action, outcome.timed_out) == ("keep_as_retrieved", "judge")
    assert [(k["node_id"], k["source"]) for k in outcome.kept] == [
        ("n0", "retrieved"),
        ("n1", "retrieved"),
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_a_node_below_lower_is_dropped_by_grade_even_far_below_the_best(
    use_async: bool,
) -> None:
    # 0.05 is below lower and more than keep_within log-odds below the best (0.99): the
    # thresholds dropped it, so "grade" is why, not "margin".
    post = crag(by_text({"Paris": 0.99, "Cats": 0.05}), keep_within=2.0, min_kept=0)
    retrieved = nodes("Paris has it.", "Cats.")
    if use_async:
        result = await post.apostprocess_nodes(retrieved, query_str=QUERY)
    else:
        result = post.postprocess_nodes(retrieved, query_str=QUERY)
    assert [n.node.node_id for n in result] == ["n0"]
    assert [(d["node_id"], d["why"]) for d in trace(result[0])["dropped"]] == [("n1", "grade")]
