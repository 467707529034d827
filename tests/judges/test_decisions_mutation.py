"""Grade decisions and calibration limits at their boundaries (found by mutation testing).

The labels a judge gives, the bounds ``ScoreCalibration`` and ``pick_thresholds`` accept, and
the checks every judge call goes through, each pinned at the value where the rule flips.
"""

from __future__ import annotations

import asyncio
import math

import pytest

from llama_index_ext_advrag.judges.base import (
    DEFAULT_DECISION_THRESHOLD,
    BaseRelevanceJudge,
    Grade,
    GradeLabel,
    ScoreCalibration,
)
from llama_index_ext_advrag.judges.calibration import (
    CRAGThresholds,
    calibrate_judge_thresholds,
    grade_labelled_pairs,
    pick_thresholds,
)


class _FixedJudge(BaseRelevanceJudge):
    """Grades every text with the same score; ``extra`` grades appended to break the contract."""

    score: float = 0.5
    extra: int = 0

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(self.score, raw=1.5, reason="fixed")] * (len(texts) + self.extra)


# --- Grade ---------------------------------------------------------------------------------------


def test_default_threshold_is_one_half() -> None:
    assert DEFAULT_DECISION_THRESHOLD == 0.5
    assert Grade.from_score(0.5, "j").label is GradeLabel.RELEVANT
    assert Grade.from_score(0.4999, "j").label is GradeLabel.IRRELEVANT


def test_from_score_clips_both_ends_and_keeps_what_it_is_given() -> None:
    low = Grade.from_score(-0.2, "j", raw=-3.0, reason="note")
    assert (low.score, low.label, low.judge, low.raw, low.reason) == (
        0.0,
        GradeLabel.IRRELEVANT,
        "j",
        -3.0,
        "note",
    )
    assert Grade.from_score(1.7, "j").score == 1.0
    assert Grade.from_score(0.25, "j").score == 0.25  # inside [0, 1]: unchanged
    # clipping happens before the label: -0.2 clipped to 0.0 meets a threshold of 0.0
    assert Grade.from_score(-0.2, "j", threshold=0.0).label is GradeLabel.RELEVANT
    assert Grade.from_score(1.7, "j", threshold=1.0).label is GradeLabel.RELEVANT


def test_nan_score_is_unknown_with_its_reason_and_raw() -> None:
    grade = Grade.from_score(math.nan, "j", raw=2.0)
    assert grade == Grade(None, GradeLabel.UNKNOWN, "j", raw=2.0, reason="score is NaN")
    assert grade.known is False and Grade.from_score(0.0, "j").known is True


def test_to_dict_gives_the_label_value() -> None:
    assert Grade.from_score(0.75, "j", raw=1.0).to_dict() == {
        "score": 0.75,
        "label": "relevant",
        "judge": "j",
        "raw": 1.0,
        "reason": None,
    }


# --- ScoreCalibration ----------------------------------------------------------------------------


@pytest.mark.parametrize("offset", [math.inf, -math.inf, math.nan])
def test_calibration_rejects_a_non_finite_offset(offset: float) -> None:
    with pytest.raises(ValueError, match="offset must be finite"):
        ScoreCalibration(offset=offset)


def test_calibration_accepts_any_positive_slope() -> None:
    assert ScoreCalibration(slope=1e-9).slope == 1e-9
    with pytest.raises(ValueError, match="slope must be a positive finite number, got 0.0"):
        ScoreCalibration(slope=0.0)


@pytest.mark.parametrize("probability", [0.0, 1.0, -0.1, 1.1])
def test_inverse_needs_an_open_unit_interval(probability: float) -> None:
    with pytest.raises(ValueError, match=r"probability must lie in \(0, 1\)"):
        ScoreCalibration().inverse(probability)


def test_inverse_and_to_dict_by_hand() -> None:
    calibration = ScoreCalibration(slope=2.0, offset=1.0)
    # sigmoid(2 * raw + 1) = 0.75  ->  2 * raw + 1 = ln 3
    assert calibration.inverse(0.75) == pytest.approx((math.log(3) - 1.0) / 2.0)
    assert calibration.to_dict() == {"slope": 2.0, "offset": 1.0}


