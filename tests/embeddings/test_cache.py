"""CachedEmbedding: every distinct text is embedded once, in memory or across runs on disk."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
from advrag_testing import HashEmbedding

from llama_index_ext_advrag.embeddings import CachedEmbedding, embedding_identity, is_english_only
from llama_index_ext_advrag.embeddings.cache import CACHE_FILE_NAME, cache_key


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
