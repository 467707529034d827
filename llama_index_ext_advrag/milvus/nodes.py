"""Batched fetch of rows and LlamaIndex nodes by id: one query per batch, never per node.

Neighbour expansion, drift-aware windows and auto-merging look up many nodes by id; one
round trip per node is what makes such components slow on a server. Here ids are split
into batches of ``batch_size`` and each batch is one ``id in [...]`` query built with the
injection-safe :func:`~llama_index_ext_advrag.milvus.filters.in_filter`.

Nodes are rebuilt the way ``MilvusVectorStore`` stores them: the node JSON (text removed,
relationships and metadata kept) sits in the ``_node_content`` field, its class in
``_node_type`` and the text in the text field; ``metadata_dict_to_node`` turns them back
into a node. Rows written by something else (no ``_node_content``) become ``TextNode``\\s.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from llama_index.core.schema import BaseNode, TextNode
from llama_index.core.vector_stores.utils import metadata_dict_to_node
from llama_index.vector_stores.milvus import MilvusVectorStore
from llama_index.vector_stores.milvus.base import MILVUS_ID_FIELD
from pymilvus import AsyncMilvusClient, MilvusClient

from llama_index_ext_advrag.milvus.filters import in_filter, validate_field_name

logger = logging.getLogger(__name__)

DEFAULT_FETCH_BATCH_SIZE = 512
DEFAULT_MAX_CONCURRENT_QUERIES = 4
NODE_CONTENT_FIELD = "_node_content"
NODE_TYPE_FIELD = "_node_type"

Row = dict[str, Any]


# --- pure helpers ----------------------------------------------------------------------------


def unique_ids(ids: Iterable[Hashable]) -> list[Any]:
    """``ids`` without duplicates, first occurrence order kept."""
    return list(dict.fromkeys(ids))


def plan_fetch(
    ids: Iterable[Hashable],
    output_fields: Sequence[str],
    id_field: str = MILVUS_ID_FIELD,
    batch_size: int = DEFAULT_FETCH_BATCH_SIZE,
) -> tuple[list[Any], list[str], list[str]]:
    """Split a fetch into queries.

    Returns:
        tuple: ``(ids, filters, fields)``: the de-duplicated ids, one ``id in [...]`` filter per
            batch, and the output fields (``id_field`` added when missing).

    Raises:
        ValueError: For ``batch_size < 1`` or an invalid ``id_field``.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
    validate_field_name(id_field)
    wanted = unique_ids(ids)
    filters = [
        in_filter(id_field, wanted[start : start + batch_size])
        for start in range(0, len(wanted), batch_size)
    ]
    fields = list(dict.fromkeys([id_field, *output_fields]))
    return wanted, filters, fields


def order_rows(wanted: Sequence[Any], rows: Iterable[Row], id_field: str) -> dict[Any, Row]:
    """Index ``rows`` by ``id_field`` in the order of ``wanted``; missing ids are left out."""
    by_id = {row[id_field]: row for row in rows}
    return {key: by_id[key] for key in wanted if key in by_id}


def _row_to_node(
    row: Row,
    text_key: str = "text",
    embedding_field: str | None = "embedding",
    id_field: str = MILVUS_ID_FIELD,
    metadata_fields: Sequence[str] = (),
) -> BaseNode:
    """Rebuild a LlamaIndex node from a ``MilvusVectorStore`` row.

    Args:
        row: A query result row; it is not modified.
        text_key: Field holding the node text.
        embedding_field: Field holding the vector; ``None`` (or an absent field) leaves
            ``embedding`` unset.
        id_field: Primary-key field, used as the node id for rows without ``_node_content``.
        metadata_fields: Fields copied into the metadata of rows without ``_node_content``.
    """
    text = row.get(text_key)
    node: BaseNode
    if row.get(NODE_CONTENT_FIELD):
        node = metadata_dict_to_node(row, text=text)
    else:
        metadata = {key: row[key] for key in metadata_fields if key in row}
        node = TextNode(id_=str(row[id_field]), text=text or "", metadata=metadata)
    vector = row.get(embedding_field) if embedding_field else None
    if vector is not None:
        node.embedding = [float(value) for value in vector]
    return node


def _node_fields(vector_store: MilvusVectorStore, with_embeddings: bool) -> list[str]:
    fields = [vector_store.text_key, NODE_CONTENT_FIELD, NODE_TYPE_FIELD]
    fields.extend(vector_store.output_fields)
    if with_embeddings:
        fields.append(vector_store.embedding_field)
    return fields


def _rows_to_nodes(
    vector_store: MilvusVectorStore, rows: dict[Any, Row], with_embeddings: bool
) -> dict[str, BaseNode]:
    return {
        str(key): _row_to_node(
            row,
            text_key=vector_store.text_key,
            embedding_field=vector_store.embedding_field if with_embeddings else None,
            metadata_fields=vector_store.output_fields,
        )
        for key, row in rows.items()
    }


# --- rows ------------------------------------------------------------------------------------


