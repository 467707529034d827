"""Opening Milvus: uri rules (unit), the Lite folder, loading after a restart, flush, counting
and iterating rows on Milvus Lite and the Milvus server."""

from __future__ import annotations

from pathlib import Path

import pytest
from pymilvus import DataType
from pymilvus.client.types import LoadState

from llama_index_ext_advrag.milvus import (
    build_index_params,
    count_rows,
    flush,
    is_server_uri,
    open_client,
)
from llama_index_ext_advrag.milvus.connection import (
    _iter_collection,
    ensure_loaded,
    resolve_uri,
    server_version,
)

# --- unit ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "server"),
    [
        ("http://127.0.0.1:19530", True),
        ("HTTPS://milvus.example.com", True),
        ("tcp://localhost:19530", True),
        ("unix:/tmp/milvus.sock", True),
        ("./data/milvus.db", False),
        ("/abs/path/store.db", False),
        ("milvus.db", False),
        (Path("relative/store.db"), False),
    ],
)
def test_is_server_uri(uri: str, server: bool) -> None:
    assert is_server_uri(uri) is server


@pytest.mark.parametrize("uri", ["", "   ", None])
def test_empty_uri_is_a_clear_error(uri: str | None) -> None:
    with pytest.raises(ValueError, match="empty Milvus uri"):
        resolve_uri(uri)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty Milvus uri"):
        open_client(uri)  # type: ignore[arg-type]


def test_lite_path_must_end_in_db(tmp_path: Path) -> None:
    bad = str(tmp_path / "store.sqlite")
    with pytest.raises(ValueError, match=r"store\.sqlite"):
        resolve_uri(bad)


def test_server_uri_is_returned_untouched() -> None:
    assert resolve_uri(" http://127.0.0.1:19530 ") == "http://127.0.0.1:19530"


def test_resolve_uri_creates_the_lite_parent_folder(tmp_path: Path) -> None:
    target = tmp_path / "nested" / "deeper" / "milvus.db"
    assert resolve_uri(target) == str(target)
    assert target.parent.is_dir()


class _VersionOnly:
    def __init__(self, version: str) -> None:
        self.version = version

    def get_server_version(self) -> str:
        return self.version


@pytest.mark.parametrize(
    ("reported", "parsed"),
    [
        ("v2.3.5-lite", (2, 3, 5)),
        ("v2.5.12", (2, 5, 12)),
        ("2.4", (2, 4, 0)),
        ("milvus_lite-3.2.2", None),
        ("unknown", None),
    ],
)
def test_server_version(reported: str, parsed: tuple[int, int, int] | None) -> None:
    assert server_version(_VersionOnly(reported)) == parsed  # type: ignore[arg-type]


def test_flush_rejects_other_objects() -> None:
    with pytest.raises(TypeError, match="str"):
        flush("not a client")


# --- Milvus Lite and server ------------------------------------------------------------------


@pytest.mark.milvus_lite
def test_open_client_creates_the_lite_folder(tmp_path: Path) -> None:
    uri = tmp_path / "a" / "b" / "milvus.db"
    client = open_client(uri)
    try:
        assert client.list_collections() == []
    finally:
        client.close()
    assert uri.parent.is_dir()


def test_search_works_after_a_restart(
    milvus_uri: str, collection_name: str, run_child, child_module
) -> None:
    """Another process creates, fills and flushes an indexed collection and exits; a new
    client on the same uri must be able to search it. (Milvus Lite locks its file, so no
    client of this process may be open while the child writes.)"""
    run_child("client", milvus_uri, collection_name, "IVF_FLAT")
    client = open_client(milvus_uri)
    try:
        if not is_server_uri(milvus_uri):
            # the reason ensure_loaded exists: Lite reopens indexed collections released
            assert client.get_load_state(collection_name)["state"] != LoadState.Loaded
        ensure_loaded(client, collection_name)
        assert client.get_load_state(collection_name)["state"] == LoadState.Loaded
        hits = client.search(
            collection_name, [child_module.client_vector(17)], limit=1, output_fields=["id"]
        )
        assert hits[0][0]["id"] == 17
        assert count_rows(client, collection_name) == child_module.ROWS
    finally:
        client.drop_collection(collection_name)
        client.close()


def _small_collection(client, name: str, rows: int) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
    index_params = build_index_params(client, "vec", "FLAT", num_rows=rows, dim=2)
    client.create_collection(
        name, schema=schema, index_params=index_params, consistency_level="Session"
    )
    client.insert(name, [{"id": i, "vec": [float(i), 1.0]} for i in range(rows)])


def test_ensure_loaded_after_release_and_on_missing_collection(
    client, collection_name: str
) -> None:
    _small_collection(client, collection_name, 10)
    client.release_collection(collection_name)
    ensure_loaded(client, collection_name)
    ensure_loaded(client, collection_name)  # idempotent
    assert len(client.search(collection_name, [[3.0, 1.0]], limit=2)[0]) == 2
    with pytest.raises(ValueError, match=f"'{collection_name}_missing'"):
        ensure_loaded(client, f"{collection_name}_missing")


def test_count_iterate_and_flush(client, collection_name: str) -> None:
    _small_collection(client, collection_name, 1300)
    client.delete(collection_name, ids=[0, 1])
    flush(client, collection_name)
    assert count_rows(client, collection_name) == 1298
    assert count_rows(client, collection_name, filter="id < 100") == 98
    ids = [row["id"] for row in _iter_collection(client, collection_name, ["id"], batch_size=500)]
    assert sorted(ids) == list(range(2, 1300))
    with pytest.raises(ValueError, match="batch_size"):
        list(_iter_collection(client, collection_name, ["id"], batch_size=0))
    with pytest.raises(ValueError, match="collection_name is required"):
        flush(client)
