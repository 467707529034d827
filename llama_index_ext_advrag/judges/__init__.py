"""Relevance judges shared by CRAG, Self-RAG and reranking.

Every judge implements :class:`BaseRelevanceJudge`: ``judge(query, texts) -> list[Grade]`` and
``ajudge`` (async), one :class:`Grade` per text with a calibrated score in [0, 1] or ``None``
(unknown), a label, the judge's name, the raw model value and a reason.

- :class:`CrossEncoderRelevanceJudge`: an offline English cross-encoder (``judges`` extra).
- :class:`EmbeddingRelevanceJudge`: a calibrated cosine under any embedding model.
- :class:`LLMRelevanceJudge`: a prompted LLM, yes/no log-probabilities when available.
- :class:`LanguageRoutedJudge`: one judge per language, by CJK share.

Classes are imported lazily.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "BaseRelevanceJudge": ".base",
    "Grade": ".base",
    "GradeLabel": ".base",
    "ScoreCalibration": ".base",
    "CrossEncoderRelevanceJudge": ".cross_encoder",
    "EmbeddingRelevanceJudge": ".embedding",
    "LLMRelevanceJudge": ".llm",
    "LanguageRoutedJudge": ".routed",
    "CRAGThresholds": ".calibration",
    "calibrate_judge_thresholds": ".calibration",
    "fit_calibration": ".calibration",
    "pick_thresholds": ".calibration",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
