"""CRAG's defaults: thresholds from the judge (explicit ones win), never dropping everything,
the language-routed offline judge; sync and async."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges import (
    BaseRelevanceJudge,
    CrossEncoderRelevanceJudge,
    Grade,
    LanguageRoutedJudge,
    offline_judge,
)
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor

QUERY = "Where is the Eiffel Tower?"


class WordJudge(BaseRelevanceJudge):
    """The score of the first table word found in the text (0.0 otherwise)."""

    table: dict[str, float] = {}

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(next((v for k, v in self.table.items() if k in t), 0.0)) for t in texts]


def nodes(*texts: str) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0) for i, t in enumerate(texts)
    ]


async def run(crag: CRAGPostprocessor, given: list[NodeWithScore], use_async: bool) -> list[str]:
    if use_async:
        result = await crag.apostprocess_nodes(given, query_str=QUERY)
    else:
        result = crag.postprocess_nodes(given, query_str=QUERY)
    return [n.node.get_content() for n in result]


def trace(node: NodeWithScore) -> dict[str, Any]:
    return node.node.metadata[TRACE_KEY]["crag"]


SCORES = {"Paris": 0.75, "France": 0.25, "Lyon": 0.15}
GIVEN = ("Lyon is big.", "Paris has the tower.", "France is a country.", "Cats sleep.")


@pytest.mark.parametrize("use_async", [False, True])
async def test_thresholds_come_from_the_judge(use_async: bool) -> None:
    judge = WordJudge(table=SCORES, default_upper=0.8, default_lower=0.2)
    crag = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0)
    assert (crag.upper, crag.lower) == (0.8, 0.2)
    # nothing reaches the judge's upper 0.8: ambiguous, the nodes >= 0.2 kept, best first
    kept = await run(crag, nodes(*GIVEN), use_async)
    assert kept == ["Paris has the tower.", "France is a country."]
    other = WordJudge(table=SCORES, default_upper=0.7, default_lower=0.1)
    assert (CRAGPostprocessor(judge=other).upper, CRAGPostprocessor(judge=other).lower) == (
        0.7,
        0.1,
    )


@pytest.mark.parametrize("use_async", [False, True])
async def test_explicit_thresholds_win_over_the_judges(use_async: bool) -> None:
    judge = WordJudge(table=SCORES, default_upper=0.8, default_lower=0.2)
    crag = CRAGPostprocessor(judge=judge, upper=0.7, lower=0.3, refine=False, max_rounds=0)
    assert (crag.upper, crag.lower) == (0.7, 0.3)
    result = (
        await crag.apostprocess_nodes(nodes(*GIVEN), query_str=QUERY)
        if use_async
        else crag.postprocess_nodes(nodes(*GIVEN), query_str=QUERY)
    )
    assert [n.node.get_content() for n in result] == ["Paris has the tower."]
    assert trace(result[0])["action"] == "correct"
    # one explicit bound, the other from the judge; None means "the judge's"
    half = CRAGPostprocessor(judge=judge, lower=0.05, upper=None)
    assert (half.upper, half.lower) == (0.8, 0.05)


def test_crossed_thresholds_are_refused_naming_both() -> None:
    judge = WordJudge(default_upper=0.6, default_lower=0.2)
    with pytest.raises(ValueError, match=r"lower \(0.7\) must not exceed upper \(0.6\)"):
        CRAGPostprocessor(judge=judge, lower=0.7)
    with pytest.raises(ValueError, match=r"default_lower \(0.5\) must not exceed default_upper"):
        WordJudge(default_upper=0.4, default_lower=0.5)
    with pytest.raises(ValueError):
        WordJudge(default_upper=1.5)
    with pytest.raises(TypeError, match="judge must be a BaseRelevanceJudge"):
        CRAGPostprocessor(judge="cross-encoder")  # type: ignore[arg-type]


@pytest.mark.parametrize("use_async", [False, True])
async def test_never_drops_everything_keeps_the_best_graded(use_async: bool) -> None:
    judge = WordJudge(table={"Lyon": 0.04, "Paris": 0.09}, default_upper=0.7, default_lower=0.3)
    given = nodes("Lyon is big.", "Paris has the tower.", "Cats sleep.")
    crag = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0)
    result = (
        await crag.apostprocess_nodes(given, query_str=QUERY)
        if use_async
        else crag.postprocess_nodes(given, query_str=QUERY)
    )
    assert [n.node.get_content() for n in result] == ["Paris has the tower."]
    record = trace(result[0])
    assert record["action"] == "incorrect" and record["kept_by"] == "min_kept"
    assert {d["node_id"] for d in record["dropped"]} == {"n0", "n2"}
    # two at least; a floor above every score (confidently irrelevant) keeps none back
    two = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0, min_kept=2)
    assert await run(two, given, use_async) == ["Paris has the tower.", "Lyon is big."]
    floor = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0, min_kept_floor=0.1)
    assert await run(floor, given, use_async) == []
    paper = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0, min_kept=0)
    assert await run(paper, given, use_async) == []


@pytest.mark.parametrize("use_async", [False, True])
async def test_nodes_kept_by_grade_are_not_marked_and_enough_means_none_kept_back(
    use_async: bool,
) -> None:
    judge = WordJudge(table=SCORES, default_upper=0.7, default_lower=0.2)
    crag = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0)
    result = (
        await crag.apostprocess_nodes(nodes(*GIVEN), query_str=QUERY)
        if use_async
        else crag.postprocess_nodes(nodes(*GIVEN), query_str=QUERY)
    )
    assert [trace(n)["kept_by"] for n in result] == ["grade", "grade"]
    # the default keeps the doubtful nodes (>= lower) next to the confident one
    assert [n.node.get_content() for n in result] == [
        "Paris has the tower.",
        "France is a country.",
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_routed_judge_applies_each_languages_thresholds(use_async: bool) -> None:
    english = WordJudge(table={"Paris": 0.65, "Lyon": 0.12}, default_upper=0.6, default_lower=0.1)
    chinese = WordJudge(table={"巴黎": 0.5, "里昂": 0.3}, default_upper=0.8, default_lower=0.4)
    router = LanguageRoutedJudge({"en": english, "zh": chinese})
    assert (router.default_upper, router.default_lower) == (0.6, 0.1)  # the English judge's
    crag = CRAGPostprocessor(judge=router, refine=False, max_rounds=0)
    given = nodes("Lyon is big.", "巴黎有铁塔。", "里昂很大。", "Cats sleep.")
    kept = await run(crag, given, use_async)
    # 0.3 is above the English lower 0.1 but below the Chinese 0.4: dropped; 0.5 kept
    assert kept == ["巴黎有铁塔。", "Lyon is big."]
    texts = ["巴黎有铁塔。"]
    grades = await router.ajudge(QUERY, texts) if use_async else router.judge(QUERY, texts)
    assert grades[0].score == pytest.approx(0.1 + (0.5 - 0.4) * (0.6 - 0.1) / (0.8 - 0.4))
    assert "aligned" in (grades[0].reason or "")


def test_the_default_judge_is_the_language_routed_offline_judge() -> None:
    crag = CRAGPostprocessor()
    judge = crag.judge
    assert isinstance(judge, LanguageRoutedJudge) and sorted(judge.judges) == ["en", "zh"]
    english = judge.judges["en"]
    assert isinstance(english, CrossEncoderRelevanceJudge)
    assert (crag.upper, crag.lower) == (english.default_upper, english.default_lower)
    zh = judge.judges["zh"]
    assert zh.name == "e5" and zh.default_lower != english.default_lower
    assert offline_judge().name == "offline"


# ----- the judge's ranking: the log-odds margin to the best-graded node (issue #31) -----

MARGIN_SCORES = {"Paris": 0.9, "France": 0.6, "Lyon": 0.25}
MARGIN_GIVEN = ("Lyon is big.", "Paris has the tower.", "France is a country.")


@pytest.mark.parametrize("use_async", [False, True])
async def test_the_judges_margin_drops_a_node_far_below_the_best(use_async: bool) -> None:
    # log-odds: Paris 2.20, France 0.41, Lyon -1.10; a margin of 2 drops Lyon although it is
    # above lower (the thresholds alone, the old rule, keep all three)
    judge = WordJudge(
        table=MARGIN_SCORES, default_upper=0.8, default_lower=0.2, default_keep_within=2.0
    )
    crag = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0)
    assert crag.keep_within == 2.0
    given = nodes(*MARGIN_GIVEN)
    result = (
        await crag.apostprocess_nodes(given, query_str=QUERY)
        if use_async
        else crag.postprocess_nodes(given, query_str=QUERY)
    )
    assert [n.node.get_content() for n in result] == [
        "Paris has the tower.",
        "France is a country.",
    ]
    dropped = trace(result[0])["dropped"]
    assert [(d["node_id"], d["why"]) for d in dropped] == [("n0", "margin")]


@pytest.mark.parametrize("use_async", [False, True])
async def test_explicit_keep_within_wins_over_the_judges(use_async: bool) -> None:
    judge = WordJudge(
        table=MARGIN_SCORES, default_upper=0.8, default_lower=0.2, default_keep_within=2.0
    )
    everything = ["Paris has the tower.", "France is a country.", "Lyon is big."]
    off = CRAGPostprocessor(judge=judge, keep_within=None, refine=False, max_rounds=0)
    assert off.keep_within is None
    assert await run(off, nodes(*MARGIN_GIVEN), use_async) == everything
    wide = CRAGPostprocessor(judge=judge, keep_within=3.5, refine=False, max_rounds=0)
    assert await run(wide, nodes(*MARGIN_GIVEN), use_async) == everything
    narrow = CRAGPostprocessor(judge=judge, keep_within=1.0, refine=False, max_rounds=0)
    assert await run(narrow, nodes(*MARGIN_GIVEN), use_async) == ["Paris has the tower."]
    # explicit thresholds do not switch the judge's margin off
    both = CRAGPostprocessor(judge=judge, upper=0.95, lower=0.1, refine=False, max_rounds=0)
    assert both.keep_within == 2.0
    with pytest.raises(ValueError):
        CRAGPostprocessor(judge=judge, keep_within=0.0)
    with pytest.raises(ValueError):
        WordJudge(default_keep_within=-1.0)


@pytest.mark.parametrize("use_async", [False, True])
async def test_the_margin_never_drops_a_confident_node_nor_the_best(use_async: bool) -> None:
    # 0.999 is 6.9 log-odds, 0.85 is 1.7: far apart, but 0.85 is at or above upper
    judge = WordJudge(
        table={"Paris": 0.999, "France": 0.85, "Lyon": 0.5},
        default_upper=0.8,
        default_lower=0.2,
        default_keep_within=1.0,
    )
    crag = CRAGPostprocessor(judge=judge, refine=False, max_rounds=0)
    kept = await run(crag, nodes(*MARGIN_GIVEN), use_async)
    assert kept == ["Paris has the tower.", "France is a country."]
    # every node doubtful (ambiguous): the best is always within its own margin
    low = WordJudge(table={"Paris": 0.3, "Lyon": 0.21}, default_upper=0.8, default_lower=0.2)
    narrow = CRAGPostprocessor(judge=low, keep_within=0.1, refine=False, max_rounds=0)
    assert await run(narrow, nodes(*MARGIN_GIVEN), use_async) == ["Paris has the tower."]


def test_the_offline_judges_carry_the_pooled_defaults() -> None:
    from llama_index_ext_advrag.judges.cross_encoder import (
        MS_MARCO_MINILM_CRAG_KEEP_WITHIN,
        MS_MARCO_MINILM_CRAG_THRESHOLDS,
    )
    from llama_index_ext_advrag.judges.embedding import (
        MULTILINGUAL_E5_CRAG_KEEP_WITHIN,
        MULTILINGUAL_E5_CRAG_THRESHOLDS,
        MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS,
    )

    judge = offline_judge()
    english, chinese = judge.judges["en"], judge.judges["zh"]
    assert (english.default_upper, english.default_lower) == MS_MARCO_MINILM_CRAG_THRESHOLDS
    assert english.default_keep_within == MS_MARCO_MINILM_CRAG_KEEP_WITHIN
    assert (chinese.default_upper, chinese.default_lower) == MULTILINGUAL_E5_CRAG_THRESHOLDS
    assert chinese.default_keep_within == MULTILINGUAL_E5_CRAG_KEEP_WITHIN
    # the pooled Chinese lower sits below the RGB-only one that lost CMRC's answers
    assert MULTILINGUAL_E5_CRAG_THRESHOLDS[1] < MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS[1]
    crag = CRAGPostprocessor()
    assert crag.keep_within == english.default_keep_within == judge.default_keep_within
    assert CrossEncoderRelevanceJudge(default_keep_within=None).default_keep_within is None


@pytest.mark.parametrize("use_async", [False, True])
async def test_routed_defaults_keep_a_short_chinese_answer_the_rgb_thresholds_dropped(
    use_async: bool,
) -> None:
    """A Chinese judge scoring an answer passage 0.1 (CMRC's short passages score low under
    e5): kept with the pooled Chinese thresholds, dropped with the RGB-only ones."""
    from llama_index_ext_advrag.judges.cross_encoder import (
        MS_MARCO_MINILM_CRAG_KEEP_WITHIN,
        MS_MARCO_MINILM_CRAG_THRESHOLDS,
    )
    from llama_index_ext_advrag.judges.embedding import (
        MULTILINGUAL_E5_CRAG_KEEP_WITHIN,
        MULTILINGUAL_E5_CRAG_THRESHOLDS,
        MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS,
    )

    table = {"1953年": 0.1, "上海": 0.6, "天气": 0.01}
    given = nodes("天气晴朗。", "他于1953年出生。", "上海是一座城市。")
    (en_upper, en_lower), (zh_upper, zh_lower) = (
        MS_MARCO_MINILM_CRAG_THRESHOLDS,
        MULTILINGUAL_E5_CRAG_THRESHOLDS,
    )
    english = WordJudge(
        default_upper=en_upper,
        default_lower=en_lower,
        default_keep_within=MS_MARCO_MINILM_CRAG_KEEP_WITHIN,
    )
    chinese = WordJudge(
        table=table,
        default_upper=zh_upper,
        default_lower=zh_lower,
        default_keep_within=MULTILINGUAL_E5_CRAG_KEEP_WITHIN,
    )
    crag = CRAGPostprocessor(
        judge=LanguageRoutedJudge({"en": english, "zh": chinese}), refine=False, max_rounds=0
    )
    assert await run(crag, given, use_async) == ["上海是一座城市。", "他于1953年出生。"]
    rgb_upper, rgb_lower = MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS
    before = WordJudge(table=table, default_upper=rgb_upper, default_lower=rgb_lower)
    old = CRAGPostprocessor(
        judge=LanguageRoutedJudge({"en": english, "zh": before}), refine=False, max_rounds=0
    )
    assert await run(old, given, use_async) == ["上海是一座城市。"]
