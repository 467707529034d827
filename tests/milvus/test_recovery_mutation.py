"""The reconnect rules pinned exactly (found by mutation testing, issue #39): a refused
authentication found through an error's chain, the not-loaded and connection tests, uri
redaction, call arguments given by keyword, the primary key, the insert check's queries and
log line, and the reopening options."""

from __future__ import annotations

import logging

import grpc
import pytest
from pymilvus.exceptions import MilvusException

from llama_index_ext_advrag.milvus.recovery import (
    Call,
    MilvusAuthenticationError,
    Recovery,
    authentication_detail,
    call_argument,
    finish_after_reconnect,
    is_connection_error,
    is_not_loaded_error,
    plan_insert_check,
    primary_key,
    redact_uri,
    reopen_options,
)

LOGGER = "llama_index_ext_advrag.milvus.recovery"
DESCRIPTION = {"collection_name": "docs", "fields": [{"name": "id", "is_primary": True}]}


class Unauthenticated(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAUTHENTICATED

    def details(self) -> str:
        return "bad token"


class UnauthenticatedWithoutDetails(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAUTHENTICATED

    def __str__(self) -> str:
        return "refused"


class NotAnRpcError(Exception):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAUTHENTICATED


def run(steps, answers: list) -> tuple[list[Call], object]:  # noqa: ANN001
    """Drive recovery ``steps``, sending ``answers`` in turn; the calls and the result."""
    calls = [next(steps)]
    try:
        for answer in answers:
            calls.append(steps.send(answer))
    except StopIteration as done:
        return calls, done.value
    raise AssertionError(f"the steps did not finish: {calls}")


def test_the_authentication_error_says_what_to_pass() -> None:
    error = MilvusAuthenticationError("http://m:19530", "open", "auth check failure")
    assert (error.uri, error.operation) == ("http://m:19530", "open")
    assert str(error) == (
        "Milvus at 'http://m:19530': open failed: authentication refused (auth check failure); "
        'pass the right token ("user:password" or an API key) with token=..., or --token / '
        "ADVRAG_MILVUS_TOKEN for the advrag command"
    )


def test_authentication_detail_reads_an_unauthenticated_rpc_error() -> None:
    assert authentication_detail(Unauthenticated()) == "bad token"
    assert authentication_detail(UnauthenticatedWithoutDetails()) == "refused"
    assert authentication_detail(NotAnRpcError("x")) is None  # a code() alone is not gRPC's


def test_authentication_detail_follows_the_cause_and_the_context() -> None:
    caused = ValueError("wrapped")
    caused.__cause__ = Unauthenticated()
    assert authentication_detail(caused) == "bad token"
    during = ValueError("wrapped")
    during.__context__ = Unauthenticated()
    assert authentication_detail(during) == "bad token"


def test_authentication_detail_ends_on_a_cycle() -> None:
    first, second = ValueError("a"), ValueError("b")
    first.__context__, second.__context__ = second, first
    assert authentication_detail(first) is None


def test_authentication_detail_reads_pymilvus_text_first_line_cut_at_200() -> None:
    error = ValueError("Auth check failure: " + "x" * 300 + "\nsecond line")
    assert authentication_detail(error) == ("Auth check failure: " + "x" * 300)[:200]


def test_a_refused_authentication_is_not_a_connection_error() -> None:
    error = MilvusException(code=2, message="Fail connecting to server: auth check failure")
    assert not is_connection_error(error)


def test_not_loaded_by_code_or_by_text_only() -> None:
    assert is_not_loaded_error(ValueError("Call load() before search"))
    assert not is_not_loaded_error(ValueError("collection not found"))  # and no code attribute


def test_redact_uri_without_a_port_or_a_host() -> None:
    assert redact_uri("https://root:secret@host/db") == "https://root:***@host/db"
    assert redact_uri("http://root:secret@/db") == "http://root:***@/db"


def test_call_argument_past_the_positional_ones_is_named() -> None:
    assert call_argument(("docs",), {}, 0, "collection_name") == "docs"
    with pytest.raises(TypeError, match="^client call has no 'data' argument$"):
        call_argument(("docs",), {}, 1, "data")


def test_primary_key_auto_id_from_the_collection_and_a_missing_key_named() -> None:
    fields = [{"name": "id", "is_primary": True}]
    assert primary_key({"auto_id": True, "fields": fields}) == ("id", True)
    assert primary_key({"fields": fields}) == ("id", False)
    with pytest.raises(ValueError, match="^collection 'docs' has no primary key$"):
        primary_key({"collection_name": "docs"})


def test_insert_check_by_keyword_with_extra_arguments_and_big_batches() -> None:
    rows = [{"id": i} for i in range(600)]
    check = plan_insert_check(
        ("docs", rows, "part"), {"timeout": 3}, {"fields": [{"name": "id", "is_primary": True}]}
    )
    assert check.extra_args == ("part",) and len(check.filters) == 1  # batches of 1000
    by_keyword = plan_insert_check((), {"collection_name": "docs", "data": rows[:1]}, DESCRIPTION)
    assert by_keyword.options == {} and by_keyword.extra_args == ()
    auto = {"fields": [{"name": "pk", "is_primary": True, "auto_id": True}]}
    with pytest.raises(ValueError) as raised:
        plan_insert_check(("docs", rows), {}, auto)
    assert str(raised.value) == (
        "collection 'docs' has an auto_id primary key: rows inserted before the connection "
        "failed cannot be found, so the insert is not repeated"
    )


def test_insert_steps_by_keyword_query_strongly_and_log(caplog: pytest.LogCaptureFixture) -> None:
    rows = [{"id": 1}, {"id": 2}]
    kwargs = {"collection_name": "docs", "data": rows, "timeout": 3}
    steps = finish_after_reconnect(Recovery.INSERT_MISSING, "insert", (), kwargs)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        calls, result = run(steps, [DESCRIPTION, [{"id": 1}], {"insert_count": 1}])
    assert calls == [
        Call("describe_collection", ("docs",)),
        Call(
            "query",
            ("docs",),
            {"filter": "id in [1, 2]", "output_fields": ["id"], "consistency_level": "Strong"},
        ),
        Call("insert", ("docs", [{"id": 2}]), {"timeout": 3}),
    ]
    assert result == {"insert_count": 2, "ids": [1, 2]}
    assert caplog.messages == ["insert after reconnect: 1 of 2 rows missing"]


@pytest.mark.parametrize(
    ("recovery", "operation"),
    [(Recovery.CREATE_IF_MISSING, "create_collection"), (Recovery.DROP_IF_PRESENT, "drop_collection")],
)  # fmt: skip
def test_create_and_drop_steps_by_keyword(recovery: Recovery, operation: str) -> None:
    kwargs = {"collection_name": "docs"}
    calls, _ = run(finish_after_reconnect(recovery, operation, (), kwargs), [False, None])
    assert calls[0] == Call("has_collection", ("docs",))


def test_a_released_collection_named_by_keyword_is_loaded() -> None:
    kwargs = {"collection_name": "docs", "filter": "id > 0"}
    steps = finish_after_reconnect(Recovery.REPEAT, "query", (), kwargs)
    assert next(steps) == Call("query", (), kwargs)
    released = MilvusException(code=101, message="collection not loaded")
    assert steps.throw(released) == Call("load_collection", ("docs",))


def test_reopen_options_dedicated_with_a_default_timeout_the_caller_may_set() -> None:
    assert reopen_options({}) == {"dedicated": True, "timeout": 30.0}
    assert reopen_options({"timeout": None}) == {"dedicated": True, "timeout": 30.0}
    assert reopen_options({"timeout": 5}) == {"dedicated": True, "timeout": 5}
