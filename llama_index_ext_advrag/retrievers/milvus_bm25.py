"""The lexical leg inside Milvus: BM25 full-text search over the vector store's own collection.

:class:`MilvusBM25Retriever` queries the BM25 function of a collection opened with
``open_vector_store(..., full_text=...)``, so the application holds no lexical index: every
process and replica reads the same one, and rows other writers add are searchable at once. It
returns what :class:`~.bm25.JiebaBM25Retriever` returns (nodes sharing a term with the query,
best first, BM25 scores >= 0, a ``bm25`` trace record) and is a drop-in BM25 leg of
:class:`~.hybrid.HybridFusionRetriever`, whose fusion (weights, normalisation, the
English-only dense leg) is unchanged.

:func:`choose_lexical_leg` picks the leg for :meth:`HybridFusionRetriever.from_defaults`:
this one when the backend and the collection have full-text search
(:func:`~llama_index_ext_advrag.milvus.full_text.collection_support`), bm25s over the nodes
otherwise, and says why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle

from llama_index_ext_advrag._lazy import warn_renamed
from llama_index_ext_advrag.events import LexicalChoiceRecord
from llama_index_ext_advrag.milvus.full_text import (
    FullTextAnalyzer,
    FullTextSupport,
    collection_support,
)
from llama_index_ext_advrag.queries import clean_query_bundle
from llama_index_ext_advrag.retrievers._config import ConfiguredRetriever
from llama_index_ext_advrag.text.words import WordTokenizer
from llama_index_ext_advrag.trace import add_trace

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_SIMILARITY_TOP_K = 10
TRACE_COMPONENT = "bm25"
BACKEND_MILVUS = "milvus"
BACKEND_BM25S = "bm25s"


class LexicalChoice(NamedTuple):
    """Which lexical leg a hybrid retriever uses and why (recorded in its trace and event)."""

    backend: str  # "milvus" (full-text search in the collection) or "bm25s" (in the process)
    reason: str

    def to_dict(self) -> LexicalChoiceRecord:
        return {"backend": self.backend, "reason": self.reason}

    def as_dict(self) -> LexicalChoiceRecord:
        """Deprecated: use :meth:`to_dict`."""
        warn_renamed(self, "as_dict", "to_dict")
        return self.to_dict()


def search_data(query: str, analyzer: FullTextAnalyzer | None, tokenizer: WordTokenizer) -> str:
    """What is sent to Milvus for ``query``: the pack's terms, space-separated, for a ``pack``
    collection (Milvus splits them on the spaces, as it did the stored terms); the query as
    typed for Milvus' own analyzers. Empty when the query has no term."""
    if analyzer is FullTextAnalyzer.PACK:
        return " ".join(tokenizer.tokenize(query))
    return query.strip()


