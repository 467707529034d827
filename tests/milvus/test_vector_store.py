"""Metadata through the documented path, ``open_vector_store`` + ``VectorStoreIndex``, on Milvus
Lite and the server: every value comes back exactly as it went in, or the node is refused before
anything is written, by an error naming the node, the key, the value's type and what is allowed.
"""

from __future__ import annotations

import asyncio
import datetime
import decimal
import enum
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from advrag_testing import HashEmbedding, require_full_text
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.milvus import count_rows, fetch_nodes, flush, open_vector_store
from llama_index_ext_advrag.milvus.vector_store import CheckedMilvusVectorStore

DIM = 16
# Each kind a value can be, at its edges: all of it must come back equal and of the same type.
STORABLE: dict[str, Any] = {
    "text": "héllo 世界 😀 \u200b tab\tnewline\n",
    "empty": "",
    "quote": 'say "hi" \\ back',
    "int_max": 2**63 - 1,
    "int_min": -(2**63),
    "zero": 0,
    "float": 0.1,
    "float_max": 1.7976931348623157e308,
    "float_min": 5e-324,
    "negative": -2.5,
    "yes": True,
    "no": False,
    "none": None,
    "list": [1, "a", None, [2.5, {"k": "v"}], True],
    "nested": {"a": {"b": [1, 2, {"c": -(2**63)}]}},
    "empty_list": [],
    "empty_dict": {},
    "中文键": "值",
}


class Colour(str, enum.Enum):
    RED = "red"


# (metadata, the key the error must name, the type it must name)
UNSTORABLE: dict[str, tuple[dict[Any, Any], str, str]] = {
    "int over 64 bits": ({"big": 2**70}, "'big'", "int"),
    "negative int over 64 bits": ({"small": -(2**63) - 1}, "'small'", "int"),
    "int over 64 bits in a list": ({"ids": [1, 2**64]}, "'ids'][1]", "int"),
    "inf": ({"score": float("inf")}, "'score'", "float"),
    "nan": ({"score": float("nan")}, "'score'", "float"),
    "set": ({"tags": {"a", "b"}}, "'tags'", "set"),
    "tuple": ({"span": (1, 2)}, "'span'", "tuple"),
    "datetime": ({"when": datetime.datetime(2024, 1, 2, 3, 4, 5)}, "'when'", "datetime"),
    "date": ({"day": datetime.date(2024, 1, 2)}, "'day'", "date"),
    "lone surrogate in a key": ({"k\ud800": "v"}, "'k\\ud800'", "surrogate"),
    "lone surrogate in a value": ({"k": "v\udfff"}, "'k'", "surrogate"),
    "bytes": ({"raw": b"\x00\xff"}, "'raw'", "bytes"),
    "object": ({"obj": object()}, "'obj'", "object"),
    "decimal": ({"price": decimal.Decimal("1.10")}, "'price'", "Decimal"),
    "str enum": ({"colour": Colour.RED}, "'colour'", "Colour"),
    "int key": ({1: "one"}, "1", "int"),
    "tuple key": ({(1, 2): "pair"}, "(1, 2)", "tuple"),
    "nested datetime": ({"log": [{"at": datetime.date(2024, 1, 2)}]}, "'log'][0]['at'", "date"),
    # numpy scalars come back as the plain type (np.float64 and np.str_ are subclasses)
    "numpy float64": ({"score": np.float64(0.5)}, "'score'", "numpy.float64"),
    "numpy float32": ({"score": np.float32(0.5)}, "'score'", "numpy.float32"),
    "numpy int64": ({"count": np.int64(3)}, "'count'", "numpy.int64"),
    "numpy bool": ({"flag": np.bool_(True)}, "'flag'", "numpy.bool"),
    "numpy str": ({"name": np.str_("x")}, "'name'", "numpy.str_"),
    "numpy float in a list": ({"scores": [0.5, np.float64(0.25)]}, "'scores'][1]", "float64"),
}


@pytest.fixture
def store(milvus_uri: str, collection_name: str) -> Iterator[CheckedMilvusVectorStore]:
    vector_store = open_vector_store(milvus_uri, collection_name, dim=DIM, overwrite=True)
    yield vector_store
    if vector_store.client.has_collection(collection_name):
        vector_store.client.drop_collection(collection_name)


