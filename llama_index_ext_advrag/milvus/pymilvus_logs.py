"""pymilvus' own reports of a lost connection, folded into the reconnecting client's warning.

pymilvus (2.6.12 and later) tries to recover a channel itself when a call fails with
``UNAVAILABLE``; against a stopped Milvus Lite server that recovery fails, and pymilvus logs
"Connection recovery failed" and "RPC error: [search] ... Fail connecting to server" with full
tracebacks on its own stderr handler, then raises. The pack's reconnecting clients catch that
error, log one warning of their own, reopen and finish the call, so a user saw several
tracebacks for a call that succeeded.

While a call of a :class:`~llama_index_ext_advrag.milvus.reconnect.ReconnectingClient` (or
its async twin) runs, :class:`FoldConnectionNoise` drops pymilvus' records about connection
failures and about a collection a restarted Lite server reopened released (the recovery
loads it), and logs each as one DEBUG line on this module's logger instead: nothing is lost,
``-v``-style DEBUG logging shows them. Records outside such a call, and every other pymilvus
record, pass unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from contextvars import ContextVar

logger = logging.getLogger(__name__)

# pymilvus loggers whose records are emitted while a call fails and is recovered; filters on
# a logger see only the records logged to that logger, so each one gets the filter.
PYMILVUS_LOGGERS = (
    "pymilvus.client.connection_manager",
    "pymilvus.decorators",
    "pymilvus.client.grpc_handler",
    "pymilvus.client.async_grpc_handler",
)
# Text of the records that the reconnecting client's warning and recovery already cover.
FOLDED_MARKERS = (
    "connection recovery failed",
    "fail connecting to server",
    "failed to connect to all addresses",
    "server unavailable",
    "statuscode.unavailable",
    "channel is closed",
    "closed channel",
    "call load() before",  # a Lite server restarted: the recovery loads the collection
)

_inside_call: ContextVar[bool] = ContextVar("advrag_reconnecting_call", default=False)
_install_lock = threading.Lock()


def record_text(record: logging.LogRecord) -> str:
    """The record's message and, when it carries one, its exception's type and message."""
    text = record.getMessage()
    if record.exc_info and record.exc_info[1] is not None:
        error = record.exc_info[1]
        text += f" ({type(error).__name__}: {error})"
    return text


def is_folded(record: logging.LogRecord, inside_call: bool) -> bool:
    """Whether ``record`` is pymilvus noise about a failure a reconnecting call handles."""
    if not inside_call:
        return False
    lowered = record_text(record).lower()
    return any(marker in lowered for marker in FOLDED_MARKERS)


class FoldConnectionNoise(logging.Filter):
    """Drop folded pymilvus records (see :func:`is_folded`), keeping one DEBUG line each."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not is_folded(record, _inside_call.get()):
            return True
        first = record_text(record).splitlines()[0][:300]
        logger.debug("pymilvus %s (folded into the reconnect warning): %s", record.levelname, first)
        return False


_FILTER = FoldConnectionNoise()


def install() -> None:
    """Attach the filter to pymilvus' loggers once per process (idempotent)."""
    with _install_lock:
        for name in PYMILVUS_LOGGERS:
            target = logging.getLogger(name)
            if _FILTER not in target.filters:
                target.addFilter(_FILTER)


@contextlib.contextmanager
def reconnecting_call() -> Iterator[None]:
    """Mark the code inside as a reconnecting client's call (works across ``await``)."""
    token = _inside_call.set(True)
    try:
        yield
    finally:
        _inside_call.reset(token)


__all__ = [
    "FOLDED_MARKERS",
    "FoldConnectionNoise",
    "PYMILVUS_LOGGERS",
    "install",
    "is_folded",
    "reconnecting_call",
    "record_text",
]
