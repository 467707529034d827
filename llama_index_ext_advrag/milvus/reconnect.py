"""Milvus clients that survive a dropped connection: reopen on the same uri, retry once.

Long ingests, notebooks and quiet services meet two faults: pymilvus pings every 10 s with
no call in flight, which Milvus Lite's gRPC server punishes with a ``GOAWAY
ENHANCE_YOUR_CALM "too_many_pings"`` (milvus-lite issue 334, pymilvus issue 1796), and a
Lite server or Milvus server that stops or restarts under an open client. Either way the
next call fails with ``UNAVAILABLE`` or ``Fail connecting to server on 127.0.0.1:<port>``.

:class:`ReconnectingClient` and :class:`AsyncReconnectingClient` stand in for
``MilvusClient`` / ``AsyncMilvusClient``. When a call fails with a connection error
(:func:`~llama_index_ext_advrag.milvus.recovery.is_connection_error`) they log one warning,
reopen a dedicated client on the same uri (for Milvus Lite, restarting the file's in-process
server first when it no longer answers) and finish the call once, as
:data:`~llama_index_ext_advrag.milvus.recovery.RECOVERY_BY_OPERATION` says:

* read-only and idempotent calls (search, query, get, describe, load, flush, list, delete,
  upsert: the same rows again leave the same state) are repeated;
* ``insert`` queries the primary keys back and inserts only the rows that are missing
  (a repeated insert would duplicate rows);
* ``create_collection`` / ``drop_collection`` run again only if the collection is still
  missing / present;
* any other call is not repeated: the reconnect happens, the error says it may have run;
* a collection a restarted Lite server reopened released is loaded before the repeat.

Milvus Lite clients also get keepalive settings the Lite server accepts
(:data:`~llama_index_ext_advrag.milvus.recovery.LITE_GRPC_OPTIONS`), so an idle client is no
longer sent a GOAWAY.

pymilvus' own reports of the same failure ("Connection recovery failed", "RPC error" with
tracebacks) are folded into that one warning while the call runs
(:mod:`~llama_index_ext_advrag.milvus.pymilvus_logs`).

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
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeVar
from urllib.parse import urlsplit

from pymilvus import AsyncMilvusClient, MilvusClient

from llama_index_ext_advrag.milvus import pymilvus_logs
from llama_index_ext_advrag.milvus.lite_files import diagnose_lite_path, is_lite_open_failure
from llama_index_ext_advrag.milvus.recovery import (
    MilvusAuthenticationError,
    MilvusConnectionError,
    Recovery,
    Steps,
    authentication_detail,
    client_options,
    finish_after_reconnect,
    is_connection_error,
    is_lite_uri,
    recovery_for,
    redact_uri,
    reopen_options,
)

logger = logging.getLogger(__name__)

OpenedT = TypeVar("OpenedT")
PROBE_TIMEOUT = 2.0  # seconds to wait for a Lite server's port to accept a connection


_process_reconnects = 0
_process_lock = threading.Lock()


def _note_reconnect() -> None:
    global _process_reconnects
    with _process_lock:
        _process_reconnects += 1


def process_reconnects() -> int:
    """Reconnects of every client of this package in this process so far (a long job reports
    the difference between a reading at its start and one at its end).

    Example:
        >>> before = process_reconnects()
        >>> process_reconnects() - before
        0
    """
    return _process_reconnects


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
    pymilvus_logs.install()
    with pymilvus_logs.reconnecting_call():
        return _open_with_reconnect(uri, opener, what)


def _open_with_reconnect(
    uri: str, opener: Callable[[bool], OpenedT], what: str
) -> tuple[OpenedT, int]:
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
    _note_reconnect()
    try:
        return opener(True), 1
    except Exception as error:
        if is_connection_error(error):
            raise MilvusConnectionError(
                redact_uri(uri), what, f"failed again after reconnecting: {error}"
            ) from error
        raise


# --- clients -----------------------------------------------------------------------------------


def run_steps(steps: Steps, client: Any) -> Any:
    """Drive recovery ``steps`` with a sync client; return their result."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            call = steps.throw(error) if error is not None else steps.send(result)
        except StopIteration as stop:
            return stop.value
        try:
            result, error = getattr(client, call.operation)(*call.args, **call.kwargs), None
        except Exception as raised:
            result, error = None, raised


async def arun_steps(steps: Steps, client: Any) -> Any:
    """Drive recovery ``steps`` with an async client; return their result."""
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            call = steps.throw(error) if error is not None else steps.send(result)
        except StopIteration as stop:
            return stop.value
        try:
            result, error = await getattr(client, call.operation)(*call.args, **call.kwargs), None
        except Exception as raised:
            result, error = None, raised


if TYPE_CHECKING:  # type checkers see the full client API; at run time calls are forwarded
    _SyncBase: TypeAlias = MilvusClient
    _AsyncBase: TypeAlias = AsyncMilvusClient
else:
    _SyncBase = object
    _AsyncBase = object


class _Reconnecting:
    """State and messages shared by the sync and async clients."""

    def _init_state(self, uri: str, token: str, options: Mapping[str, Any]) -> None:
        pymilvus_logs.install()
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

    Args:
        uri: A resolved uri (Lite ``*.db`` path or server URL).
        token: Server credentials, if any.
        client: An open ``MilvusClient`` on ``uri`` to wrap; opened here when ``None``.
        **options: ``MilvusClient`` arguments, reused when reopening (``grpc_options`` merge over
            :data:`~llama_index_ext_advrag.milvus.recovery.LITE_GRPC_OPTIONS` on Lite).

    Raises:
        MilvusConnectionError: If opening fails twice on the connection.
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
        with pymilvus_logs.reconnecting_call():
            return self._call_once(operation, args, kwargs)

    def _call_once(self, operation: str, args: tuple, kwargs: dict[str, Any]) -> Any:
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
            return run_steps(
                finish_after_reconnect(recovery, operation, args, kwargs), self._client
            )
        except Exception as error:
            if is_connection_error(error):
                raise self._failed(operation, error) from error
            raise

    def _reconnect(self, operation: str, error: Exception, generation: int) -> None:
        with self._lock:
            if generation != self._generation:
                return  # another thread reconnected already
            self.reconnect_count += 1
            _note_reconnect()
            self._warn(operation, error)
            with contextlib.suppress(Exception):
                self._client.close()
            try:
                _prepare_reopen(self.uri)
                self._client = self._open(reopening=True)
            except Exception as reopen_error:
                raise self._failed(operation, reopen_error) from reopen_error
            self._generation += 1


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
        with pymilvus_logs.reconnecting_call():
            return await self._call_once(operation, args, kwargs)

    async def _call_once(self, operation: str, args: tuple, kwargs: dict[str, Any]) -> Any:
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
            steps = finish_after_reconnect(recovery, operation, args, kwargs)
            return await arun_steps(steps, self._client)
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
            _note_reconnect()
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


__all__ = [
    "AsyncReconnectingClient",
    "MilvusAuthenticationError",
    "MilvusConnectionError",
    "ReconnectingClient",
    "arun_steps",
    "count_reconnects",
    "process_reconnects",
    "open_with_reconnect",
    "restart_lite_server_if_down",
    "run_steps",
]
