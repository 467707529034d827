"""An embedding cache keyed by model identity and text hash: a re-ingest embeds nothing twice.

:class:`CachedEmbedding` wraps any LlamaIndex ``BaseEmbedding``. Each vector is stored under
``sha256(model key, kind, text)`` where the kind separates query from text embeddings (e5 models
embed the same string differently as a query and as a passage) and the model key separates
models, so one cache directory can serve several models. By default the cache lives in memory
for the wrapper's lifetime; with ``path`` it is also kept in a SQLite file (``float32`` blobs,
no pickle) that later runs read. A cache file that is not a sound SQLite database (truncated,
overwritten) is moved aside with a warning naming both paths and the cache starts empty: every
vector in it can be computed again.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_ext_advrag.embeddings.inputs import CleanInputEmbedding

logger = logging.getLogger(__name__)

CACHE_FILE_NAME = "embeddings.sqlite"
QUERY_KIND = "query"
TEXT_KIND = "text"
# Attributes that change what a model returns for the same text, beyond its name.
IDENTITY_ATTRIBUTES = (
    "query_instruction",
    "text_instruction",
    "normalize",
    "dimensions",
    "max_tokens",
    "precision",
)
SQLITE_MAX_PARAMS = 900  # stay under SQLite's bound-parameter limit per statement
CORRUPT_SUFFIX = ".corrupt"
# Python < 3.11 has no error names; there, corruption is a plain DatabaseError and locks, I/O
# and permission errors are OperationalError.
_CORRUPTION_MESSAGES = ("file is not a database", "database disk image is malformed")
_Result = TypeVar("_Result")


def embedding_identity(embed_model: BaseEmbedding) -> str:
    """A string naming what ``embed_model`` computes: its class, model name and the settings
    that change its vectors (instructions, normalisation, dimensions, tokens read)."""
    parts = [embed_model.class_name(), str(embed_model.model_name)]
    for name in IDENTITY_ATTRIBUTES:
        value = getattr(embed_model, name, None)
        if value is not None:
            parts.append(f"{name}={value}")
    return "|".join(parts)


def cache_key(model_key: str, kind: str, text: str) -> str:
    """The hex SHA-256 of model key, kind and text (NUL-separated)."""
    return hashlib.sha256(f"{model_key}\x00{kind}\x00{text}".encode()).hexdigest()


def is_corrupt_database(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says the file is not a sound SQLite database (not: locked, I/O, rights).

    >>> is_corrupt_database(sqlite3.DatabaseError("file is not a database"))
    True
    >>> is_corrupt_database(sqlite3.OperationalError("database is locked"))
    False
    """
    name = getattr(exc, "sqlite_errorname", None)
    if name is not None:
        return name == "SQLITE_NOTADB" or name.startswith("SQLITE_CORRUPT")
    return type(exc) is sqlite3.DatabaseError and str(exc) in _CORRUPTION_MESSAGES


def set_aside(file: Path, reason: Exception) -> Path:
    """Move the unreadable cache ``file`` (and any journal beside it) to a free
    ``<name>.corrupt[-N]`` path in the same folder and return that path.

    Raises:
        sqlite3.DatabaseError: the file cannot be moved; the message names it and says what to do.
    """
    aside = file.with_name(file.name + CORRUPT_SUFFIX)
    number = 1
    while aside.exists():
        number += 1
        aside = file.with_name(f"{file.name}{CORRUPT_SUFFIX}-{number}")
    try:
        file.replace(aside)
    except OSError as move_error:
        raise sqlite3.DatabaseError(
            f"the embedding cache file {file} is not a readable SQLite database ({reason}) and "
            f"could not be moved aside ({move_error}); delete it or give the cache another path"
        ) from reason
    for journal in ("-journal", "-wal", "-shm"):
        stale = file.with_name(file.name + journal)
        if stale.exists():
            stale.replace(aside.with_name(aside.name + journal))
    return aside


@dataclass
class CacheStats:
    """Texts served from the cache (``hits``) and texts the wrapped model embedded (``misses``;
    a text repeated within one call is embedded once and counted once)."""

    hits: int = 0
    misses: int = 0


