"""The paired bootstrap against a one-shot reference of the documented algorithm (numpy's
default_rng, rows resampled with replacement, percentile interval), whatever the chunking; the
tolerance of "same"; the input checks' messages. Kills the mutants of evaluation/paired.py
test_paired leaves alive (mutation testing, issue #39)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_ext_advrag.evaluation import paired
from llama_index_ext_advrag.evaluation.paired import (
    SAME_TOLERANCE,
    ChangeCounts,
    count_changes,
    paired_bootstrap_intervals,
)

pytestmark = pytest.mark.unit


def reference(values: np.ndarray, confidence: float, resamples: int, seed: int) -> list[tuple]:
    rows = np.random.default_rng(seed).integers(0, len(values), size=(resamples, len(values)))
    means = values[rows].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    lows, highs = np.percentile(means, tail, axis=0), np.percentile(means, 100 - tail, axis=0)
    return list(zip(values.mean(axis=0), lows, highs, strict=True))


@pytest.mark.parametrize("chunk_values", [None, 40 * 2 * 7])  # one chunk; chunks of 7 resamples
def test_the_interval_is_the_documented_percentile_bootstrap(monkeypatch, chunk_values) -> None:
    if chunk_values is not None:
        monkeypatch.setattr(paired, "_CHUNK_VALUES", chunk_values)
    values = np.random.default_rng(5).normal(0.1, 1.0, size=(40, 2))
    got = paired_bootstrap_intervals(values, confidence=0.9, resamples=2003, seed=4)
    assert [tuple(i) for i in got] == reference(values, 0.9, 2003, 4)


def test_every_question_can_be_drawn() -> None:
    # one outlier among zeros: the resamples that draw it move the upper bound above zero
    [interval] = paired_bootstrap_intervals([10.0] + [0.0] * 39)
    assert interval.low == 0.0 and interval.high > 0.0


def test_numbers_given_as_text_are_read_as_floats() -> None:
    assert count_changes(["0.5", "-0.5", "0"]) == ChangeCounts(1, 1, 1)
    assert paired_bootstrap_intervals(["1.0"] * 40)[0] == (1.0, 1.0, 1.0)


def test_a_difference_at_the_tolerance_counts_as_same() -> None:
    assert count_changes([SAME_TOLERANCE, -SAME_TOLERANCE, 0.0]) == ChangeCounts(0, 0, 3)


def test_bad_input_is_refused_with_its_shape_or_value() -> None:
    with pytest.raises(ValueError, match=r"got shape \(0,\)$"):
        paired_bootstrap_intervals([])
    with pytest.raises(ValueError, match=r"got shape \(2, 2, 2\)$"):
        paired_bootstrap_intervals(np.zeros((2, 2, 2)))
    with pytest.raises(ValueError) as raised:
        paired_bootstrap_intervals([1.0, float("nan")])
    assert str(raised.value) == "differences must be finite numbers (a NaN or inf was given)"
    with pytest.raises(ValueError, match="strictly between 0 and 1, got 0"):
        paired_bootstrap_intervals([1.0] * 40, confidence=0)


def test_the_first_and_last_resamples_count() -> None:
    # with seed 3300 the largest of the 2,000 resample means (60.9; the next is 56.9) is drawn
    # last; at a confidence this close to 1 the upper bound is that maximum
    [interval] = paired_bootstrap_intervals(
        np.arange(10.0) ** 2, confidence=1 - 1e-12, resamples=2000, seed=3300
    )
    assert interval.high == pytest.approx(60.9, abs=1e-6)