def fetch_rows(
    client: MilvusClient,
    collection: str,
    ids: Iterable[Hashable],
    output_fields: Sequence[str],
    id_field: str = MILVUS_ID_FIELD,
    batch_size: int = DEFAULT_FETCH_BATCH_SIZE,
) -> dict[Any, Row]:
    """Fetch rows by primary key, one query per ``batch_size`` ids.

    Args:
        client: An open client (:func:`~llama_index_ext_advrag.milvus.open_client`).
        collection: Collection name; it must be loaded.
        ids: Primary keys (str or int); duplicates are fetched once.
        output_fields: Fields to return (``"*"`` for all); ``id_field`` is always included.
        id_field: Primary-key field name.
        batch_size: Ids per query.

    Returns:
        dict: ``id -> row`` in the order of ``ids``; ids with no row are absent.

    Example:
        >>> rows = fetch_rows(client, "docs", ["n1", "n2"], ["text", "page"])  # doctest: +SKIP
        >>> rows["n1"]["page"]  # doctest: +SKIP
        3
    """
    wanted, filters, fields = plan_fetch(ids, output_fields, id_field, batch_size)
    rows: list[Row] = []
    for expression in filters:
        rows.extend(
            client.query(collection_name=collection, filter=expression, output_fields=fields)
        )
    logger.debug("fetched %d of %d rows in %d queries", len(rows), len(wanted), len(filters))
    return order_rows(wanted, rows, id_field)


async def afetch_rows(
    client: AsyncMilvusClient,
    collection: str,
    ids: Iterable[Hashable],
    output_fields: Sequence[str],
    id_field: str = MILVUS_ID_FIELD,
    batch_size: int = DEFAULT_FETCH_BATCH_SIZE,
    max_concurrent_queries: int = DEFAULT_MAX_CONCURRENT_QUERIES,
) -> dict[Any, Row]:
    """Async :func:`fetch_rows`: the batches run concurrently, at most
    ``max_concurrent_queries`` at a time."""
    if max_concurrent_queries < 1:
        raise ValueError(f"max_concurrent_queries must be >= 1, got {max_concurrent_queries!r}")
    wanted, filters, fields = plan_fetch(ids, output_fields, id_field, batch_size)
    semaphore = asyncio.Semaphore(max_concurrent_queries)

    async def run(expression: str) -> list[Row]:
        async with semaphore:
            return list(
                await client.query(
                    collection_name=collection, filter=expression, output_fields=fields
                )
            )

    batches = await asyncio.gather(*(run(expression) for expression in filters))
    return order_rows(wanted, (row for batch in batches for row in batch), id_field)


# --- nodes -----------------------------------------------------------------------------------


def fetch_nodes(
    vector_store: MilvusVectorStore,
    node_ids: Iterable[str],
    with_embeddings: bool = False,
    batch_size: int = DEFAULT_FETCH_BATCH_SIZE,
) -> dict[str, BaseNode]:
    """Fetch LlamaIndex nodes by id from a ``MilvusVectorStore``, batched.

    Text, metadata and relationships come back as they were added; vectors only with
    ``with_embeddings=True`` (they are not transferred otherwise).

    Returns:
        dict: ``node_id -> node`` in the order of ``node_ids``; unknown ids are absent.

    Example:
        >>> store = open_vector_store("./data/milvus.db", "docs", dim=384)  # doctest: +SKIP
        >>> nodes = fetch_nodes(store, ["n1", "n2"])  # doctest: +SKIP
        >>> nodes["n1"].relationships  # doctest: +SKIP
    """
    rows = fetch_rows(
        vector_store.client,
        vector_store.collection_name,
        node_ids,
        _node_fields(vector_store, with_embeddings),
        batch_size=batch_size,
    )
    return _rows_to_nodes(vector_store, rows, with_embeddings)


async def afetch_nodes(
    vector_store: MilvusVectorStore,
    node_ids: Iterable[str],
    with_embeddings: bool = False,
    batch_size: int = DEFAULT_FETCH_BATCH_SIZE,
) -> dict[str, BaseNode]:
    """Async :func:`fetch_nodes` over the store's ``AsyncMilvusClient``.

    Raises:
        ValueError: If the store was created with ``use_async_client=False``.
    """
    if vector_store.aclient is None:
        raise ValueError(
            f"vector store for collection {vector_store.collection_name!r} has no async "
            "client; create it with use_async_client=True"
        )
    rows = await afetch_rows(
        vector_store.aclient,
        vector_store.collection_name,
        node_ids,
        _node_fields(vector_store, with_embeddings),
        batch_size=batch_size,
    )
    return _rows_to_nodes(vector_store, rows, with_embeddings)


# --- nodes by filter -------------------------------------------------------------------------


def _filter_fields(vector_store: MilvusVectorStore) -> list[str]:
    return [vector_store.text_key, NODE_CONTENT_FIELD, NODE_TYPE_FIELD]


def _filtered_nodes(vector_store: MilvusVectorStore, rows: Sequence[Row]) -> list[BaseNode]:
    return [_row_to_node(row, text_key=vector_store.text_key, embedding_field=None) for row in rows]


def query_nodes(vector_store: MilvusVectorStore, expression: str, limit: int) -> list[BaseNode]:
    """All nodes of the store matching a filter built with ``eq_filter``/``in_filter``
    (at most ``limit``; without vectors)."""
    rows = vector_store.client.query(
        vector_store.collection_name,
        filter=expression,
        output_fields=_filter_fields(vector_store),
        limit=limit,
    )
    return _filtered_nodes(vector_store, rows)


async def aquery_nodes(vector_store: Any, expression: str, limit: int) -> list[BaseNode]:
    """Async :func:`query_nodes` over the store's ``AsyncMilvusClient``."""
    rows = await vector_store.aclient.query(
        vector_store.collection_name,
        filter=expression,
        output_fields=_filter_fields(vector_store),
        limit=limit,
    )
    return _filtered_nodes(vector_store, rows)


__all__ = [
    "afetch_nodes",
    "afetch_rows",
    "aquery_nodes",
    "fetch_nodes",
    "fetch_rows",
    "order_rows",
    "plan_fetch",
    "query_nodes",
]
