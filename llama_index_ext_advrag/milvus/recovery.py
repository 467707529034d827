"""What a reconnecting Milvus client does with a call that failed on its connection.

The rules of :mod:`~llama_index_ext_advrag.milvus.reconnect`, as pure functions: which errors
mean the connection failed (:func:`is_connection_error`), how each client method is finished
after a reconnect (:data:`RECOVERY_BY_OPERATION`), how an ``insert`` is checked instead of
repeated (:func:`plan_insert_check`), and the client options for Milvus Lite
(:data:`LITE_GRPC_OPTIONS`).
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import grpc
from pymilvus.exceptions import MilvusException

from llama_index_ext_advrag.milvus.nodes import plan_fetch

logger = logging.getLogger(__name__)

# Milvus Lite's gRPC server keeps gRPC's defaults: no pings without a call in flight and at
# most one per 5 minutes, else GOAWAY "too_many_pings" after two strikes. pymilvus 2.6 pings
# every 10 s even when idle. Ping only during calls, and no more often than the server allows.
LITE_GRPC_OPTIONS: Mapping[str, Any] = {
    "grpc.keepalive_time_ms": 330_000,
    "grpc.keepalive_timeout_ms": 20_000,
    "grpc.keepalive_permit_without_calls": 0,
}
DEFAULT_RECONNECT_TIMEOUT = 30.0
CHECK_BATCH_SIZE = 1_000
LITE_SUFFIX = ".db"
STRONG = {"consistency_level": "Strong"}

# Text of the connection failures pymilvus and grpc raise (checked case-insensitively).
CONNECTION_ERROR_MARKERS = (
    "fail connecting to server",
    "server unavailable",
    "too_many_pings",
    "goaway",
    "closed channel",
    "channel is closed",
    "channel closed",
    "failed to connect to all addresses",
    "connection refused",
    "connection reset",
    "socket closed",
    "should create connection first",
    "event loop is closed",
    "statuscode.unavailable",
)
_CONNECT_FAILED = 2  # pymilvus Status.CONNECT_FAILED
_NOT_LOADED = 101  # Milvus CollectionNotLoaded


class MilvusConnectionError(ConnectionError):
    """A Milvus call failed again after one reconnect (or was not safe to repeat).

    Example:
        >>> error = MilvusConnectionError("./rag.db", "search", "failed again after reconnecting")
        >>> error.uri, error.operation, isinstance(error, ConnectionError)
        ('./rag.db', 'search', True)
    """

    def __init__(self, uri: str, operation: str, reason: str) -> None:
        self.uri = uri
        self.operation = operation
        super().__init__(f"Milvus at {uri!r}: {operation} {reason}")


class MilvusAuthenticationError(MilvusConnectionError):
    """The Milvus server refused the credentials (a wrong or missing token): never retried,
    never answered from another store.

    Example:
        >>> error = MilvusAuthenticationError("http://milvus:19530", "open", "auth check failure")
        >>> "authentication refused" in str(error), isinstance(error, MilvusConnectionError)
        (True, True)
    """

    def __init__(self, uri: str, operation: str, detail: str) -> None:
        super().__init__(
            uri,
            operation,
            f"failed: authentication refused ({detail}); pass the right token "
            '("user:password" or an API key) with token=..., or --token / '
            "ADVRAG_MILVUS_TOKEN for the advrag command",
        )


class Recovery(str, Enum):
    """What a client does with a call that failed on a connection it then reopened."""

    REPEAT = "repeat"
    INSERT_MISSING = "insert_missing"
    CREATE_IF_MISSING = "create_if_missing"
    DROP_IF_PRESENT = "drop_if_present"
    NOT_REPEATED = "not_repeated"


_REPEATABLE = (
    # reads
    "search", "hybrid_search", "query", "get", "query_iterator", "search_iterator",
    "describe_collection", "describe_index", "list_indexes", "list_collections",
    "has_collection", "has_partition", "list_partitions", "get_load_state",
    "get_server_version", "get_server_type", "get_collection_stats", "get_partition_stats",
    "list_databases", "describe_database", "list_aliases", "describe_alias",
    # writes that leave the same state when repeated (upsert: the same rows again)
    "load_collection", "release_collection", "load_partitions", "release_partitions",
    "flush", "alter_collection_properties", "create_index", "delete", "upsert",
    "use_database",
    # local builders
    "create_schema", "prepare_index_params",
)  # fmt: skip
RECOVERY_BY_OPERATION: Mapping[str, Recovery] = {
    **dict.fromkeys(_REPEATABLE, Recovery.REPEAT),
    "insert": Recovery.INSERT_MISSING,
    "create_collection": Recovery.CREATE_IF_MISSING,
    "drop_collection": Recovery.DROP_IF_PRESENT,
}


# --- pure helpers ----------------------------------------------------------------------------


def authentication_detail(error: BaseException) -> str | None:
    """What the server said when ``error`` (or an error it was raised from) is a refused
    authentication (gRPC ``UNAUTHENTICATED``), else ``None``. pymilvus reports it as a
    connection failure ("Fail connecting to server ... illegal connection params")."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "code", None)
        status = code() if isinstance(current, grpc.RpcError) and callable(code) else None
        if status == grpc.StatusCode.UNAUTHENTICATED:
            details = getattr(current, "details", None)
            return str(details() if callable(details) else current)
        if "auth check failure" in str(current).lower():
            return str(current).splitlines()[0][:200]
        current = current.__cause__ or current.__context__
    return None


