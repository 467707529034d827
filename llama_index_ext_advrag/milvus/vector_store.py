"""A ``MilvusVectorStore`` configured the same way for Milvus Lite and the Milvus 2.3 server.

What :func:`open_vector_store` settles so callers do not have to:

* the uri goes through :func:`~llama_index_ext_advrag.milvus.connection.resolve_uri` (Lite
  folder created, empty uri rejected);
* the dense index comes from an :class:`~llama_index_ext_advrag.milvus.indexes.IndexPreset`
  and search parameters match it; an existing collection keeps its index, and its search
  parameters are read back from it;
* the collection is loaded on open, so a store reopened after a restart can query;
* its sync and async clients reconnect after a lost connection (a stopped Lite server, a
  restarted server, a GOAWAY) and Lite clients use keepalive settings the Lite server
  accepts: see :mod:`~llama_index_ext_advrag.milvus.reconnect`;
* options the 2.3 server cannot serve are refused up front: sparse vectors need 2.4 and
  the BM25 function 2.5 (on 2.3 the collection would be created and the index then fail).
  ``full_text="auto"`` turns itself off there (logged): the hybrid retriever then uses
  bm25s. Dynamic fields (where ``MilvusVectorStore`` keeps ``_node_content`` and metadata)
  and the ``Session`` consistency level work on both backends and are kept;
* ``add``/``async_add`` refuse, before anything is written, a node Milvus would refuse,
  change or lose (:func:`~llama_index_ext_advrag.milvus.limits.check_storable_nodes`: text
  too long, metadata that would not come back as it went in), naming the node and the key;
* ``full_text=`` gives a new collection Milvus' own BM25 (full-text search, see
  :mod:`~llama_index_ext_advrag.milvus.full_text`) where the backend has it; with the
  ``pack`` analyzer ``add`` also writes each node's terms.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Iterable, Sequence
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode
from llama_index.core.utils import iter_batch
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from llama_index.vector_stores.milvus import MilvusVectorStore
from llama_index.vector_stores.milvus.base import MILVUS_ID_FIELD
from pymilvus import MilvusClient

from llama_index_ext_advrag._enums import parse_enum
from llama_index_ext_advrag.milvus.connection import (
    ensure_loaded,
    is_server_uri,
    open_client,
    resolve_uri,
    server_version,
)
from llama_index_ext_advrag.milvus.full_text import (
    TERMS_FIELD,
    FullTextAnalyzer,
    FullTextSupport,
    backend_support,
    lite_support,
    resolve_analyzer,
    store_options,
)
from llama_index_ext_advrag.milvus.indexes import (
    DEFAULT_METRIC,
    IndexPlan,
    IndexPreset,
    parse_preset,
    plan_from_description,
    resolve_index,
)
from llama_index_ext_advrag.milvus.limits import (
    DYNAMIC_FIELD,
    MAX_TEXT_BYTES,
    check_storable_nodes,
)
from llama_index_ext_advrag.milvus.reconnect import (
    AsyncReconnectingClient,
    ReconnectingClient,
    client_options,
    open_with_reconnect,
    reopen_options,
)

logger = logging.getLogger(__name__)

SPARSE_MIN_SERVER_VERSION = (2, 4, 0)
BM25_MIN_SERVER_VERSION = (2, 5, 0)
# Arguments open_vector_store sets itself; passing them in **kwargs would be ambiguous.
_OWNED_ARGUMENTS = (
    "uri",
    "token",
    "collection_name",
    "dim",
    "overwrite",
    "index_config",
    "similarity_metric",
)
# Arguments full_text= sets; passing them too would be ambiguous.
_FULL_TEXT_ARGUMENTS = ("enable_sparse", "sparse_embedding_function", "sparse_embedding_field")


class CheckedMilvusVectorStore(MilvusVectorStore):
    """``MilvusVectorStore`` whose ``add``/``async_add`` check the nodes first.

    What :func:`open_vector_store` returns. A node whose text or metadata Milvus would refuse,
    change or lose raises ``ValueError`` naming it (see
    :func:`~llama_index_ext_advrag.milvus.limits.check_storable_nodes`) and no row of that
    call is written; so does a node with a metadata key Milvus would refuse the row for
    (:meth:`reserved_metadata_keys`). In a collection with the ``pack`` full-text
    analyzer each row also gets the node's terms (:func:`terms_of`) in ``advrag_terms``, which
    Milvus' BM25 function reads.
    """

    _fields: tuple[frozenset[str], frozenset[str]] | None = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "MilvusVectorStore"

    def _described(self) -> tuple[frozenset[str], frozenset[str]]:
        """The collection's field names and its functions' output fields (read once, kept)."""
        if self._fields is None:
            description = self.client.describe_collection(self.collection_name)
            names = frozenset(str(field.get("name")) for field in description.get("fields", []))
            outputs = frozenset(
                str(name)
                for function in description.get("functions") or []
                for name in function.get("output_field_names") or []
            )
            self._fields = (names, outputs)
        return self._fields

    def writes_terms(self) -> bool:
        """Whether the collection has the ``advrag_terms`` field (read once, then kept)."""
        return TERMS_FIELD in self._described()[0]

    def reserved_metadata_keys(self) -> frozenset[str]:
        """Metadata keys Milvus refuses a row for: its dynamic field ``$meta`` and the output
        fields of the collection's functions (``sparse_embedding`` of a full-text collection,
        which the BM25 function fills). A key named like another field (``id``, ``text``...)
        is stored and comes back: the row's field is written after it."""
        return self._described()[1] | {DYNAMIC_FIELD}

    def terms_rows(self, nodes: Sequence[BaseNode]) -> list[dict[str, Any]]:
        """The rows ``MilvusVectorStore.add`` writes, each with the node's terms too.

        Raises:
            ValueError: a node's terms exceed Milvus' VARCHAR limit (names the node).
        """
        rows = []
        for node, terms in zip(nodes, terms_of(nodes), strict=True):
            row = node_to_metadata_dict(node, remove_text=True, text_field=self.text_key)
            row[self.text_key] = node.model_dump()[self.text_key]
            row[MILVUS_ID_FIELD] = node.node_id
            if self.enable_dense:
                row[self.embedding_field] = node.embedding
            row[TERMS_FIELD] = terms
            rows.append(row)
        return rows

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        check_storable_nodes(nodes, reserved_keys=self.reserved_metadata_keys())
        if not self.writes_terms():
            return super().add(list(nodes), **add_kwargs)
        write = self.client.upsert if self.upsert_mode else self.client.insert
        for batch in iter_batch(self.terms_rows(nodes), self.batch_size):
            write(
                self.collection_name, batch, partition_name=add_kwargs.get("milvus_partition_name")
            )
        if add_kwargs.get("force_flush", False):
            self.client.flush(self.collection_name)
        return [node.node_id for node in nodes]

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        check_storable_nodes(nodes, reserved_keys=self.reserved_metadata_keys())
        if not self.writes_terms():
            return await super().async_add(list(nodes), **kwargs)
        aclient = self.aclient
        if aclient is None:
            raise ValueError(
                "async_add needs the store's async client; open it with use_async_client=True "
                "(the default)"
            )
        write = aclient.upsert if self.upsert_mode else aclient.insert
        for batch in iter_batch(self.terms_rows(nodes), self.batch_size):
            await write(
                self.collection_name, batch, partition_name=kwargs.get("milvus_partition_name")
            )
        return [node.node_id for node in nodes]