# --- the judge contract ----------------------------------------------------------------------


def test_grade_uses_the_judges_name_and_threshold() -> None:
    judge = _FixedJudge(name="fixed", decision_threshold=0.8, score=0.7)
    (grade,) = judge.judge("q", ["t"])
    assert grade == Grade(0.7, GradeLabel.IRRELEVANT, "fixed", raw=1.5, reason="fixed")
    (high,) = _FixedJudge(decision_threshold=0.7, score=0.7).judge("q", ["t"])
    assert high.label is GradeLabel.RELEVANT


@pytest.mark.parametrize("threshold", [-0.01, 1.01])
def test_decision_threshold_bounds(threshold: float) -> None:
    with pytest.raises(ValueError, match="decision_threshold"):
        _FixedJudge(decision_threshold=threshold)
    assert _FixedJudge(decision_threshold=0.0).decision_threshold == 0.0
    assert _FixedJudge(decision_threshold=1.0).decision_threshold == 1.0


def test_no_texts_means_no_call_and_no_grades() -> None:
    judge = _FixedJudge(extra=1)  # would break the contract if it were called
    assert judge.judge("q", []) == []
    assert asyncio.run(judge.ajudge("q", ())) == []


def test_one_grade_per_text_is_enforced_sync_and_async() -> None:
    judge = _FixedJudge(name="sloppy", extra=1)
    message = "judge 'sloppy' returned 3 grades for 2 texts"
    with pytest.raises(RuntimeError, match=message):
        judge.judge("q", ["a", "b"])
    with pytest.raises(RuntimeError, match=message):
        asyncio.run(judge.ajudge("q", ["a", "b"]))


