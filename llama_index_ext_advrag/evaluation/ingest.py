"""Ingest a corpus once per parser, and reuse an index whose corpus and settings are unchanged.

Every index is named by a content hash of (the documents' ids, texts and metadata, the parser
and its settings, the embedding model): a re-run with the same corpus and settings opens the
existing collection; any change gives a new name, so the index is rebuilt (and the stale
collection of the same parser is dropped). A small manifest per collection under
``state_dir/indexes/`` records the row count; an index is reused only when its manifest exists
and the collection still holds that many rows.

Within one run an in-memory embedding memo (:class:`MemoEmbedding`) embeds a text shared by
several parsers (the same sentence in three sentence-level parsers) once; the ingest record
says how many texts each parser really embedded.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, MetadataMode

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
INSERT_BATCH = 2000
HEARTBEAT_SECONDS = 4.0


class MemoEmbedding(BaseEmbedding):
    """An embedding model that remembers the vectors it computed (for one run).

    Texts and queries are remembered apart (a query may carry an instruction a passage does
    not). A query is embedded alone, so its remembered vector is the one a new call would
    give; ``embedded`` counts the texts actually sent to the model.
    """

    _inner: BaseEmbedding = PrivateAttr()
    _memo: dict[str, list[float]] = PrivateAttr(default_factory=dict)
    _queries: dict[str, list[float]] = PrivateAttr(default_factory=dict)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _embedded: int = PrivateAttr(default=0)

    def __init__(self, inner: BaseEmbedding, **kwargs: Any) -> None:
        super().__init__(
            model_name=inner.model_name, embed_batch_size=inner.embed_batch_size, **kwargs
        )
        self._inner = inner

    @classmethod
    def class_name(cls) -> str:
        return "MemoEmbedding"

    @property
    def inner(self) -> BaseEmbedding:
        return self._inner

    @property
    def embedded(self) -> int:
        return self._embedded

    def _get_query_embedding(self, query: str) -> list[float]:
        with self._lock:
            known = self._queries.get(query)
        if known is None:
            known = self._inner.get_query_embedding(query)
            with self._lock:
                self._queries[query] = known
        return list(known)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        with self._lock:
            known = self._queries.get(query)
        if known is None:
            known = await self._inner.aget_query_embedding(query)
            with self._lock:
                self._queries[query] = known
        return list(known)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _fill(self, texts: Sequence[str], show_progress: bool = False) -> None:
        """Embed the texts not remembered yet, all of them in one length-ordered pass.

        Sorting the whole call (not each model batch of it) keeps padding small: a batch of
        64 sentences in reading order is padded to its longest one, which for papers costs
        about 1.5x the sorted pass."""
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if not missing:
            return
        missing.sort(key=len)
        vectors = self._inner.get_text_embedding_batch(missing, show_progress=show_progress)
        with self._lock:
            self._memo.update(zip(missing, vectors, strict=True))
            self._embedded += len(missing)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._fill(texts)
        with self._lock:
            return [self._memo[t] for t in texts]

    def get_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[list[float]]:
        """Embed what is new in ``texts`` in one sorted pass (progress over those only), then
        answer every text from the memo through the base class (its events still fire)."""
        self._fill(texts, show_progress)
        return super().get_text_embedding_batch(texts, show_progress=False, **kwargs)


def close_quietly(client: Any) -> None:
    """Close a Milvus client, ignoring a connection that is already gone (imported late:
    this module loads without pymilvus)."""
    from llama_index_ext_advrag.milvus.connection import close_quietly as close

    close(client)


def corpus_fingerprint(documents: Sequence[Document]) -> str:
    """A hash of the documents' ids, texts and metadata, independent of their order."""
    digest = hashlib.sha256()
    for document in sorted(documents, key=lambda d: d.id_):
        digest.update(document.id_.encode("utf-8") + b"\0")
        digest.update(hashlib.sha256(document.text.encode("utf-8")).digest())
        digest.update(json.dumps(document.metadata, sort_keys=True, default=str).encode("utf-8"))
    return digest.hexdigest()


