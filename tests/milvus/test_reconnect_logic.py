"""The reconnect mechanism without a service: error classification, recoveries, the insert
check, uri schemes, and the clients driven over a scripted fake pymilvus client."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path
from typing import Any

import grpc
import pytest
from pymilvus.exceptions import MilvusException

from llama_index_ext_advrag.milvus import (
    AsyncReconnectingClient,
    MilvusConnectionError,
    ReconnectingClient,
    count_reconnects,
)
from llama_index_ext_advrag.milvus import reconnect as module
from llama_index_ext_advrag.milvus.connection import resolve_uri
from llama_index_ext_advrag.milvus.reconnect import is_connection_error
from llama_index_ext_advrag.milvus.recovery import (
    LITE_GRPC_OPTIONS,
    Call,
    Recovery,
    client_options,
    finish_after_reconnect,
    plan_insert_check,
    recovery_for,
    redact_uri,
)

URI = "http://milvus.example:19530"
LOST = "Fail connecting to server on 127.0.0.1:1, illegal connection params or server unavailable"


class Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


class Deadline(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.DEADLINE_EXCEEDED


# --- pure logic ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (MilvusException(code=2, message=LOST), True),
        (MilvusException(code=1, message="Unexpected error, <Cannot invoke RPC on closed channel!>"), True),
        (MilvusException(code=1, message="Unexpected error, message=<Channel is closed.>"), True),
        (MilvusException(code=1, message="should create connection first"), True),
        (ValueError("Cannot invoke RPC on closed channel!"), True),
        (RuntimeError("Event loop is closed"), True),
        (Unavailable(), True),
        (Deadline(), False),
        (MilvusException(code=100, message="collection not found[collection=x]"), False),
        (MilvusException(code=1100, message="invalid parameter: dim"), False),
        (ValueError("dim must be a positive integer"), False),
        (MilvusConnectionError(URI, "search", "failed again"), False),
    ],
)  # fmt: skip
def test_connection_errors_are_told_from_request_errors(error: Exception, expected: bool) -> None:
    assert is_connection_error(error) is expected


def test_recovery_per_operation() -> None:
    assert recovery_for("search") is Recovery.REPEAT
    assert recovery_for("upsert") is Recovery.REPEAT
    assert recovery_for("insert") is Recovery.INSERT_MISSING
    assert recovery_for("create_collection") is Recovery.CREATE_IF_MISSING
    assert recovery_for("drop_collection") is Recovery.DROP_IF_PRESENT
    assert recovery_for("rename_collection") is Recovery.NOT_REPEATED


def test_redact_uri_hides_the_password_only() -> None:
    assert redact_uri("https://root:secret@host:19530/db") == "https://root:***@host:19530/db"
    assert redact_uri("./data/milvus.db") == "./data/milvus.db"
    assert redact_uri(URI) == URI


def test_lite_gets_calm_keepalive_and_the_callers_options_win() -> None:
    lite = client_options("./x.db", {"timeout": 5})
    assert lite["timeout"] == 5 and lite["grpc_options"] == dict(LITE_GRPC_OPTIONS)
    assert lite["grpc_options"]["grpc.keepalive_permit_without_calls"] == 0
    assert lite["grpc_options"]["grpc.keepalive_time_ms"] >= 300_000  # the server's minimum
    own = client_options("./x.db", {"grpc_options": {"grpc.keepalive_time_ms": 600_000}})
    assert own["grpc_options"]["grpc.keepalive_time_ms"] == 600_000
    assert "grpc_options" not in client_options(URI, {})


def test_insert_check_plans_queries_and_finds_missing_rows() -> None:
    rows = [{"id": i, "v": [0.0, 1.0]} for i in range(5)]
    description = {"fields": [{"name": "id", "is_primary": True}, {"name": "v"}]}
    check = plan_insert_check(("docs", rows), {"timeout": 3}, description)
    assert check.collection == "docs" and check.key == "id" and check.options == {"timeout": 3}
    assert check.filters == ["id in [0, 1, 2, 3, 4]"] and check.fields == ["id"]
    assert check.missing([{"id": 1}, {"id": 3}]) == [rows[0], rows[2], rows[4]]
    assert check.result() == {"insert_count": 5, "ids": [0, 1, 2, 3, 4]}
    single = plan_insert_check((), {"collection_name": "docs", "data": rows[0]}, description)
    assert single.rows == [rows[0]]
    auto = {"fields": [{"name": "pk", "is_primary": True, "auto_id": True}]}
    with pytest.raises(ValueError, match="auto_id"):
        plan_insert_check(("docs", rows), {}, auto)


def test_recovery_steps_load_a_released_collection_then_repeat() -> None:
    released = MilvusException(code=101, message="collection is in state 'released'")
    steps = finish_after_reconnect(Recovery.REPEAT, "query", ("docs",), {"filter": "id > 0"})
    assert next(steps) == Call("query", ("docs",), {"filter": "id > 0"})
    assert steps.throw(released) == Call("load_collection", ("docs",))
    assert steps.send(None) == Call("query", ("docs",), {"filter": "id > 0"})
    with pytest.raises(StopIteration) as done:
        steps.send([{"id": 1}])
    assert done.value.value == [{"id": 1}]


def test_recovery_steps_skip_a_create_that_happened() -> None:
    steps = finish_after_reconnect(Recovery.CREATE_IF_MISSING, "create_collection", ("c",), {})
    assert next(steps) == Call("has_collection", ("c",))
    with pytest.raises(StopIteration) as done:
        steps.send(True)
    assert done.value.value is None


@pytest.mark.parametrize("uri", ["grpc://localhost:19530", "ftp://x", "s3://bucket/x.db", "grpc:x"])
def test_unknown_uri_schemes_are_refused(
    uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=re.escape(repr(uri))) as raised:
        resolve_uri(uri)
    assert "http://" in str(raised.value) and ".db" in str(raised.value)
    assert list(tmp_path.iterdir()) == []  # no folder named after the scheme


@pytest.mark.parametrize("uri", ["tcp://localhost:19530", "unix:/tmp/milvus.sock", "HTTP://h:1"])
def test_known_schemes_pass(uri: str) -> None:
    assert resolve_uri(uri) == uri


# --- the clients over a fake pymilvus ----------------------------------------------------------


class Backend:
    """A tiny in-memory Milvus behind the fake clients; ``failures`` makes the next calls fail
    with a lost connection, ``fail_after_insert`` loses the reply of an applied insert."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, dict]] = {"docs": {}}
        self.failures = 0
        self.fail_after_insert = False
        self.opened: list[dict[str, Any]] = []
        self.calls: list[str] = []

    def run(self, operation: str, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(operation)
        if self.failures:
            self.failures -= 1
            raise MilvusException(code=2, message=LOST)
        return getattr(self, "_" + operation)(*args, **kwargs)

    def _search(self, collection: str, data: list, limit: int = 10, **kwargs: Any) -> list:
        return [sorted(self.rows[collection])[:limit]]

    def _query(self, collection: str, filter: str = "", output_fields=(), **kwargs: Any) -> list:
        wanted = {int(i) for i in re.findall(r"\d+", filter)}
        return [{"id": i} for i in self.rows[collection] if i in wanted]

    def _insert(self, collection: str, data: list, **kwargs: Any) -> dict:
        for row in data:
            assert row["id"] not in self.rows[collection], f"duplicate row {row['id']}"
            self.rows[collection][row["id"]] = row
        if self.fail_after_insert:
            self.fail_after_insert = False
            raise MilvusException(code=2, message=LOST)
        return {"insert_count": len(data), "ids": [row["id"] for row in data]}

    def _describe_collection(self, collection: str) -> dict:
        return {"fields": [{"name": "id", "is_primary": True}]}

    def _has_collection(self, collection: str) -> bool:
        return collection in self.rows

    def _create_collection(self, collection: str, **kwargs: Any) -> None:
        assert collection not in self.rows, "created twice"
        self.rows[collection] = {}

    def _drop_collection(self, collection: str) -> None:
        del self.rows[collection]

    def _rename_collection(self, old: str, new: str) -> None:
        self.rows[new] = self.rows.pop(old)


OPERATIONS = [
    "search",
    "query",
    "insert",
    "describe_collection",
    "has_collection",
    "create_collection",
    "drop_collection",
    "rename_collection",
]


class FakeClient:
    def __init__(self, backend: Backend, **options: Any) -> None:
        backend.opened.append(options)
        self.closed = False
        for name in OPERATIONS:
            setattr(self, name, self._operation(backend, name))

    @staticmethod
    def _operation(backend: Backend, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            return backend.run(name, *args, **kwargs)

        return call

    def close(self) -> None:
        self.closed = True


class FakeAsyncClient(FakeClient):
    @staticmethod
    def _operation(backend: Backend, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0)
            return backend.run(name, *args, **kwargs)

        return call

    async def close(self) -> None:  # type: ignore[override]
        self.closed = True


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch) -> Backend:
    fake = Backend()
    monkeypatch.setattr(module, "MilvusClient", lambda **options: FakeClient(fake, **options))
    monkeypatch.setattr(
        module, "AsyncMilvusClient", lambda **options: FakeAsyncClient(fake, **options)
    )
    fake.rows["docs"] = {i: {"id": i} for i in range(3)}
    return fake


def test_a_read_is_repeated_once_on_a_new_dedicated_client(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    client = ReconnectingClient(URI, "root:secret")
    first = client.wrapped
    backend.failures = 1
    with caplog.at_level(logging.WARNING, logger=module.__name__):
        assert client.search("docs", [[0.0]], limit=2) == [[0, 1]]
    assert client.reconnect_count == 1 and count_reconnects(client) == 1
    assert first.closed and client.wrapped is not first
    assert backend.opened[-1]["dedicated"] is True and backend.opened[-1]["token"] == "root:secret"
    assert len(caplog.records) == 1 and URI in caplog.records[0].getMessage()


def test_a_second_failure_is_a_clear_error_naming_the_uri(backend: Backend) -> None:
    client = ReconnectingClient(URI)
    backend.failures = 2
    with pytest.raises(MilvusConnectionError, match=re.escape(URI)) as raised:
        client.query("docs", filter="id in [1]")
    assert "failed again after reconnecting" in str(raised.value)
    assert raised.value.uri == URI and raised.value.operation == "query"
    assert client.reconnect_count == 1
    assert client.query("docs", filter="id in [1]") == [{"id": 1}]  # usable afterwards


def test_an_applied_insert_is_not_repeated(backend: Backend) -> None:
    client = ReconnectingClient(URI)
    backend.fail_after_insert = True  # rows 3, 4 land, the reply is lost
    result = client.insert("docs", [{"id": 3}, {"id": 4}])
    assert result == {"insert_count": 2, "ids": [3, 4]}
    assert sorted(backend.rows["docs"]) == [0, 1, 2, 3, 4]  # the fake refuses duplicates
    backend.failures = 1  # lost before anything landed: only the missing rows go in
    assert client.insert("docs", [{"id": 4}, {"id": 5}])["ids"] == [4, 5]
    assert sorted(backend.rows["docs"]) == [0, 1, 2, 3, 4, 5]
    assert client.reconnect_count == 2


def test_create_and_drop_run_again_only_when_needed(backend: Backend) -> None:
    client = ReconnectingClient(URI)
    backend.failures = 1
    client.create_collection("other")
    assert "other" in backend.rows and backend.calls[-2:] == ["has_collection", "create_collection"]
    backend.failures = 1
    client.drop_collection("other")
    assert "other" not in backend.rows


def test_a_call_that_may_have_run_is_not_repeated(backend: Backend) -> None:
    client = ReconnectingClient(URI)
    backend.failures = 1
    with pytest.raises(MilvusConnectionError, match="not repeated"):
        client.rename_collection("docs", "renamed")
    assert "docs" in backend.rows and client.reconnect_count == 1
    assert client.has_collection("docs")  # the new connection works


def test_request_errors_pass_through_without_reconnecting(backend: Backend) -> None:
    client = ReconnectingClient(URI)
    with pytest.raises(KeyError):
        client.query("missing", filter="id in [1]")
    assert client.reconnect_count == 0 and len(backend.opened) == 1


def test_opening_retries_once_then_names_the_uri(backend: Backend) -> None:
    backend.failures = 0
    opened = ReconnectingClient(URI, client=None)
    assert opened.reconnect_count == 0

    def refuse(**options: Any) -> FakeClient:
        raise MilvusException(code=2, message=LOST)

    module_client = module.MilvusClient
    try:
        module.MilvusClient = refuse  # type: ignore[assignment,misc]
        with pytest.raises(MilvusConnectionError, match=re.escape(URI)):
            ReconnectingClient(URI)
    finally:
        module.MilvusClient = module_client  # type: ignore[misc]


async def test_async_read_is_repeated_and_second_failure_named(backend: Backend) -> None:
    client = AsyncReconnectingClient(URI)
    backend.failures = 1
    assert await client.search("docs", [[0.0]], limit=1) == [[0]]
    assert client.reconnect_count == 1 and backend.opened[-1]["dedicated"] is True
    backend.fail_after_insert = True
    assert (await client.insert("docs", [{"id": 7}]))["ids"] == [7]
    assert 7 in backend.rows["docs"] and client.reconnect_count == 2
    backend.failures = 2
    with pytest.raises(MilvusConnectionError, match=re.escape(URI)):
        await client.query("docs", filter="id in [1]")


async def test_concurrent_failures_reconnect_once(backend: Backend) -> None:
    client = AsyncReconnectingClient(URI)
    await client.search("docs", [[0.0]])
    backend.failures = 3
    results = await asyncio.gather(*(client.query("docs", filter=f"id in [{i}]") for i in range(3)))
    assert results == [[{"id": 0}], [{"id": 1}], [{"id": 2}]]
    assert client.reconnect_count == 1


def test_async_client_reopens_in_a_new_event_loop_without_counting(backend: Backend) -> None:
    client = AsyncReconnectingClient(URI)
    asyncio.run(client.search("docs", [[0.0]]))
    first = client.wrapped
    asyncio.run(client.search("docs", [[0.0]]))
    assert client.wrapped is not first and client.reconnect_count == 0
