"""Batched node fetch and the vector store: row/node conversion (unit), and round trips,
batching, async and restarts on Milvus Lite and the Milvus server."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.core.vector_stores.utils import node_to_metadata_dict
from llama_index.vector_stores.milvus import MilvusVectorStore
from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction

from llama_index_ext_advrag.milvus import afetch_nodes, fetch_nodes, flush, open_vector_store
from llama_index_ext_advrag.milvus.nodes import _row_to_node, fetch_rows, order_rows, plan_fetch
from llama_index_ext_advrag.milvus.vector_store import check_server_features

DIM = 32

# --- unit ------------------------------------------------------------------------------------


def test_plan_fetch_batches_and_deduplicates() -> None:
    ids = [f"n{i}" for i in range(1100)] + ["n0", "n5"]
    wanted, filters, fields = plan_fetch(ids, ["text", "id"], batch_size=512)
    assert wanted == [f"n{i}" for i in range(1100)]
    assert len(filters) == 3
    assert filters[0].startswith('id in ["n0", "n1", ') and filters[2].endswith('"n1099"]')
    assert fields == ["id", "text"]


def test_plan_fetch_of_nothing_makes_no_query() -> None:
    assert plan_fetch([], ["text"]) == ([], [], ["id", "text"])


def test_plan_fetch_validates_arguments() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        plan_fetch(["a"], [], batch_size=0)
    with pytest.raises(ValueError, match="'id; drop'"):
        plan_fetch(["a"], [], id_field="id; drop")


def test_order_rows_follows_the_request_and_skips_missing() -> None:
    rows = [{"id": 3, "x": "c"}, {"id": 1, "x": "a"}]
    assert order_rows([1, 2, 3], rows, "id") == {1: {"id": 1, "x": "a"}, 3: {"id": 3, "x": "c"}}


def _related_node() -> TextNode:
    node = TextNode(
        id_="child-1",
        text='He said "hi".\nSecond line.',
        metadata={"file_name": "a.txt", "page": 2, "score": 0.5, "中文": "值"},
        excluded_llm_metadata_keys=["page"],
        start_char_idx=10,
        end_char_idx=37,
    )
    node.relationships = {
        NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc-1"),
        NodeRelationship.PREVIOUS: RelatedNodeInfo(node_id="child-0"),
        NodeRelationship.NEXT: RelatedNodeInfo(node_id="child-2", metadata={"k": 1}),
        NodeRelationship.PARENT: RelatedNodeInfo(node_id="parent-1"),
    }
    return node


def _stored_row(node: TextNode, embedding: list[float] | None = None) -> dict:
    row = node_to_metadata_dict(node, remove_text=True)
    row.update(id=node.node_id, text=node.text, embedding=embedding)
    return row


def _assert_same_node(got, expected: TextNode) -> None:
    assert got.node_id == expected.node_id
    assert got.text == expected.text
    assert got.metadata == expected.metadata
    assert got.relationships == expected.relationships
    assert got.excluded_llm_metadata_keys == expected.excluded_llm_metadata_keys
    assert (got.start_char_idx, got.end_char_idx) == (
        expected.start_char_idx,
        expected.end_char_idx,
    )


def test_row_to_node_rebuilds_text_metadata_and_relationships() -> None:
    expected = _related_node()
    row = _stored_row(expected, embedding=[0.25, 0.5])
    snapshot = dict(row)
    node = _row_to_node(row)
    _assert_same_node(node, expected)
    assert node.embedding == [0.25, 0.5]
    assert row == snapshot  # the row is not modified
    assert _row_to_node(row, embedding_field=None).embedding is None


def test_row_without_node_content_becomes_a_text_node() -> None:
    row = {"id": "ext-1", "text": "external", "author": "x", "other": 1}
    node = _row_to_node(row, metadata_fields=["author", "missing"])
    assert isinstance(node, TextNode)
    assert (node.node_id, node.text, node.metadata) == ("ext-1", "external", {"author": "x"})


def test_open_vector_store_validates_arguments() -> None:
    with pytest.raises(ValueError, match="dim must be a positive integer, got 0"):
        open_vector_store("x.db", "c", dim=0)
    with pytest.raises(ValueError, match="index_config"):
        open_vector_store("x.db", "c", dim=4, index_config={"index_type": "FLAT"})
    with pytest.raises(ValueError, match="empty Milvus uri"):
        open_vector_store("", "c", dim=4)
    with pytest.raises(ValueError, match="'FAST'"):
        open_vector_store("x.db", "c", dim=4, index_preset="FAST")


def test_server_features_by_version() -> None:
    sparse = {"enable_sparse": True}
    bm25 = {"enable_sparse": True, "sparse_embedding_function": BM25BuiltInFunction()}
    with pytest.raises(ValueError, match=re.escape("need Milvus >= 2.4.0, the server is 2.3.5")):
        check_server_features((2, 3, 5), sparse)
    with pytest.raises(ValueError, match=re.escape("BM25 built-in function need Milvus >= 2.5.0")):
        check_server_features((2, 4, 9), bm25)
    check_server_features((2, 4, 0), sparse)
    check_server_features((2, 5, 0), bm25)
    check_server_features(None, bm25)  # Milvus Lite
    check_server_features((2, 3, 5), {"enable_sparse": False})


# --- Milvus Lite and server ------------------------------------------------------------------


@pytest.fixture
def store(milvus_uri: str, collection_name: str) -> Iterator[MilvusVectorStore]:
    vector_store = open_vector_store(milvus_uri, collection_name, dim=DIM, overwrite=True)
    yield vector_store
    vector_store.client.drop_collection(collection_name)
    vector_store.client.close()


def _chain(count: int, embed: HashEmbedding) -> list[TextNode]:
    nodes = []
    for i in range(count):
        text = f'Sentence {i} mentions "topic{i % 4}" and item{i}.'
        node = TextNode(
            id_=f"node-{i}",
            text=text,
            metadata={"position": i, "section": f"s{i // 3}", "title": 'It\'s "quoted"'},
            embedding=embed.get_text_embedding(text),
        )
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc-1")
        if i > 0:
            node.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=f"node-{i - 1}")
        if i < count - 1:
            node.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=f"node-{i + 1}")
        nodes.append(node)
    return nodes


def test_fetch_nodes_round_trip(store: MilvusVectorStore) -> None:
    embed = HashEmbedding(dim=DIM)
    nodes = _chain(6, embed) + [_related_node()]
    nodes[-1].embedding = embed.get_text_embedding(nodes[-1].text)
    store.add(nodes)
    flush(store)
    wanted = ["node-4", "missing", "child-1", "node-0"]
    fetched = fetch_nodes(store, wanted)
    assert list(fetched) == ["node-4", "child-1", "node-0"]
    by_id = {node.node_id: node for node in nodes}
    for node_id, node in fetched.items():
        _assert_same_node(node, by_id[node_id])
        assert node.embedding is None
    with_vectors = fetch_nodes(store, ["node-2"], with_embeddings=True)
    assert with_vectors["node-2"].embedding == pytest.approx(by_id["node-2"].embedding, abs=1e-6)
    assert fetch_nodes(store, []) == {}


async def test_afetch_nodes_matches_fetch_nodes(store: MilvusVectorStore) -> None:
    store.add(_chain(5, HashEmbedding(dim=DIM)))
    flush(store)
    ids = ["node-3", "nope", "node-1"]
    sync_nodes = fetch_nodes(store, ids, with_embeddings=True)
    async_nodes = await afetch_nodes(store, ids, with_embeddings=True, batch_size=1)
    assert list(async_nodes) == list(sync_nodes) == ["node-3", "node-1"]
    for node_id, node in sync_nodes.items():
        assert async_nodes[node_id].model_dump() == node.model_dump()


def test_fetch_of_many_ids_takes_few_queries(store: MilvusVectorStore, spy) -> None:
    count = 1100
    nodes = [
        TextNode(
            id_=f"bulk-{i}", text=f"t{i}", embedding=[math.cos(i), math.sin(i)] + [0.0] * (DIM - 2)
        )
        for i in range(count)
    ]
    store.add(nodes)
    flush(store)
    calls = spy(store.client, "query", record=lambda *args, **kwargs: kwargs.get("filter", ""))
    ids = [node.node_id for node in nodes] + ["bulk-0", "absent-1"]
    fetched = fetch_nodes(store, ids)
    assert len(calls) == 3  # ceil(1101 distinct ids / 512)
    assert len(fetched) == count
    assert fetched["bulk-777"].text == "t777"
    calls.clear()
    rows = fetch_rows(store.client, store.collection_name, ids[:10], ["text"], batch_size=4)
    assert len(calls) == 3
    assert list(rows) == ids[:10] and rows["bulk-3"]["text"] == "t3"


def test_vector_store_query_and_filters(store: MilvusVectorStore) -> None:
    embed = HashEmbedding(dim=DIM)
    store.add(_chain(8, embed))
    flush(store)
    query = VectorStoreQuery(
        query_embedding=embed.get_query_embedding("Sentence 5 item5"), similarity_top_k=3
    )
    result = store.query(query)
    assert result.ids is not None and result.ids[0] == "node-5"
    assert result.nodes is not None and result.nodes[0].metadata["position"] == 5


def test_vector_store_works_after_a_restart(
    milvus_uri: str, collection_name: str, run_child, child_module
) -> None:
    """Another process writes the store with an IVF_FLAT index and exits; reopening it with
    overwrite=False loads the collection and searches with the index's own parameters."""
    run_child("store", milvus_uri, collection_name, "IVF_FLAT")
    store = open_vector_store(milvus_uri, collection_name, dim=child_module.STORE_DIM)
    try:
        assert store.search_config == {"params": {"nprobe": 1}}  # nlist 1 for 40 rows
        embed = HashEmbedding(dim=child_module.STORE_DIM)
        expected = child_module.store_node(7, embed)
        result = store.query(
            VectorStoreQuery(query_embedding=expected.embedding, similarity_top_k=2)
        )
        assert result.ids is not None and result.ids[0] == "n7"
        fetched = fetch_nodes(store, ["n7", "n39"])
        assert fetched["n7"].text == expected.text
        assert fetched["n7"].metadata == expected.metadata
        assert len(fetched) == 2
        with pytest.raises(ValueError, match="stores 32-dimensional vectors"):
            open_vector_store(milvus_uri, collection_name, dim=16)
    finally:
        store.client.drop_collection(collection_name)
        store.client.close()