def is_connection_error(error: BaseException) -> bool:
    """Whether ``error`` means the connection (not the request) failed.

    ``UNAVAILABLE`` gRPC errors, pymilvus ``CONNECT_FAILED`` and the messages of a closed
    channel, a GOAWAY, a refused connection or a closed event loop count; a bad argument, a
    missing collection or a deadline the caller set do not.
    """
    if isinstance(error, MilvusConnectionError) or authentication_detail(error) is not None:
        return False
    code = getattr(error, "code", None)
    if (
        isinstance(error, grpc.RpcError)
        and callable(code)
        and code() == grpc.StatusCode.UNAVAILABLE
    ):
        return True
    if isinstance(error, MilvusException) and error.code == _CONNECT_FAILED:
        return True
    text = str(error).lower()
    return any(marker in text for marker in CONNECTION_ERROR_MARKERS)


def is_not_loaded_error(error: BaseException) -> bool:
    """Whether ``error`` says the collection is not loaded: a restarted Milvus Lite server
    reopens indexed collections released (code 101, "call load() before search")."""
    text = str(error).lower()
    return getattr(error, "code", None) == _NOT_LOADED or "call load()" in text


def recovery_for(operation: str) -> Recovery:
    """The :class:`Recovery` of a client method (unknown methods are not repeated)."""
    return RECOVERY_BY_OPERATION.get(operation, Recovery.NOT_REPEATED)


def redact_uri(uri: str) -> str:
    """``uri`` with any password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(uri)
    if not parts.password:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def is_lite_uri(uri: str) -> bool:
    """Whether pymilvus opens ``uri`` as a Milvus Lite file (its rule: a ``.db`` suffix)."""
    return uri.endswith(LITE_SUFFIX)


def client_options(uri: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The client arguments for ``uri``: on Milvus Lite, :data:`LITE_GRPC_OPTIONS` under the
    caller's own ``grpc_options``."""
    merged = dict(options)
    if is_lite_uri(uri):
        merged["grpc_options"] = {**LITE_GRPC_OPTIONS, **dict(options.get("grpc_options", {}))}
    return merged


def call_argument(args: Sequence[Any], kwargs: Mapping[str, Any], index: int, name: str) -> Any:
    """Argument ``name`` of a client call, given by position ``index`` or by keyword."""
    if name in kwargs:
        return kwargs[name]
    if index < len(args):
        return args[index]
    raise TypeError(f"client call has no {name!r} argument")


def primary_key(description: Mapping[str, Any]) -> tuple[str, bool]:
    """``(field name, auto_id)`` of the primary key in a ``describe_collection`` result."""
    for spec in description.get("fields", []):
        if spec.get("is_primary"):
            auto_id = bool(spec.get("auto_id", description.get("auto_id", False)))
            return str(spec["name"]), auto_id
    raise ValueError(f"collection {description.get('collection_name')!r} has no primary key")


