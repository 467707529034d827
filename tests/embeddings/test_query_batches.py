"""Batch query embeddings (``get_query_embedding_batch``): one model call for several queries,
the same vectors as one call each, cached per query by ``CachedEmbedding``."""

from __future__ import annotations

import asyncio

import pytest
from advrag_testing import HashEmbedding

from llama_index_ext_advrag.embeddings import CachedEmbedding
from llama_index_ext_advrag.embeddings._blocking import BlockingEncoderEmbedding


class QueryPrefixEncoder(BlockingEncoderEmbedding):
    """Vectors from the text length; queries get a marker; every ``_encode`` call is kept."""

    calls: list[tuple[list[str], bool]] = []

    def _encode(self, texts: list[str], is_query: bool) -> list[list[float]]:
        self.calls.append((list(texts), is_query))
        return [[float(len(t)), 1.0 if is_query else 0.0] for t in texts]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_blocking_encoder_embeds_a_query_batch_in_one_call(mode: str) -> None:
    model = QueryPrefixEncoder(calls=[])
    queries = ["one", "three", "\ud800"]
    if mode == "async":
        vectors = asyncio.run(model.aget_query_embedding_batch(queries))
    else:
        vectors = model.get_query_embedding_batch(queries)
    assert model.calls == [(["one", "three", "\ufffd"], True)]
    assert vectors == [model.get_query_embedding(q) for q in queries]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_cached_query_batches_hit_the_cache_and_batch_the_misses(mode: str) -> None:
    inner = QueryPrefixEncoder(calls=[])
    cached = CachedEmbedding(inner)

    def batch(queries: list[str]) -> list[list[float]]:
        if mode == "async":
            return asyncio.run(cached.aget_query_embedding_batch(queries))
        return cached.get_query_embedding_batch(queries)

    first = batch(["a", "bb", "a"])
    assert inner.calls == [(["a", "bb"], True)]
    assert batch(["bb", "ccc"]) == [first[1], [3.0, 1.0]]
    assert inner.calls[1] == (["ccc"], True)
    assert (cached.stats.misses, cached.stats.hits) == (3, 2)
    assert first == [cached.get_query_embedding(q) for q in ["a", "bb", "a"]]


def test_a_core_model_inside_the_cache_is_asked_once_per_query() -> None:
    cached = CachedEmbedding(HashEmbedding(dim=8), cache_queries=False)
    assert cached.get_query_embedding_batch(["pump", "valve"]) == [
        HashEmbedding(dim=8).get_query_embedding(q) for q in ["pump", "valve"]
    ]
