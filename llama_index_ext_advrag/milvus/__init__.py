"""Milvus layer: one open path for Milvus Lite and the server, index presets, safe filters,
batched node fetch, clients that reconnect after a lost connection, the layout registry of
the retrievers' indexes.

>>> from llama_index_ext_advrag.milvus import open_vector_store, fetch_nodes, flush
>>> store = open_vector_store("./data/milvus.db", "docs", dim=384)  # doctest: +SKIP
>>> store.add(nodes)  # doctest: +SKIP
>>> flush(store)  # doctest: +SKIP
>>> fetch_nodes(store, ["n1", "n2"])  # doctest: +SKIP
"""

from __future__ import annotations

from llama_index_ext_advrag.milvus.connection import (
    close_quietly,
    close_stores,
    count_rows,
    ensure_loaded,
    flush,
    is_lite_client,
    is_server_uri,
    iter_collection,
    open_client,
    resolve_uri,
    server_version,
)
from llama_index_ext_advrag.milvus.filters import (
    eq_filter,
    format_literal,
    in_filter,
    quote_string,
    validate_field_name,
)
from llama_index_ext_advrag.milvus.indexes import (
    AUTO_FLAT_MAX_ROWS,
    LITE_INDEX_TYPES,
    IndexPlan,
    IndexPreset,
    build_index_params,
    build_search_params,
    resolve_index,
)
from llama_index_ext_advrag.milvus.limits import (
    MAX_TEXT_BYTES,
    STORABLE_METADATA,
    check_storable_nodes,
    unstorable_metadata,
)
from llama_index_ext_advrag.milvus.nodes import (
    afetch_nodes,
    afetch_rows,
    aquery_nodes,
    fetch_nodes,
    fetch_rows,
    query_nodes,
    row_to_node,
)
from llama_index_ext_advrag.milvus.reconnect import (
    AsyncReconnectingClient,
    MilvusAuthenticationError,
    MilvusConnectionError,
    ReconnectingClient,
    count_reconnects,
    is_connection_error,
    process_reconnects,
)
from llama_index_ext_advrag.milvus.registry import (
    LAYOUT_COLLECTION,
    PLACEHOLDER_DIM,
    PLACEHOLDER_VECTOR,
    IndexLayoutError,
    delete_layout,
    list_layouts,
    load_layout,
    prepare_build,
    read_layout,
    record_layout,
    write_layout,
)
from llama_index_ext_advrag.milvus.vector_store import (
    AsyncLoopBinding,
    CheckedMilvusVectorStore,
    open_vector_store,
)

__all__ = [
    "AUTO_FLAT_MAX_ROWS",
    "AsyncLoopBinding",
    "AsyncReconnectingClient",
    "CheckedMilvusVectorStore",
    "IndexLayoutError",
    "IndexPlan",
    "IndexPreset",
    "LAYOUT_COLLECTION",
    "LITE_INDEX_TYPES",
    "MAX_TEXT_BYTES",
    "MilvusAuthenticationError",
    "MilvusConnectionError",
    "PLACEHOLDER_DIM",
    "PLACEHOLDER_VECTOR",
    "ReconnectingClient",
    "STORABLE_METADATA",
    "afetch_nodes",
    "afetch_rows",
    "aquery_nodes",
    "build_index_params",
    "build_search_params",
    "check_storable_nodes",
    "close_quietly",
    "close_stores",
    "count_reconnects",
    "count_rows",
    "delete_layout",
    "ensure_loaded",
    "eq_filter",
    "fetch_nodes",
    "fetch_rows",
    "flush",
    "format_literal",
    "in_filter",
    "is_connection_error",
    "is_lite_client",
    "is_server_uri",
    "iter_collection",
    "list_layouts",
    "load_layout",
    "open_client",
    "open_vector_store",
    "prepare_build",
    "process_reconnects",
    "query_nodes",
    "quote_string",
    "read_layout",
    "record_layout",
    "resolve_index",
    "resolve_uri",
    "row_to_node",
    "server_version",
    "unstorable_metadata",
    "validate_field_name",
    "write_layout",
]