class MilvusBM25Retriever(ConfiguredRetriever):
    """BM25 in Milvus (full-text search) over a vector store's collection, as a lexical leg.

    Args:
        vector_store: a ``MilvusVectorStore`` whose collection has a BM25 function (made by
            ``open_vector_store(..., full_text="auto")`` on Milvus Lite or a server >= 2.5).
            It stays the caller's: :meth:`close` does not close it.
        similarity_top_k: results returned per query (only rows sharing a term with it).

    Every query term is searched (``drop_ratio_search`` 0, as bm25s does; Milvus Lite 3.2.2
    refuses any other value on a BM25 field, so the integration's own ``text_search`` query
    mode, which sends 0.2, fails there).

    Scores are BM25 scores (>= 0; Milvus Lite reports them negated, they are turned back).

    Raises:
        ValueError: the store's backend or collection has no full-text search (the message
            says which, with the version), or a setting out of bounds.

    Example:
        >>> store = open_vector_store("./rag.db", "docs", dim=384, full_text="auto")  # doctest: +SKIP
        >>> index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(
        ...     vector_store=store), embed_model=embed_model)  # doctest: +SKIP
        >>> MilvusBM25Retriever(store, similarity_top_k=5).retrieve("带薪年假有几天")  # doctest: +SKIP
    """

    similarity_top_k: int = Field(
        default=DEFAULT_SIMILARITY_TOP_K,
        ge=1,
        le=16_384,  # Milvus' search limit
        description="Results returned per query (only rows sharing a term score > 0).",
    )

    _store: Any = PrivateAttr(default=None)
    _support: FullTextSupport = PrivateAttr()
    _tokenizer: WordTokenizer = PrivateAttr(default_factory=WordTokenizer)

    def __init__(self, vector_store: Any, **settings: Any) -> None:
        super().__init__(**settings)
        support = collection_support(vector_store.client, vector_store.collection_name)
        if not support.supported:
            raise ValueError(
                f"vector store {vector_store.collection_name!r} cannot serve full-text search: "
                f"{support.reason}; use JiebaBM25Retriever(nodes) instead"
            )
        self._store = vector_store
        self._support = support

    @classmethod
    def class_name(cls) -> str:
        return "MilvusBM25Retriever"

    @property
    def support(self) -> FullTextSupport:
        """What the collection offers: fields, analyzer, and why it qualified."""
        return self._support

    def _search_kwargs(self, query: str) -> dict[str, Any] | None:
        data = search_data(query, self._support.analyzer, self._tokenizer)
        if not data:
            return None
        store = self._store
        return {
            "collection_name": store.collection_name,
            "data": [data],
            "anns_field": self._support.output_field,
            "limit": self.similarity_top_k,
            "output_fields": ["*"] if not store.output_fields else list(store.output_fields),
            "search_params": {
                "metric_type": "BM25",
                "params": {"drop_ratio_search": 0.0},
            },
        }

    def _results(self, query: str, found: Any) -> list[NodeWithScore]:
        """The integration's own row parser, BM25 scores made positive, a trace per node."""
        nodes, scores, _ids = self._store._parse_from_milvus_results(found)
        results = []
        for rank, (node, score) in enumerate(zip(nodes, scores, strict=True), start=1):
            hit = NodeWithScore(node=node, score=abs(float(score)))
            add_trace(
                hit.node, TRACE_COMPONENT, {"rank": rank, "score": hit.score, "backend": "milvus"}
            )
            results.append(hit)
        if not results:
            logger.debug("Milvus BM25 found no row sharing a term with %r", query)
        return results

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        search = self._search_kwargs(query_bundle.query_str)
        if search is None:
            return []
        return self._results(query_bundle.query_str, self._store.client.search(**search))

    @dispatcher.span  # core's mixin spans only the sync _retrieve
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        search = self._search_kwargs(query_bundle.query_str)
        if search is None:
            return []
        found = await self._store.aclient.search(**search)
        return self._results(query_bundle.query_str, found)


def vector_store_of(vector_index: Any) -> Any:
    """The vector store behind a ``VectorStoreIndex`` (``None`` when it has none)."""
    return getattr(vector_index, "vector_store", None)


def choose_lexical_leg(
    vector_index: Any, nodes: Sequence[BaseNode] | None = None
) -> tuple[BaseRetriever, LexicalChoice]:
    """Milvus full-text search when ``vector_index``'s Milvus collection has it, else bm25s
    over ``nodes``; the choice says why.

    Raises:
        ValueError: no full-text search in the store and no ``nodes`` to index.
    """
    from llama_index.vector_stores.milvus import MilvusVectorStore

    from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever

    store = vector_store_of(vector_index)
    if isinstance(store, MilvusVectorStore):
        support = collection_support(store.client, store.collection_name)
        if support.supported:
            return MilvusBM25Retriever(store), LexicalChoice(BACKEND_MILVUS, support.reason)
        reason = support.reason
    else:
        reason = f"the vector store is {type(store).__name__}, not Milvus"
    if nodes is None:
        raise ValueError(
            "give nodes or bm25_retriever for the BM25 leg, got neither, and the vector store "
            f"has no full-text search ({reason})"
        )
    return JiebaBM25Retriever(nodes), LexicalChoice(BACKEND_BM25S, reason)


def lexical_choice_of(legs: Sequence[BaseRetriever]) -> LexicalChoice | None:
    """The lexical backend among ``legs`` given by hand (``None`` when none is a BM25 leg)."""
    from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever

    for leg in legs:
        if isinstance(leg, MilvusBM25Retriever):
            return LexicalChoice(BACKEND_MILVUS, f"given: {leg.support.reason}")
        if isinstance(leg, JiebaBM25Retriever):
            return LexicalChoice(BACKEND_BM25S, "given: JiebaBM25Retriever")
    return None


__all__ = [
    "BACKEND_BM25S",
    "BACKEND_MILVUS",
    "LexicalChoice",
    "MilvusBM25Retriever",
    "choose_lexical_leg",
    "lexical_choice_of",
    "search_data",
]