def build(store: Any, nodes: list[TextNode], mode: str) -> VectorStoreIndex:
    """The documented path: ``VectorStoreIndex(nodes, storage_context=...)``; in async mode
    its nodes go through the store's ``async_add``."""
    context = StorageContext.from_defaults(vector_store=store)
    embed = HashEmbedding(dim=DIM)
    if mode == "sync":
        return VectorStoreIndex(nodes, storage_context=context, embed_model=embed)
    index = VectorStoreIndex([], storage_context=context, embed_model=embed)
    asyncio.run(index.ainsert_nodes(nodes))
    return index


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (True == 1 is not enough)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    return bool(a == b)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_storable_metadata_comes_back_exactly(store, mode: str) -> None:
    nodes = [
        TextNode(text="every kind of value", id_="all", metadata=dict(STORABLE)),
        TextNode(text="one more", id_="plain", metadata={"n": 1}),
    ]
    index = build(store, nodes, mode)
    flush(store)
    fetched = fetch_nodes(store, ["all", "plain"])
    assert list(fetched) == ["all", "plain"]
    back = fetched["all"].metadata
    assert same(back, STORABLE), {
        k: back.get(k) for k in STORABLE if not same(back.get(k), STORABLE[k])
    }
    hits = {hit.node.node_id: hit.node for hit in index.as_retriever().retrieve("value")}
    assert set(hits) == {"all", "plain"} and same(hits["all"].metadata, STORABLE)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_unstorable_metadata_is_refused_before_anything_is_written(store, mode: str) -> None:
    for case, (metadata, key, kind) in UNSTORABLE.items():
        bad = TextNode(text="the bad node", id_=f"bad-{case}")
        bad.metadata.update(metadata)  # after construction: pydantic would refuse int keys
        nodes = [TextNode(text="a fine node", id_="fine", metadata={"ok": 1}), bad]
        with pytest.raises(ValueError) as raised:
            build(store, nodes, mode)
        message = str(raised.value)
        assert f"node 'bad-{case}'" in message, (case, message)
        assert key in message and kind in message, (case, message)
        assert "Allowed: str (no lone surrogate), int within 64 bits" in message, (case, message)
    flush(store)
    assert count_rows(store.client, store.collection_name) == 0  # not even the fine node


def test_the_store_checks_direct_adds_too(store) -> None:
    node = TextNode(text="x", id_="direct", metadata={"when": datetime.date(2024, 1, 2)})
    node.embedding = [0.1] * DIM
    with pytest.raises(ValueError, match=r"node 'direct'.*metadata\['when'\].*date"):
        store.add([node])
    with pytest.raises(ValueError, match=r"node 'direct'.*metadata\['when'\].*date"):
        asyncio.run(store.async_add([node]))
    node.metadata = {"when": "2024-01-02"}
    assert store.add([node]) == ["direct"]


def full_text_store(uri: str, name: str, full_text: str | None) -> CheckedMilvusVectorStore:
    if full_text is not None:
        require_full_text(uri)
    return open_vector_store(uri, name, dim=DIM, overwrite=True, full_text=full_text)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("full_text", [None, "auto"])
def test_metadata_keys_milvus_keeps_for_itself_are_refused_by_name(
    milvus_uri: str, collection_name: str, mode: str, full_text: str | None
) -> None:
    """``$meta`` (the dynamic field) and, on a full-text collection, ``sparse_embedding`` (the
    BM25 function's output) fail inside pymilvus at insert; they are refused first, by name.
    Other field names (``id``, ``text``...) are stored and come back."""
    store = full_text_store(milvus_uri, collection_name, full_text)
    try:
        reserved = ["$meta"] + (["sparse_embedding"] if full_text else [])
        assert store.reserved_metadata_keys() == frozenset(reserved)
        for key in reserved:
            bad = TextNode(text="the bad node", id_="bad", metadata={key: "v"})
            nodes = [TextNode(text="a fine node", id_="fine"), bad]
            with pytest.raises(ValueError) as raised:
                build(store, nodes, mode)
            assert str(raised.value).startswith(
                f"node 'bad' has the metadata key {key!r}, which Milvus keeps for itself"
            )
        flush(store)
        assert count_rows(store.client, store.collection_name) == 0  # not even the fine node
        ordinary = {"id": "mine", "text": "mine too", "embedding": [1], "doc_id": "d"}
        if full_text is None:
            ordinary["sparse_embedding"] = "a plain key here"
        build(store, [TextNode(text="fine", id_="kept", metadata=dict(ordinary))], mode)
        flush(store)
        assert fetch_nodes(store, ["kept"])["kept"].metadata == ordinary
    finally:
        store.client.drop_collection(collection_name)