def terms_of(nodes: Sequence[BaseNode]) -> list[str]:
    """Each node's text as the pack's BM25 terms (WordTokenizer), space-separated: what the
    ``pack`` analyzer stores and what its queries are turned into.

    Raises:
        ValueError: the terms of a node exceed Milvus' VARCHAR limit (names the node and size).
    """
    from llama_index_ext_advrag.text.words import WordTokenizer

    tokenizer = WordTokenizer()
    texts = [node.get_content(metadata_mode=MetadataMode.NONE) for node in nodes]
    joined = [" ".join(terms) for terms in tokenizer.tokenize_many(texts)]
    for node, terms in zip(nodes, joined, strict=True):
        size = len(terms.encode("utf-8"))
        if size > MAX_TEXT_BYTES:
            raise ValueError(
                f"node {node.node_id!r}: its BM25 terms take {size} bytes, Milvus stores at most "
                f"{MAX_TEXT_BYTES} in {TERMS_FIELD!r}; split the node or use full_text='jieba'/"
                "'standard' (no terms field)"
            )
    return joined


def check_server_features(version: tuple[int, int, int] | None, kwargs: dict[str, Any]) -> None:
    """Refuse ``MilvusVectorStore`` options the server ``version`` cannot serve.

    ``version`` is ``None`` for Milvus Lite, which supports them all.

    Raises:
        ValueError: Naming the option, the server version and the version it needs.
    """
    if version is None or not kwargs.get("enable_sparse"):
        return
    function = kwargs.get("sparse_embedding_function")
    is_bm25 = type(function).__name__ == "BM25BuiltInFunction"
    needed = BM25_MIN_SERVER_VERSION if is_bm25 else SPARSE_MIN_SERVER_VERSION
    if version < needed:
        feature = "the BM25 built-in function" if is_bm25 else "sparse vectors (enable_sparse)"
        raise ValueError(
            f"{feature} need Milvus >= {'.'.join(map(str, needed))}, the server is "
            f"{'.'.join(map(str, version))}; drop enable_sparse and use a client-side BM25 "
            "retriever instead"
        )


