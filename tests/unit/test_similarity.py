"""Cosine helpers, checked against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_ext_advrag.similarity import cosine_to_query, normalise_rows, paired_cosines


def test_cosine_to_query_by_hand() -> None:
    assert cosine_to_query([2.0, 0.0], [[1.0, 0.0], [0.0, 3.0], [1.0, 1.0]]) == pytest.approx(
        [1.0, 0.0, 2**-0.5]
    )
    assert cosine_to_query([1.0, 0.0], []) == []
    assert cosine_to_query([1.0, 0.0], [[0.0, 0.0]]) == [0.0]


def test_normalise_rows_keeps_zero_rows() -> None:
    assert normalise_rows([3.0, 4.0]).tolist() == [[0.6, 0.8]]
    assert normalise_rows([[0.0, 0.0]]).tolist() == [[0.0, 0.0]]


def test_paired_cosines_by_hand() -> None:
    left = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    right = np.array([[0.0, 2.0], [3.0, 3.0], [1.0, 0.0]])
    assert paired_cosines(left, right).tolist() == pytest.approx([0.0, 1.0, 0.0])
