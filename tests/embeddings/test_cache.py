"""CachedEmbedding: every distinct text is embedded once, in memory or across runs on disk."""

from __future__ import annotations

import hashlib
import sqlite3

import numpy as np
import pytest
from advrag_testing import HashEmbedding
from llama_index.core.base.embeddings.base import BaseEmbedding

from llama_index_ext_advrag.embeddings import CachedEmbedding, embedding_identity, is_english_only
from llama_index_ext_advrag.embeddings.cache import (
    CACHE_FILE_NAME,
    cache_key,
    is_corrupt_database,
)


class CountingEmbedding(HashEmbedding):
    """HashEmbedding that records every text it embeds (queries prefixed with ``q:``)."""

    seen: list[str] = []

    def _get_query_embedding(self, query: str) -> list[float]:
        self.seen.append(f"q:{query}")
        return super()._get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        self.seen.append(text)
        return super()._get_text_embedding(text)


@pytest.fixture
def inner() -> CountingEmbedding:
    return CountingEmbedding(dim=16, seen=[])


def test_reingest_embeds_nothing_twice(inner: CountingEmbedding) -> None:
    cached = CachedEmbedding(inner)
    first = cached.get_text_embedding_batch(["a b", "c d", "a b"])
    assert inner.seen == ["a b", "c d"]  # the repeat inside one batch is embedded once
    assert (cached.stats.misses, cached.stats.hits) == (2, 1)
    cached.reset_stats()
    second = cached.get_text_embedding_batch(["c d", "a b"])
    assert inner.seen == ["a b", "c d"]
    assert (cached.stats.misses, cached.stats.hits) == (0, 2)
    assert second == [first[1], first[0]]
    assert first[0] == pytest.approx(inner.get_text_embedding("a b"))


def test_queries_and_texts_are_separate_entries(inner: CountingEmbedding) -> None:
    cached = CachedEmbedding(inner)
    cached.get_text_embedding("same words")
    cached.get_query_embedding("same words")
    cached.get_query_embedding("same words")
    assert inner.seen == ["same words", "q:same words"]


def test_cache_queries_off_always_asks_the_model(inner: CountingEmbedding) -> None:
    cached = CachedEmbedding(inner, cache_queries=False)
    cached.get_query_embedding("x")
    cached.get_query_embedding("x")
    assert inner.seen == ["q:x", "q:x"]


def test_disk_cache_survives_a_new_object_and_keys_by_model(tmp_path, inner) -> None:
    first = CachedEmbedding(inner, path=tmp_path)
    vectors = first.get_text_embedding_batch(["eins", "zwei"])
    first.close()
    again = CountingEmbedding(dim=16, seen=[])
    reloaded = CachedEmbedding(again, path=tmp_path)
    np.testing.assert_allclose(
        reloaded.get_text_embedding_batch(["zwei", "eins"]), [vectors[1], vectors[0]], atol=1e-6
    )
    assert again.seen == []
    other_model = CachedEmbedding(again, path=tmp_path, model_key="another-model")
    other_model.get_text_embedding("eins")
    assert again.seen == ["eins"]
    # plain float32 blobs under SHA-256 keys, no pickle
    with sqlite3.connect(tmp_path / CACHE_FILE_NAME) as db:
        (blob,) = db.execute(
            "SELECT vector FROM embeddings WHERE key = ?",
            (cache_key(reloaded.model_key, "text", "eins"),),
        ).fetchone()
    assert len(blob) == 16 * 4


async def test_async_matches_sync_and_shares_the_cache(inner: CountingEmbedding) -> None:
    cached = CachedEmbedding(inner)
    async_vectors = await cached.aget_text_embedding_batch(["p q", "r s", "p q"])
    query = await cached.aget_query_embedding("p q")
    assert cached.get_text_embedding_batch(["p q", "r s"]) == async_vectors[:2]
    assert cached.get_query_embedding("p q") == query
    assert inner.seen == ["p q", "r s", "q:p q"]


def test_identity_serialisation_and_wrapping(inner: CountingEmbedding, tmp_path) -> None:
    cached = CachedEmbedding(inner, path=tmp_path)
    assert cached.model_key == embedding_identity(inner) == "HashEmbedding|unknown"
    data = cached.to_dict()
    assert data["path"] == str(tmp_path) and data["model_key"] == "HashEmbedding|unknown"
    assert cached.inner is inner
    named = HashEmbedding(dim=8, model_name="sentence-transformers/all-MiniLM-L6-v2")
    assert is_english_only(CachedEmbedding(named))
    with pytest.raises(TypeError, match="str"):
        CachedEmbedding("all-MiniLM-L6-v2")  # type: ignore[arg-type]


