"""normalise_rows computes in float64 whatever the input's dtype (float32 embeddings lose no
precision). Kills the dtype mutants of similarity.py (mutation testing, issue #39)."""

from __future__ import annotations

import numpy as np
import pytest

from llama_index_ext_advrag.similarity import cosine_to_query, normalise_rows

pytestmark = pytest.mark.unit


def test_rows_are_normalised_in_float64_from_float32_input() -> None:
    rows = normalise_rows(np.array([[1.0, 3.0], [0.0, 0.0]], dtype=np.float32))
    assert rows.dtype == np.float64
    assert rows[0].tolist() == pytest.approx([1 / np.sqrt(10), 3 / np.sqrt(10)], abs=1e-15)
    assert cosine_to_query(np.array([1.0, 3.0], dtype=np.float32), rows)[0] == pytest.approx(
        1.0, abs=1e-15
    )
