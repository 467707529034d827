"""CRAGPostprocessor: action rules, corrective rounds, refinement, faults, sync == async."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor
from llama_index_ext_advrag.postprocessor.crag import (
    CRAGAction,
    decide_action,
    distinctive_terms,
    keep_corrective,
    keep_retrieved,
)
from llama_index_ext_advrag.postprocessor.crag_refine import (
    Strip,
    join_strips,
    select_strips,
    split_strips,
)

QUERY = "Where is the Eiffel Tower?"


class TableJudge(BaseRelevanceJudge):
    """Scores from a function of the text; records every batch it grades."""

    _fn: Callable[[str], float | None]
    calls: list[list[str]] = []

    def __init__(self, fn: Callable[[str], float | None], **data: Any) -> None:
        super().__init__(calls=[], **data)
        object.__setattr__(self, "_fn", fn)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self.calls.append(list(texts))
        grades = []
        for text in texts:
            score = self._fn(text)
            grades.append(Grade.unknown(self.name, "n/a") if score is None else self.grade(score))
        return grades


class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[NodeWithScore], fail: bool = False) -> None:
        super().__init__()
        self.nodes, self.fail, self.queries = nodes, fail, []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        if self.fail:
            raise ConnectionError("index down")
        return list(self.nodes)


def nodes(*texts: str, prefix: str = "n") -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"{prefix}{i}"), score=1.0)
        for i, t in enumerate(texts)
    ]


def by_word(
    table: dict[str, float | None], default: float | None = 0.0
) -> Callable[[str], float | None]:
    def score(text: str) -> float | None:
        return next((v for k, v in table.items() if k in text), default)

    return score


def texts(result: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content() for n in result]


# ----- pure rules -----


@pytest.mark.parametrize(
    ("scores", "expected"),
    [
        ([0.7, 0.0], CRAGAction.CORRECT),  # == upper counts (>=)
        ([0.69, 0.3], CRAGAction.AMBIGUOUS),  # == lower is not below it
        ([0.29, 0.0], CRAGAction.INCORRECT),  # every score < lower
        ([0.29, 0.5], CRAGAction.AMBIGUOUS),  # one not below lower: not all
        ([0.1, None], CRAGAction.AMBIGUOUS),  # an unknown is not "below lower"
        ([None, 0.9], CRAGAction.CORRECT),
        ([None, None], None),
    ],
)
def test_decide_action(scores: list[float | None], expected: CRAGAction | None) -> None:
    assert decide_action(scores, upper=0.7, lower=0.3) is expected


def test_keep_rules() -> None:
    scores = [0.8, 0.5, 0.1, None]
    assert keep_retrieved(scores, CRAGAction.CORRECT, 0.7, 0.3) == [True, False, False, False]
    assert keep_retrieved(scores, CRAGAction.CORRECT, 0.7, 0.3, True) == [True, True, False, True]
    assert keep_retrieved(scores, CRAGAction.AMBIGUOUS, 0.7, 0.3) == [True, True, False, True]
    assert keep_retrieved(scores, CRAGAction.INCORRECT, 0.7, 0.3) == [False] * 4
    assert keep_corrective([0.3, 0.29, None], 0.3) == [True, False, True]


def test_distinctive_terms() -> None:
    assert distinctive_terms("Where is the Eiffel Tower? The tower!") == "where eiffel tower"
    assert distinctive_terms("埃菲尔铁塔在哪里？") == "埃菲尔铁塔"
    assert distinctive_terms("the") == "the"  # nothing distinctive: the query itself


def test_split_strips_groups_sentences_under_the_token_budget() -> None:
    text = "Alpha beta gamma. Delta epsilon. Zeta eta theta iota kappa lambda mu nu xi omicron pi."
    strips = split_strips(3, text, strip_tokens=8)
    assert [s.text for s in strips] == [
        "Alpha beta gamma. Delta epsilon.",
        "Zeta eta theta iota kappa lambda mu nu xi omicron pi.",  # too long: alone
    ]
    assert all(text[s.start : s.end] == s.text and s.passage == 3 for s in strips)
    assert split_strips(0, "") == []
    with pytest.raises(ValueError, match="strip_tokens"):
        split_strips(0, "x", 0)


def test_select_strips_threshold_best_fallback_budget_and_order() -> None:
    strips = [Strip(0, 0, 0, 1, "a", 10), Strip(0, 1, 2, 3, "b", 10), Strip(1, 0, 0, 1, "c", 10),
              Strip(1, 1, 2, 3, "d", 10)]  # fmt: skip
    # passage 0: both >= 0.5; passage 1: none, so its best (d) is kept
    assert select_strips(strips, [0.6, 0.9, 0.1, 0.2], 0.5) == [0, 1, 3]
    assert select_strips(strips, [0.5, 0.49, 0.1, 0.2], 0.5) == [0, 3]  # >= threshold
    # budget 20: each passage's best first (b 0.9, d 0.2), then a does not fit
    assert select_strips(strips, [0.6, 0.9, 0.1, 0.2], 0.5, token_budget=20) == [1, 3]
    # unknown scores are candidates
    assert select_strips(strips, [None, 0.0, 0.0, 0.0], 0.5) == [0, 2]
    with pytest.raises(ValueError, match="4 strips but 1 scores"):
        select_strips(strips, [0.1], 0.5)


def test_join_strips_keeps_adjacent_source_text() -> None:
    text = "One. Two.  Three. Four."
    strips = split_strips(0, text, strip_tokens=1)
    assert join_strips(text, [strips[0], strips[1], strips[3]]) == "One. Two.\nFour."


# ----- the postprocessor -----


def test_correct_keeps_confident_nodes_sorted_with_trace_and_no_mutation() -> None:
    judge = TableJudge(by_word({"Paris": 0.9, "France": 0.6, "cheese": 0.05}))
    given = nodes("Cheese is tasty.", "The tower is in Paris.", "France is big.")
    before = copy.deepcopy(given)
    crag = CRAGPostprocessor(
        judge=judge, upper=0.7, lower=0.3, refine=False, keep_doubtful_when_correct=False
    )
    result = crag.postprocess_nodes(given, query_str=QUERY)
    assert texts(result) == ["The tower is in Paris."]
    assert result[0].score == pytest.approx(0.9)
    trace = result[0].node.metadata[TRACE_KEY]["crag"]
    assert trace["action"] == "correct" and trace["source"] == "retrieved"
    assert trace["grade"]["judge"] == "judge" and trace["grade"]["label"] == "relevant"
    assert {d["node_id"] for d in trace["dropped"]} == {"n0", "n2"}
    assert [n.model_dump() for n in given] == [n.model_dump() for n in before]
    doubtful = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False)  # the default
    assert texts(doubtful.postprocess_nodes(given, query_str=QUERY)) == [
        "The tower is in Paris.",
        "France is big.",
    ]


def test_incorrect_drops_everything_and_retrieves_with_the_rewritten_query() -> None:
    judge = TableJudge(by_word({"Paris": 0.9, "Lyon": 0.4}))
    retriever = ListRetriever(
        nodes("The Eiffel Tower stands in Paris.", "Lyon has a tower.", "Noise.", prefix="c")
    )
    crag = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False,
                             corrective_retriever=retriever)  # fmt: skip
    result = crag.postprocess_nodes(nodes("Cheese.", "Wine."), query_str=QUERY)
    assert retriever.queries == ["where eiffel tower"]  # no LLM: distinctive terms
    assert texts(result) == ["The Eiffel Tower stands in Paris.", "Lyon has a tower."]
    trace = result[0].node.metadata[TRACE_KEY]["crag"]
    assert trace["action"] == "incorrect" and trace["source"] == "corrective"
    assert trace["rounds"] == [
        {"query": "where eiffel tower", "rewrite": "keywords", "retrieved": 3, "new": 3, "kept": 2}
    ]


def test_ambiguous_merges_and_deduplicates() -> None:
    judge = TableJudge(by_word({"Paris": 0.9, "tower": 0.5}))
    retriever = ListRetriever(
        [NodeWithScore(node=TextNode(text="A  tower.", id_="other"))]  # same text, other id
        + nodes("In Paris.")
    )
    crag = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False,
                             corrective_retriever=retriever)  # fmt: skip
    result = crag.postprocess_nodes(nodes("a tower.", "Cheese."), query_str=QUERY)
    # "In Paris." has id n0 like the caller's first node: a duplicate by id, dropped too
    assert texts(result) == ["a tower."]
    trace = result[0].node.metadata[TRACE_KEY]["crag"]
    assert trace["action"] == "ambiguous" and trace["rounds"][0]["new"] == 0


def test_rounds_are_bounded_and_stop_at_a_confident_node() -> None:
    judge = TableJudge(by_word({"maybe": 0.5}))
    retriever = ListRetriever([])
    llm = ScriptedLLM(["q1", "q2", "q3", "q4"])
    crag = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False, max_rounds=3,
                             corrective_retriever=retriever, llm=llm)  # fmt: skip
    crag.postprocess_nodes(nodes("maybe."), query_str=QUERY)
    assert retriever.queries == ["q1", "q2", "q3"]
    # without an LLM there are two distinct rewrites (keywords, then the query itself)
    plain = ListRetriever([])
    CRAGPostprocessor(judge=judge, refine=False, max_rounds=5, upper=0.7, lower=0.3,
                      corrective_retriever=plain).postprocess_nodes(nodes("maybe."), query_str=QUERY)  # fmt: skip
    assert plain.queries == ["where eiffel tower", QUERY]
    # a confident corrective node ends the rounds
    found = ListRetriever(nodes("x", "y", "z", "Paris!", prefix="c"))
    stop_judge = TableJudge(by_word({"maybe": 0.5, "Paris": 0.9}))
    CRAGPostprocessor(judge=stop_judge, refine=False, max_rounds=3, upper=0.7, lower=0.3,
                      corrective_retriever=found, llm=ScriptedLLM(["a", "b"])).postprocess_nodes(
        [NodeWithScore(node=TextNode(text="maybe.", id_="m"))], query_str=QUERY)  # fmt: skip
    assert found.queries == ["a"]
    # max_rounds=0: no corrective retrieval at all
    none = ListRetriever([])
    CRAGPostprocessor(judge=judge, max_rounds=0, upper=0.7, lower=0.3,
                      corrective_retriever=none).postprocess_nodes(nodes("maybe."), query_str=QUERY)  # fmt: skip
    assert none.queries == []


def test_web_search_is_the_last_resort() -> None:
    judge = TableJudge(by_word({"web": 0.8}))
    searched: list[str] = []

    def web(query: str) -> list[str]:
        searched.append(query)
        return ["A web page about it.", "spam"]

    crag = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False, web_search=web,
                             corrective_retriever=ListRetriever(nodes("nothing", prefix="c")))  # fmt: skip
    result = crag.postprocess_nodes(nodes("Cheese."), query_str=QUERY)
    assert searched == ["where eiffel tower"]
    assert texts(result) == ["A web page about it."]
    assert result[0].node.metadata[TRACE_KEY]["crag"]["source"] == "web_search"
    # not called when the retrieval was already confident
    searched.clear()
    crag.postprocess_nodes(nodes("web stuff"), query_str=QUERY)
    assert searched == []


def test_refinement_keeps_relevant_strips_in_reading_order_within_budget() -> None:
    text = "Paris has the tower. Cheese is made in Normandy. The tower is 330 m tall."
    judge = TableJudge(by_word({"Paris has": 0.95, "330": 0.8, "Cheese": 0.05}))
    crag = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, strip_tokens=1)
    result = crag.postprocess_nodes(nodes(text), query_str=QUERY)
    assert texts(result) == ["Paris has the tower.\nThe tower is 330 m tall."]
    refinement = result[0].node.metadata[TRACE_KEY]["crag"]["refinement"]
    assert refinement["kept"] == [0, 2] and refinement["strips"] == 3
    assert refinement["dropped"] == [{"text": "Cheese is made in Normandy.", "score": 0.05}]
    budget = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, strip_tokens=1,
                               strip_token_budget=6)  # fmt: skip
    assert texts(budget.postprocess_nodes(nodes(text), query_str=QUERY)) == ["Paris has the tower."]
    # a node left without any strip under the budget is dropped, and the trace says why
    two = budget.postprocess_nodes(nodes(text, "The tower is 330 m tall."), query_str=QUERY)
    assert texts(two) == ["Paris has the tower."]
    dropped = two[0].node.metadata[TRACE_KEY]["crag"]["dropped"]
    assert [(d["node_id"], d["why"]) for d in dropped] == [("n1", "refinement")]


@pytest.mark.parametrize("failure", ["raise", "wrong-length"])
def test_failing_judge_keeps_nodes_as_retrieved(failure: str) -> None:
    class Broken(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            if failure == "raise":
                raise RuntimeError("model crashed")
            return []

    given = nodes("a", "b")
    result = CRAGPostprocessor(judge=Broken()).postprocess_nodes(given, query_str=QUERY)
    assert texts(result) == ["a", "b"] and result[0].node is not given[0].node
    trace = result[0].node.metadata[TRACE_KEY]["crag"]
    assert trace["action"] == "keep_as_retrieved" and "judge failed" in trace["error"]


def test_all_unknown_grades_keep_nodes_as_retrieved() -> None:
    result = CRAGPostprocessor(judge=TableJudge(lambda t: None)).postprocess_nodes(
        nodes("a"), query_str=QUERY
    )
    assert result[0].node.metadata[TRACE_KEY]["crag"]["error"] == "every grade is unknown"


def test_failing_retriever_and_web_search_are_recorded_not_raised() -> None:
    def web(query: str) -> list[str]:
        raise TimeoutError("search timed out")

    crag = CRAGPostprocessor(judge=TableJudge(by_word({"maybe": 0.5})), upper=0.7, lower=0.3,
                             refine=False, corrective_retriever=ListRetriever([], fail=True),
                             web_search=web)  # fmt: skip
    result = crag.postprocess_nodes(nodes("maybe."), query_str=QUERY)
    rounds = result[0].node.metadata[TRACE_KEY]["crag"]["rounds"]
    assert "index down" in rounds[0]["error"] and "search timed out" in rounds[1]["error"]


def test_garbage_llm_rewrite_falls_back_to_keywords() -> None:
    retriever = ListRetriever([])
    crag = CRAGPostprocessor(judge=TableJudge(by_word({})), upper=0.7, lower=0.3, min_kept=0,
                             corrective_retriever=retriever, llm=ScriptedLLM(["", "  "]))  # fmt: skip
    assert crag.postprocess_nodes(nodes("x"), query_str=QUERY) == []
    assert retriever.queries == ["where eiffel tower"]


async def test_sync_equals_async() -> None:
    judge = TableJudge(by_word({"Paris": 0.9, "tower": 0.5, "Lyon": 0.4}))
    given = nodes("A tower. Cheese.", "Lyon.", "Wine.")

    def build() -> CRAGPostprocessor:
        return CRAGPostprocessor(judge=judge, upper=0.95, lower=0.3, strip_tokens=3,
                                 corrective_retriever=ListRetriever(nodes("x", "y", "z", "In Paris.", prefix="c")),
                                 web_search=lambda q: ["Paris tower web."], max_rounds=2)  # fmt: skip

    sync = build().postprocess_nodes(given, query_str=QUERY)
    asynchronous = await build().apostprocess_nodes(given, query_str=QUERY)
    assert [n.model_dump() for n in sync] == [n.model_dump() for n in asynchronous]
    assert len(sync) >= 3


def test_arguments_are_validated() -> None:
    judge = TableJudge(by_word({}))
    with pytest.raises(ValueError, match=r"lower \(0.8\) must not exceed upper \(0.5\)"):
        CRAGPostprocessor(judge=judge, upper=0.5, lower=0.8)
    with pytest.raises(ValueError):
        CRAGPostprocessor(judge=judge, max_rounds=-1)
    with pytest.raises(ValueError, match="query"):
        CRAGPostprocessor(judge=judge).postprocess_nodes(nodes("a"))
    assert CRAGPostprocessor(judge=judge).postprocess_nodes([], query_str=QUERY) == []


# ----- prompts (PromptMixin) -----


@pytest.mark.parametrize("use_async", [False, True])
def test_prompts_are_listed_and_update_what_the_llms_receive(use_async: bool) -> None:
    import asyncio

    from llama_index.core.prompts import PromptTemplate

    from llama_index_ext_advrag.judges import LLMRelevanceJudge

    rewriter = ScriptedLLM(["eiffel tower city"])
    grader = ScriptedLLM(["no"])
    crag = CRAGPostprocessor(
        judge=LLMRelevanceJudge(llm=grader),
        upper=0.6,
        lower=0.3,
        refine=False,
        corrective_retriever=ListRetriever(nodes("Unrelated.", prefix="c")),
        llm=rewriter,
    )
    prompts = crag.get_prompts()
    assert sorted(prompts) == ["judge:prompt", "rewrite_prompt"]
    assert prompts["rewrite_prompt"].get_template() == crag.rewrite_prompt.get_template()
    crag.update_prompts(
        {
            "rewrite_prompt": PromptTemplate("REWRITE {query}"),
            "judge:prompt": PromptTemplate("GRADE {query} || {text}"),
        }
    )
    hits = nodes("Cats sleep.")
    if use_async:
        asyncio.run(crag.apostprocess_nodes(hits, query_str=QUERY))
    else:
        crag.postprocess_nodes(hits, query_str=QUERY)
    assert rewriter.prompts == [f"REWRITE {QUERY}"]
    assert sorted(grader.prompts) == [
        f"GRADE {QUERY} || Cats sleep.",
        f"GRADE {QUERY} || Unrelated.",
    ]


def test_a_rewrite_prompt_without_the_query_is_refused() -> None:
    from llama_index.core.prompts import PromptTemplate

    crag = CRAGPostprocessor(judge=TableJudge(by_word({})))
    with pytest.raises(ValueError, match=r"rewrite_prompt lacks the variables \['query'\]"):
        crag.update_prompts({"rewrite_prompt": PromptTemplate("Rewrite: {question}")})
    with pytest.raises(ValueError, match=r"needs \[.query.\] \(and may use {avoid}"):
        CRAGPostprocessor(judge=TableJudge(by_word({})), rewrite_prompt=PromptTemplate("x"))
    assert "{query}" in crag.get_prompts()["rewrite_prompt"].get_template()  # unchanged