def test_empty_batch(inner: CountingEmbedding) -> None:
    assert CachedEmbedding(inner).get_text_embedding_batch([]) == []
    assert inner.seen == []


# --- query and passage vectors that differ; models that differ -----------------------------------


class KindAwareEmbedding(BaseEmbedding):
    """Unrelated pseudo-random unit vectors per (model name, kind, text): a query vector never
    equals the passage vector of the same text, and two model names never agree. Counts calls."""

    dim: int = 8
    calls: list[str] = []

    @classmethod
    def class_name(cls) -> str:
        return "KindAwareEmbedding"

    def _vector(self, kind: str, text: str) -> list[float]:
        self.calls.append(f"{kind}:{text}")
        seed = hashlib.sha256(f"{self.model_name}|{kind}|{text}".encode()).digest()
        vector = np.random.default_rng(list(seed)).standard_normal(self.dim)
        return (vector / np.linalg.norm(vector)).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector("query", query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector("query", query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector("passage", text)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._vector("passage", text)


def reference(model_name: str, kind: str, text: str) -> list[float]:
    """What an uncached KindAwareEmbedding named ``model_name`` returns."""
    return KindAwareEmbedding(model_name=model_name, calls=[])._vector(kind, text)


async def embed(cached: CachedEmbedding, kind: str, text: str, use_async: bool) -> list[float]:
    """One query or passage embedding through the public sync or async method."""
    if kind == "query":
        if use_async:
            return await cached.aget_query_embedding(text)
        return cached.get_query_embedding(text)
    if use_async:
        return (await cached.aget_text_embedding_batch([text]))[0]
    return cached.get_text_embedding_batch([text])[0]


ORDERS = [("query", "passage"), ("passage", "query")]


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("order", ORDERS, ids=["query-first", "passage-first"])
async def test_query_and_passage_vectors_stay_apart(tmp_path, use_async, order) -> None:
    inner = KindAwareEmbedding(model_name="m", calls=[])
    cached = CachedEmbedding(inner, path=tmp_path)
    assert reference("m", "query", "w") != reference("m", "passage", "w")
    for _ in range(2):  # the second round is served from the cache
        for kind in order:
            assert await embed(cached, kind, "w", use_async) == pytest.approx(
                reference("m", kind, "w"), abs=1e-6
            )
    assert sorted(inner.calls) == ["passage:w", "query:w"]
    cached.close()
    reloaded = CachedEmbedding(KindAwareEmbedding(model_name="m", calls=[]), path=tmp_path)
    for kind in order:  # and from the SQLite file
        assert await embed(reloaded, kind, "w", use_async) == pytest.approx(
            reference("m", kind, "w"), abs=1e-6
        )
    assert reloaded.stats.misses == 0


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_two_models_never_share_vectors_without_explicit_keys(tmp_path, use_async) -> None:
    first = CachedEmbedding(KindAwareEmbedding(model_name="model-a", calls=[]), path=tmp_path)
    second_inner = KindAwareEmbedding(model_name="model-b", calls=[])
    second = CachedEmbedding(second_inner, path=tmp_path)  # the same file, no model_key given
    other_class = CachedEmbedding(HashEmbedding(dim=8, model_name="model-a"), path=tmp_path)
    assert len({first.model_key, second.model_key, other_class.model_key}) == 3
    for kind in ("query", "passage"):
        assert await embed(first, kind, "w", use_async) == pytest.approx(
            reference("model-a", kind, "w"), abs=1e-6
        )
        assert await embed(second, kind, "w", use_async) == pytest.approx(
            reference("model-b", kind, "w"), abs=1e-6
        )
    assert sorted(second_inner.calls) == ["passage:w", "query:w"]  # nothing served from model-a
    passage = await embed(other_class, "passage", "w", use_async)
    assert passage == pytest.approx(HashEmbedding(dim=8).get_text_embedding("w"), abs=1e-6)


# --- bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_non_strings_are_refused_with_type_and_position(inner, use_async) -> None:
    cached = CachedEmbedding(inner, embed_batch_size=2)
    calls = {
        "query": lambda: (
            cached.aget_query_embedding(5) if use_async else cached.get_query_embedding(5)
        ),
        "text": lambda: (
            cached.aget_text_embedding(None) if use_async else cached.get_text_embedding(None)
        ),
        "batch": lambda: (
            cached.aget_text_embedding_batch(["a", "b", "c", None])
            if use_async
            else cached.get_text_embedding_batch(["a", "b", "c", None])
        ),
        "single str as batch": lambda: (
            cached.aget_text_embedding_batch("abc")
            if use_async
            else cached.get_text_embedding_batch("abc")
        ),
    }
    expected = {
        "query": "query must be a str, got int",
        "text": "text must be a str, got NoneType",
        "batch": r"texts\[3\] must be a str, got NoneType",  # the caller's position, not the batch's
        "single str as batch": "got a single str; wrap it in a list",
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=expected[name]):
            result = call()
            if use_async:
                await result
    assert inner.seen == []  # refused before the model was asked


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_lone_surrogates_are_replaced_with_a_warning(
    tmp_path, inner, caplog, use_async
) -> None:
    cached = CachedEmbedding(inner, path=tmp_path)
    with caplog.at_level("WARNING"):
        vectors = [
            await embed(cached, "passage", "bad \ud800 text", use_async),
            await embed(cached, "query", "\udfff", use_async),
        ]
    clean = CountingEmbedding(dim=16, seen=[])
    assert vectors[0] == pytest.approx(clean.get_text_embedding("bad \ufffd text"), abs=1e-6)
    assert vectors[1] == pytest.approx(clean.get_query_embedding("\ufffd"), abs=1e-6)
    assert inner.seen == ["bad \ufffd text", "q:\ufffd"]  # the wrapped model gets clean text
    warnings = [r.getMessage() for r in caplog.records if "surrogate" in r.getMessage()]
    assert len(warnings) == 2 and all("CachedEmbedding" in w for w in warnings)


# --- a damaged cache file ------------------------------------------------------------------------


def _filled_cache(folder, texts: list[str]) -> list[list[float]]:
    """A cache file at ``folder`` holding the vectors of ``texts``; returns them."""
    cached = CachedEmbedding(HashEmbedding(dim=64), path=folder)
    vectors = cached.get_text_embedding_batch(texts)
    cached.close()
    return vectors


def _truncate(file) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 3])