def index_key(corpus: str, parser: str, settings: dict[str, Any], embed_model: str) -> str:
    """The content hash naming one index."""
    payload = json.dumps(
        {
            "format": FORMAT_VERSION,
            "corpus": corpus,
            "parser": parser,
            "settings": settings,
            "embed_model": embed_model,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def collection_name_for(parser: str, key: str) -> str:
    """A valid Milvus collection name: letters, digits, underscores, starting with a letter."""
    slug = re.sub(r"[^0-9A-Za-z]+", "_", parser).strip("_").lower()[:40] or "index"
    return f"advrag_{slug}_{key[:12]}"


def uri_slug(uri: str) -> str:
    return hashlib.sha1(uri.encode("utf-8")).hexdigest()[:12]


@dataclass
class IngestRecord:
    """What ingesting one parser cost, or that its index was reused."""

    parser: str
    collection: str
    nodes: int
    seconds: float
    reused: bool
    embedded_texts: int = 0
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class BuiltIndex:
    """A dense index ready to query (its store, and the nodes when they were parsed now)."""

    parser: str
    collection: str
    vector_store: Any
    index: Any  # VectorStoreIndex
    nodes: list[BaseNode] | None
    record: IngestRecord


class IndexStore:
    """Builds or reopens the indexes of one corpus on one Milvus ``uri``.

    Args:
        documents: the corpus.
        uri: Milvus Lite file or server URL.
        embed_model: the embedding model (wrapped in a :class:`MemoEmbedding`).
        state_dir: where manifests and BM25 indexes are kept (a local folder).
        token: server credentials.
        rebuild: ignore existing indexes.
        show_progress: tqdm bars while embedding.
    """

    def __init__(
        self,
        documents: Sequence[Document],
        uri: str,
        embed_model: BaseEmbedding,
        state_dir: str | Path,
        token: str = "",
        rebuild: bool = False,
        show_progress: bool = True,
        index_preset: str = "AUTO",
    ) -> None:
        self.documents = list(documents)
        self.uri = uri
        self.token = token
        self.embed_model = (
            embed_model if isinstance(embed_model, MemoEmbedding) else MemoEmbedding(embed_model)
        )
        self.rebuild = rebuild
        self.show_progress = show_progress
        self.index_preset = index_preset
        self.corpus = corpus_fingerprint(self.documents)
        self.manifest_dir = Path(state_dir) / "indexes" / uri_slug(uri)
        self.records: dict[str, IngestRecord] = {}
        self.used: list[str] = []  # index names asked for, in order (cached ones included)
        self._built: dict[str, Any] = {}
        self._dim: int | None = None
        self._heartbeat: tuple[threading.Event, threading.Thread, Any] | None = None

    # --- shared helpers -----------------------------------------------------------------------

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = len(self.embed_model.get_query_embedding("dimension probe"))
        return self._dim

    def warm_up(self) -> None:
        """Load the embedding model and start the Milvus connection before anything is timed."""
        from llama_index_ext_advrag.milvus import open_client

        _ = self.dim
        open_client(self.uri, token=self.token).close()

    def start_heartbeat(self, interval: float = HEARTBEAT_SECONDS) -> None:
        """Keep the Milvus Lite connection busy during long embedding gaps.

        pymilvus shares one gRPC channel per address and pings it every 10 s; Milvus Lite's
        server answers pings on a channel that carries no calls with GOAWAY "too_many_pings",
        after which opening the next collection fails. A cheap call every few seconds keeps
        data on the channel. Servers (http(s)://) need none. Stopped by :meth:`close`."""
        from llama_index_ext_advrag.milvus import is_server_uri, open_client

        if is_server_uri(self.uri) or self._heartbeat is not None:
            return
        client = open_client(self.uri, token=self.token)
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(interval):
                try:
                    client.list_collections()
                except Exception as exc:  # the next real call reports a dead connection
                    logger.debug("heartbeat call failed: %s", exc)

        thread = threading.Thread(target=beat, name="advrag-milvus-heartbeat", daemon=True)
        thread.start()
        self._heartbeat = (stop, thread, client)

    def close(self) -> None:
        """Stop the heartbeat and close every client this store opened."""
        self.release()
        if self._heartbeat is not None:
            stop, thread, client = self._heartbeat
            stop.set()
            thread.join(timeout=10)
            close_quietly(client)
            self._heartbeat = None

    def key_for(self, parser: str, settings: dict[str, Any]) -> str:
        return index_key(self.corpus, parser, settings, self.embed_model.model_name)

    def _manifest_path(self, collection: str) -> Path:
        return self.manifest_dir / f"{collection}.json"

    def _read_manifest(self, collection: str) -> dict[str, Any] | None:
        path = self._manifest_path(collection)
        if self.rebuild or not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None

    def _write_manifest(self, record: IngestRecord) -> None:
        self.manifest_dir.mkdir(parents=True, exist_ok=True)
        data = {**asdict(record), "uri": self.uri, "written": time.time()}
        self._manifest_path(record.collection).write_text(
            json.dumps(data, indent=2, default=str), encoding="utf-8"
        )

    def _drop_stale(self, parser: str, keep: str) -> None:
        """Drop collections an earlier run built for ``parser`` with other content/settings."""
        if not self.manifest_dir.is_dir():
            return
        from llama_index_ext_advrag.milvus import open_client

        stale = []
        for path in self.manifest_dir.glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError):
                continue
            if data.get("parser") == parser and data.get("collection") != keep:
                stale.append((path, str(data["collection"])))
        if not stale:
            return
        client = open_client(self.uri, token=self.token)
        try:
            for path, collection in stale:
                for name in (
                    collection,
                    f"{collection}_parents",
                    f"{collection}_summary",
                    f"{collection}_details",
                ):
                    if client.has_collection(name):
                        client.drop_collection(name)
                path.unlink(missing_ok=True)
                logger.info("dropped stale index %s of %s", collection, parser)
        finally:
            client.close()

    def _rows(self, collection: str) -> int | None:
        from llama_index_ext_advrag.milvus import count_rows, open_client

        client = open_client(self.uri, token=self.token)
        try:
            if not client.has_collection(collection):
                return None
            return int(count_rows(client, collection))
        finally:
            client.close()

    # --- dense indexes over a node parser -----------------------------------------------------

    def vector_index(
        self,
        parser: str,
        make_parser: Callable[[], NodeParser],
        settings: dict[str, Any],
        transform: Callable[[list[BaseNode]], list[BaseNode]] | None = None,
    ) -> BuiltIndex:
        """Parse, embed and store the corpus with ``make_parser()`` once; reuse when unchanged.

        ``parser`` names the index (pipelines sharing it share the index); ``settings`` are
        the parser settings that enter the content hash; ``transform`` runs on the parsed nodes
        before embedding (e.g. ``UnitAnnotator``)."""
        self.used.append(parser)
        if parser in self._built:
            return self._built[parser]
        from llama_index.core import VectorStoreIndex

        from llama_index_ext_advrag.milvus import flush, open_vector_store

        key = self.key_for(parser, settings)
        collection = collection_name_for(parser, key)
        started = time.perf_counter()
        manifest = self._read_manifest(collection)
        rows = self._rows(collection) if manifest else None
        nodes: list[BaseNode] | None = None
        if manifest and rows is not None and rows == manifest.get("nodes"):
            store = open_vector_store(self.uri, collection, dim=self.dim, token=self.token)
            record = IngestRecord(
                parser, collection, rows, time.perf_counter() - started, True, 0, settings
            )
        else:
            before = self.embed_model.embedded
            nodes = make_parser().get_nodes_from_documents(self.documents)
            if transform is not None:
                nodes = transform(nodes)
            if not nodes:
                raise ValueError(f"parser {parser!r} made no nodes from the documents")
            texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
            vectors = self.embed_model.get_text_embedding_batch(
                texts, show_progress=self.show_progress
            )
            for node, vector in zip(nodes, vectors, strict=True):
                node.embedding = vector
            store = open_vector_store(
                self.uri,
                collection,
                dim=self.dim,
                token=self.token,
                overwrite=True,
                index_preset=self.index_preset,
                expected_rows=len(nodes),
            )
            for start in range(0, len(nodes), INSERT_BATCH):
                store.add(nodes[start : start + INSERT_BATCH])
            flush(store)
            record = IngestRecord(
                parser,
                collection,
                len(nodes),
                time.perf_counter() - started,
                False,
                self.embed_model.embedded - before,
                settings,
            )
            self._write_manifest(record)
            self._drop_stale(parser, collection)
        index = VectorStoreIndex.from_vector_store(store, embed_model=self.embed_model)
        record = self.records.setdefault(parser, record)  # a reopen keeps the build's record
        built = BuiltIndex(parser, collection, store, index, nodes, record)
        self._built[parser] = built
        return built

    def bm25(self, built: BuiltIndex, make_parser: Callable[[], NodeParser]) -> Any:
        """A BM25 retriever over the nodes of ``built``, persisted beside its manifest."""
        from llama_index_ext_advrag.retrievers import JiebaBM25Retriever

        folder = self.manifest_dir / f"{built.collection}.bm25"
        if built.nodes is None and (folder / "advrag_bm25.json").is_file():
            try:
                return JiebaBM25Retriever.from_persist_dir(folder)
            except (OSError, ValueError) as exc:
                logger.warning("BM25 index at %s unreadable (%s); rebuilding it", folder, exc)
        nodes = built.nodes
        if nodes is None:  # the dense index was reused: parse again (cheap), do not embed
            nodes = make_parser().get_nodes_from_documents(self.documents)
        retriever = JiebaBM25Retriever(nodes)
        retriever.persist(folder)
        return retriever

    # --- retrievers that build their own collections ------------------------------------------

    def layout_index(
        self,
        parser: str,
        settings: dict[str, Any],
        build: Callable[[str], Any],
        reopen: Callable[[str], Any],
    ) -> str:
        """Build (``build(collection)``) or reuse (``reopen(collection)`` succeeds) an index
        written by a retriever's own builder; returns its collection name."""
        self.used.append(parser)
        if parser in self._built:
            return self._built[parser]
        key = self.key_for(parser, settings)
        collection = collection_name_for(parser, key)
        started = time.perf_counter()
        manifest = self._read_manifest(collection)
        reused = False
        if manifest is not None:
            try:
                reopen(collection)
                reused = True
            except ValueError as exc:  # IndexLayoutError: the layout row is missing
                logger.info("index %s not reusable (%s); rebuilding", collection, exc)
        before = self.embed_model.embedded
        if not reused:
            build(collection)
        record = IngestRecord(
            parser,
            collection,
            int(manifest.get("nodes", 0)) if reused and manifest else self._rows(collection) or 0,
            time.perf_counter() - started,
            reused,
            0 if reused else self.embed_model.embedded - before,
            settings,
        )
        if not reused:
            self._write_manifest(record)
            self._drop_stale(parser, collection)
        self.records.setdefault(parser, record)
        self._built[parser] = collection
        return collection

    def release(self) -> None:
        """Close the Milvus clients of the open indexes (they reopen on the next request).

        Milvus Lite throttles a client that stays idle through a long ingest ("too_many_pings")
        and the next connection on the file can then fail, so no client is kept open while
        another parser embeds."""
        for name, built in list(self._built.items()):
            if isinstance(built, BuiltIndex):
                close_quietly(built.vector_store.client)
                del self._built[name]


__all__ = [
    "BuiltIndex",
    "IndexStore",
    "IngestRecord",
    "MemoEmbedding",
    "collection_name_for",
    "corpus_fingerprint",
    "index_key",
]
