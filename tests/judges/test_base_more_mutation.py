"""The judge boundary in exact words (kills the mutants of judges/base.py left by the code added
since test_base_mutation.py): calibration fields filled only where not given, a score of the
wrong type or outside [0, 1] named with its text, the async judge given the query, node texts
without metadata, a label that is not a string left for the boundary to refuse."""

from __future__ import annotations

import asyncio
import logging

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.judges.base import ScoreCalibration, add_calibration_fields, node_texts


def test_calibration_fields_are_filled_only_where_not_given() -> None:
    data: dict = {"calibration_offset": 9.0}
    add_calibration_fields(data, ScoreCalibration(slope=2.0, offset=-1.0))
    assert data == {"calibration_slope": 2.0, "calibration_offset": 9.0}
    data = {}
    add_calibration_fields(data, ScoreCalibration(slope=2.0, offset=-1.0))
    assert data == {"calibration_slope": 2.0, "calibration_offset": -1.0}
    add_calibration_fields(data, None)
    assert data == {"calibration_slope": 2.0, "calibration_offset": -1.0}


class Fixed(BaseRelevanceJudge):
    scores: list = []
    queries: list = []

    def _judge(self, query, texts):
        self.queries.append(query)
        return [Grade(score, "relevant", self.name) if not isinstance(score, Grade) else score
                for score in self.scores]  # fmt: skip


def test_a_score_of_the_wrong_type_is_named() -> None:
    judge = Fixed(name="fixed", scores=["0.5"])
    with pytest.raises(TypeError) as error:
        judge.judge("q", ["t"])
    assert str(error.value) == (
        "Fixed (judge 'fixed') returned the score '0.5' (str) for text 0; "
        "allowed: a number in [0, 1] or None (unknown)"
    )


def test_a_score_outside_the_range_is_logged_with_its_text(caplog) -> None:
    judge = Fixed(name="fixed", scores=[0.5, 1.5])
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.judges.base"):
        grades = judge.judge("q", ["a", "b"])
    assert caplog.messages == [
        "Fixed (judge 'fixed') returned the score 1.5 for text 1, outside [0, 1]: counted as "
        "unknown"
    ]
    assert grades[1].score is None and grades[1].reason == "score 1.5 is not in [0, 1]"


def test_the_async_judge_is_given_the_query() -> None:
    judge = Fixed(name="fixed", scores=[0.5], queries=[])
    asyncio.run(judge.ajudge("the query", ["t"]))
    assert judge.queries == ["the query"]


def test_node_texts_leave_out_metadata() -> None:
    node = TextNode(text="body", metadata={"title": "T"})
    assert node_texts([NodeWithScore(node=node, score=1.0)]) == ["body"]


def test_a_label_that_is_not_a_string_is_left_for_the_boundary() -> None:
    grade = Grade(0.5, 3, "j")  # type: ignore[arg-type]
    assert grade.label == 3
