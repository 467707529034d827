"""CRAG's action rules, strip selection and judge reranking at their boundaries (found by
mutation testing: each case flips when one comparison or one default changes)."""

from __future__ import annotations

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor
from llama_index_ext_advrag.postprocessor.crag import (
    CRAGAction,
    decide_action,
    dedupe_key,
    keep_corrective,
    keep_retrieved,
)
from llama_index_ext_advrag.postprocessor.crag_refine import (
    Strip,
    join_strips,
    select_strips,
    split_strips,
)
from llama_index_ext_advrag.postprocessor.judge_rerank import rerank_order

# --- the action --------------------------------------------------------------------------------


def test_no_scores_means_no_action() -> None:
    assert decide_action([], upper=0.7, lower=0.3) is None


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.5], CRAGAction.CORRECT),  # upper == lower == 0.5: at the threshold is correct
        ([0.49], CRAGAction.INCORRECT),
        ([0.49, 0.5], CRAGAction.CORRECT),
    ],
)
def test_equal_thresholds(scores: list[float], expected: CRAGAction) -> None:
    assert decide_action(scores, upper=0.5, lower=0.5) is expected


def test_incorrect_needs_every_score_below_lower() -> None:
    assert decide_action([0.0, 0.0, 0.0], 0.7, 0.3) is CRAGAction.INCORRECT
    assert decide_action([0.0, 0.3, 0.0], 0.7, 0.3) is CRAGAction.AMBIGUOUS
    assert decide_action([0.0, None, 0.0], 0.7, 0.3) is CRAGAction.AMBIGUOUS


def test_keep_rules_at_the_thresholds() -> None:
    scores = [0.7, 0.69, 0.3, 0.29, None]
    assert keep_retrieved(scores, CRAGAction.CORRECT, 0.7, 0.3) == [
        True,
        False,
        False,
        False,
        False,
    ]
    doubtful = keep_retrieved(scores, CRAGAction.CORRECT, 0.7, 0.3, keep_doubtful_when_correct=True)
    assert doubtful == [True, True, True, False, True]
    assert keep_retrieved(scores, CRAGAction.AMBIGUOUS, 0.7, 0.3) == doubtful
    assert keep_retrieved(scores, CRAGAction.AMBIGUOUS, 0.7, 0.3, True) == doubtful
    assert keep_retrieved(scores, CRAGAction.INCORRECT, 0.7, 0.3, True) == [False] * 5
    assert keep_corrective(scores, 0.3) == [True, True, True, False, True]


def test_dedupe_key_ignores_spacing_and_case() -> None:
    assert (
        dedupe_key("  The  Eiffel\nTower ") == dedupe_key("the eiffel tower") == "the eiffel tower"
    )
    assert dedupe_key("Straße") == dedupe_key("STRASSE")  # case-folded, not lower-cased


# --- strips ------------------------------------------------------------------------------------


def test_a_strip_may_fill_its_budget_exactly() -> None:
    # "One two." is 3 tokens, so two sentences make 6.
    text = "One two. One two. One two."
    assert [s.tokens for s in split_strips(0, text, strip_tokens=6)] == [6, 3]
    assert [s.text for s in split_strips(0, text, strip_tokens=5)] == ["One two."] * 3
    strips = split_strips(2, text, strip_tokens=6)
    assert [(s.passage, s.position, s.start, s.end) for s in strips] == [
        (2, 0, 0, 17),
        (2, 1, 18, 26),
    ]


def test_unknown_scores_rank_first_and_ties_keep_reading_order() -> None:
    strips = [Strip(0, i, 0, 1, "x", 10) for i in range(3)]
    # unknown ranks as 1.0: under a budget of one strip it wins over 0.9
    assert select_strips(strips, [0.9, None, 0.2], 0.5, token_budget=10) == [1]
    # a passage without a candidate offers its best strip, the first of equal ones
    assert select_strips(strips, [0.1, 0.3, 0.3], 0.5) == [1]


