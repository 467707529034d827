"""A curve point whose coverage is unknown (NaN) is left out of the interpolation, not read as
a value (kills the frontier mutant that keeps it)."""

from __future__ import annotations

import math

import pytest

from llama_index_ext_advrag.evaluation.frontier import interpolate_coverage


def test_a_point_without_coverage_is_left_out() -> None:
    points = [(100.0, 0.5), (200.0, math.nan), (300.0, 0.7)]
    assert interpolate_coverage(points, 200.0) == pytest.approx(0.6)
    assert interpolate_coverage([(math.nan, 0.9), (100.0, 0.5)], 100.0) == 0.5
