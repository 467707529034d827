"""Fit a judge's score calibration and pick CRAG thresholds from a labelled sample.

Two small pure functions do the maths and one helper runs a judge over labelled pairs:

- :func:`fit_calibration` is Platt scaling: a one-feature logistic regression of the label on
  the raw value, fitted by Newton's method on Platt's smoothed targets
  (``(N+ + 1) / (N+ + 2)`` for positives, ``1 / (N- + 2)`` for negatives) so a sample the raw
  value separates perfectly still gives a finite slope.
- :func:`pick_thresholds` chooses CRAG's ``upper`` and ``lower``: ``upper`` is the lowest score
  above which the sample's passages are relevant with at least ``target_precision``; ``lower``
  is the score below which at most ``max_positive_loss`` of the relevant passages fall.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade, ScoreCalibration

logger = logging.getLogger(__name__)

DEFAULT_TARGET_PRECISION = 0.9
DEFAULT_MAX_POSITIVE_LOSS = 0.05
_NEWTON_STEPS = 100


def platt_targets(labels: Sequence[bool]) -> np.ndarray:
    """Platt's smoothed targets for ``labels``.

    >>> platt_targets([True, False, True]).round(3).tolist()
    [0.75, 0.333, 0.75]
    """
    flags = np.asarray(labels, dtype=bool)
    positives = int(flags.sum())
    negatives = len(flags) - positives
    return np.where(flags, (positives + 1) / (positives + 2), 1 / (negatives + 2))


def fit_calibration(raw: Sequence[float], labels: Sequence[bool]) -> ScoreCalibration:
    """Fit ``sigmoid(slope * raw + offset)`` to labelled raw values (Platt scaling).

    Raises:
        ValueError: lengths differ, a class is missing, a raw value is not finite, or the raw
            value does not rise with relevance on this sample (fitted slope <= 0).
    """
    x = np.asarray(raw, dtype=np.float64)
    if len(x) != len(labels):
        raise ValueError(f"raw has {len(x)} values but labels has {len(labels)}")
    if not np.all(np.isfinite(x)):
        raise ValueError("raw values must be finite (drop unknown grades first)")
    flags = np.asarray(labels, dtype=bool)
    if flags.all() or not flags.any():
        raise ValueError("labels need at least one relevant and one irrelevant example")
    targets = platt_targets(flags.tolist())
    design = np.stack([x, np.ones_like(x)], axis=1)
    params = np.zeros(2)
    for _ in range(_NEWTON_STEPS):
        probs = 1.0 / (1.0 + np.exp(-(design @ params)))
        gradient = design.T @ (probs - targets)
        hessian = design.T @ (design * (probs * (1 - probs))[:, None]) + 1e-12 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        params -= step
        if np.max(np.abs(step)) < 1e-10:
            break
    slope, offset = float(params[0]), float(params[1])
    if not slope > 0:
        raise ValueError(
            f"the raw value does not rise with relevance on this sample (fitted slope {slope:.4g})"
        )
    return ScoreCalibration(slope=slope, offset=offset)


@dataclass(frozen=True)
class CRAGThresholds:
    """``upper`` / ``lower`` for ``CRAGPostprocessor`` and what they achieved on the sample."""

    upper: float
    lower: float
    precision_at_upper: float
    positive_loss_at_lower: float
    num_positive: int
    num_negative: int

    def as_kwargs(self) -> dict[str, float]:
        return {"upper": self.upper, "lower": self.lower}


def pick_thresholds(
    scores: Sequence[float],
    labels: Sequence[bool],
    target_precision: float = DEFAULT_TARGET_PRECISION,
    max_positive_loss: float = DEFAULT_MAX_POSITIVE_LOSS,
) -> CRAGThresholds:
    """Pick CRAG thresholds from scores of labelled passages.

    ``upper`` is the lowest observed score ``u`` with precision of ``{score >= u}`` at least
    ``target_precision`` (1.0 when none reaches it); ``lower`` is the largest observed score
    ``l`` with at most ``max_positive_loss`` of the positives below it, capped at ``upper``.

    >>> t = pick_thresholds([0.9, 0.8, 0.7, 0.2, 0.1], [True, True, False, True, False], 0.99, 0.0)
    >>> (t.upper, t.lower)
    (0.8, 0.2)
    """
    if not 0.0 < target_precision <= 1.0:
        raise ValueError(f"target_precision must lie in (0, 1], got {target_precision!r}")
    if not 0.0 <= max_positive_loss < 1.0:
        raise ValueError(f"max_positive_loss must lie in [0, 1), got {max_positive_loss!r}")
    values = np.asarray(scores, dtype=np.float64)
    flags = np.asarray(labels, dtype=bool)
    if len(values) != len(flags):
        raise ValueError(f"scores has {len(values)} values but labels has {len(flags)}")
    if not flags.any() or flags.all():
        raise ValueError("labels need at least one relevant and one irrelevant example")
    upper, precision = 1.0, 0.0
    for candidate in np.unique(values):  # ascending: the first that qualifies is the lowest
        above = values >= candidate
        share = float(flags[above].mean())
        if share >= target_precision:
            upper, precision = float(candidate), share
            break
    positives = np.sort(values[flags])
    allowed = math.floor(max_positive_loss * len(positives))  # positives allowed below lower
    lower = min(float(positives[allowed]), upper)
    loss = float((positives < lower).mean())
    return CRAGThresholds(
        upper=upper,
        lower=lower,
        precision_at_upper=precision,
        positive_loss_at_lower=loss,
        num_positive=int(flags.sum()),
        num_negative=int((~flags).sum()),
    )


def grade_labelled_pairs(
    judge: BaseRelevanceJudge, pairs: Sequence[tuple[str, str, bool]]
) -> tuple[list[Grade], list[bool]]:
    """Grade ``(query, text, is_relevant)`` pairs (batched per query); unknown grades dropped."""
    by_query: dict[str, list[int]] = {}
    for index, (query, _, _) in enumerate(pairs):
        by_query.setdefault(query, []).append(index)
    grades: list[Grade | None] = [None] * len(pairs)
    for query, indices in by_query.items():
        for index, grade in zip(
            indices, judge.judge(query, [pairs[i][1] for i in indices]), strict=True
        ):
            grades[index] = grade
    kept = [(g, pairs[i][2]) for i, g in enumerate(grades) if g is not None and g.known]
    if len(kept) < len(pairs):
        logger.info("dropped %d unknown grades of %d", len(pairs) - len(kept), len(pairs))
    return [g for g, _ in kept], [label for _, label in kept]


def calibrate_judge_thresholds(
    judge: BaseRelevanceJudge,
    pairs: Sequence[tuple[str, str, bool]],
    target_precision: float = DEFAULT_TARGET_PRECISION,
    max_positive_loss: float = DEFAULT_MAX_POSITIVE_LOSS,
) -> CRAGThresholds:
    """Run ``judge`` on labelled pairs and :func:`pick_thresholds` from its scores."""
    grades, labels = grade_labelled_pairs(judge, pairs)
    scores = [g.score for g in grades if g.score is not None]
    return pick_thresholds(scores, labels, target_precision, max_positive_loss)


__all__ = [
    "CRAGThresholds",
    "calibrate_judge_thresholds",
    "fit_calibration",
    "grade_labelled_pairs",
    "pick_thresholds",
    "platt_targets",
]