def full_text_options(
    uri: str,
    token: str,
    full_text: FullTextAnalyzer | str | None,
    sample_texts: Iterable[str] | None = None,
) -> tuple[dict[str, Any], FullTextSupport]:
    """The ``MilvusVectorStore`` arguments for ``full_text`` on the backend at ``uri`` (a
    resolved uri), and what decided them.

    ``None``: none. ``"auto"``: Milvus' BM25 where the backend has it (Milvus Lite, servers
    from 2.5), none elsewhere (logged; the application's BM25 leg is used there); the analyzer
    by ``sample_texts``' language. An analyzer named explicitly must be served.

    Raises:
        ValueError: an unknown analyzer, or one named explicitly on a backend without
            full-text search (names the version and the one needed).
    """
    if full_text is None:
        return {}, FullTextSupport(False, "full_text not requested")
    wanted = parse_enum(FullTextAnalyzer, full_text, "full_text")
    if is_server_uri(uri):
        probe = open_client(uri, token=token)
        try:
            support = backend_support(str(probe.get_server_version()))
        finally:
            probe.close()
    else:
        support = lite_support()
    if not support.supported:
        if wanted is FullTextAnalyzer.AUTO:
            logger.info("full-text search off: %s; use a client-side BM25 leg", support.reason)
            return {}, support
        raise ValueError(
            f"full_text={wanted.value!r}: {support.reason}; pass full_text='auto' (falls back) "
            "or None, and use JiebaBM25Retriever"
        )
    analyzer, why = resolve_analyzer(wanted, sample_texts, support)
    logger.info("full-text search on: %s, %s", support.reason, why)
    options = store_options(analyzer, lite=support.lite)
    return options, support._replace(reason=f"{support.reason}; {why}", analyzer=analyzer)


