"""The second hop's calls: the query embeddings in one batch, the hop-2 searches bounded.

Kept apart from :mod:`._hops` (pure decisions) and :mod:`.second_hop` (the retriever).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore

LegOutcome = list[NodeWithScore] | BaseException


def find_embed_model(retriever: BaseRetriever) -> BaseEmbedding | None:
    """The embedding model ``retriever`` (or one of its legs) embeds queries with, if it
    exposes one (core's vector retrievers and the pack's Milvus retrievers do)."""
    for candidate in [retriever, *getattr(retriever, "legs", ())]:
        model = getattr(candidate, "_embed_model", None)
        if isinstance(model, BaseEmbedding):
            return model
    return None


def embed_queries(model: BaseEmbedding, queries: Sequence[str]) -> list[Embedding]:
    """Query embeddings of ``queries``: one batch call when the model offers
    ``get_query_embedding_batch`` (the pack's models do), else one call per query."""
    batch = getattr(model, "get_query_embedding_batch", None)
    if callable(batch):
        return list(batch(list(queries)))
    return [model.get_query_embedding(q) for q in queries]


async def aembed_queries(model: BaseEmbedding, queries: Sequence[str]) -> list[Embedding]:
    """Async :func:`embed_queries`."""
    batch = getattr(model, "aget_query_embedding_batch", None)
    if callable(batch):
        return list(await batch(list(queries)))
    return list(await asyncio.gather(*(model.aget_query_embedding(q) for q in queries)))


async def bounded_gather(
    calls: Sequence[Callable[[], Awaitable[list[NodeWithScore]]]], limit: int
) -> list[LegOutcome]:
    """Run ``calls`` concurrently, at most ``limit`` at once; an ``Exception`` becomes the
    call's outcome, cancellation and interrupts propagate."""
    semaphore = asyncio.Semaphore(limit)

    async def run(call: Callable[[], Awaitable[list[NodeWithScore]]]) -> LegOutcome:
        async with semaphore:
            try:
                return list(await call())
            except Exception as exc:
                return exc

    return list(await asyncio.gather(*(run(call) for call in calls)))


__all__ = ["LegOutcome", "aembed_queries", "bounded_gather", "embed_queries", "find_embed_model"]