class CachedEmbedding(CleanInputEmbedding):
    """Wrap an embedding model so that every distinct text is embedded once.

    A query or text that is not a str raises a ``TypeError``; lone surrogates become U+FFFD
    (with a warning) before they are hashed or reach ``inner``.

    Args:
        inner: the model that computes missing vectors.
        path: a directory for a persistent SQLite cache (created if missing); ``None`` keeps
            the cache in memory only, for this object's lifetime. A file there that is not a
            sound SQLite database is moved to ``embeddings.sqlite.corrupt`` with a warning and
            the cache starts empty.
        model_key: the model identity in the keys; default :func:`embedding_identity` of
            ``inner``. Change it when the same model name computes different vectors.
        cache_queries: also cache query embeddings (default); off for query streams that
            never repeat.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> cached = CachedEmbedding(MockEmbedding(embed_dim=4))
        >>> _ = cached.get_text_embedding_batch(["a", "b", "a"])
        >>> _ = cached.get_text_embedding_batch(["a", "b"])
        >>> (cached.stats.misses, cached.stats.hits)
        (2, 3)
    """

    path: str | None = Field(default=None, description="SQLite cache directory; None = memory.")
    model_key: str = Field(default="", description="Model identity in the cache keys.")
    cache_queries: bool = Field(default=True, description="Also cache query embeddings.")
    embed_batch_size: int = Field(
        default=1024, gt=0, le=2048, description="Texts looked up per batch."
    )

    _inner: BaseEmbedding = PrivateAttr()
    _memory: dict[str, np.ndarray] = PrivateAttr(default_factory=dict)
    _db: sqlite3.Connection | None = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _stats: CacheStats = PrivateAttr(default_factory=CacheStats)

    def __init__(
        self,
        inner: BaseEmbedding,
        path: str | Path | None = None,
        model_key: str | None = None,
        cache_queries: bool = True,
        **kwargs: Any,
    ) -> None:
        if not isinstance(inner, BaseEmbedding):
            raise TypeError(f"inner must be a BaseEmbedding, got {type(inner).__name__}")
        kwargs.setdefault("model_name", inner.model_name)
        fields: dict[str, Any] = {
            "path": None if path is None else str(path),
            "model_key": model_key or embedding_identity(inner),
            "cache_queries": cache_queries,
        }
        super().__init__(**fields, **kwargs)
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    @property
    def inner(self) -> BaseEmbedding:
        """The wrapped model."""
        return self._inner

    @property
    def stats(self) -> CacheStats:
        """Hits and misses since construction (or :meth:`reset_stats`)."""
        return self._stats

    def reset_stats(self) -> None:
        self._stats = CacheStats()

    def close(self) -> None:
        """Close the SQLite file (the memory cache stays usable)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    # --- storage ---------------------------------------------------------------------------

    def _connection(self, folder: Path) -> sqlite3.Connection:
        """The SQLite connection, opened on first use (call with the lock held)."""
        if self._db is None:
            folder.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(
                folder / CACHE_FILE_NAME, timeout=60, check_same_thread=False
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS embeddings (key TEXT PRIMARY KEY, vector BLOB)"
            )
        return self._db

    def _on_disk(self, operation: Callable[[sqlite3.Connection], _Result]) -> _Result | None:
        """Run ``operation`` on the SQLite file (``None`` without ``path``; lock held). When the
        file turns out not to be a sound database, move it aside, warn, and run ``operation``
        once more on a new, empty file."""
        if self.path is None:
            return None
        folder = Path(self.path)
        try:
            return operation(self._connection(folder))
        except sqlite3.DatabaseError as exc:
            if not is_corrupt_database(exc):
                raise
            if self._db is not None:
                self._db.close()
                self._db = None
            file = folder / CACHE_FILE_NAME
            aside = set_aside(file, exc)
            logger.warning(
                "embedding cache %s is not a readable SQLite database (%s); moved it to %s and "
                "started an empty cache: its vectors will be computed again",
                file,
                exc,
                aside,
            )
            return operation(self._connection(folder))

    def _partition(self, kind: str, texts: Sequence[str]) -> tuple[list[str], list[str]]:
        """The keys of ``texts`` and the distinct keys still missing after memory and disk."""
        keys = [cache_key(self.model_key, kind, text) for text in texts]
        with self._lock:
            unknown = [key for key in dict.fromkeys(keys) if key not in self._memory]
            if unknown:
                self._memory.update(self._on_disk(lambda db: _read(db, unknown)) or {})
            missing = [key for key in unknown if key not in self._memory]
        return keys, missing

    def _remember(self, keys: Sequence[str], vectors: Sequence[Embedding]) -> None:
        arrays = [np.asarray(v, dtype=np.float32) for v in vectors]
        rows = [(key, array.tobytes()) for key, array in zip(keys, arrays, strict=True)]
        with self._lock:
            self._memory.update(zip(keys, arrays, strict=True))
            self._on_disk(lambda db: _write(db, rows))

    def _assemble(self, keys: Sequence[str], missing: Sequence[str]) -> list[Embedding]:
        self._stats.misses += len(missing)
        self._stats.hits += len(keys) - len(missing)
        return [self._memory[key].tolist() for key in keys]

    @staticmethod
    def _first_texts(
        keys: Sequence[str], texts: Sequence[str], missing: Sequence[str]
    ) -> list[str]:
        """The text of each missing key (its first occurrence)."""
        text_of = dict(zip(reversed(keys), reversed(texts), strict=True))
        return [text_of[key] for key in missing]

    # --- sync ------------------------------------------------------------------------------

    def _texts(self, texts: list[str]) -> list[Embedding]:
        keys, missing = self._partition(TEXT_KIND, texts)
        if missing:
            todo = self._first_texts(keys, texts, missing)
            self._remember(missing, self._inner.get_text_embedding_batch(todo))
        return self._assemble(keys, missing)

    def _get_query_embedding(self, query: str) -> Embedding:
        if not self.cache_queries:
            return self._inner.get_query_embedding(query)
        keys, missing = self._partition(QUERY_KIND, [query])
        if missing:
            self._remember(missing, [self._inner.get_query_embedding(query)])
        return self._assemble(keys, missing)[0]

    def _get_text_embedding(self, text: str) -> Embedding:
        return self._texts([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return self._texts(texts)

    def _get_query_embeddings(self, queries: list[str]) -> list[Embedding]:
        if not self.cache_queries:
            return _inner_queries(self._inner, queries)
        keys, missing = self._partition(QUERY_KIND, queries)
        if missing:
            todo = self._first_texts(keys, queries, missing)
            self._remember(missing, _inner_queries(self._inner, todo))
        return self._assemble(keys, missing)

    # --- async: the same steps; disk and the model run off the event loop ------------------

    async def _atexts(self, texts: list[str]) -> list[Embedding]:
        keys, missing = await asyncio.to_thread(self._partition, TEXT_KIND, texts)
        if missing:
            todo = self._first_texts(keys, texts, missing)
            vectors = await self._inner.aget_text_embedding_batch(todo)
            await asyncio.to_thread(self._remember, missing, vectors)
        return self._assemble(keys, missing)

    async def _aget_query_embedding(self, query: str) -> Embedding:
        if not self.cache_queries:
            return await self._inner.aget_query_embedding(query)
        keys, missing = await asyncio.to_thread(self._partition, QUERY_KIND, [query])
        if missing:
            vector = await self._inner.aget_query_embedding(query)
            await asyncio.to_thread(self._remember, missing, [vector])
        return self._assemble(keys, missing)[0]

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return (await self._atexts([text]))[0]

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await self._atexts(texts)

    async def _aget_query_embeddings(self, queries: list[str]) -> list[Embedding]:
        if not self.cache_queries:
            return await _ainner_queries(self._inner, queries)
        keys, missing = await asyncio.to_thread(self._partition, QUERY_KIND, queries)
        if missing:
            todo = self._first_texts(keys, queries, missing)
            vectors = await _ainner_queries(self._inner, todo)
            await asyncio.to_thread(self._remember, missing, vectors)
        return self._assemble(keys, missing)


def _inner_queries(inner: BaseEmbedding, queries: list[str]) -> list[Embedding]:
    """``inner``'s query vectors: in one batch when it has one (the pack's models)."""
    if isinstance(inner, CleanInputEmbedding):
        return inner.get_query_embedding_batch(queries)
    return [inner.get_query_embedding(query) for query in queries]


async def _ainner_queries(inner: BaseEmbedding, queries: list[str]) -> list[Embedding]:
    if isinstance(inner, CleanInputEmbedding):
        return await inner.aget_query_embedding_batch(queries)
    return [await inner.aget_query_embedding(query) for query in queries]


def _read(db: sqlite3.Connection, keys: Sequence[str]) -> dict[str, np.ndarray]:
    """The stored vectors among ``keys``."""
    found: dict[str, np.ndarray] = {}
    for start in range(0, len(keys), SQLITE_MAX_PARAMS):
        chunk = list(keys[start : start + SQLITE_MAX_PARAMS])
        marks = ",".join("?" * len(chunk))
        rows = db.execute(f"SELECT key, vector FROM embeddings WHERE key IN ({marks})", chunk)
        for key, blob in rows:
            found[key] = np.frombuffer(blob, dtype=np.float32)
    return found


def _write(db: sqlite3.Connection, rows: Sequence[tuple[str, bytes]]) -> None:
    db.executemany("INSERT OR REPLACE INTO embeddings VALUES (?, ?)", rows)
    db.commit()


__all__ = [
    "CacheStats",
    "CachedEmbedding",
    "cache_key",
    "embedding_identity",
    "is_corrupt_database",
    "set_aside",
]