def _client_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The arguments ``MilvusVectorStore`` passes on to its ``MilvusClient``s."""
    own = inspect.signature(MilvusVectorStore.__init__).parameters
    return {key: value for key, value in kwargs.items() if key not in own}


def attach_reconnecting_clients(
    store: MilvusVectorStore, uri: str, token: str, reconnects: int = 0, **options: Any
) -> MilvusVectorStore:
    """Give ``store`` clients that reconnect by themselves (its current ones, wrapped).

    ``options`` are the client arguments reused when reopening; ``reconnects`` those already
    made while opening the store.
    """
    if not isinstance(store.client, ReconnectingClient):
        store._milvusclient = ReconnectingClient(uri, token, client=store.client, **options)
        store._milvusclient.reconnect_count = reconnects
    if store.aclient is not None and not isinstance(store.aclient, AsyncReconnectingClient):
        store._async_milvusclient = AsyncReconnectingClient(
            uri, token, client=store.aclient, **options
        )
    return store


def _existing_plan(
    client: MilvusClient, collection_name: str, embedding_field: str, preset: IndexPreset | str
) -> IndexPlan | None:
    names = client.list_indexes(collection_name, field_name=embedding_field)
    if not names:
        return None
    return plan_from_description(client.describe_index(collection_name, names[0]), preset)


def _check_dim(client: MilvusClient, collection_name: str, field_name: str, dim: int) -> None:
    fields = client.describe_collection(collection_name).get("fields", [])
    for spec in fields:
        if spec.get("name") == field_name:
            stored = int(spec.get("params", {}).get("dim", dim))
            if stored != dim:
                raise ValueError(
                    f"collection {collection_name!r} stores {stored}-dimensional vectors in "
                    f"{field_name!r}, but dim={dim} was given"
                )


def open_vector_store(
    uri: str | os.PathLike[str],
    collection_name: str,
    dim: int,
    token: str = "",
    overwrite: bool = False,
    index_preset: IndexPreset | str = IndexPreset.AUTO,
    *,
    metric: str = DEFAULT_METRIC,
    expected_rows: int | None = None,
    full_text: FullTextAnalyzer | str | None = None,
    sample_texts: Iterable[str] | None = None,
    **kwargs: Any,
) -> MilvusVectorStore:
    """Open (or create) a ``MilvusVectorStore`` that works on Milvus Lite and the server.

    Args:
        uri: Milvus Lite file (``*.db``) or server URL.
        collection_name: Collection to open or create.
        dim: Embedding dimension.
        token: Server credentials, if any.
        overwrite: Drop and recreate the collection.
        index_preset: ``AUTO``, ``FLAT``, ``IVF_FLAT``, ``HNSW`` or ``IVF_PQ`` (see
            :mod:`~llama_index_ext_advrag.milvus.indexes`); used when the index is created.
        metric: ``COSINE`` (default), ``IP`` or ``L2``.
        expected_rows: Rows the collection will hold, to size the index (``AUTO`` picks FLAT when
            unknown).
        full_text: Give a new collection Milvus' own BM25 (full-text search) for the lexical
            leg: ``"auto"`` where the backend has it (Milvus Lite, servers >= 2.5; off on 2.3,
            logged), or an analyzer (``"pack"``, ``"standard"``, ``"jieba"``) that must be
            served. ``None`` (default): no sparse field. See
            :mod:`~llama_index_ext_advrag.milvus.full_text`.
        sample_texts: Some document texts, for ``full_text="auto"`` to read the corpus language.
        **kwargs: Other ``MilvusVectorStore`` arguments (``text_key``, ``search_config``,
            ``use_async_client``, ...).

    Raises:
        ValueError: For an empty uri, a bad ``dim``/preset/metric, or options the server cannot
            serve (an explicit ``full_text`` analyzer on a server below 2.5). Later, from the store's ``add``/``async_add``: a node Milvus would refuse,
            change or lose (its text or metadata), before any row of that call is written.

    Example:
        >>> store = open_vector_store("./data/milvus.db", "docs", dim=384)  # doctest: +SKIP
        >>> store.add(nodes_with_embeddings)  # doctest: +SKIP
        >>> flush(store)  # doctest: +SKIP
        >>> index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)  # doctest: +SKIP
    """
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    owned = sorted(set(_OWNED_ARGUMENTS) & set(kwargs))
    if owned:
        raise ValueError(
            f"open_vector_store sets {', '.join(owned)} itself; use its index_preset and "
            "metric arguments instead"
        )
    if full_text is not None:
        clash = sorted(set(_FULL_TEXT_ARGUMENTS) & set(kwargs))
        if clash:
            raise ValueError(f"full_text={full_text!r} sets {', '.join(clash)} itself; pass one")
    requested = parse_preset(index_preset)
    resolved = resolve_uri(uri)
    lite = not is_server_uri(resolved)
    kwargs = kwargs | full_text_options(resolved, token, full_text, sample_texts)[0]
    if not lite and kwargs.get("enable_sparse"):
        probe = open_client(resolved, token=token)
        try:
            check_server_features(server_version(probe), kwargs)
        finally:
            probe.close()
    plan = resolve_index(requested, metric, expected_rows, dim, lite=lite)
    user_search_config = kwargs.pop("search_config", None)
    kwargs = client_options(resolved, kwargs)
    client_kwargs = _client_kwargs(kwargs)

    def build(reopening: bool) -> MilvusVectorStore:
        return CheckedMilvusVectorStore(
            uri=resolved,
            token=token,
            collection_name=collection_name,
            dim=dim,
            overwrite=overwrite,
            index_config=plan.to_vector_store_config(),
            search_config=user_search_config or plan.search_params,
            similarity_metric=plan.metric_type,
            **(kwargs | reopen_options(client_kwargs) if reopening else kwargs),
        )

    store, reconnects = open_with_reconnect(
        resolved, build, f"opening collection {collection_name!r}"
    )
    attach_reconnecting_clients(store, resolved, token, reconnects, **client_kwargs)
    ensure_loaded(store.client, collection_name)
    _check_dim(store.client, collection_name, store.embedding_field, dim)
    existing = _existing_plan(store.client, collection_name, store.embedding_field, requested)
    if existing is not None:
        if requested is not IndexPreset.AUTO and existing.index_type != plan.index_type:
            logger.warning(
                "collection %r already has a %s index; preset %s is not applied "
                "(overwrite=True rebuilds it)",
                collection_name,
                existing.index_type,
                requested.value,
            )
        if user_search_config is None:
            store.search_config = existing.search_params
    logger.debug(
        "opened vector store %r on %s (index %s, search %s)",
        collection_name,
        "Milvus Lite" if lite else "a Milvus server",
        existing.index_type if existing else plan.index_type,
        store.search_config,
    )
    return store


class AsyncLoopBinding:
    """Keep the async clients of ``MilvusVectorStore``\\ s usable across event loops.

    pymilvus' ``AsyncMilvusClient`` keeps the gRPC handler of the event loop it first ran
    on; once that loop is closed (a second ``asyncio.run``, a notebook cell, a test) every
    call fails with "Event loop is closed". :meth:`bind` gives the stores fresh async clients
    (they connect lazily) whenever it is called from a loop other than the previous one.
    """

    def __init__(self, uri: str | None, token: str = "") -> None:
        self._uri = uri
        self._token = token
        self._loop: asyncio.AbstractEventLoop | None = None

    def bind(self, *stores: Any) -> None:
        """Give ``stores`` new async clients when the running loop is not the last one seen."""
        loop = asyncio.get_running_loop()
        if loop is self._loop:
            return
        if self._loop is not None and self._uri is not None:
            uri = resolve_uri(self._uri)
            for store in stores:
                if not isinstance(store.aclient, AsyncReconnectingClient):  # those rebind
                    store._async_milvusclient = AsyncReconnectingClient(uri, self._token)
            logger.debug("rebound async Milvus clients to a new event loop")
        self._loop = loop


__all__ = [
    "AsyncLoopBinding",
    "CheckedMilvusVectorStore",
    "attach_reconnecting_clients",
    "check_server_features",
    "full_text_options",
    "open_vector_store",
    "terms_of",
]
