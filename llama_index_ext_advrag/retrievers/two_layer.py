"""Two-layer retrieval for naturally layered data: a summary collection routes, a details
collection answers.

For the sheets of a workbook, the sections of a manual or the documents of a library, one
*unit* (sheet, section, document) gets a row in ``<name>_summary`` (its name or summary,
embedded) and its content goes to ``<name>_details`` (a table as one whole Markdown text,
since rows embedded one by one lose the table's meaning; a document as sentence-aligned
chunks). Both carry the same ``unit_key`` scalar field. A query searches the summaries for the
``route_top_k`` best units, then fetches (``details_mode="fetch"``) or searches
(``"search"``) only the details whose ``unit_key`` is one of them, with a filter built by
``milvus.in_filter``, so a unit name with quotes or backslashes can never widen it.

The route taken (units, scores, similarity and cue overlap) is recorded on every returned node
under ``metadata["advrag_trace"]["two_layer"]``, with ``milvus_reconnects`` (reconnects of its
two stores so far).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult

from llama_index_ext_advrag._enums import parse_enum
from llama_index_ext_advrag.configuration import checked_prompt
from llama_index_ext_advrag.events import TwoLayerRouteEvent
from llama_index_ext_advrag.milvus import aquery_nodes, count_reconnects, in_filter, query_nodes
from llama_index_ext_advrag.models import resolve_llm
from llama_index_ext_advrag.queries import clean_query_bundle, embedding_strings
from llama_index_ext_advrag.retrievers._config import settings_model
from llama_index_ext_advrag.retrievers._milvus_base import MilvusLayoutRetriever
from llama_index_ext_advrag.retrievers._routing import (
    KEY_FIELD,
    RouteHit,
    fetched_details,
    rank_routes,
    searched_details,
)
from llama_index_ext_advrag.retrievers._two_layer_store import (
    SUMMARY_PROMPT_VARIABLES,
    build_two_layer_index,
    open_two_layer_stores,
)
from llama_index_ext_advrag.retrievers._units import (
    DEFAULT_SUMMARY_ROWS,
    Unit,
    UnitGranularity,
    document_units,
    workbook_units,
)
from llama_index_ext_advrag.trace import add_trace

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_COLLECTION_NAME = "advrag_two_layer"
DEFAULT_DETAIL_CHUNK_TOKENS = 256
TRACE_COMPONENT = "two_layer"
MAX_QUERY_LIMIT = 16_384  # Milvus' cap on offset + limit


class DetailsMode(str, Enum):
    """How the details of the routed units are obtained."""

    FETCH = "fetch"  # every detail row of the routed units (tables: the whole table)
    SEARCH = "search"  # vector search restricted to the routed units' detail rows


class TwoLayerMilvusRetriever(MilvusLayoutRetriever):
    """Route a query to the best units through their summaries, answer from their details.

    Args:
        summary_store: ``MilvusVectorStore`` of the summaries.
        details_store: ``MilvusVectorStore`` of the details (same uri).
        embed_model: the model both were embedded with; resolved when first needed.
        route_top_k, details_mode, details_top_k, route_candidates, cue_weight: the query
            settings (fields, see their descriptions).
        layout: the recorded layout (set by the builders and ``from_uri``).

    ``to_dict()`` is the settings with ``uri`` and ``collection_name``;
    ``from_dict(data, embed_model=...)`` reopens the index. ``with_settings(...)`` gives a copy
    on the same open collections; :meth:`close` closes their clients.

    Raises:
        ValueError: an argument is out of bounds (the message names it and its value).

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> docs = [Document(text="Sales in 2022 were 10 units.", metadata={"title": "Sales 2022"}, id_="a"),
        ...         Document(text="Sales in 2023 were 12 units.", metadata={"title": "Sales 2023"}, id_="b")]
        >>> retriever = TwoLayerMilvusRetriever.from_documents(  # or .from_excel("tables.xlsx", uri=...)
        ...     docs, uri="./units.db", embed_model=MockEmbedding(embed_dim=8), route_top_k=1)
        >>> hit = retriever.retrieve("How many units were sold in 2023?")[0]
        >>> hit.node.text, hit.node.metadata["advrag_trace"]["two_layer"]["route"][0]["unit_name"]
        ('Sales in 2023 were 12 units.', 'Sales 2023')
    """

    route_top_k: int = Field(default=2, ge=1, le=1024, description="Units routed to per query.")
    details_mode: DetailsMode | None = Field(
        default=None,
        description="'fetch' or 'search'; None uses the builder's choice recorded in the "
        "layout (fetch for workbooks, search for documents).",
    )
    details_top_k: int = Field(
        default=4, ge=1, le=MAX_QUERY_LIMIT, description="Detail rows returned in search mode."
    )
    route_candidates: int = Field(
        default=16,
        ge=1,
        le=MAX_QUERY_LIMIT,
        description="Summary hits re-ranked with the cue overlap before keeping route_top_k.",
    )
    cue_weight: float = Field(
        default=0.3,
        ge=0.0,
        le=10.0,
        description="Weight of the overlap between the query's entity/number cues and a unit "
        "name's, added to the summary similarity; 0 routes on the embedding alone.",
    )
    top_k_setting: ClassVar[str | None] = "details_top_k"

    def __init__(
        self,
        summary_store: Any = None,
        details_store: Any = None,
        embed_model: BaseEmbedding | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(summary_store, details_store, embed_model, **kwargs)
        if self.details_mode is None and "details_mode" in self._layout:
            self.details_mode = DetailsMode(self._layout["details_mode"])  # the builder's choice

    @classmethod
    def class_name(cls) -> str:
        return "TwoLayerMilvusRetriever"

    @classmethod
    def _collection_from_layout(cls, layout: dict[str, Any]) -> str:
        name = str(layout.get("summary_collection", "")).removesuffix("_summary")
        return name or DEFAULT_COLLECTION_NAME

    @property
    def _summary_store(self) -> Any:
        return self._stores[0]

    @property
    def _details_store(self) -> Any:
        return self._stores[1]

    def _mode(self) -> DetailsMode:
        return self.details_mode or DetailsMode(self._layout.get("details_mode", "fetch"))

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_uri(
        cls,
        uri: str,
        embed_model: BaseEmbedding | None = None,
        collection_name: str = DEFAULT_COLLECTION_NAME,
        token: str = "",
        **options: Any,
    ) -> TwoLayerMilvusRetriever:
        """Open an index built by :meth:`from_excel` or :meth:`from_documents`.

        Raises:
            IndexLayoutError: no such index at ``uri`` (the message lists the existing ones).
        """
        return cls._open_index(uri, collection_name, embed_model, token, options)

    @classmethod
    def _open_stores(cls, uri: str, collection_name: str, token: str) -> tuple[dict, Any, Any]:
        return open_two_layer_stores(uri, collection_name, token)

    @classmethod
    def from_units(
        cls,
        units: Sequence[Unit],
        uri: str,
        embed_model: BaseEmbedding | None = None,
        llm: LLM | None = None,
        collection_name: str = DEFAULT_COLLECTION_NAME,
        token: str = "",
        overwrite: bool = False,
        index_preset: str = "AUTO",
        default_details_mode: DetailsMode | str = DetailsMode.FETCH,
        source: str = "units",
        show_progress: bool = False,
        summary_prompt: str | BasePromptTemplate | None = None,
        **options: Any,
    ) -> TwoLayerMilvusRetriever:
        """Store prepared units and open them (the builders below prepare the units).

        ``summary_prompt`` replaces the prompt the LLM writes each unit's summary with (a
        template or string with the variables ``kind``, ``name`` and ``content``; the
        default is ``SUMMARY_PROMPT`` of ``retrievers._two_layer_store``); it is checked before
        anything is opened."""
        details_mode = parse_enum(DetailsMode, default_details_mode, "default_details_mode")
        template = (
            None
            if summary_prompt is None
            else checked_prompt(summary_prompt, "summary_prompt", SUMMARY_PROMPT_VARIABLES)
        )
        return cls._build_index(
            lambda embedder: build_two_layer_index(
                units,
                uri=uri,
                collection_name=collection_name,
                embed_model=embedder,
                llm=resolve_llm(llm),
                token=token,
                overwrite=overwrite,
                index_preset=index_preset,
                details_mode=details_mode.value,
                source=source,
                show_progress=show_progress,
                summary_prompt=template,
            ),
            uri,
            embed_model,
            token,
            options,
        )

    @classmethod
    def from_excel(
        cls,
        path: str | Path,
        uri: str,
        embed_model: BaseEmbedding | None = None,
        llm: LLM | None = None,
        summary_rows: int = DEFAULT_SUMMARY_ROWS,
        **kwargs: Any,
    ) -> TwoLayerMilvusRetriever:
        """One unit per sheet (any sheet name, e.g. "2023年10大首富"); details fetched whole.

        Without an LLM the summary is the sheet name, the years it mentions, the columns and
        the first ``summary_rows`` rows; with one (explicit or ``Settings.llm``), an LLM
        summary is appended."""
        if not Path(path).is_file():
            raise FileNotFoundError(f"workbook {path} not found")
        units = workbook_units(path, summary_rows=summary_rows)
        kwargs.setdefault("default_details_mode", DetailsMode.FETCH)
        return cls.from_units(
            units,
            uri,
            embed_model=embed_model,
            llm=llm,
            source=f"excel:{Path(path).name}",
            **kwargs,
        )

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[BaseNode],
        uri: str,
        embed_model: BaseEmbedding | None = None,
        llm: LLM | None = None,
        granularity: UnitGranularity | str = UnitGranularity.DOCUMENT,
        detail_chunk_tokens: int = DEFAULT_DETAIL_CHUNK_TOKENS,
        **kwargs: Any,
    ) -> TwoLayerMilvusRetriever:
        """One unit per document or per section; details are sentence-aligned chunks of at most
        ``detail_chunk_tokens`` tokens, searched within the routed units by default.

        Summaries come from the LLM (explicit or ``Settings.llm``) when there is one, otherwise
        from the title and the leading sentences."""
        if detail_chunk_tokens < 1:
            raise ValueError(f"detail_chunk_tokens must be >= 1, got {detail_chunk_tokens}")
        units = document_units(documents, UnitGranularity(granularity), detail_chunk_tokens)
        kwargs.setdefault("default_details_mode", DetailsMode.SEARCH)
        return cls.from_units(
            units, uri, embed_model=embed_model, llm=llm, source="documents", **kwargs
        )

    # --- retrieval ----------------------------------------------------------------------------

    def _summary_query(self, embedding: list[float]) -> VectorStoreQuery:
        self._check_dimensions(embedding)
        top_k = self.route_top_k
        if self.cue_weight > 0:
            top_k = max(top_k, self.route_candidates)
        return VectorStoreQuery(query_embedding=embedding, similarity_top_k=top_k)

    def _route(self, query: str, result: VectorStoreQueryResult) -> list[RouteHit]:
        route = rank_routes(
            result.nodes or [],
            result.similarities or [],
            query,
            self.route_top_k,
            self.cue_weight,
        )
        dispatcher.event(
            TwoLayerRouteEvent(
                query=query,
                route=[hit.as_trace() for hit in route],
                details_mode=self._mode().value,
            )
        )
        return route

    def _details_request(self, route: list[RouteHit], embedding: list[float]) -> dict[str, Any]:
        expression = in_filter(KEY_FIELD, [hit.unit_key for hit in route])
        if self._mode() is DetailsMode.SEARCH:
            query = VectorStoreQuery(query_embedding=embedding, similarity_top_k=self.details_top_k)
            return {"query": query, "string_expr": expression}
        limit = min(MAX_QUERY_LIMIT, len(route) * int(self._layout.get("max_parts", 1) or 1))
        return {"expression": expression, "limit": limit}

    def _finish(
        self, route: list[RouteHit], nodes: Sequence[BaseNode], similarities: Sequence[float]
    ) -> list[NodeWithScore]:
        mode = self._mode()
        if mode is DetailsMode.SEARCH:
            results = searched_details(route, nodes, similarities)
        else:
            results = fetched_details(route, nodes)
        rank = {hit.unit_key: i for i, hit in enumerate(route)}
        route_trace = [hit.as_trace() for hit in route]
        reconnects = count_reconnects(self._summary_store, self._details_store)
        for result in results:  # nodes deserialised from Milvus for this query: ours
            key = result.node.metadata.get(KEY_FIELD)
            add_trace(
                result.node,
                TRACE_COMPONENT,
                {
                    "route": route_trace,
                    "unit_key": key,
                    "route_rank": rank.get(str(key)),
                    "details_mode": mode.value,
                    "milvus_reconnects": reconnects,
                },
            )
        return results

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        embedding = query_bundle.embedding or self._embedder().get_agg_embedding_from_queries(
            embedding_strings(query_bundle, self.class_name())
        )
        summary = self._summary_store.query(self._summary_query(embedding))
        route = self._route(query_bundle.query_str, summary)
        if not route:
            return []
        request = self._details_request(route, embedding)
        if "query" in request:
            found = self._details_store.query(request["query"], string_expr=request["string_expr"])
            return self._finish(route, found.nodes or [], found.similarities or [])
        nodes = query_nodes(self._details_store, request["expression"], request["limit"])
        return self._finish(route, nodes, [])

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        self._loop_binding.bind(self._summary_store, self._details_store)
        embedding = query_bundle.embedding or (
            await self._embedder().aget_agg_embedding_from_queries(
                embedding_strings(query_bundle, self.class_name())
            )
        )
        summary = await self._summary_store.aquery(self._summary_query(embedding))
        route = self._route(query_bundle.query_str, summary)
        if not route:
            return []
        request = self._details_request(route, embedding)
        if "query" in request:
            found = await self._details_store.aquery(
                request["query"], string_expr=request["string_expr"]
            )
            return self._finish(route, found.nodes or [], found.similarities or [])
        nodes = await aquery_nodes(self._details_store, request["expression"], request["limit"])
        return self._finish(route, nodes, [])


# Deprecated: the settings of earlier versions' ``config`` attribute (now fields).
TwoLayerConfig = settings_model(TwoLayerMilvusRetriever, "TwoLayerConfig")

__all__ = ["DEFAULT_COLLECTION_NAME", "DetailsMode", "TwoLayerConfig", "TwoLayerMilvusRetriever"]
