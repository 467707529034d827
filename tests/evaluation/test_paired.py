"""The paired bootstrap: seeded, validated, and equal to a t interval where they must agree."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from llama_index_ext_advrag.evaluation.paired import (
    MIN_RESAMPLES,
    count_changes,
    paired_bootstrap_intervals,
)


def test_constant_differences_give_a_point_interval() -> None:
    [interval] = paired_bootstrap_intervals([0.5] * 12)
    assert interval == (0.5, 0.5, 0.5)
    [zero] = paired_bootstrap_intervals(np.zeros(50))
    assert zero.low <= 0 <= zero.high


def test_seeded_and_columns_resampled_together() -> None:
    rng = np.random.default_rng(3)
    values = rng.integers(-1, 2, size=(80, 2)).astype(float)
    first = paired_bootstrap_intervals(values, seed=9)
    assert first == paired_bootstrap_intervals(values, seed=9)
    assert first != paired_bootstrap_intervals(values, seed=10)
    # a column repeated gives the same interval (same resampled rows)
    twin = paired_bootstrap_intervals(np.column_stack([values[:, 0], values[:, 0]]), seed=9)
    assert twin[0] == twin[1]
    assert [i.mean for i in first] == pytest.approx(values.mean(axis=0).tolist())


def test_large_sample_agrees_with_the_paired_t_interval() -> None:
    # On 2,000 questions the bootstrap distribution of the mean is close to normal, so the
    # percentile interval and scipy's paired t interval agree to a few percent of their width.
    rng = np.random.default_rng(1)
    candidate = (rng.random(2000) < 0.62).astype(float)
    baseline = (rng.random(2000) < 0.55).astype(float)
    [interval] = paired_bootstrap_intervals(candidate - baseline)
    reference = stats.ttest_rel(candidate, baseline).confidence_interval(0.95)
    width = reference.high - reference.low
    assert interval.low == pytest.approx(reference.low, abs=0.05 * width)
    assert interval.high == pytest.approx(reference.high, abs=0.05 * width)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"differences": []}, "non-empty"),
        ({"differences": [1.0, float("nan")]}, "finite"),
        ({"differences": [1.0], "confidence": 1.0}, "confidence must lie strictly"),
        ({"differences": [1.0], "resamples": 100}, f"resamples must be >= {MIN_RESAMPLES}, got 100"),
    ],
)  # fmt: skip
def test_bad_arguments_name_the_value(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        paired_bootstrap_intervals(**kwargs)


def test_count_changes() -> None:
    assert count_changes([1.0, -0.5, 0.0, 1e-12, 0.25]) == (2, 1, 2)
