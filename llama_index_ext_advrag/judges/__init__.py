"""Relevance judges shared by CRAG, Self-RAG and reranking.

Every judge implements :class:`BaseRelevanceJudge`: ``judge(query, texts) -> list[Grade]`` and
``ajudge`` (async), one :class:`Grade` per text with a calibrated score in [0, 1] or ``None``
(unknown), a label, the judge's name, the raw model value and a reason.

- :class:`CrossEncoderRelevanceJudge`: an offline English cross-encoder (``judges`` extra).
- :class:`ColbertRelevanceJudge`: offline English late interaction (ColBERT MaxSim, ``judges``
  extra).
- :class:`EmbeddingRelevanceJudge`: a calibrated cosine under any embedding model.
- :class:`LLMRelevanceJudge`: a prompted LLM, yes/no log-probabilities when available.
- :class:`LanguageRoutedJudge`: one judge per language, by CJK share.
- :func:`offline_judge`: the cross-encoder for English, :func:`multilingual_e5_judge` for
  Chinese, routed: CRAG's default judge.

Every judge carries CRAG thresholds for its own scores (``default_upper`` /
``default_lower``), which ``CRAGPostprocessor`` uses unless given others.

Classes are imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
    from llama_index_ext_advrag.judges.base import BaseRelevanceJudge as BaseRelevanceJudge
    from llama_index_ext_advrag.judges.base import Grade as Grade
    from llama_index_ext_advrag.judges.base import GradeLabel as GradeLabel
    from llama_index_ext_advrag.judges.base import ScoreCalibration as ScoreCalibration
    from llama_index_ext_advrag.judges.calibration import CRAGThresholds as CRAGThresholds
    from llama_index_ext_advrag.judges.calibration import (
        calibrate_judge_thresholds as calibrate_judge_thresholds,
    )
    from llama_index_ext_advrag.judges.calibration import fit_calibration as fit_calibration
    from llama_index_ext_advrag.judges.calibration import pick_thresholds as pick_thresholds
    from llama_index_ext_advrag.judges.colbert import (
        ColbertRelevanceJudge as ColbertRelevanceJudge,
    )
    from llama_index_ext_advrag.judges.cross_encoder import (
        CrossEncoderRelevanceJudge as CrossEncoderRelevanceJudge,
    )
    from llama_index_ext_advrag.judges.embedding import (
        EmbeddingRelevanceJudge as EmbeddingRelevanceJudge,
    )
    from llama_index_ext_advrag.judges.llm import LLMRelevanceJudge as LLMRelevanceJudge
    from llama_index_ext_advrag.judges.offline import (
        multilingual_e5_judge as multilingual_e5_judge,
    )
    from llama_index_ext_advrag.judges.offline import offline_judge as offline_judge
    from llama_index_ext_advrag.judges.routed import LanguageRoutedJudge as LanguageRoutedJudge

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
