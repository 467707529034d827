"""HierarchicalAutoMergingRetriever and TwoLayerMilvusRetriever after a lost Milvus connection:
the next retrieval reconnects once and returns what it returned before (sync and async), the
trace counts the reconnects, and reopening from the uri works after a Lite server stopped."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document
from milvus_faults import Faults

from llama_index_ext_advrag.milvus import count_reconnects
from llama_index_ext_advrag.retrievers import (
    HierarchicalAutoMergingRetriever,
    TwoLayerMilvusRetriever,
)
from llama_index_ext_advrag.trace import TRACE_KEY

TOPICS = ["volcano", "glacier", "desert", "reef", "forest", "tundra"]


@pytest.fixture
def faults() -> Iterator[Faults]:
    injected = Faults()
    yield injected
    injected.mend()


def documents() -> list[Document]:
    docs = []
    for d in range(2):
        paragraphs = [
            f"## Part {i} about {topic}\n\n"
            + " ".join(f"The {topic} in region {d} has feature {j}." for j in range(6))
            for i, topic in enumerate(TOPICS)
        ]
        docs.append(Document(text="\n\n".join(paragraphs), id_=f"doc-{d}"))
    return docs


def summary(nodes) -> list[tuple[str, float]]:
    return [(n.node.node_id, round(n.score or 0.0, 5)) for n in nodes]


def auto_merging(uri: str) -> HierarchicalAutoMergingRetriever:
    return HierarchicalAutoMergingRetriever.from_documents(
        documents(), uri=uri, collection_name=f"t_{uuid.uuid4().hex[:12]}",
        embed_model=HashEmbedding(dim=64), chunk_sizes=[256, 64, 24], similarity_top_k=8,
    )  # fmt: skip


def two_layer(uri: str, data_dir: Path) -> TwoLayerMilvusRetriever:
    return TwoLayerMilvusRetriever.from_excel(
        data_dir / "tables.xlsx", uri=uri, collection_name=f"t_{uuid.uuid4().hex[:12]}",
        embed_model=HashEmbedding(dim=64), route_top_k=1,
    )  # fmt: skip


def stores_of(retriever) -> tuple:
    if isinstance(retriever, HierarchicalAutoMergingRetriever):
        return retriever._vector_store, retriever._parent_store
    return retriever._summary_store, retriever._details_store


def trace_of(node, retriever) -> dict:
    key = "auto_merging" if isinstance(retriever, HierarchicalAutoMergingRetriever) else "two_layer"
    return node.node.metadata[TRACE_KEY][key]


QUERIES = {"auto": "glacier region 1 feature", "two_layer": "Staff salary by department"}


@pytest.fixture(params=["auto", "two_layer"])
def retriever(request: pytest.FixtureRequest, milvus_uri: str, data_dir: Path):
    if request.param == "auto":
        return auto_merging(milvus_uri), QUERIES["auto"]
    return two_layer(milvus_uri, data_dir), QUERIES["two_layer"]


def test_retrieval_after_closed_channels_is_unchanged(retriever, faults: Faults) -> None:
    retriever, query = retriever
    expected = summary(retriever.retrieve(query))
    assert expected
    faults.break_store(*stores_of(retriever))
    again = retriever.retrieve(query)
    assert summary(again) == expected
    reconnects = count_reconnects(*stores_of(retriever))
    assert 1 <= reconnects <= 2  # stores sharing one channel each reconnect once
    assert trace_of(again[0], retriever)["milvus_reconnects"] == reconnects


def test_async_retrieval_after_closed_channels_is_unchanged(retriever, faults: Faults) -> None:
    retriever, query = retriever
    expected = summary(retriever.retrieve(query))

    async def run() -> list:
        first = summary(await retriever.aretrieve(query))
        await faults.abreak_store(*stores_of(retriever))
        return [first, summary(await retriever.aretrieve(query))]

    assert asyncio.run(run()) == [expected, expected]
    assert sum(store.aclient.reconnect_count for store in stores_of(retriever)) == 2


@pytest.mark.milvus_lite
@pytest.mark.parametrize("kind", ["auto", "two_layer"])
def test_lite_server_stopped_between_queries_and_before_reopening(
    kind: str, tmp_path: Path, data_dir: Path, faults: Faults
) -> None:
    uri = str(tmp_path / "retrievers.db")
    retriever = auto_merging(uri) if kind == "auto" else two_layer(uri, data_dir)
    query = QUERIES[kind]
    expected = summary(retriever.retrieve(query))
    faults.stop_lite_server(uri)
    assert summary(retriever.retrieve(query)) == expected
    assert count_reconnects(*stores_of(retriever)) == 2  # each store's client reconnected
    faults.stop_lite_server(uri)
    data = retriever.to_dict()
    reopened = type(retriever).from_dict(data, embed_model=HashEmbedding(dim=64))
    assert summary(reopened.retrieve(query)) == expected
    faults.stop_lite_server(uri)
    assert summary(asyncio.run(reopened.aretrieve(query))) == expected