def test_budget_skips_a_strip_that_does_not_fit_and_goes_on() -> None:
    strips = [Strip(0, 0, 0, 1, "a", 8), Strip(0, 1, 0, 1, "b", 5), Strip(0, 2, 0, 1, "c", 2)]
    # best first: a (8) fits; b (8 + 5 > 12) is skipped; c (8 + 2) still fits
    assert select_strips(strips, [0.9, 0.8, 0.7], 0.5, token_budget=12) == [0, 2]
    assert select_strips(strips, [0.9, 0.8, 0.7], 0.5, token_budget=13) == [0, 1]
    assert select_strips(strips, [0.9, 0.8, 0.7], 0.5, token_budget=15) == [0, 1, 2]


def test_every_passage_gets_its_best_strip_before_any_second_one() -> None:
    strips = [Strip(0, 0, 0, 1, "a", 5), Strip(0, 1, 0, 1, "b", 5), Strip(1, 0, 0, 1, "c", 5)]
    # b (0.9) outranks c (0.6), but c is passage 1's best: it goes before b
    assert select_strips(strips, [0.95, 0.9, 0.6], 0.5, token_budget=10) == [0, 2]
    # the output is in reading order, not rank order
    assert select_strips(strips, [0.6, 0.9, 0.95], 0.5) == [0, 1, 2]


def test_join_strips_adjacent_and_apart() -> None:
    text = "One. Two.  Three. Four. Five."
    strips = split_strips(0, text, strip_tokens=1)
    assert join_strips(text, strips[1:3]) == "Two.  Three."
    assert join_strips(text, [strips[0], strips[1], strips[2]]) == "One. Two.  Three."
    assert join_strips(text, [strips[0], strips[2], strips[4]]) == "One.\nThree.\nFive."
    assert join_strips(text, [strips[0], strips[2], strips[3]]) == "One.\nThree. Four."
    assert join_strips(text, []) == ""


# --- the postprocessor's bounds ------------------------------------------------------------------


class _Judge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.5) for _ in texts]


def test_thresholds_may_be_equal_but_not_crossed() -> None:
    assert CRAGPostprocessor(judge=_Judge(), upper=0.4, lower=0.4).lower == 0.4
    with pytest.raises(ValueError, match=r"lower \(0.41\) must not exceed upper \(0.4\)"):
        CRAGPostprocessor(judge=_Judge(), upper=0.4, lower=0.41)


def test_max_rounds_bounds() -> None:
    assert CRAGPostprocessor(judge=_Judge(), max_rounds=10).max_rounds == 10
    with pytest.raises(ValueError, match="max_rounds"):
        CRAGPostprocessor(judge=_Judge(), max_rounds=11)


# --- judge reranking ---------------------------------------------------------------------------


def test_rerank_order_ties_zero_and_unknown() -> None:
    grades = [
        Grade.unknown("j", "x"),
        Grade.from_score(0.0, "j"),
        Grade.from_score(0.5, "j"),
        Grade.unknown("j", "y"),
        Grade.from_score(0.5, "j"),
    ]
    # by score, ties in input order; a known 0.0 before every unknown
    assert rerank_order(grades) == [2, 4, 1, 0, 3]


def test_rerank_keeps_top_n_exactly() -> None:
    from llama_index_ext_advrag.postprocessor import JudgeRerankPostprocessor

    class _ByLength(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(len(t) / 10) for t in texts]

    hits = [NodeWithScore(node=TextNode(text="x" * n, id_=str(n)), score=0.0) for n in (1, 3, 2)]
    top = JudgeRerankPostprocessor(judge=_ByLength(), top_n=2).postprocess_nodes(
        hits, query_str="q"
    )
    assert [(n.node.node_id, n.score) for n in top] == [("3", 0.3), ("2", 0.2)]
    trace = [n.node.metadata["advrag_trace"]["judge_rerank"] for n in top]
    assert [(t["retrieval_rank"], t["rank"]) for t in trace] == [(1, 0), (2, 1)]
    assert hits[1].score == 0.0  # the input is not rescored


# --- corrective retrieval: rewrites and web results ----------------------------------------------


