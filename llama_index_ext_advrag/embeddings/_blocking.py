"""The shared shape of the pack's local embedding models: one blocking ``_encode(texts,
is_query)`` call, which the async methods run in a worker thread so the event loop keeps
running, behind the pack's one input step (strings only, lone surrogates replaced)."""

from __future__ import annotations

import asyncio
from abc import abstractmethod

from llama_index.core.base.embeddings.base import Embedding

from llama_index_ext_advrag.embeddings.inputs import CleanInputEmbedding


class BlockingEncoderEmbedding(CleanInputEmbedding):
    """A ``BaseEmbedding`` whose subclasses write only :meth:`_encode`."""

    @abstractmethod
    def _encode(self, texts: list[str], is_query: bool) -> list[Embedding]:
        """Embed ``texts`` as queries or passages (blocking)."""

    def _get_query_embedding(self, query: str) -> Embedding:
        return self._encode([query], is_query=True)[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._encode([text], is_query=False)[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._encode(texts, is_query=False)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return (await asyncio.to_thread(self._encode, [query], True))[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await asyncio.to_thread(self._encode, [text], False))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._encode, texts, False)

    def _get_query_embeddings(self, queries: list[str]) -> list[Embedding]:
        return self._encode(queries, is_query=True)

    async def _aget_query_embeddings(self, queries: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._encode, queries, True)


__all__ = ["BlockingEncoderEmbedding"]