@dataclass(frozen=True)
class InsertCheck:
    """An ``insert`` to finish after a reconnect: which of its rows are already stored.

    Built by :func:`plan_insert_check`; the client runs ``filters`` (``key in [...]``) with
    strong consistency, then inserts :meth:`missing` rows with the call's other arguments.
    """

    collection: str
    rows: list[Mapping[str, Any]]
    key: str
    filters: list[str]
    fields: list[str]
    extra_args: tuple[Any, ...]
    options: dict[str, Any]

    def missing(self, found: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The rows whose primary key is not among ``found``, in their order."""
        present = {row[self.key] for row in found}
        return [row for row in self.rows if row[self.key] not in present]

    def result(self) -> dict[str, Any]:
        """What ``insert`` returns for all the rows (written now or before the reconnect)."""
        return {"insert_count": len(self.rows), "ids": [row[self.key] for row in self.rows]}


def plan_insert_check(
    args: Sequence[Any], kwargs: Mapping[str, Any], description: Mapping[str, Any]
) -> InsertCheck:
    """Plan the check of an ``insert(collection_name, data, ...)`` call.

    Raises:
        ValueError: the collection generates its primary keys (``auto_id``), so rows written
            before the failure cannot be told apart.
    """
    collection = call_argument(args, kwargs, 0, "collection_name")
    data = call_argument(args, kwargs, 1, "data")
    rows = [data] if isinstance(data, Mapping) else list(data)
    key, auto_id = primary_key(description)
    if auto_id:
        raise ValueError(
            f"collection {collection!r} has an auto_id primary key: rows inserted before the "
            "connection failed cannot be found, so the insert is not repeated"
        )
    _, filters, fields = plan_fetch([row[key] for row in rows], [], key, CHECK_BATCH_SIZE)
    options = {k: v for k, v in kwargs.items() if k not in ("collection_name", "data")}
    return InsertCheck(collection, rows, key, filters, fields, tuple(args[2:]), options)


def skips_after_check(recovery: Recovery, exists: bool) -> bool:
    """Whether a create/drop is already done: created (exists) or dropped (does not)."""
    return exists == (recovery is Recovery.CREATE_IF_MISSING)


@dataclass(frozen=True)
class Call:
    """One client call a recovery asks for: ``getattr(client, operation)(*args, **kwargs)``."""

    operation: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


Steps = Generator[Call, Any, Any]


def finish_after_reconnect(
    recovery: Recovery, operation: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Steps:
    """The calls that finish ``operation`` on a reopened client, as a generator: it yields each
    :class:`Call`, is sent its result (or thrown its exception) and returns the call's result.

    The sync and async clients drive the same steps, so only the I/O differs. A collection
    reported not loaded (a restarted Lite server) is loaded and the steps run once more.
    """
    try:
        return (yield from _finish(recovery, operation, args, kwargs))
    except Exception as error:
        if not is_not_loaded_error(error):
            raise
    yield Call("load_collection", (call_argument(args, kwargs, 0, "collection_name"),))
    return (yield from _finish(recovery, operation, args, kwargs))


def _finish(
    recovery: Recovery, operation: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Steps:
    if recovery is Recovery.INSERT_MISSING:
        collection = call_argument(args, kwargs, 0, "collection_name")
        check = plan_insert_check(args, kwargs, (yield Call("describe_collection", (collection,))))
        found: list[Mapping[str, Any]] = []
        for expression in check.filters:
            query = {"filter": expression, "output_fields": check.fields, **STRONG}
            found.extend((yield Call("query", (collection,), query)))
        missing = check.missing(found)
        logger.info("insert after reconnect: %d of %d rows missing", len(missing), len(check.rows))
        if missing:
            yield Call("insert", (collection, missing, *check.extra_args), check.options)
        return check.result()
    if recovery is not Recovery.REPEAT:
        collection = call_argument(args, kwargs, 0, "collection_name")
        if skips_after_check(recovery, (yield Call("has_collection", (collection,)))):
            return None
    return (yield Call(operation, args, kwargs))


def reopen_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Client arguments for reopening: a dedicated connection (pymilvus would hand back its
    shared, broken one) with a connect timeout of :data:`DEFAULT_RECONNECT_TIMEOUT` unless
    the caller set one."""
    reopen = {**options, "dedicated": True}
    if reopen.get("timeout") is None:
        reopen["timeout"] = DEFAULT_RECONNECT_TIMEOUT
    return reopen


__all__ = [
    "CONNECTION_ERROR_MARKERS",
    "DEFAULT_RECONNECT_TIMEOUT",
    "LITE_GRPC_OPTIONS",
    "RECOVERY_BY_OPERATION",
    "Call",
    "InsertCheck",
    "MilvusAuthenticationError",
    "MilvusConnectionError",
    "Recovery",
    "authentication_detail",
    "call_argument",
    "client_options",
    "finish_after_reconnect",
    "is_connection_error",
    "is_lite_uri",
    "is_not_loaded_error",
    "plan_insert_check",
    "recovery_for",
    "redact_uri",
    "reopen_options",
    "skips_after_check",
]