class _Retriever(BaseRetriever):
    """Returns nothing; records the queries it was given."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        return []


def _irrelevant(max_rounds: int, llm: ScriptedLLM | None) -> tuple[CRAGPostprocessor, _Retriever]:
    class _Zero(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.0) for _ in texts]

    retriever = _Retriever()
    crag = CRAGPostprocessor(
        judge=_Zero(), upper=0.7, lower=0.3, refine=False, max_rounds=max_rounds,
        corrective_retriever=retriever, llm=llm, min_kept=0,
    )  # fmt: skip
    return crag, retriever


def _hit(text: str) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=text, id_="n0"), score=1.0)]


def test_llm_rewrite_first_line_without_quotes_and_avoiding_tried_ones() -> None:
    llm = ScriptedLLM(['"eiffel tower location"\nbecause...', "eiffel tower location", "paris"])
    crag, retriever = _irrelevant(3, llm)
    result = crag.postprocess_nodes(_hit("Cats."), query_str="Where is the Eiffel Tower?")
    assert result == []
    # 2nd reply repeats a tried query: the keyword rewrite replaces it; the 3rd is new
    assert retriever.queries == ["eiffel tower location", "where eiffel tower", "paris"]
    assert "Not: eiffel tower location\n" in llm.prompts[1]
    assert "Not:" not in llm.prompts[0]


def test_without_llm_rewrites_run_out_after_keywords_and_the_original() -> None:
    crag, retriever = _irrelevant(5, None)
    crag.postprocess_nodes(_hit("Cats."), query_str="Where is the Eiffel Tower?")
    assert retriever.queries == ["where eiffel tower", "Where is the Eiffel Tower?"]


def test_web_results_become_marked_text_nodes() -> None:
    class _Half(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.5) for _ in texts]

    crag = CRAGPostprocessor(
        judge=_Half(), upper=0.7, lower=0.3, refine=False, web_search=lambda q: ["Web page."]
    )
    result = crag.postprocess_nodes(_hit("Maybe."), query_str="q")
    web = [n for n in result if n.node.metadata.get("source") == "web_search"]
    assert len(web) == 1 and web[0].node.node_id.startswith("web-")
    assert len(web[0].node.node_id) == len("web-") + 16
    assert web[0].node.metadata["advrag_trace"]["crag"]["source"] == "web_search"
    bad = CRAGPostprocessor(
        judge=_Half(), upper=0.7, lower=0.3, refine=False, web_search=lambda q: [3]
    )
    rounds = bad.postprocess_nodes(_hit("Maybe."), query_str="q")[0].node.metadata
    assert "web_search returned a int; allowed: str, NodeWithScore" in str(rounds)


def test_rewrite_prompt_carries_the_question() -> None:
    llm = ScriptedLLM(["eiffel"])
    crag, _ = _irrelevant(1, llm)
    crag.postprocess_nodes(_hit("Cats."), query_str="Where is the Eiffel Tower?")
    assert "Question: Where is the Eiffel Tower?\nQuery:" in llm.prompts[0]


class _Broken(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("boom")


def test_a_failing_judge_is_logged_with_the_error(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING")
    crag = CRAGPostprocessor(judge=_Broken(name="broken"), refine=False)
    crag.postprocess_nodes(_hit("Cats."), query_str="q")
    assert (
        "CRAG keeps the nodes as retrieved: judge failed: RuntimeError('boom')" in caplog.messages
    )


async def test_async_rerank_with_a_failing_judge_keeps_order_and_says_why(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from llama_index_ext_advrag.postprocessor import JudgeRerankPostprocessor

    caplog.set_level("WARNING")
    hits = [NodeWithScore(node=TextNode(text=t, id_=t), score=0.1) for t in ("a", "b", "c")]
    rerank = JudgeRerankPostprocessor(judge=_Broken(name="broken"), top_n=2)
    for result in (
        await rerank.apostprocess_nodes(hits, query_str="q"),
        rerank.postprocess_nodes(hits, query_str="q"),
    ):
        assert [n.node.node_id for n in result] == ["a", "b"]
        trace = result[0].node.metadata["advrag_trace"]["judge_rerank"]
        assert trace == {
            "retrieval_rank": 0,
            "rank": 0,
            "error": "judge failed: RuntimeError('boom')",
        }
    assert (
        caplog.messages
        == ["judge broken failed; keeping the retrieval order: RuntimeError('boom')"] * 2
    )


class _Failing(BaseRetriever):
    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        raise ConnectionError("index down")


class _Half(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.5) for _ in texts]


def _rounds(result: list[NodeWithScore]) -> list[dict]:
    return result[0].node.metadata["advrag_trace"]["crag"]["rounds"]


async def test_async_failures_web_search_and_rewrites_match_sync(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("WARNING")

    async def web_async(query: str) -> list[str]:
        return [f"Async page for {query}."]

    def web_sync(query: str) -> list[str]:
        return [f"Page for {query}."]

    def web_failing(query: str) -> list[str]:
        raise TimeoutError("search timed out")

    # (sync postprocessing cannot await an async web_search: see the test below)
    for web in (web_async, web_sync, web_failing):
        results = []
        for run_async in (True,) if web is web_async else (False, True):
            retriever = _Failing()
            crag = CRAGPostprocessor(
                judge=_Half(), upper=0.7, lower=0.3, refine=False, max_rounds=2,
                corrective_retriever=retriever, web_search=web, llm=ScriptedLLM(["tower", "eiffel"]),
            )  # fmt: skip
            hit = _hit("Maybe.")
            if run_async:
                result = await crag.apostprocess_nodes(hit, query_str="Where is the Eiffel Tower?")
            else:
                result = crag.postprocess_nodes(hit, query_str="Where is the Eiffel Tower?")
            assert retriever.queries == ["tower", "eiffel"]
            results.append([n.model_dump() for n in result])
            rounds = _rounds(result)
            assert [r.get("error") for r in rounds[:2]] == [
                "retrieve failed: ConnectionError('index down')"
            ] * 2
            # the web search runs once, with the first rewritten query
            assert rounds[2]["query"] == "tower" and rounds[2]["source"] == "web_search"
            if web is web_failing:
                assert rounds[2]["error"] == "websearch failed: TimeoutError('search timed out')"
            else:
                assert rounds[2]["new"] == 1 and rounds[2]["kept"] == 1
                assert any("page for tower." in n.node.get_content().lower() for n in result)
        assert results[0] == results[-1]
    assert "CRAG Retrieve failed: ConnectionError('index down')" in caplog.messages


def test_the_web_search_query_without_rewrites_is_the_distinctive_terms() -> None:
    seen: list[str] = []
    crag = CRAGPostprocessor(
        judge=_Half(), upper=0.7, lower=0.3, refine=False,
        web_search=lambda q: seen.append(q) or [],
    )  # fmt: skip
    crag.postprocess_nodes(_hit("Maybe."), query_str="Where is the Eiffel Tower?")
    assert seen == ["where eiffel tower"]


def test_no_web_search_after_a_confident_corrective_node() -> None:
    class _ByWord(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.7 if "Paris" in t else 0.5) for t in texts]

    class _Paris(BaseRetriever):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return [NodeWithScore(node=TextNode(text="Paris.", id_="p"), score=1.0)]

    searched: list[str] = []
    crag = CRAGPostprocessor(
        judge=_ByWord(), upper=0.7, lower=0.3, refine=False, max_rounds=3,
        corrective_retriever=_Paris(), web_search=lambda q: searched.append(q) or [],
    )  # fmt: skip
    result = crag.postprocess_nodes(_hit("Maybe."), query_str="q")
    assert searched == [] and len(_rounds(result)) == 1  # 0.7 == upper is confident
    assert _rounds(result)[0] == {
        "query": "q",
        "rewrite": "keywords",
        "retrieved": 1,
        "new": 1,
        "kept": 1,
    }


def test_an_async_web_search_in_sync_use_is_a_clear_recorded_failure(caplog) -> None:
    async def web_async(query: str) -> list[str]:
        return [f"Async page for {query}."]

    crag = CRAGPostprocessor(
        judge=_Half(), upper=0.7, lower=0.3, refine=False, max_rounds=2,
        corrective_retriever=_Failing(), web_search=web_async, llm=ScriptedLLM(["tower", "eiffel"]),
    )  # fmt: skip
    with caplog.at_level("WARNING"):
        result = crag.postprocess_nodes(_hit("Maybe."), query_str="Where is the Eiffel Tower?")
    error = _rounds(result)[-1]["error"]
    assert error.startswith("websearch failed: TypeError('web_search is async")
    assert "apostprocess_nodes" in error and "coroutine" not in error
    assert not any("never awaited" in message for message in caplog.messages)