def test_inputs_are_checked_sync_and_async() -> None:
    judge = _FixedJudge()
    with pytest.raises(TypeError, match="query must be a str, got int"):
        judge.judge(3, ["a"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="got a single str"):
        judge.judge("q", "abc")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got NoneType"):
        asyncio.run(judge.ajudge("q", ["a", None]))  # type: ignore[list-item]
    assert [g.score for g in asyncio.run(judge.ajudge("q", ("a", "b")))] == [0.5, 0.5]


# --- pick_thresholds ---------------------------------------------------------------------------


def test_pick_thresholds_accepts_the_closed_ends_of_its_ranges() -> None:
    scores, labels = [0.9, 0.8, 0.1], [True, True, False]
    exact = pick_thresholds(scores, labels, target_precision=1.0, max_positive_loss=0.0)
    assert (exact.upper, exact.lower, exact.precision_at_upper) == (0.8, 0.8, 1.0)
    with pytest.raises(ValueError, match=r"max_positive_loss must lie in \[0, 1\), got -0.1"):
        pick_thresholds(scores, labels, max_positive_loss=-0.1)
    with pytest.raises(ValueError, match=r"target_precision must lie in \(0, 1\], got 1.5"):
        pick_thresholds(scores, labels, target_precision=1.5)


def test_pick_thresholds_rejects_mismatched_or_one_class_samples() -> None:
    with pytest.raises(ValueError, match="scores has 2 values but labels has 3"):
        pick_thresholds([0.1, 0.9], [False, True, True])
    with pytest.raises(ValueError, match="one relevant and one irrelevant"):
        pick_thresholds([0.1, 0.9], [True, True])
    with pytest.raises(ValueError, match="one relevant and one irrelevant"):
        pick_thresholds([0.1, 0.9], [False, False])


def test_lower_counts_the_positives_allowed_below_it() -> None:
    # 10 positives at 0.1 .. 1.0 and a negative at 0.95, so upper (precision 1.0) is 1.0 and
    # does not cap lower. 5% of 10 positives rounds down to 0 allowed below, 10% to 1, 25% to 2.
    scores = [i / 10 for i in range(1, 11)] + [0.95]
    labels = [True] * 10 + [False]
    assert pick_thresholds(scores, labels, 1.0, 0.05).lower == 0.1
    ten = pick_thresholds(scores, labels, 1.0, 0.1)
    assert (ten.upper, ten.lower) == (1.0, 0.2)
    assert ten.positive_loss_at_lower == pytest.approx(0.1)
    assert pick_thresholds(scores, labels, 1.0, 0.25).lower == 0.3
    assert (ten.num_positive, ten.num_negative) == (10, 1)


def test_upper_is_the_lowest_score_reaching_the_precision() -> None:
    # precision of {score >= u}: 0.1 -> 3/5, 0.2 -> 3/4, 0.3 -> 2/3, 0.4 -> 1, 0.5 -> 1
    scores = [0.1, 0.2, 0.3, 0.4, 0.5]
    labels = [False, True, False, True, True]
    assert pick_thresholds(scores, labels, 0.75).upper == 0.2
    assert pick_thresholds(scores, labels, 0.76).upper == 0.4
    assert pick_thresholds(scores, labels, 0.6).upper == 0.1


def test_thresholds_as_kwargs() -> None:
    thresholds = CRAGThresholds(0.7, 0.2, 0.9, 0.05, 10, 20)
    assert thresholds.as_kwargs() == {"upper": 0.7, "lower": 0.2}


# --- grading labelled pairs --------------------------------------------------------------------


class _LengthJudge(BaseRelevanceJudge):
    """Scores a text by its length / 10; unknown when it contains '?'."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [
            Grade.unknown(self.name, "?") if "?" in t else self.grade(len(t) / 10, raw=len(t))
            for t in texts
        ]


PAIRS = [
    ("q1", "xxxxxxxxx", True),  # 0.9
    ("q2", "xxxxxxxx", True),  # 0.8
    ("q1", "xx", True),  # 0.2
    ("q2", "x?", False),  # unknown: dropped
    ("q1", "x", False),  # 0.1
]


def test_dropped_unknown_grades_are_logged_with_their_count(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="llama_index_ext_advrag.judges.calibration")
    grade_labelled_pairs(_LengthJudge(), PAIRS)
    assert [r.getMessage() for r in caplog.records] == ["dropped 1 unknown grades of 5"]
    caplog.clear()
    grade_labelled_pairs(_LengthJudge(), [p for p in PAIRS if "?" not in p[1]])
    assert caplog.records == []


def test_calibrate_judge_thresholds_passes_the_positive_loss_on() -> None:
    # A negative scoring 1.0 keeps precision 1.0 out of reach: upper is 1.0 and does not cap
    # lower. Positives 0.2, 0.8, 0.9: allowing a third of them below lower moves it to 0.8.
    pairs = [*PAIRS, ("q2", "x" * 10, False)]
    strict = calibrate_judge_thresholds(_LengthJudge(), pairs, 1.0, 0.0)
    loose = calibrate_judge_thresholds(_LengthJudge(), pairs, 1.0, 0.34)
    assert (strict.upper, strict.lower) == (1.0, 0.2)
    assert (loose.upper, loose.lower) == (1.0, 0.8)
    assert calibrate_judge_thresholds(_LengthJudge(), pairs, 0.6).upper == 0.1  # 3 of 5


def test_class_names() -> None:
    from llama_index_ext_advrag.postprocessor import CRAGPostprocessor, JudgeRerankPostprocessor

    assert BaseRelevanceJudge.class_name() == "BaseRelevanceJudge"
    assert CRAGPostprocessor.class_name() == "CRAGPostprocessor"
    assert JudgeRerankPostprocessor.class_name() == "JudgeRerankPostprocessor"


def test_fit_calibration_errors_say_what_is_wrong() -> None:
    from llama_index_ext_advrag.judges.calibration import fit_calibration

    with pytest.raises(
        ValueError, match=r"^raw values must be finite \(drop unknown grades first\)$"
    ):
        fit_calibration([math.inf, 1.0], [False, True])
    with pytest.raises(
        ValueError, match="^labels need at least one relevant and one irrelevant example$"
    ):
        fit_calibration([0.0, 1.0], [False, False])
