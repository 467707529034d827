"""Reconnecting after a lost connection, on Milvus Lite and the Milvus server: a client, a
vector store behind a ``VectorStoreIndex`` (sync and async) and the layout registry.

Faults are injected between two operations: the client's gRPC channel is closed (both
backends) or the Lite file's server is stopped as a crash would (Lite).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode
from milvus_faults import Faults
from pymilvus import DataType

from llama_index_ext_advrag.milvus import (
    MilvusConnectionError,
    ReconnectingClient,
    build_index_params,
    count_reconnects,
    count_rows,
    flush,
    open_client,
    open_vector_store,
    process_reconnects,
)
from llama_index_ext_advrag.milvus.registry import (
    _list_layouts,
    _read_layout,
    _write_layout,
    load_layout,
)

DIM = 32
TOPICS = ["volcano", "glacier", "desert", "reef", "forest"]


@pytest.fixture
def faults() -> Iterator[Faults]:
    injected = Faults()
    yield injected
    injected.mend()


def break_between(faults: Faults, kind: str, uri: str, *stores: object) -> None:
    if kind == "stopped_server":
        faults.stop_lite_server(uri)
    else:
        faults.break_store(*stores)


def fault_kinds(milvus_uri: str) -> list[str]:
    return (
        ["closed_channel", "stopped_server"] if milvus_uri.endswith(".db") else ["closed_channel"]
    )


def make_nodes(embed: HashEmbedding) -> list[TextNode]:
    nodes = []
    for i in range(30):
        text = f"note {i} about the {TOPICS[i % 5]} and item{i}"
        nodes.append(TextNode(id_=f"n{i}", text=text, embedding=embed.get_text_embedding(text)))
    return nodes


def ranked(results) -> list[tuple[str, float]]:
    """``(id, score)`` best first; ties (HashEmbedding has some) ordered by id."""
    pairs = [(r.node.node_id, round(r.score or 0.0, 5)) for r in results]
    return sorted(pairs, key=lambda pair: (-pair[1], pair[0]))


def make_collection(client: ReconnectingClient, name: str) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
    index_params = build_index_params(client, "vec", "FLAT", metric="L2")
    client.create_collection(name, schema=schema, index_params=index_params)


def test_client_reconnects_once_and_checks_an_insert(
    milvus_uri: str, collection_name: str, faults: Faults
) -> None:
    process_before = process_reconnects()
    client = open_client(milvus_uri)
    make_collection(client, collection_name)
    rows = [{"id": i, "vec": [float(i), 1.0]} for i in range(10)]
    client.insert(collection_name, rows[:6])
    flush(client, collection_name)
    for kind in fault_kinds(milvus_uri):
        before = client.reconnect_count
        break_between(faults, kind, milvus_uri, type("S", (), {"client": client})())
        assert count_rows(client, collection_name) == 6, kind
        assert client.reconnect_count == before + 1
    faults.break_channel(client)
    assert client.insert(collection_name, rows[4:])["ids"] == list(range(4, 10))
    assert count_rows(client, collection_name) == 10  # rows 4 and 5 not inserted twice
    # the process-wide count long jobs report (advrag compare's "Milvus reconnects")
    assert process_reconnects() - process_before == client.reconnect_count > 0
    client.drop_collection(collection_name)
    client.close()


def test_a_second_consecutive_failure_names_the_uri(
    milvus_uri: str, collection_name: str, faults: Faults, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = open_client(milvus_uri)
    make_collection(client, collection_name)
    reopen = ReconnectingClient._open

    def reopen_broken(self: ReconnectingClient, reopening: bool):  # the new channel dies too
        opened = reopen(self, reopening)
        opened._handler._channel.close()
        return opened

    monkeypatch.setattr(ReconnectingClient, "_open", reopen_broken)
    faults.break_channel(client)
    with pytest.raises(MilvusConnectionError, match=re.escape(repr(milvus_uri))) as raised:
        client.has_collection(collection_name)
    assert "failed again after reconnecting" in str(raised.value)
    monkeypatch.undo()
    assert open_client(milvus_uri).has_collection(collection_name)
    open_client(milvus_uri).drop_collection(collection_name)


@pytest.fixture
def index(milvus_uri: str, collection_name: str) -> Iterator[tuple[VectorStoreIndex, object]]:
    embed = HashEmbedding(dim=DIM)
    store = open_vector_store(milvus_uri, collection_name, DIM, overwrite=True)
    store.add(make_nodes(embed))
    flush(store)
    yield VectorStoreIndex.from_vector_store(store, embed_model=embed), store
    store.client.drop_collection(collection_name)


def test_vector_store_query_survives_a_fault(
    milvus_uri: str, index: tuple[VectorStoreIndex, object], faults: Faults
) -> None:
    vector_index, store = index
    retriever = vector_index.as_retriever(similarity_top_k=4)
    expected = ranked(retriever.retrieve("glacier item6"))
    assert len(expected) == 4 and "n6" in dict(expected)
    for count, kind in enumerate(fault_kinds(milvus_uri), start=1):
        break_between(faults, kind, milvus_uri, store)
        assert ranked(retriever.retrieve("glacier item6")) == expected, kind
        assert count_reconnects(store) == count


def test_vector_store_async_query_survives_a_fault(
    milvus_uri: str, index: tuple[VectorStoreIndex, object], faults: Faults
) -> None:
    vector_index, store = index
    retriever = vector_index.as_retriever(similarity_top_k=4)
    expected = ranked(retriever.retrieve("desert item7"))

    async def run() -> list[list[tuple[str, float]]]:
        results = [ranked(await retriever.aretrieve("desert item7"))]
        await faults.abreak_store(store)
        results.append(ranked(await retriever.aretrieve("desert item7")))
        if milvus_uri.endswith(".db"):
            faults.stop_lite_server(milvus_uri)
            results.append(ranked(await retriever.aretrieve("desert item7")))
        return results

    results = asyncio.run(run())
    assert results == [expected] * len(results)
    assert store.aclient.reconnect_count == len(results) - 1


@pytest.mark.milvus_lite
def test_opening_another_collection_after_the_lite_server_stopped(tmp_path, faults: Faults) -> None:
    """The crash of issue 21: the next ``open_vector_store`` on the file after its server died."""
    uri = str(tmp_path / "ingest.db")
    embed = HashEmbedding(dim=DIM)
    first = open_vector_store(uri, "first", DIM)
    first.add(make_nodes(embed))
    flush(first)
    faults.stop_lite_server(uri)
    second = open_vector_store(uri, "second", DIM)
    second.add(make_nodes(embed)[:5])
    flush(second)
    assert count_rows(second.client, "second") == 5
    assert count_rows(first.client, "first") == 30
    assert count_reconnects(first) == 1 and count_reconnects(second) == 1


def test_registry_reads_and_writes_survive_a_fault(
    milvus_uri: str, collection_name: str, faults: Faults
) -> None:
    client = open_client(milvus_uri)
    layout = {"component": "Test", "leaf_collection": collection_name}
    _write_layout(client, collection_name, layout)
    faults.break_channel(client)
    assert _read_layout(client, collection_name, "Test")["leaf_collection"] == collection_name
    faults.break_channel(client)
    _write_layout(client, collection_name, {**layout, "num_leaves": 3})
    faults.break_channel(client)
    assert collection_name in _list_layouts(client)
    assert client.reconnect_count == 3
    if milvus_uri.endswith(".db"):  # the short-lived registry clients reopen a stopped server
        faults.stop_lite_server(milvus_uri)
        assert load_layout(milvus_uri, "", collection_name, "Test")["num_leaves"] == 3
    client.delete("advrag_layouts", ids=[collection_name])
