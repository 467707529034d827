"""A stopped Milvus Lite server costs one warning, not pymilvus' recovery tracebacks.

pymilvus logs through its own handler on the ``pymilvus`` logger (``propagate=False``), so the
tests attach caplog's handler there as well to see what a user's terminal would show.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode
from milvus_faults import Faults

from llama_index_ext_advrag.milvus import count_reconnects, flush, open_vector_store
from llama_index_ext_advrag.milvus.pymilvus_logs import install, is_folded, reconnecting_call

DIM = 16
RECONNECT_LOGGER = "llama_index_ext_advrag.milvus.reconnect"


@pytest.fixture
def pymilvus_records(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """caplog that also sees the records pymilvus' own handler prints."""
    pymilvus = logging.getLogger("pymilvus")
    pymilvus.addHandler(caplog.handler)
    caplog.set_level(logging.DEBUG, logger="llama_index_ext_advrag.milvus.pymilvus_logs")
    try:
        yield caplog
    finally:
        pymilvus.removeHandler(caplog.handler)


@pytest.fixture
def lite_index(tmp_path: Path) -> Iterator[tuple[VectorStoreIndex, object, str]]:
    uri = str(tmp_path / "stopped.db")
    embed = HashEmbedding(dim=DIM)
    store = open_vector_store(uri, "notes", DIM, overwrite=True)
    texts = [f"note {i} about item{i}" for i in range(12)]
    store.add(
        [TextNode(id_=f"n{i}", text=t, embedding=embed.get_text_embedding(t)) for i, t in enumerate(texts)]
    )  # fmt: skip
    flush(store)
    yield VectorStoreIndex.from_vector_store(store, embed_model=embed), store, uri


def shown(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """The records a terminal at WARNING level would print."""
    return [r for r in caplog.records if r.levelno >= logging.WARNING]


def assert_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    records = shown(caplog)
    assert [(r.name, r.levelname) for r in records] == [(RECONNECT_LOGGER, "WARNING")], [
        f"{r.name} {r.levelname}: {r.getMessage()[:200]}" for r in records
    ]
    assert "lost during search" in records[0].getMessage()
    assert records[0].exc_info is None  # one line: no traceback
    # pymilvus' reports are kept at DEBUG, one line each, not dropped
    folded = [
        r.getMessage() for r in caplog.records if "folded into the reconnect" in r.getMessage()
    ]
    assert any("Connection recovery failed" in m or "Fail connecting" in m for m in folded)


@pytest.mark.milvus_lite
def test_a_stopped_lite_server_is_one_warning(lite_index, pymilvus_records) -> None:
    index, store, uri = lite_index
    retriever = index.as_retriever(similarity_top_k=3)
    expected = [n.node.node_id for n in retriever.retrieve("item4")]
    pymilvus_records.clear()
    Faults.stop_lite_server(uri)
    assert [n.node.node_id for n in retriever.retrieve("item4")] == expected
    assert count_reconnects(store) == 1
    assert_one_warning(pymilvus_records)


@pytest.mark.milvus_lite
def test_a_stopped_lite_server_is_one_warning_async(lite_index, pymilvus_records) -> None:
    index, store, uri = lite_index
    retriever = index.as_retriever(similarity_top_k=3)

    async def run() -> tuple[list[str], list[str]]:
        before = [n.node.node_id for n in await retriever.aretrieve("item7")]
        pymilvus_records.clear()
        Faults.stop_lite_server(uri)
        return before, [n.node.node_id for n in await retriever.aretrieve("item7")]

    before, after = asyncio.run(run())
    assert after == before and store.aclient.reconnect_count == 1
    assert_one_warning(pymilvus_records)


def make_record(message: str, level: int = logging.WARNING) -> logging.LogRecord:
    return logging.LogRecord("pymilvus.decorators", level, __file__, 1, message, None, None)


def test_only_connection_noise_inside_a_reconnecting_call_is_folded() -> None:
    noise = make_record("RPC error: [search], <MilvusException: Fail connecting to server on x>")
    other = make_record("RPC error: [insert], <MilvusException: (code=1100, the dim mismatch)>")
    assert is_folded(noise, inside_call=True)
    assert not is_folded(noise, inside_call=False)  # a user's own pymilvus client: untouched
    assert not is_folded(other, inside_call=True)  # not a connection failure: shown
    install()
    pymilvus = logging.getLogger("pymilvus.decorators")
    assert pymilvus.filters
    with reconnecting_call():
        assert not all(f.filter(noise) for f in pymilvus.filters)
        assert all(f.filter(other) for f in pymilvus.filters)
    assert all(f.filter(noise) for f in pymilvus.filters)  # outside a call
