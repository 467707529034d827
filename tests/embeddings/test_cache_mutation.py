"""CachedEmbedding pinned exactly (found by mutation testing, issue #39): what counts as a
damaged file, the journals moved aside with it, a file that cannot be moved, closing and
reopening, nested cache folders, the lock wait, and the uncached and async single paths."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding

from llama_index_ext_advrag.embeddings import CachedEmbedding
from llama_index_ext_advrag.embeddings import cache as module
from llama_index_ext_advrag.embeddings.cache import (
    CACHE_FILE_NAME,
    embedding_identity,
    is_corrupt_database,
    set_aside,
)


def named_error(kind: type[sqlite3.DatabaseError], message: str, name: str | None):
    error = kind(message)
    if name is not None:
        error.sqlite_errorname = name  # type: ignore[attr-defined]
    return error


def test_the_error_name_decides_over_the_message() -> None:
    assert is_corrupt_database(named_error(sqlite3.DatabaseError, "other", "SQLITE_CORRUPT_VTAB"))
    assert is_corrupt_database(named_error(sqlite3.DatabaseError, "other", "SQLITE_NOTADB"))
    busy = named_error(sqlite3.DatabaseError, "file is not a database", "SQLITE_BUSY")
    assert not is_corrupt_database(busy)


def test_without_a_name_only_a_plain_database_error_with_a_known_message_counts() -> None:
    assert is_corrupt_database(named_error(sqlite3.DatabaseError, "file is not a database", None))
    assert not is_corrupt_database(named_error(sqlite3.DatabaseError, "other", None))
    locked = named_error(sqlite3.OperationalError, "file is not a database", None)
    assert not is_corrupt_database(locked)


def test_set_aside_moves_the_journals_with_the_file(tmp_path: Path) -> None:
    file = tmp_path / CACHE_FILE_NAME
    for name in ("", "-journal", "-wal", "-shm"):
        (tmp_path / f"{CACHE_FILE_NAME}{name}").write_text(name or "db", encoding="utf-8")
    aside = set_aside(file, ValueError("bad"))
    assert aside == tmp_path / f"{CACHE_FILE_NAME}.corrupt"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{CACHE_FILE_NAME}.corrupt{name}" for name in ("", "-journal", "-wal", "-shm")
    )
    assert (tmp_path / f"{CACHE_FILE_NAME}.corrupt-wal").read_text(encoding="utf-8") == "-wal"


def test_a_file_that_cannot_be_moved_aside_is_named_with_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    file = tmp_path / CACHE_FILE_NAME
    file.write_text("garbage", encoding="utf-8")

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError("read-only folder")

    monkeypatch.setattr(Path, "replace", refuse)
    with pytest.raises(sqlite3.DatabaseError) as raised:
        set_aside(file, ValueError("file is not a database"))
    assert str(raised.value) == (
        f"the embedding cache file {file} is not a readable SQLite database (file is not a "
        "database) and could not be moved aside (read-only folder); delete it or give the "
        "cache another path"
    )


def test_close_then_use_again_and_close_twice(tmp_path: Path) -> None:
    never_opened = CachedEmbedding(HashEmbedding(dim=4), path=tmp_path / "unused")
    never_opened.close()
    cached = CachedEmbedding(HashEmbedding(dim=4), path=tmp_path / "a" / "b")  # nested, new
    first = cached.get_text_embedding("one")
    cached.close()
    cached.close()
    assert cached.get_text_embedding("two") == CachedEmbedding(
        HashEmbedding(dim=4)
    ).get_text_embedding("two")
    cached.close()
    again = CachedEmbedding(HashEmbedding(dim=4), path=tmp_path / "a" / "b")
    assert again.get_text_embedding_batch(["one", "two"])[0] == first
    assert (again.stats.hits, again.stats.misses) == (2, 0)  # both were written to disk
    again.close()


def test_the_file_waits_a_minute_for_another_writers_lock(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[dict] = []
    connect = sqlite3.connect

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        opened.append(kwargs)
        return connect(*args, **kwargs)

    monkeypatch.setattr(module.sqlite3, "connect", spy)
    cached = CachedEmbedding(HashEmbedding(dim=4), path=tmp_path)
    cached.get_text_embedding("one")
    cached.close()
    assert [k["timeout"] for k in opened] == [60]


def test_async_single_text_and_uncached_query() -> None:
    inner = HashEmbedding(dim=4)
    cached = CachedEmbedding(inner, cache_queries=False)
    assert asyncio.run(cached.aget_text_embedding("one")) == inner.get_text_embedding("one")
    assert asyncio.run(cached.aget_query_embedding("q")) == inner.get_query_embedding("q")


class Configured(HashEmbedding):
    """A model whose settings change its vectors."""

    normalize: bool = True
    dimensions: int = 8


def test_the_identity_names_the_settings_that_change_vectors() -> None:
    model = Configured(dim=4)
    assert (
        embedding_identity(model) == f"HashEmbedding|{model.model_name}|normalize=True|dimensions=8"
    )


def test_defaults_keyword_settings_and_class_name() -> None:
    cached = CachedEmbedding(HashEmbedding(dim=4), embed_batch_size=8)
    assert cached.path is None and cached.embed_batch_size == 8
    assert CachedEmbedding.class_name() == "CachedEmbedding"


def test_a_damaged_file_is_warned_about_in_full(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    file = tmp_path / CACHE_FILE_NAME
    file.write_bytes(b"not a database at all, " * 100)
    cached = CachedEmbedding(HashEmbedding(dim=4), path=tmp_path)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.embeddings.cache"):
        cached.get_text_embedding("one")
    cached.close()
    aside = tmp_path / f"{CACHE_FILE_NAME}.corrupt"
    assert caplog.messages == [
        f"embedding cache {file} is not a readable SQLite database (file is not a database); "
        f"moved it to {aside} and started an empty cache: its vectors will be computed again"
    ]


def test_a_damaged_file_that_cannot_be_moved_is_named_with_its_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / CACHE_FILE_NAME).write_bytes(b"not a database at all, " * 100)

    def refuse(self: Path, target: Path) -> Path:
        raise PermissionError("read-only folder")

    monkeypatch.setattr(Path, "replace", refuse)
    cached = CachedEmbedding(HashEmbedding(dim=4), path=tmp_path)
    with pytest.raises(sqlite3.DatabaseError, match=r"database \(file is not a database\) and"):
        cached.get_text_embedding("one")
    cached.close()


@pytest.mark.parametrize("use_async", [False, True])
def test_query_batches_share_the_single_querys_entries(use_async: bool) -> None:
    cached = CachedEmbedding(HashEmbedding(dim=4))
    if use_async:
        asyncio.run(cached.aget_query_embedding_batch(["a", "b"]))
    else:
        cached.get_query_embedding_batch(["a", "b"])
    cached.reset_stats()
    cached.get_query_embedding("a")
    assert (cached.stats.hits, cached.stats.misses) == (1, 0)


@pytest.mark.parametrize("cache_queries", [True, False])
def test_async_query_batches_of_a_core_model(cache_queries: bool) -> None:
    inner = HashEmbedding(dim=4)  # a core BaseEmbedding: asked once per query
    cached = CachedEmbedding(inner, cache_queries=cache_queries)
    vectors = asyncio.run(cached.aget_query_embedding_batch(["a b", "c"]))
    expected = [inner.get_query_embedding("a b"), inner.get_query_embedding("c")]
    assert vectors == [pytest.approx(v, abs=1e-6) for v in expected]  # stored as float32


class DropsOnce(HashEmbedding):
    """Returns one vector too few for its first batch."""

    dropped: bool = False

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        vectors = [self._get_text_embedding(t) for t in texts]
        if not self.dropped:
            self.dropped = True
            return vectors[1:]
        return vectors


def test_a_model_returning_too_few_vectors_leaves_nothing_cached() -> None:
    cached = CachedEmbedding(DropsOnce(dim=4))
    with pytest.raises(ValueError, match="zip"):
        cached.get_text_embedding_batch(["a", "b"])
    cached.reset_stats()
    assert cached.get_text_embedding("a") == HashEmbedding(dim=4).get_text_embedding("a")
    assert (cached.stats.hits, cached.stats.misses) == (0, 1)
