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


def test_calibrated_thresholds_are_the_background_quantiles_by_hand() -> None:
    # every text is sampled (samples as large as the inputs), so the background is known
    texts = [n.get_content() for n in sentence_nodes(embed=False)]
    questions = ["pier storm", "almond cakes", "lighthouse keeper", "granite"]
    model = HashEmbedding(dim=64)
    background = background_similarities(
        [model.get_query_embedding(q) for q in questions], model.get_text_embedding_batch(texts)
    )
    for low, high in ((0.5, 0.93), (0.2, 0.8), (0.0, 1.0)):
        calibration = calibrate_thresholds(
            texts, embed_model=model, queries=questions, num_sentences=len(texts),
            num_queries=len(questions), min_quantile=low, prune_quantile=high,
        )  # fmt: skip
        expected = (np.quantile(background, low), np.quantile(background, high))
        assert (calibration.min_sim, calibration.prune_sim) == pytest.approx(expected, abs=1e-4)
        assert calibration.min_sim < calibration.prune_sim  # the two quantiles differ here
        assert calibration.quantiles["q90"] == pytest.approx(np.quantile(background, 0.9), abs=1e-4)
    assert (calibration.min_sim, calibration.prune_sim) == pytest.approx(
        (background.min(), background.max()), abs=1e-4
    )
