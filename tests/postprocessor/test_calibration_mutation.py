"""Threshold calibration's bounds and outputs, exactly (kills the mutants of
postprocessor/calibration.py that test_calibration.py and test_drift_thresholds.py leave): a
query exactly half CJK is Chinese, the quantile bounds (1 allowed, above refused, equal quantiles
allowed), the exact error, four decimals, two texts are enough, stand-in queries are never the
sampled sentences, the default seed, and the info line."""

from __future__ import annotations

import logging

import numpy as np
import pytest
from advrag_testing import HashEmbedding
from postprocessor._corpus import sentence_nodes

from llama_index_ext_advrag.postprocessor.calibration import (
    E5_ZH_MIN_SIM,
    E5_ZH_PRUNE_SIM,
    calibrate_thresholds,
    default_thresholds,
    thresholds_from_background,
)

E5 = "intfloat/multilingual-e5-small"


def test_a_query_half_cjk_uses_the_chinese_thresholds() -> None:
    assert default_thresholds(E5, "潜伏ab") == (
        E5_ZH_MIN_SIM,
        E5_ZH_PRUNE_SIM,
        "multilingual-e5/zh",
    )
    assert default_thresholds(E5, "潜abc")[2] == "multilingual-e5"
    assert default_thresholds(E5)[2] == "multilingual-e5"


def test_quantile_bounds_and_the_exact_error() -> None:
    sims = np.arange(11) / 10
    assert thresholds_from_background(sims, 1.0, 1.0) == (1.0, 1.0)
    assert thresholds_from_background(sims, 0.0, 0.0) == (0.0, 0.0)
    assert thresholds_from_background(sims, 0.3, 0.3) == (0.3, 0.3)
    for bad in (1.01, 1.5):
        with pytest.raises(ValueError, match=rf"^prune_quantile={bad} must lie in \[0, 1\]$"):
            thresholds_from_background(sims, 0.5, bad)
    with pytest.raises(ValueError, match=r"^no similarities to calibrate from \(empty sample\)$"):
        thresholds_from_background(np.array([]))


def test_thresholds_have_four_decimals() -> None:
    sims = np.array([0.123456, 0.654321])
    assert thresholds_from_background(sims, 0.0, 1.0) == (0.1235, 0.6543)


class Recording(HashEmbedding):
    """HashEmbedding that records the batches it embeds."""

    def get_text_embedding_batch(self, texts, **kwargs):  # type: ignore[override]
        self.__dict__.setdefault("batches", []).append(list(texts))
        return super().get_text_embedding_batch(texts, **kwargs)


def test_two_texts_are_enough() -> None:
    calibration = calibrate_thresholds(["The pier.", "The cakes."], embed_model=HashEmbedding())
    assert (calibration.num_sentences, calibration.num_queries) == (2, 2)


def test_stand_in_queries_are_not_the_sampled_sentences() -> None:
    texts = [n.get_content() for n in sentence_nodes(embed=False)]
    model = Recording(dim=64)
    calibration = calibrate_thresholds(texts, embed_model=model, num_sentences=5, num_queries=50)
    sentences, queries = model.__dict__["batches"]
    assert len(sentences) == 5 and len(queries) == len(texts) - 5
    assert set(sentences).isdisjoint(queries)
    assert set(sentences) | set(queries) == set(texts)
    assert calibration.num_queries == len(texts) - 5


def test_the_default_seed_is_zero_and_quantiles_have_four_decimals() -> None:
    texts = [n.get_content() for n in sentence_nodes(embed=False)]
    model = HashEmbedding(dim=64)
    kwargs = {"embed_model": model, "num_sentences": 4, "num_queries": 3}
    default = calibrate_thresholds(texts, **kwargs)
    assert default == calibrate_thresholds(texts, seed=0, **kwargs)
    assert default != calibrate_thresholds(texts, seed=1, **kwargs)
    assert list(default.quantiles) == ["q50", "q75", "q90", "q95", "q99"]
    assert all(round(v, 4) == v for v in default.quantiles.values())
    assert any(round(v, 3) != v for v in default.quantiles.values())


def test_the_info_line_names_the_thresholds(caplog) -> None:
    texts = [n.get_content() for n in sentence_nodes(embed=False)]
    name = "llama_index_ext_advrag.postprocessor.calibration"
    with caplog.at_level(logging.INFO, logger=name):
        calibration = calibrate_thresholds(texts, embed_model=HashEmbedding(dim=64))
    (record,) = [r for r in caplog.records if r.name == name]
    assert record.getMessage() == (
        f"calibrated min_sim={calibration.min_sim:.3f} prune_sim={calibration.prune_sim:.3f} "
        f"from {calibration.quantiles}"
    )
