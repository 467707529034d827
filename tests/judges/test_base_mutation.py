"""The judge base class's decisions pinned exactly: unknown grades for blank input, input type
errors, the surrogate warning and the sigmoid branch (found by mutation testing)."""

from __future__ import annotations

import asyncio
import logging
import math

import pytest

from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade, GradeLabel, sigmoid


class _LengthJudge(BaseRelevanceJudge):
    """Scores a text by its length (capped at 1); records what it was asked."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(min(1.0, len(t) / 10), raw=float(len(t))) for t in texts]


def _both(judge: BaseRelevanceJudge, query: str, texts: list[str]) -> list[list[Grade]]:
    return [judge.judge(query, texts), asyncio.run(judge.ajudge(query, texts))]


def test_blank_query_gives_unknown_grades_named_after_the_judge() -> None:
    judge = _LengthJudge(name="len")
    expected = [Grade.unknown("len", "empty query")] * 2
    for grades in _both(judge, "  ", ["abc", "defgh"]):
        assert grades == expected


def test_blank_text_gives_an_unknown_grade_among_the_model_grades() -> None:
    judge = _LengthJudge(name="len")
    for grades in _both(judge, "q", ["", "abcde", " \n"]):
        assert grades == [
            Grade.unknown("len", "empty text"),
            Grade(score=0.5, label=GradeLabel.RELEVANT, judge="len", raw=5.0),
            Grade.unknown("len", "empty text"),
        ]


def test_single_string_texts_are_refused_with_a_hint() -> None:
    judge = _LengthJudge()
    message = "texts must be a sequence of str, got a single str; wrap it in a list"
    with pytest.raises(TypeError) as info:
        judge.judge("q", "abc")
    assert str(info.value) == message


def test_non_string_text_is_named_with_its_index_and_type() -> None:
    judge = _LengthJudge()
    with pytest.raises(TypeError) as info:
        judge.judge("q", ["a", 3])  # type: ignore[list-item]
    assert str(info.value) == "texts[1] must be a str, got int"


def test_lone_surrogates_are_replaced_with_a_warning_naming_judge_and_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judge = _LengthJudge(name="len")
    caplog.set_level(logging.WARNING, logger="llama_index_ext_advrag.judges.base")
    for method in ("judge", "ajudge"):
        caplog.clear()
        call = getattr(judge, method)("q\ud800", ["ab\udfff\ud800"])
        grades = asyncio.run(call) if method == "ajudge" else call
        assert grades[0].raw == 4.0  # "ab" + two U+FFFD
        assert [r.getMessage() for r in caplog.records] == [
            "judge 'len': the query or texts hold 3 lone surrogate code points, which no model "
            "can encode; replaced with U+FFFD"
        ]


def test_sigmoid_uses_the_positive_branch_from_zero() -> None:
    assert sigmoid(0.0) == 0.5
    # 1/(1+e^-x) and e^x/(1+e^x) differ in the last bit for some x in [0, 1) (0.9 here): the
    # positive branch is the first formula from 0 on.
    for value in [i / 100 for i in range(100)]:
        assert sigmoid(value) == 1.0 / (1.0 + math.exp(-value))
    for value in [-i / 100 for i in range(1, 100)]:
        assert sigmoid(value) == math.exp(value) / (1.0 + math.exp(value))
