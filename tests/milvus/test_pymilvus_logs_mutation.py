"""The folding filter's pure parts: the text a record is matched on (with its exception), the
one DEBUG line a folded record leaves, and install() putting the filter once on each pymilvus
logger. Kills the mutants of milvus/pymilvus_logs.py the Milvus Lite tests leave alive
(mutation testing, issue #39)."""

from __future__ import annotations

import logging

import pytest

from llama_index_ext_advrag.milvus.pymilvus_logs import (
    PYMILVUS_LOGGERS,
    FoldConnectionNoise,
    install,
    reconnecting_call,
    record_text,
)

pytestmark = pytest.mark.unit

MODULE_LOGGER = "llama_index_ext_advrag.milvus.pymilvus_logs"


def make_record(message: str, exc_info=None) -> logging.LogRecord:
    return logging.LogRecord(
        "pymilvus.decorators", logging.ERROR, __file__, 1, message, None, exc_info
    )


def test_record_text_appends_the_exception_type_and_message() -> None:
    error = ConnectionError("channel is closed")
    assert record_text(make_record("RPC error", (ConnectionError, error, None))) == (
        "RPC error (ConnectionError: channel is closed)"
    )
    assert record_text(make_record("RPC error", (None, None, None))) == "RPC error"
    assert record_text(make_record("RPC error")) == "RPC error"


def test_a_folded_record_leaves_one_debug_line_with_its_first_line(caplog) -> None:
    caplog.set_level(logging.DEBUG, logger=MODULE_LOGGER)
    first = "Connection recovery failed " + "x" * 400
    with reconnecting_call():
        assert FoldConnectionNoise().filter(make_record(first + "\nTraceback ...")) is False
    (line,) = [r.getMessage() for r in caplog.records if r.name == MODULE_LOGGER]
    assert line == f"pymilvus ERROR (folded into the reconnect warning): {first[:300]}"


def test_install_puts_one_filter_on_each_pymilvus_logger() -> None:
    def folding(name: str) -> list[logging.Filter]:
        return [f for f in logging.getLogger(name).filters if isinstance(f, FoldConnectionNoise)]

    for name in PYMILVUS_LOGGERS:
        for existing in folding(name):
            logging.getLogger(name).removeFilter(existing)
    root_before = list(logging.getLogger().filters)
    install()
    install()
    assert {name: len(folding(name)) for name in PYMILVUS_LOGGERS} == dict.fromkeys(
        PYMILVUS_LOGGERS, 1
    )
    assert None not in logging.getLogger(PYMILVUS_LOGGERS[0]).filters
    assert logging.getLogger().filters == root_before  # only pymilvus' loggers
