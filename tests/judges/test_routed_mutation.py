"""LanguageRoutedJudge beyond test_embedding_and_routed.py: the CJK threshold inclusive and
reaching the routing, every branch of ``align_score``, judges with other thresholds aligned to
the router's (score, label, note, raw kept; unknown grades and same-scale judges unchanged) in
sync and async, the keep-within margin taken from the reference judge, and the messages (kills
the module's mutants those tests leave)."""

from __future__ import annotations

import asyncio

import pytest

from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade, GradeLabel
from llama_index_ext_advrag.judges.routed import LanguageRoutedJudge, align_score, pair_language


class Fixed(BaseRelevanceJudge):
    """Grades every text ``value`` (raw ``value * 10``); a text holding "?" gets unknown."""

    value: float = 0.5

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [
            Grade.unknown(self.name, "cannot tell")
            if "?" in text
            else self.grade(self.value, raw=self.value * 10)
            for text in texts
        ]


def test_the_cjk_threshold_is_inclusive_and_reaches_the_routing() -> None:
    assert pair_language("Who?", "ab巴黎", cjk_threshold=0.5) == "zh"  # 2 of 4 letters
    english, chinese = Fixed(name="en-judge"), Fixed(name="zh-judge")
    judges = {"en": english, "zh": chinese}
    assert [g.judge for g in LanguageRoutedJudge(judges).judge("Who", ["ab巴黎"])] == ["zh-judge"]
    strict = LanguageRoutedJudge(judges, cjk_threshold=0.6)
    assert [g.judge for g in strict.judge("Who", ["ab巴黎"])] == ["en-judge"]


def test_align_score_maps_each_piece() -> None:
    source, target = (0.2, 0.7), (0.1, 0.6)
    assert align_score(0.1, source, target) == pytest.approx(0.05)  # below lower
    assert align_score(0.0, source, target) == 0.0
    assert align_score(0.45, source, target) == pytest.approx(0.35)  # between
    assert align_score(0.85, source, target) == pytest.approx(0.8)  # above upper
    assert align_score(1.0, (0.2, 1.0), target) == 0.6  # upper 1: no piece above it


def test_a_judges_thresholds_land_exactly_on_the_routers() -> None:
    """Exactly, not up to rounding: CRAG compares the aligned score with the router's upper and
    lower, so a score at a judge's threshold must stay at the router's."""
    source, target = (0.1, 0.2), (0.1, 0.5)
    assert align_score(0.2, source, target) == 0.5  # the middle piece would give 0.5000000000000001
    assert align_score(0.1, source, (0.1, 0.2)) == 0.1  # the lower piece: 0.10000000000000002


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_other_thresholds_are_aligned_to_the_routers(mode: str) -> None:
    english = Fixed(name="en-judge", value=0.65, default_lower=0.2, default_upper=0.7)
    chinese = Fixed(name="zh-judge", value=0.65, default_lower=0.4, default_upper=0.9)
    judge = LanguageRoutedJudge({"en": english, "zh": chinese})
    assert (judge.default_lower, judge.default_upper) == (0.2, 0.7)
    texts = ["Paris.", "巴黎是首都。", "巴黎是首都吗?"]
    if mode == "async":
        grades = asyncio.run(judge.ajudge("capital", texts))
    else:
        grades = judge.judge("capital", texts)
    # the English judge has the router's scale: its grade is untouched
    assert grades[0] == english.grade(0.65, raw=6.5)
    # the Chinese judge's 0.65 sits halfway between its thresholds: halfway on the router's
    assert grades[1].score == pytest.approx(0.45) and grades[1].raw == 6.5
    assert grades[1].label is GradeLabel.IRRELEVANT and grades[1].judge == "zh-judge"
    assert grades[1].reason == "zh-judge score 0.65 aligned to the router's thresholds"
    assert grades[2] == Grade.unknown("zh-judge", "cannot tell")  # unknown stays unknown


def test_a_grade_with_a_reason_keeps_it_when_aligned() -> None:
    class Noted(Fixed):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.9, reason="model note") for _ in texts]

    chinese = Noted(name="zh-judge", default_lower=0.4, default_upper=0.9)
    judge = LanguageRoutedJudge({"zh": chinese}, default_lower=0.2, default_upper=0.6)
    (grade,) = judge.judge("首都", ["巴黎"])
    assert grade.score == pytest.approx(0.6) and grade.reason == "model note"
    assert grade.label is GradeLabel.RELEVANT


def test_the_keep_within_margin_is_the_reference_judges_unless_given() -> None:
    english = Fixed(name="en-judge", default_keep_within=2.0)
    assert LanguageRoutedJudge({"en": english}).default_keep_within == 2.0
    chinese_only = LanguageRoutedJudge({"zh": Fixed(default_keep_within=3.0)})
    assert chinese_only.default_keep_within == 3.0
    given = LanguageRoutedJudge({"en": english}, default_keep_within=1.0)
    assert given.default_keep_within == 1.0


def test_the_class_name_and_the_empty_message() -> None:
    assert LanguageRoutedJudge.class_name() == "LanguageRoutedJudge"
    with pytest.raises(
        ValueError, match=r"^judges must map at least one of 'en', 'zh' to a judge$"
    ):
        LanguageRoutedJudge({})
