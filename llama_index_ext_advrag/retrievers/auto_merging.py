"""Auto-merging retrieval whose whole hierarchy lives in Milvus, so it survives a restart.

LlamaIndex core's ``AutoMergingRetriever`` looks parents up in an in-memory docstore; with an
external vector store, or in a new process, the parents are gone (llama_index issues #7435,
#11934, #13488). Here the leaves are searched in a Milvus collection written by
``MilvusVectorStore`` (so plain LlamaIndex can query them too) and the parents are stored in a
second collection beside it; a small registry row records the layout, so
:meth:`HierarchicalAutoMergingRetriever.from_uri` reopens an index from its ``uri`` alone, on
Milvus Lite or on a Milvus server.

Collections for an index named ``name``:

* ``name``: the leaves, with their embeddings (searched);
* ``name_parents``: every non-leaf node, fetched by id, one batched query per merge round.
  Milvus needs a vector field, so parents carry a constant 2-dimensional placeholder vector
  rather than an embedding nobody searches (building stays as cheap as embedding the leaves);
* a row ``name`` in ``advrag_layouts`` (chunk sizes, embedding dimension and model name).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryResult

from llama_index_ext_advrag.events import AutoMergingEvent, ReturnedNodeRecord
from llama_index_ext_advrag.milvus import afetch_nodes, count_reconnects, fetch_nodes
from llama_index_ext_advrag.queries import clean_query_bundle, embedding_strings
from llama_index_ext_advrag.retrievers._auto_merging_store import (
    build_hierarchy_index,
    default_node_parser,
    open_hierarchy_stores,
)
from llama_index_ext_advrag.retrievers._config import settings_model
from llama_index_ext_advrag.retrievers._hierarchy import (
    LEVEL_KEY,
    Entry,
    MergeSession,
    ScoreAggregation,
    content_tokens,
)
from llama_index_ext_advrag.retrievers._milvus_base import MilvusLayoutRetriever
from llama_index_ext_advrag.text import count_tokens
from llama_index_ext_advrag.trace import add_trace, get_trace

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_COLLECTION_NAME = "advrag_auto_merging"
DEFAULT_SIMILARITY_TOP_K = 12
DEFAULT_MERGE_RATIO = 0.5
TRACE_COMPONENT = "auto_merging"


def merge_event(
    session: MergeSession, results: Sequence[NodeWithScore], query: str
) -> AutoMergingEvent:
    """The instrumentation event of one retrieval: every merge made or skipped, what returned."""
    merges: dict[str, dict[str, Any]] = {}
    skipped: list[dict[str, Any]] = []
    for entry in session.final_entries():
        merges.update((m["parent_id"], m) for m in entry.merges)
        skipped.extend(s for s in entry.skipped if s not in skipped)
    returned: list[ReturnedNodeRecord] = []
    for result in results:
        record = get_trace(result.node, TRACE_COMPONENT)
        returned.append(
            {
                "node_id": result.node.node_id,
                "merged": record["merged"],
                "leaf_ids": record["leaf_ids"],
                "level": record["level"],
                "score": result.score,
            }
        )
    return AutoMergingEvent(
        query=query,
        merges=sorted(merges.values(), key=lambda m: m["round"]),
        skipped=skipped,
        returned=returned,
        rounds=session.rounds,
    )


class HierarchicalAutoMergingRetriever(MilvusLayoutRetriever):
    """Search small chunks in Milvus, return their parents when enough siblings are hit.

    A parent replaces its retrieved children when ``children retrieved / children`` is greater
    than ``merge_ratio``; rounds repeat up the levels until nothing merges. The parent's score
    is the ``score_aggregation`` (max by default) of the scores of the nodes it replaces.
    Results come grouped by document (best document first), in reading order inside each
    document, without duplicates or overlaps. Each node carries
    ``metadata["advrag_trace"]["auto_merging"]``: the retrieved leaf ids it stands for, every
    merge that produced it (parent id, round, children retrieved / total, ratio, absorbed
    nodes, the retrieved leaves merged into it), merges refused by the token budget and
    ``milvus_reconnects`` (reconnects of its two stores so far).

    Args:
        vector_store: the leaves' ``MilvusVectorStore``.
        parent_store: the parents' ``MilvusVectorStore`` (same uri).
        embed_model: the model the leaves were embedded with; resolved when first needed
            (explicit > ``Settings.embed_model`` > packaged bge-small-en-v1.5).
        similarity_top_k, merge_ratio, score_aggregation, max_context_tokens: the query
            settings (fields, see their descriptions).
        layout: the recorded layout (set by ``from_uri``/``from_documents``).

    ``to_dict()`` is the settings with ``uri`` and ``collection_name``;
    ``from_dict(data, embed_model=...)`` reopens the index. ``with_settings(...)`` gives a copy
    on the same open collections; :meth:`close` closes their clients.

    Raises:
        ValueError: an argument is out of bounds (the message names it and its value).

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> text = "## Setup\\n\\nPlug in the cable. Press the power button. Wait for the green light. Log in."
        >>> built = HierarchicalAutoMergingRetriever.from_documents(  # e.g. chunk_sizes=[1024, 256, 64]
        ...     [Document(text=text, id_="manual")], uri="./rag.db", chunk_sizes=[64, 8],
        ...     similarity_top_k=4, embed_model=MockEmbedding(embed_dim=8))
        >>> # ... and in any later process, from the uri alone:
        >>> same = HierarchicalAutoMergingRetriever.from_uri("./rag.db", embed_model=MockEmbedding(embed_dim=8))
        >>> trace = same.retrieve("When is the light green?")[0].node.metadata["advrag_trace"]["auto_merging"]
        >>> trace["merged"], len(trace["leaf_ids"])
        (True, 4)
    """

    similarity_top_k: int = Field(
        default=DEFAULT_SIMILARITY_TOP_K,
        ge=1,
        le=16_384,
        description="Number of leaves fetched from the vector search before merging.",
    )
    merge_ratio: float = Field(
        default=DEFAULT_MERGE_RATIO,
        ge=0.0,
        lt=1.0,
        description="A parent replaces its retrieved children when their share of its children "
        "is strictly greater than this.",
    )
    score_aggregation: ScoreAggregation = Field(
        default=ScoreAggregation.MAX,
        description="How a merged parent's score is derived from the nodes it replaces: 'max' "
        "(default) or 'mean' (LlamaIndex core's choice).",
    )
    max_context_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Token budget of the returned context: a merge that would push the total "
        "past it is skipped (leaves are never dropped). None: no budget.",
    )

    def __init__(
        self,
        vector_store: Any = None,
        parent_store: Any = None,
        embed_model: BaseEmbedding | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(vector_store, parent_store, embed_model, **kwargs)

    @classmethod
    def class_name(cls) -> str:
        return "HierarchicalAutoMergingRetriever"

    @classmethod
    def _collection_from_layout(cls, layout: dict[str, Any]) -> str:
        return str(layout.get("leaf_collection", DEFAULT_COLLECTION_NAME))

    @property
    def vector_store(self) -> Any:
        """The leaves' ``MilvusVectorStore`` (usable with a plain ``VectorStoreIndex``)."""
        return self._stores[0]

    @property
    def _vector_store(self) -> Any:
        return self._stores[0]

    @property
    def _parent_store(self) -> Any:
        return self._stores[1]

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_uri(
        cls,
        uri: str,
        embed_model: BaseEmbedding | None = None,
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        collection_name: str = DEFAULT_COLLECTION_NAME,
        token: str = "",
        **options: Any,
    ) -> HierarchicalAutoMergingRetriever:
        """Open an index built by :meth:`from_documents` (in this or any earlier process).

        Raises:
            IndexLayoutError: no such index at ``uri`` (the message lists the existing ones).
        """
        options["similarity_top_k"] = similarity_top_k
        return cls._open_index(uri, collection_name, embed_model, token, options)

    @classmethod
    def _open_stores(cls, uri: str, collection_name: str, token: str) -> tuple[dict, Any, Any]:
        return open_hierarchy_stores(uri, collection_name, token)

    @classmethod
    def from_documents(
        cls,
        documents: Sequence[Document],
        uri: str,
        embed_model: BaseEmbedding | None = None,
        chunk_sizes: Sequence[int] | None = None,
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        collection_name: str = DEFAULT_COLLECTION_NAME,
        node_parser: NodeParser | None = None,
        token: str = "",
        overwrite: bool = False,
        index_preset: str = "AUTO",
        show_progress: bool = False,
        **options: Any,
    ) -> HierarchicalAutoMergingRetriever:
        """Parse ``documents`` into a chunk hierarchy, store it on ``uri``, return a retriever.

        Args:
            chunk_sizes: token sizes of the levels, largest first (ignored when ``node_parser``
                is given); default: the hierarchy parser's default.
            node_parser: any parser producing PARENT/CHILD relationships (e.g. core's
                ``HierarchicalNodeParser``); default ``HierarchicalSentenceNodeParser``.
            overwrite: replace an index of the same name; otherwise building over an existing
                one raises ``ValueError``.
            **options: query settings (``merge_ratio``...), the retriever's fields.
        """
        parser = node_parser or default_node_parser(chunk_sizes)
        nodes = parser.get_nodes_from_documents(documents, show_progress=show_progress)
        return cls.from_nodes(
            nodes,
            uri=uri,
            embed_model=embed_model,
            similarity_top_k=similarity_top_k,
            collection_name=collection_name,
            token=token,
            overwrite=overwrite,
            index_preset=index_preset,
            show_progress=show_progress,
            parser_name=parser.class_name(),
            chunk_sizes=list(getattr(parser, "chunk_sizes", None) or chunk_sizes or []),
            **options,
        )

    @classmethod
    def from_nodes(
        cls,
        nodes: Sequence[BaseNode],
        uri: str,
        embed_model: BaseEmbedding | None = None,
        similarity_top_k: int = DEFAULT_SIMILARITY_TOP_K,
        collection_name: str = DEFAULT_COLLECTION_NAME,
        token: str = "",
        overwrite: bool = False,
        index_preset: str = "AUTO",
        show_progress: bool = False,
        parser_name: str | None = None,
        chunk_sizes: Sequence[int] = (),
        **options: Any,
    ) -> HierarchicalAutoMergingRetriever:
        """Store an already parsed hierarchy (all levels, PARENT/CHILD related) and open it.

        The caller's nodes are not modified (copies are stored)."""
        options["similarity_top_k"] = similarity_top_k
        return cls._build_index(
            lambda embedder: build_hierarchy_index(
                nodes,
                uri=uri,
                collection_name=collection_name,
                embed_model=embedder,
                token=token,
                overwrite=overwrite,
                index_preset=index_preset,
                show_progress=show_progress,
                parser_name=parser_name,
                chunk_sizes=list(chunk_sizes),
            ),
            uri,
            embed_model,
            token,
            options,
        )

    # --- retrieval ----------------------------------------------------------------------------

    def _vector_query(self, embedding: list[float]) -> VectorStoreQuery:
        self._check_dimensions(embedding)
        return VectorStoreQuery(query_embedding=embedding, similarity_top_k=self.similarity_top_k)

    def _start_session(self, result: VectorStoreQueryResult) -> MergeSession:
        scores = result.similarities or []
        entries = [
            Entry(
                node=node,
                score=float(scores[i]) if i < len(scores) else 0.0,
                leaf_ids=(node.node_id,),
                tokens=content_tokens(node, count_tokens),
            )
            for i, node in enumerate(result.nodes or [])
        ]
        return MergeSession(
            entries,
            merge_ratio=self.merge_ratio,
            aggregation=self.score_aggregation,
            max_context_tokens=self.max_context_tokens,
            token_counter=count_tokens,
        )

    def _finish(self, session: MergeSession, query: str) -> list[NodeWithScore]:
        chunk_sizes = self._layout.get("chunk_sizes") or []
        reconnects = count_reconnects(self._vector_store, self._parent_store)
        results = []
        for entry in session.final_entries():
            node = entry.node  # a fresh object deserialised from Milvus: ours to annotate
            level = node.metadata.get(LEVEL_KEY)
            add_trace(
                node,
                TRACE_COMPONENT,
                {
                    "merged": bool(entry.merges),
                    "leaf_ids": list(entry.leaf_ids),
                    "merges": list(entry.merges),
                    "merge_skipped": list(entry.skipped),
                    "level": level,
                    "chunk_size": chunk_sizes[level]
                    if isinstance(level, int) and 0 <= level < len(chunk_sizes)
                    else None,
                    "tokens": entry.tokens,
                    "rounds": session.rounds,
                    "score_aggregation": self.score_aggregation.value,
                    "milvus_reconnects": reconnects,
                },
            )
            results.append(NodeWithScore(node=node, score=entry.score))
        dispatcher.event(merge_event(session, results, query))
        return results

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        embedding = query_bundle.embedding or self._embedder().get_agg_embedding_from_queries(
            embedding_strings(query_bundle, self.class_name())
        )
        result = self._vector_store.query(self._vector_query(embedding))
        session = self._start_session(result)
        while (parent_ids := session.pending_parent_ids()) is not None:
            session.advance(fetch_nodes(self._parent_store, parent_ids) if parent_ids else {})
        return self._finish(session, query_bundle.query_str)

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        self._loop_binding.bind(self._vector_store, self._parent_store)
        embedding = query_bundle.embedding or (
            await self._embedder().aget_agg_embedding_from_queries(
                embedding_strings(query_bundle, self.class_name())
            )
        )
        result = await self._vector_store.aquery(self._vector_query(embedding))
        session = self._start_session(result)
        while (parent_ids := session.pending_parent_ids()) is not None:
            session.advance(
                await afetch_nodes(self._parent_store, parent_ids) if parent_ids else {}
            )
        return self._finish(session, query_bundle.query_str)


# Deprecated: the settings of earlier versions' ``config`` attribute (now fields).
AutoMergingConfig = settings_model(HierarchicalAutoMergingRetriever, "AutoMergingConfig")

__all__ = [
    "DEFAULT_COLLECTION_NAME",
    "AutoMergingConfig",
    "HierarchicalAutoMergingRetriever",
    "ScoreAggregation",
]
