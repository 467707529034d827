"""Grade, ScoreCalibration, Platt fitting and CRAG threshold picking, checked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from llama_index_ext_advrag.judges.base import (
    BaseRelevanceJudge,
    Grade,
    GradeLabel,
    ScoreCalibration,
    sigmoid,
)
from llama_index_ext_advrag.judges.calibration import (
    calibrate_judge_thresholds,
    fit_calibration,
    grade_labelled_pairs,
    pick_thresholds,
    platt_targets,
)


def test_sigmoid_values_and_extremes() -> None:
    assert sigmoid(0.0) == 0.5
    assert sigmoid(math.log(3)) == pytest.approx(0.75)
    assert sigmoid(-math.log(3)) == pytest.approx(0.25)
    assert sigmoid(1000.0) == 1.0 and sigmoid(-1000.0) == 0.0


def test_calibration_maps_and_inverts() -> None:
    calibration = ScoreCalibration(slope=0.5, offset=-1.0)
    # sigmoid(0.5 * 4 - 1) = sigmoid(1) = 0.7311
    assert calibration(4.0) == pytest.approx(1 / (1 + math.exp(-1)))
    assert calibration.inverse(0.5) == pytest.approx(2.0)
    assert calibration(calibration.inverse(0.9)) == pytest.approx(0.9)


@pytest.mark.parametrize("slope", [0.0, -1.0, math.nan, math.inf])
def test_calibration_rejects_bad_slope(slope: float) -> None:
    with pytest.raises(ValueError, match="slope"):
        ScoreCalibration(slope=slope)


def test_grade_from_score_clips_labels_and_handles_nan() -> None:
    assert Grade.from_score(1.7, "j").score == 1.0
    assert Grade.from_score(-0.2, "j").label is GradeLabel.IRRELEVANT
    assert Grade.from_score(0.5, "j").label is GradeLabel.RELEVANT  # >= threshold
    assert Grade.from_score(0.49, "j", threshold=0.5).label is GradeLabel.IRRELEVANT
    nan = Grade.from_score(math.nan, "j", raw=1.0)
    assert nan.score is None and nan.label is GradeLabel.UNKNOWN and not nan.known
    record = Grade.unknown("j", "timeout").to_dict()
    assert record == {
        "score": None,
        "label": "unknown",
        "judge": "j",
        "raw": None,
        "reason": "timeout",
    }


def test_platt_targets_by_hand() -> None:
    # 2 positives -> 3/4; 1 negative -> 1/3
    assert platt_targets([True, True, False]).tolist() == pytest.approx([0.75, 0.75, 1 / 3])


def test_fit_calibration_matches_the_closed_form_of_a_two_point_sample() -> None:
    # One positive at raw=1, one negative at raw=-1: targets 2/3 and 1/3. The fit reproduces
    # them exactly: sigmoid(a + b) = 2/3 and sigmoid(-a + b) = 1/3 -> b = 0, a = ln 2.
    calibration = fit_calibration([1.0, -1.0], [True, False])
    assert calibration.offset == pytest.approx(0.0, abs=1e-8)
    assert calibration.slope == pytest.approx(math.log(2), rel=1e-6)


def test_fit_calibration_recovers_a_logistic_model() -> None:
    rng = np.random.default_rng(0)
    raw = rng.normal(0, 3, 4000)
    labels = rng.random(4000) < 1 / (1 + np.exp(-(0.8 * raw - 1.5)))
    calibration = fit_calibration(raw.tolist(), labels.tolist())
    assert calibration.slope == pytest.approx(0.8, abs=0.08)
    assert calibration.offset == pytest.approx(-1.5, abs=0.15)


def test_fit_calibration_rejects_bad_samples() -> None:
    with pytest.raises(ValueError, match="one relevant and one irrelevant"):
        fit_calibration([1.0, 2.0], [True, True])
    with pytest.raises(ValueError, match="2 values but labels has 1"):
        fit_calibration([1.0, 2.0], [True])
    with pytest.raises(ValueError, match="does not rise"):
        fit_calibration([1.0, -1.0], [False, True])
    with pytest.raises(ValueError, match="finite"):
        fit_calibration([math.nan, 1.0], [False, True])


def test_pick_thresholds_by_hand() -> None:
    scores = [0.95, 0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.2, 0.1, 0.05]
    labels = [True, True, True, False, True, False, True, False, False, False]
    # upper: lowest u with precision(score >= u) >= 0.8: at 0.6 -> 4/5 = 0.8 (>= counts).
    thresholds = pick_thresholds(scores, labels, target_precision=0.8, max_positive_loss=0.0)
    assert thresholds.upper == 0.6
    assert thresholds.precision_at_upper == pytest.approx(0.8)
    # lower with no positive lost: the lowest positive, 0.3.
    assert thresholds.lower == 0.3 and thresholds.positive_loss_at_lower == 0.0
    # allowing 1 of 5 positives below: the second-lowest positive, 0.6.
    loose = pick_thresholds(scores, labels, target_precision=0.8, max_positive_loss=0.2)
    assert loose.lower == 0.6 and loose.positive_loss_at_lower == pytest.approx(0.2)
    assert (thresholds.num_positive, thresholds.num_negative) == (5, 5)


def test_pick_thresholds_unreachable_precision_and_cap() -> None:
    # The top score is a negative: no {score >= u} reaches precision 0.99 -> upper 1.0.
    never = pick_thresholds([0.9, 0.8, 0.1], [False, True, False], target_precision=0.99)
    assert never.upper == 1.0 and never.precision_at_upper == 0.0
    assert never.lower == 0.8
    # lower is capped at upper
    capped = pick_thresholds([0.9, 0.95, 0.1], [True, True, False], 0.99, 0.5)
    assert capped.upper == 0.9 and capped.lower == 0.9


def test_pick_thresholds_validates() -> None:
    with pytest.raises(ValueError, match="target_precision"):
        pick_thresholds([0.1, 0.9], [False, True], target_precision=0.0)
    with pytest.raises(ValueError, match="max_positive_loss"):
        pick_thresholds([0.1, 0.9], [False, True], max_positive_loss=1.0)


class _LengthJudge(BaseRelevanceJudge):
    """Scores a text by its length / 10; unknown when it contains '?'."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [
            Grade.unknown(self.name, "?") if "?" in t else self.grade(len(t) / 10, raw=len(t))
            for t in texts
        ]


def test_grade_labelled_pairs_and_calibrate_judge_thresholds() -> None:
    pairs = [
        ("q1", "xxxxxxxxx", True),
        ("q2", "xxxxxxxx", True),
        ("q1", "xx", False),
        ("q2", "x?", True),
        ("q1", "x", False),
    ]
    grades, labels = grade_labelled_pairs(_LengthJudge(), pairs)
    assert [g.raw for g in grades] == [9, 8, 2, 1] and labels == [True, True, False, False]
    thresholds = calibrate_judge_thresholds(_LengthJudge(), pairs, 1.0, 0.0)
    assert (thresholds.upper, thresholds.lower) == (0.8, 0.8)
