"""The layout registry: which collections make up a retriever index recorded on a Milvus uri.

One small collection per ``uri`` (``advrag_layouts``), one row per retriever
index, keyed by the index name, holding a JSON description of its collections (names, chunk
sizes, embedding dimension and model). ``from_uri`` reads it, so reopening an index needs no
file beside the Milvus database. Milvus requires a vector field, so the rows carry a constant
2-dimensional placeholder vector; the collection is never searched.

The builders of the Milvus layout retrievers call :func:`prepare_build` first and
:func:`record_layout` last (a half-built index has no layout, so it never looks complete);
``from_uri`` calls :func:`load_layout`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from llama_index_ext_advrag.milvus.connection import ensure_loaded, open_client
from llama_index_ext_advrag.milvus.indexes import build_index_params
from llama_index_ext_advrag.milvus.nodes import fetch_rows

logger = logging.getLogger(__name__)

_LAYOUT_COLLECTION = "advrag_layouts"
LAYOUT_FORMAT = 1
PLACEHOLDER_DIM = 2
PLACEHOLDER_VECTOR = [1.0, 0.0]


class IndexLayoutError(ValueError):
    """A retriever index's layout (its collections, recorded in the uri's layout registry) is
    missing: the named index does not exist at the uri, or is of another kind.

    >>> from llama_index_ext_advrag.retrievers import HierarchicalAutoMergingRetriever
    >>> try:  # doctest: +SKIP
    ...     HierarchicalAutoMergingRetriever.from_uri("./rag.db", collection_name="missing")
    ... except IndexLayoutError as error:
    ...     print(error)  # names the index and lists those that exist at the uri
    >>> issubclass(IndexLayoutError, ValueError)
    True
    """


def _ensure_layout_collection(client: Any) -> None:
    if client.has_collection(_LAYOUT_COLLECTION):
        return
    from pymilvus import DataType

    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.VARCHAR, max_length=512, is_primary=True)
    schema.add_field("layout", DataType.VARCHAR, max_length=65_535)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=PLACEHOLDER_DIM)
    index_params = build_index_params(client, "vector", preset="FLAT", metric="L2")
    try:
        client.create_collection(_LAYOUT_COLLECTION, schema=schema, index_params=index_params)
    except Exception:  # another process created it between the check and the create
        if not client.has_collection(_LAYOUT_COLLECTION):
            raise


def _write_layout(client: Any, name: str, layout: dict[str, Any]) -> None:
    """Record (or replace) the layout of the index ``name``."""
    _ensure_layout_collection(client)
    row = {
        "id": name,
        "layout": json.dumps({"format": LAYOUT_FORMAT, **layout}, ensure_ascii=False),
        "vector": PLACEHOLDER_VECTOR,
    }
    client.upsert(_LAYOUT_COLLECTION, [row])
    client.flush(_LAYOUT_COLLECTION)


def _delete_layout(client: Any, name: str) -> None:
    """Forget the layout of the index ``name`` (its collections are left alone)."""
    if client.has_collection(_LAYOUT_COLLECTION):
        client.delete(_LAYOUT_COLLECTION, ids=[name])


def prepare_build(
    uri: str, token: str, name: str, collections: Sequence[str], overwrite: bool, opener: str
) -> None:
    """Refuse to build over existing ``collections`` unless ``overwrite``; forget the old
    layout so a half-rebuilt index never looks complete.

    Uses a dedicated connection, closed again: a shared pymilvus connection left idle while
    the build spends minutes embedding or asking an LLM gets dropped by Milvus Lite ("too many
    pings"), and pymilvus' recovery of it on the next open failed in our tests.

    Collections left by an interrupted build (they exist, but no layout was recorded for
    ``name``: the layout is written last) are rebuilt without ``overwrite``, with a warning:
    re-running the ingest repairs it and duplicates nothing (the builders recreate them).

    Raises:
        ValueError: collections of a complete index exist and ``overwrite`` is false (names
            them and ``opener``).
    """
    client = open_client(uri, token=token, dedicated=True)
    try:
        existing = [c for c in collections if client.has_collection(c)]
        if existing and not overwrite and name not in _recorded(client, name):
            logger.warning(
                "collections %s at %s have no recorded layout for %r (an interrupted build); "
                "rebuilding them",
                existing,
                uri,
                name,
            )
        elif existing and not overwrite:
            raise ValueError(
                f"collections {existing} already exist at {uri!r}; pass overwrite=True to "
                f"rebuild or open them with {opener}.from_uri"
            )
        _delete_layout(client, name)
    finally:
        client.close()


def _recorded(client: Any, name: str) -> dict[Any, dict[str, Any]]:
    """The layout row of ``name`` (an empty dict when there is none)."""
    if not client.has_collection(_LAYOUT_COLLECTION):
        return {}
    ensure_loaded(client, _LAYOUT_COLLECTION)
    return fetch_rows(client, _LAYOUT_COLLECTION, [name], ["id"])


def record_layout(uri: str, token: str, name: str, layout: dict[str, Any]) -> None:
    """Write the layout over a short-lived dedicated connection (the last step of a build)."""
    client = open_client(uri, token=token, dedicated=True)
    try:
        _write_layout(client, name, layout)
    finally:
        client.close()


def load_layout(uri: str, token: str, name: str, component: str) -> dict[str, Any]:
    """:func:`_read_layout` over a short-lived dedicated connection."""
    client = open_client(uri, token=token, dedicated=True)
    try:
        return _read_layout(client, name, component)
    finally:
        client.close()


def _read_layout(client: Any, name: str, component: str) -> dict[str, Any]:
    """Return the layout of the index ``name`` built by ``component``.

    Raises:
        IndexLayoutError: no such index at this uri (the message lists the ones that exist), or
            it was built by another component.
    """
    rows: dict[Any, dict[str, Any]] = {}
    if client.has_collection(_LAYOUT_COLLECTION):
        ensure_loaded(client, _LAYOUT_COLLECTION)
        rows = fetch_rows(client, _LAYOUT_COLLECTION, [name], ["layout"])
    if name not in rows:
        raise IndexLayoutError(
            f"no index named {name!r} at this uri; indexes recorded there: "
            f"{_list_layouts(client) or 'none'}"
        )
    layout = json.loads(rows[name]["layout"])
    if layout.get("component") != component:
        raise IndexLayoutError(
            f"index {name!r} was built by {layout.get('component')!r}, not {component!r}"
        )
    return dict(layout)


def _list_layouts(client: Any) -> list[str]:
    """Names of the indexes recorded at this uri."""
    if not client.has_collection(_LAYOUT_COLLECTION):
        return []
    ensure_loaded(client, _LAYOUT_COLLECTION)
    rows = client.query(_LAYOUT_COLLECTION, filter='id != ""', output_fields=["id"], limit=16_384)
    return sorted(str(row["id"]) for row in rows)


__all__ = [
    "PLACEHOLDER_DIM",
    "PLACEHOLDER_VECTOR",
    "IndexLayoutError",
    "load_layout",
    "prepare_build",
    "record_layout",
]
