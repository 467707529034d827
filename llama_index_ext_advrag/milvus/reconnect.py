"""Milvus clients that survive a dropped connection: reopen on the same uri, retry once.

Long ingests, notebooks and quiet services meet two faults: pymilvus pings every 10 s with
no call in flight, which Milvus Lite's gRPC server punishes with a ``GOAWAY
ENHANCE_YOUR_CALM "too_many_pings"`` (milvus-lite issue 334, pymilvus issue 1796), and a
Lite server or Milvus server that stops or restarts under an open client. Either way the
next call fails with ``UNAVAILABLE`` or ``Fail connecting to server on 127.0.0.1:<port>``.

:class:`ReconnectingClient` and :class:`AsyncReconnectingClient` stand in for
``MilvusClient`` / ``AsyncMilvusClient``. When a call fails with a connection error
(:func:`is_connection_error`) they log one warning, reopen a dedicated client on the same
uri (for Milvus Lite, restarting the file's in-process server first when it no longer
answers) and finish the call once, as :data:`RECOVERY_BY_OPERATION` says:

* read-only and idempotent calls (search, query, get, describe, load, flush, list, delete,
  upsert: the same rows again leave the same state) are repeated;
* ``insert`` queries the primary keys back and inserts only the rows that are missing
  (a repeated insert would duplicate rows);
* ``create_collection`` / ``drop_collection`` run again only if the collection is still
  missing / present;
* any other call is not repeated: the reconnect happens, the error says it may have run.

A second failure raises :class:`MilvusConnectionError` naming the uri. Each client counts
its reconnects in ``reconnect_count``; :func:`count_reconnects` sums them for stores.

>>> client = ReconnectingClient("./data/milvus.db")  # doctest: +SKIP
>>> client.search("docs", [[0.1, 0.2]], limit=3)  # doctest: +SKIP
>>> client.reconnect_count  # doctest: +SKIP
0
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar
from urllib.parse import urlsplit, urlunsplit

import grpc
from pymilvus import AsyncMilvusClient, MilvusClient
from pymilvus.exceptions import MilvusException

from llama_index_ext_advrag.milvus.lite_files import diagnose_lite_path, is_lite_open_failure
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
PROBE_TIMEOUT = 2.0
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
OpenedT = TypeVar("OpenedT")


class MilvusConnectionError(ConnectionError):
    """A Milvus call failed again after one reconnect (or was not safe to repeat)."""

    def __init__(self, uri: str, operation: str, reason: str) -> None:
        self.uri = uri
        self.operation = operation
        super().__init__(f"Milvus at {uri!r}: {operation} {reason}")


class MilvusAuthenticationError(MilvusConnectionError):
    """The Milvus server refused the credentials (a wrong or missing token): never retried,
    never answered from another store."""

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


def count_reconnects(*targets: Any) -> int:
    """Reconnects of the given clients and vector stores (their sync and async clients).

    Objects without a counter (plain pymilvus clients, ``None``) count zero.
    """
    total = 0
    for target in targets:
        for client in (target, getattr(target, "client", None), getattr(target, "aclient", None)):
            total += int(getattr(client, "reconnect_count", 0) or 0)
    return total


# --- Milvus Lite server ------------------------------------------------------------------------


def _endpoint_answers(endpoint: str) -> bool:
    """Whether a TCP (``http://host:port``) or unix-socket endpoint accepts a connection."""
    try:
        if endpoint.startswith("unix:"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(PROBE_TIMEOUT)
                sock.connect(endpoint[len("unix:") :])
            return True
        parts = urlsplit(endpoint)
        with socket.create_connection((parts.hostname, parts.port), timeout=PROBE_TIMEOUT):
            return True
    except OSError:
        return False


def restart_lite_server_if_down(path: str) -> bool:
    """Restart the Milvus Lite server of ``path`` when it no longer accepts connections.

    milvus-lite keeps one server per file in ``server_manager_instance`` and hands its
    endpoint to every client opening that file; a stopped server stays registered, so new
    clients would connect to a dead port. Returns whether it was restarted.
    """
    from milvus_lite.server_manager import server_manager_instance

    endpoint = server_manager_instance.start_and_get_uri(path)
    if endpoint is not None and _endpoint_answers(endpoint):
        return False
    logger.info("Milvus Lite server for %s is not answering; restarting it", path)
    server_manager_instance.release_server(path)
    return server_manager_instance.start_and_get_uri(path) is not None


def _prepare_reopen(uri: str) -> None:
    if is_lite_uri(uri):
        restart_lite_server_if_down(uri)


def reopen_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """Client arguments for reopening: a dedicated connection (pymilvus would hand back its
    shared, broken one) with a connect timeout of :data:`DEFAULT_RECONNECT_TIMEOUT` unless
    the caller set one."""
    reopen = {**options, "dedicated": True}
    if reopen.get("timeout") is None:
        reopen["timeout"] = DEFAULT_RECONNECT_TIMEOUT
    return reopen


def open_with_reconnect(
    uri: str, opener: Callable[[bool], OpenedT], what: str = "open"
) -> tuple[OpenedT, int]:
    """Run ``opener(False)``; after a connection error restart a dead Lite server and run
    ``opener(True)`` (``True``: open dedicated connections) once.

    Returns ``(what opener returned, reconnects)`` with ``reconnects`` 0 or 1.

    Raises:
        MilvusConnectionError: the second attempt failed on the connection too, or Milvus
            Lite could not open the file (the message names the path and the likely cause:
            a folder that cannot be written, another process holding the file).
    """
    try:
        return opener(False), 0
    except Exception as error:
        detail = authentication_detail(error)
        if detail is not None:
            raise MilvusAuthenticationError(redact_uri(uri), what, detail) from error
        if is_lite_uri(uri) and is_lite_open_failure(error):
            raise MilvusConnectionError(
                uri, what, f"failed: Milvus Lite cannot open {uri}: {diagnose_lite_path(uri)}"
            ) from error
        if not is_connection_error(error):
            raise
        logger.warning("Milvus %s of %s failed (%s); reconnecting", what, redact_uri(uri), error)
    _prepare_reopen(uri)
    try:
        return opener(True), 1
    except Exception as error:
        if is_connection_error(error):
            raise MilvusConnectionError(
                redact_uri(uri), what, f"failed again after reconnecting: {error}"
            ) from error
        raise


# --- clients -----------------------------------------------------------------------------------

if TYPE_CHECKING:  # type checkers see the full client API; at run time calls are forwarded
    _SyncBase: TypeAlias = MilvusClient
    _AsyncBase: TypeAlias = AsyncMilvusClient
else:
    _SyncBase = object
    _AsyncBase = object


class _Reconnecting:
    """State and messages shared by the sync and async clients."""

    def _init_state(self, uri: str, token: str, options: Mapping[str, Any]) -> None:
        self.uri = uri
        self.reconnect_count = 0
        self._token = token
        self._options = client_options(uri, options)
        self._generation = 0

    def _warn(self, operation: str, error: BaseException) -> None:
        logger.warning(
            "Milvus connection to %s lost during %s (%s: %s); reconnecting (reconnect %d of "
            "this client)",
            redact_uri(self.uri),
            operation,
            type(error).__name__,
            str(error).splitlines()[0][:300] if str(error) else "",
            self.reconnect_count,
        )

    def _raise_if_refused(self, operation: str, error: BaseException) -> None:
        detail = authentication_detail(error)
        if detail is not None:
            raise MilvusAuthenticationError(redact_uri(self.uri), operation, detail) from error

    def _failed(self, operation: str, error: BaseException) -> MilvusConnectionError:
        return MilvusConnectionError(
            redact_uri(self.uri),
            operation,
            f"failed again after reconnecting ({type(error).__name__}: {error})",
        )

    def _not_repeated(self, operation: str, error: BaseException) -> MilvusConnectionError:
        return MilvusConnectionError(
            redact_uri(self.uri),
            operation,
            f"lost its connection ({error}); reconnected, but {operation} is not repeated "
            "because it may have been applied: check and call it again",
        )


class ReconnectingClient(_Reconnecting, _SyncBase):
    """A ``MilvusClient`` that reopens itself on the same uri after a connection failure.

    Parameters
    ----------
    uri:
        A resolved uri (Lite ``*.db`` path or server URL).
    token:
        Server credentials, if any.
    client:
        An open ``MilvusClient`` on ``uri`` to wrap; opened here when ``None``.
    **options:
        ``MilvusClient`` arguments, reused when reopening (``grpc_options`` merge over
        :data:`LITE_GRPC_OPTIONS` on Lite).

    Raises
    ------
    MilvusConnectionError
        If opening fails twice on the connection.
    """

    def __init__(
        self, uri: str, token: str = "", *, client: MilvusClient | None = None, **options: Any
    ) -> None:
        self._init_state(uri, token, options)
        self._lock = threading.Lock()
        self._client = client if client is not None else self._open_first()

    def _open(self, reopening: bool) -> MilvusClient:
        options = reopen_options(self._options) if reopening else self._options
        return MilvusClient(uri=self.uri, token=self._token, **options)

    def _open_first(self) -> MilvusClient:
        client, self.reconnect_count = open_with_reconnect(self.uri, self._open)
        return client

    @property
    def wrapped(self) -> MilvusClient:
        """The ``MilvusClient`` in use now (a new one after each reconnect)."""
        return self._client

    def close(self) -> None:
        self._client.close()

    def __getattr__(self, name: str) -> Any:
        if name == "_client":  # not set yet: never forward it
            raise AttributeError(name)
        attribute = getattr(self._client, name)
        if name.startswith("_") or not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            return self._call(name, args, kwargs)

        return call

    def _call(self, operation: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        generation = self._generation
        try:
            return getattr(self._client, operation)(*args, **kwargs)
        except Exception as error:
            self._raise_if_refused(operation, error)
            if not is_connection_error(error):
                raise
            self._reconnect(operation, error, generation)
            failure = error
        recovery = recovery_for(operation)
        if recovery is Recovery.NOT_REPEATED:
            raise self._not_repeated(operation, failure) from failure
        try:
            return self._recover_loaded(recovery, operation, args, kwargs)
        except Exception as error:
            if is_connection_error(error):
                raise self._failed(operation, error) from error
            raise

    def _reconnect(self, operation: str, error: Exception, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return  # another thread reconnected already
            self.reconnect_count += 1
            self._warn(operation, error)
            with contextlib.suppress(Exception):
                self._client.close()
            try:
                _prepare_reopen(self.uri)
                self._client = self._open(reopening=True)
            except Exception as reopen_error:
                raise self._failed(operation, reopen_error) from reopen_error
            self._generation += 1

    def _recover_loaded(self, recovery: Recovery, operation: str, args: tuple, kwargs: dict) -> Any:
        try:
            return self._recover(recovery, operation, args, kwargs)
        except Exception as error:
            if not is_not_loaded_error(error):
                raise
            self._client.load_collection(call_argument(args, kwargs, 0, "collection_name"))
        return self._recover(recovery, operation, args, kwargs)

    def _recover(self, recovery: Recovery, operation: str, args: tuple, kwargs: dict) -> Any:
        client = self._client
        if recovery is Recovery.INSERT_MISSING:
            return self._insert_missing(args, kwargs)
        if recovery is not Recovery.REPEAT:
            exists = client.has_collection(call_argument(args, kwargs, 0, "collection_name"))
            if skips_after_check(recovery, exists):
                return None
        return getattr(client, operation)(*args, **kwargs)

    def _insert_missing(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        client = self._client
        collection = call_argument(args, kwargs, 0, "collection_name")
        check = plan_insert_check(args, kwargs, client.describe_collection(collection))
        found = [
            row
            for expression in check.filters
            for row in client.query(
                collection, filter=expression, output_fields=check.fields, **STRONG
            )
        ]
        missing = check.missing(found)
        logger.info(
            "insert after reconnect: %d of %d rows were missing", len(missing), len(check.rows)
        )
        if missing:
            client.insert(collection, missing, *check.extra_args, **check.options)
        return check.result()


class AsyncReconnectingClient(_Reconnecting, _AsyncBase):
    """An ``AsyncMilvusClient`` that reopens itself after a connection failure, and when it
    is used from a new event loop (pymilvus binds its channel to the first loop).

    Same parameters and recoveries as :class:`ReconnectingClient`; the client connects
    lazily, so building one does no I/O.
    """

    def __init__(
        self,
        uri: str,
        token: str = "",
        *,
        client: AsyncMilvusClient | None = None,
        **options: Any,
    ) -> None:
        self._init_state(uri, token, options)
        self._client = client if client is not None else self._open(reopening=False)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None

    def _open(self, reopening: bool) -> AsyncMilvusClient:
        options = reopen_options(self._options) if reopening else self._options
        return AsyncMilvusClient(uri=self.uri, token=self._token, **options)

    @property
    def wrapped(self) -> AsyncMilvusClient:
        """The ``AsyncMilvusClient`` in use now."""
        return self._client

    async def close(self) -> None:
        await self._client.close()

    def __getattr__(self, name: str) -> Any:
        if name == "_client":
            raise AttributeError(name)
        attribute = getattr(self._client, name)
        if name.startswith("_") or not asyncio.iscoroutinefunction(attribute):
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await self._call(name, args, kwargs)

        return call

    def _bind_loop(self) -> asyncio.Lock:
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._lock is None:
            if self._loop is not None and self._loop is not loop:
                logger.debug("async Milvus client used from a new event loop; reopening it")
                self._client = self._open(reopening=True)
                self._generation += 1
            self._loop = loop
            self._lock = asyncio.Lock()
        return self._lock

    async def _call(self, operation: str, args: tuple, kwargs: dict[str, Any]) -> Any:
        lock = self._bind_loop()
        generation = self._generation
        try:
            return await getattr(self._client, operation)(*args, **kwargs)
        except Exception as error:
            self._raise_if_refused(operation, error)
            if not is_connection_error(error):
                raise
            await self._reconnect(lock, operation, error, generation)
            failure = error
        recovery = recovery_for(operation)
        if recovery is Recovery.NOT_REPEATED:
            raise self._not_repeated(operation, failure) from failure
        try:
            return await self._recover_loaded(recovery, operation, args, kwargs)
        except Exception as error:
            if is_connection_error(error):
                raise self._failed(operation, error) from error
            raise

    async def _reconnect(
        self, lock: asyncio.Lock, operation: str, error: Exception, generation: int
    ) -> None:
        async with lock:
            if generation != self._generation:
                return  # another task reconnected already
            self.reconnect_count += 1
            self._warn(operation, error)
            with contextlib.suppress(Exception):
                await self._client.close()
            try:
                if is_lite_uri(self.uri):
                    await asyncio.to_thread(restart_lite_server_if_down, self.uri)
                self._client = self._open(reopening=True)
            except Exception as reopen_error:
                raise self._failed(operation, reopen_error) from reopen_error
            self._generation += 1

    async def _recover_loaded(
        self, recovery: Recovery, operation: str, args: tuple, kwargs: dict
    ) -> Any:
        try:
            return await self._recover(recovery, operation, args, kwargs)
        except Exception as error:
            if not is_not_loaded_error(error):
                raise
            await self._client.load_collection(call_argument(args, kwargs, 0, "collection_name"))
        return await self._recover(recovery, operation, args, kwargs)

    async def _recover(self, recovery: Recovery, operation: str, args: tuple, kwargs: dict) -> Any:
        client = self._client
        if recovery is Recovery.INSERT_MISSING:
            return await self._insert_missing(args, kwargs)
        if recovery is not Recovery.REPEAT:
            exists = await client.has_collection(call_argument(args, kwargs, 0, "collection_name"))
            if skips_after_check(recovery, exists):
                return None
        return await getattr(client, operation)(*args, **kwargs)

    async def _insert_missing(self, args: tuple, kwargs: dict[str, Any]) -> Any:
        client = self._client
        collection = call_argument(args, kwargs, 0, "collection_name")
        check = plan_insert_check(args, kwargs, await client.describe_collection(collection))
        found = [
            row
            for expression in check.filters
            for row in await client.query(
                collection, filter=expression, output_fields=check.fields, **STRONG
            )
        ]
        missing = check.missing(found)
        logger.info(
            "insert after reconnect: %d of %d rows were missing", len(missing), len(check.rows)
        )
        if missing:
            await client.insert(collection, missing, *check.extra_args, **check.options)
        return check.result()
