"""Milvus layer: one open path for Milvus Lite and the server, index presets, safe filters,
batched node fetch, clients that reconnect after a lost connection.

>>> from llama_index_ext_advrag.milvus import open_vector_store, fetch_nodes, flush
>>> store = open_vector_store("./data/milvus.db", "docs", dim=384)  # doctest: +SKIP
>>> store.add(nodes)  # doctest: +SKIP
>>> flush(store)  # doctest: +SKIP
>>> fetch_nodes(store, ["n1", "n2"])  # doctest: +SKIP

The names below are the public surface. The submodules' other names serve the pack's own
retrievers and postprocessors (the layout registry, row fetches, loop binding) and may change
without notice; a name with a leading underscore is used only inside its module.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import Deprecated, module_getattr
from llama_index_ext_advrag.milvus.connection import (
    count_rows,
    flush,
    is_server_uri,
    open_client,
)
from llama_index_ext_advrag.milvus.filters import eq_filter, in_filter
from llama_index_ext_advrag.milvus.indexes import (
    IndexPreset,
    build_index_params,
    build_search_params,
)
from llama_index_ext_advrag.milvus.limits import check_storable_nodes
from llama_index_ext_advrag.milvus.nodes import (
    afetch_nodes,
    aquery_nodes,
    fetch_nodes,
    query_nodes,
)
from llama_index_ext_advrag.milvus.reconnect import (
    AsyncReconnectingClient,
    MilvusAuthenticationError,
    MilvusConnectionError,
    ReconnectingClient,
    count_reconnects,
    process_reconnects,
)
from llama_index_ext_advrag.milvus.registry import IndexLayoutError
from llama_index_ext_advrag.milvus.vector_store import open_vector_store

__all__ = [
    "AsyncReconnectingClient",
    "IndexLayoutError",
    "IndexPreset",
    "MilvusAuthenticationError",
    "MilvusConnectionError",
    "ReconnectingClient",
    "afetch_nodes",
    "aquery_nodes",
    "build_index_params",
    "build_search_params",
    "check_storable_nodes",
    "count_reconnects",
    "count_rows",
    "eq_filter",
    "fetch_nodes",
    "flush",
    "in_filter",
    "is_server_uri",
    "open_client",
    "open_vector_store",
    "process_reconnects",
    "query_nodes",
]

# Names the docs listed here before; still readable for one release (reading one warns).
_INTERNAL = "it is internal to the pack (the retrievers' layout registry and row fetches)"
_DEPRECATED = {
    name: Deprecated(module, _INTERNAL, attribute)
    for name, module, attribute in (
        ("AsyncLoopBinding", ".vector_store", None),
        ("ensure_loaded", ".connection", None),
        ("fetch_rows", ".nodes", None),
        ("load_layout", ".registry", None),
        ("prepare_build", ".registry", None),
        ("record_layout", ".registry", None),
        ("PLACEHOLDER_DIM", ".registry", None),
        ("PLACEHOLDER_VECTOR", ".registry", None),
        ("LAYOUT_COLLECTION", ".registry", "_LAYOUT_COLLECTION"),
        ("list_layouts", ".registry", "_list_layouts"),
        ("read_layout", ".registry", "_read_layout"),
        ("write_layout", ".registry", "_write_layout"),
    )
}

__getattr__ = module_getattr(__name__, {}, _DEPRECATED)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