def _overwrite(file) -> None:
    file.write_bytes(b"this is not a database, just some garbage bytes " * 100)


@pytest.mark.parametrize("damage", [_truncate, _overwrite], ids=["truncated", "garbage"])
@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_a_damaged_cache_file_is_set_aside_and_rebuilt(
    tmp_path, caplog, damage, use_async
) -> None:
    texts = [f"sentence number {i} about topic {i % 7}" for i in range(300)]
    expected = _filled_cache(tmp_path, texts)
    file = tmp_path / CACHE_FILE_NAME
    damage(file)
    damaged = file.read_bytes()
    inner = CountingEmbedding(dim=64, seen=[])
    cached = CachedEmbedding(inner, path=tmp_path)
    with caplog.at_level("WARNING"):
        if use_async:
            vectors = await cached.aget_text_embedding_batch(texts)
        else:
            vectors = cached.get_text_embedding_batch(texts)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)  # correct vectors, recomputed
    assert len(inner.seen) == len(texts)
    aside = tmp_path / (CACHE_FILE_NAME + ".corrupt")
    assert aside.read_bytes() == damaged  # the bad file is kept for inspection, not deleted
    (warning,) = [r.getMessage() for r in caplog.records if "moved it to" in r.getMessage()]
    assert str(file) in warning and str(aside) in warning
    cached.close()
    again = CountingEmbedding(dim=64, seen=[])
    reopened = CachedEmbedding(again, path=tmp_path)  # the rebuilt file serves the next run
    np.testing.assert_allclose(reopened.get_text_embedding_batch(texts), expected, atol=1e-6)
    assert again.seen == []


def test_a_second_damaged_file_does_not_overwrite_the_first_set_aside(tmp_path) -> None:
    for _ in range(2):
        _filled_cache(tmp_path, ["a", "b"])
        _overwrite(tmp_path / CACHE_FILE_NAME)
        cached = CachedEmbedding(HashEmbedding(dim=64), path=tmp_path)
        cached.get_text_embedding("a")
        cached.close()
    assert (tmp_path / f"{CACHE_FILE_NAME}.corrupt").is_file()
    assert (tmp_path / f"{CACHE_FILE_NAME}.corrupt-2").is_file()


def test_a_locked_file_is_not_mistaken_for_a_damaged_one() -> None:
    assert not is_corrupt_database(sqlite3.OperationalError("database is locked"))
    assert is_corrupt_database(sqlite3.DatabaseError("database disk image is malformed"))
