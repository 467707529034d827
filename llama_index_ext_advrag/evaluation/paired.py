"""Paired statistics: is one pipeline better than another on the same questions?

Two pipelines answer the same questions, so their scores are compared question by question:
the difference ``candidate - baseline`` per question, its mean, and a percentile interval of
that mean from a paired bootstrap (questions are resampled with replacement, each keeping its
own pair of scores). Pairing removes the between-question variance (easy and hard questions
are easy or hard for both pipelines), which an unpaired standard error of each pipeline's own
coverage does not.
"""

from __future__ import annotations

import logging
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

logger = logging.getLogger(__name__)

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 10_000
MIN_RESAMPLES = 2_000
DEFAULT_BOOTSTRAP_SEED = 0
# Below this many paired questions no decision is made ("too few questions to decide"). Not a
# calibration fix: simulating two equally good pipelines (benchmarks/bench_paired_decision.py)
# the rule calls a false winner at 0.000-0.033 of runs at every size from 5 to 200 questions
# (nominal 0.025). It keeps a verdict from resting on a handful of questions: the percentile
# interval of a mean of a few 0/+-1 values excludes 0 as soon as 4 questions change one way
# and none the other (an exact sign test needs 6), and below 30 questions one question moves
# the mean by more than 0.033.
MIN_PAIRED_QUESTIONS = 30
SAME_TOLERANCE = 1e-9  # per-question differences closer to 0 than this count as "same"
_CHUNK_VALUES = 4_000_000  # resampled values held in memory at once


class PairedInterval(NamedTuple):
    """The mean per-question difference and its bootstrap interval."""

    mean: float
    low: float
    high: float


class ChangeCounts(NamedTuple):
    """How many questions the candidate scored higher, lower, or the same as the baseline."""

    better: int
    worse: int
    same: int


def count_changes(differences: npt.ArrayLike) -> ChangeCounts:
    """Questions whose difference is above, below or (within ``SAME_TOLERANCE``) at 0."""
    values = np.asarray(differences, dtype=float)
    return ChangeCounts(
        better=int(np.sum(values > SAME_TOLERANCE)),
        worse=int(np.sum(values < -SAME_TOLERANCE)),
        same=int(np.sum(np.abs(values) <= SAME_TOLERANCE)),
    )


def paired_bootstrap_intervals(
    differences: npt.ArrayLike,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_BOOTSTRAP_SEED,
) -> list[PairedInterval]:
    """Percentile bootstrap intervals of the mean of each column of ``differences``.

    Args:
        differences: per-question differences, shape ``(questions,)`` or ``(questions,
            columns)`` (one column per token budget). Rows are resampled together, so the
            columns' intervals come from the same resampled question sets.
        confidence: two-sided confidence level, in (0, 1).
        resamples: bootstrap resamples, at least ``MIN_RESAMPLES``.
        seed: seed of numpy's ``default_rng``: the same input and seed give the same interval.

    Returns:
        One :class:`PairedInterval` per column.

    Raises:
        ValueError: no questions, a non-finite difference, or a bad confidence / resamples.

    >>> [round(v, 3) for v in paired_bootstrap_intervals([1.0] * 40)[0]]
    [1.0, 1.0, 1.0]
    """
    values = np.asarray(differences, dtype=float)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2 or values.shape[0] == 0 or values.shape[1] == 0:
        raise ValueError(
            f"differences must be a non-empty (questions,) or (questions, columns) array, got "
            f"shape {np.asarray(differences).shape}"
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("differences must be finite numbers (a NaN or inf was given)")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must lie strictly between 0 and 1, got {confidence!r}")
    if resamples < MIN_RESAMPLES:
        raise ValueError(f"resamples must be >= {MIN_RESAMPLES}, got {resamples!r}")
    questions, columns = values.shape
    rng = np.random.default_rng(seed)
    chunk = max(1, _CHUNK_VALUES // (questions * columns))
    means = np.empty((resamples, columns))
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        rows = rng.integers(0, questions, size=(stop - start, questions))
        means[start:stop] = values[rows].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lows = np.percentile(means, tail, axis=0)
    highs = np.percentile(means, 100 - tail, axis=0)
    observed = values.mean(axis=0)
    return [
        PairedInterval(float(m), float(lo), float(hi))
        for m, lo, hi in zip(observed, lows, highs, strict=True)
    ]


__all__ = [
    "DEFAULT_BOOTSTRAP_SEED",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "MIN_PAIRED_QUESTIONS",
    "MIN_RESAMPLES",
    "ChangeCounts",
    "PairedInterval",
    "count_changes",
    "paired_bootstrap_intervals",
]
