"""The judge boundary (``judge``/``ajudge``), sync and async: a label given as a known string is
the enum member, any other label or a non-Grade is a TypeError naming the judge class, the
value and what is allowed; a NaN or out-of-range score counts as unknown, with a warning."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from typing import Any

import pytest

from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade, GradeLabel

TEXTS = ["Paris is the capital of France.", "Cats sleep."]


class HandBuiltJudge(BaseRelevanceJudge):
    """A custom judge that builds its grades by hand (no ``self.grade``)."""

    _make: Callable[[int, str], Any]

    def __init__(self, make: Callable[[int, str], Any], **data: Any) -> None:
        super().__init__(**data)
        object.__setattr__(self, "_make", make)

    def _judge(self, query: str, texts: list[str]) -> list[Any]:
        return [self._make(i, t) for i, t in enumerate(texts)]


def judged(judge: BaseRelevanceJudge, use_async: bool) -> list[Grade]:
    if use_async:
        return asyncio.run(judge.ajudge("capital of France", TEXTS))
    return judge.judge("capital of France", TEXTS)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("label", ["relevant", " Relevant ", "RELEVANT"])
def test_a_known_label_string_becomes_the_enum(label: str, use_async: bool) -> None:
    judge = HandBuiltJudge(lambda i, t: Grade(score=0.9 - i * 0.8, label=label, judge="hand"))
    grades = judged(judge, use_async)
    assert [g.label for g in grades] == [GradeLabel.RELEVANT, GradeLabel.RELEVANT]
    assert grades[0].to_dict()["label"] == "relevant"  # what crashed CRAG and judge rerank


@pytest.mark.parametrize("use_async", [False, True])
def test_an_unknown_label_is_refused_naming_the_judge_class(use_async: bool) -> None:
    judge = HandBuiltJudge(lambda i, t: Grade(score=0.9, label="yes", judge="hand"), name="mine")
    with pytest.raises(TypeError) as caught:
        judged(judge, use_async)
    message = str(caught.value)
    assert "HandBuiltJudge" in message and "'mine'" in message and "'yes'" in message
    assert "['irrelevant', 'relevant', 'unknown']" in message


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.9, "0.9 (float)"), ({"score": 0.9}, "(dict)"), (None, "None (NoneType)")],
)
def test_a_grade_that_is_not_a_grade_is_refused(value: Any, shown: str, use_async: bool) -> None:
    judge = HandBuiltJudge(lambda i, t: value)
    with pytest.raises(TypeError, match="HandBuiltJudge") as caught:
        judged(judge, use_async)
    assert shown in str(caught.value) and "allowed: a Grade" in str(caught.value)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_score_of_the_wrong_type_is_refused(use_async: bool) -> None:
    judge = HandBuiltJudge(lambda i, t: Grade(score="0.9", label=GradeLabel.RELEVANT, judge="h"))
    with pytest.raises(TypeError, match=r"score '0.9' \(str\).*a number in \[0, 1\] or None"):
        judged(judge, use_async)


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 1.7, -0.2])
def test_a_nan_or_out_of_range_score_counts_as_unknown(
    bad: float, use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    judge = HandBuiltJudge(
        lambda i, t: Grade(
            score=bad if i == 0 else 0.25, label=GradeLabel.RELEVANT, judge="hand", raw=3.0
        )
    )
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.judges.base"):
        grades = judged(judge, use_async)
    assert grades[0].score is None and grades[0].label is GradeLabel.UNKNOWN
    assert grades[0].reason == f"score {bad!r} is not in [0, 1]" and grades[0].raw == 3.0
    assert grades[0].judge == "hand"
    assert grades[1].score == 0.25 and grades[1].label is GradeLabel.RELEVANT  # untouched
    assert any("counted as unknown" in m and "HandBuiltJudge" in m for m in caplog.messages)


def test_scores_at_the_bounds_are_kept_and_grade_still_clips() -> None:
    judge = HandBuiltJudge(lambda i, t: Grade(float(i), GradeLabel.RELEVANT, "hand"))
    assert [g.score for g in judge.judge("q", TEXTS)] == [0.0, 1.0]
    assert Grade.from_score(1.3, "j").score == 1.0  # the documented clipping of from_score
    assert Grade.from_score(math.nan, "j").label is GradeLabel.UNKNOWN
