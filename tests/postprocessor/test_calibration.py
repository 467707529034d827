"""Threshold calibration for the drift-aware window."""

from __future__ import annotations

import numpy as np
import pytest
from advrag_testing import HashEmbedding
from postprocessor._corpus import sentence_nodes

from llama_index_ext_advrag.postprocessor.calibration import (
    background_similarities,
    calibrate_thresholds,
    thresholds_from_background,
)


def test_background_and_quantiles_by_hand() -> None:
    sims = background_similarities([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [1.0, 1.0]])
    assert sims == pytest.approx([1.0, 2**-0.5, 0.0, 2**-0.5])
    assert thresholds_from_background(np.arange(101) / 100, 0.9, 0.95) == (0.9, 0.95)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"min_quantile": 1.5}, "min_quantile=1.5"), ({"prune_quantile": -0.1}, "prune_quantile=-0.1"),
     ({"min_quantile": 0.9, "prune_quantile": 0.5}, "prune_quantile=0.5 must be >=")],
)  # fmt: skip
def test_invalid_quantiles(kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        thresholds_from_background(np.ones(3), **kwargs)
    with pytest.raises(ValueError, match="no similarities"):
        thresholds_from_background(np.array([]))


def test_calibrate_on_a_corpus_sample() -> None:
    texts = [n.get_content() for n in sentence_nodes(embed=False)]
    model = HashEmbedding(dim=64)
    first = calibrate_thresholds(texts, embed_model=model, num_sentences=8, num_queries=5)
    again = calibrate_thresholds(texts, embed_model=model, num_sentences=8, num_queries=5)
    assert first == again  # seeded
    assert -1.0 <= first.min_sim <= first.prune_sim <= 1.0
    assert (first.num_sentences, first.num_queries) == (8, 5)
    assert first.as_kwargs() == {"min_sim": first.min_sim, "prune_sim": first.prune_sim}
    with_queries = calibrate_thresholds(texts, embed_model=model, queries=["pier storm", "cakes"])
    assert with_queries.num_queries == 2
    with pytest.raises(ValueError, match="at least 2 distinct"):
        calibrate_thresholds(["same", "same", " "], embed_model=model)
