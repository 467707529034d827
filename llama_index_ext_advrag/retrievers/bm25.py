"""BM25 over LlamaIndex nodes with bm25s, Chinese-aware word tokenisation, and persistence.

Documents and queries are tokenised with :class:`~llama_index_ext_advrag.text.words.WordTokenizer`
(jieba for Chinese runs, stemmed English without stop words). The index is saved with bm25s'
own ``save``/``load`` next to a ``nodes.jsonl`` (node ids, texts, metadata, relationships) and
the tokenizer settings, so a reloaded index returns the same nodes with the same scores.
:func:`bm25_persist_dir` puts the index beside a Milvus Lite file (``<file>.bm25/<collection>``)
or under an explicit folder for a Milvus server.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import uuid
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore.utils import doc_to_json, json_to_doc

from llama_index_ext_advrag.queries import clean_query_bundle
from llama_index_ext_advrag.retrievers._config import (
    ConfiguredRetriever,
    setting_names,
    settings_model,
)
from llama_index_ext_advrag.text.words import WordTokenizer
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)

DEFAULT_SIMILARITY_TOP_K = 10
BM25Method = Literal["lucene", "robertson", "atire", "bm25l", "bm25+"]
BM25_METHODS: tuple[str, ...] = get_args(BM25Method)
TRACE_COMPONENT = "bm25"
CONFIG_FILE = "advrag_bm25.json"
NODES_FILE = "nodes.jsonl"
FORMAT_VERSION = 1


def bm25_persist_dir(uri: str, collection_name: str, persist_dir: str | Path | None = None) -> Path:
    """Where the BM25 index of ``collection_name`` lives beside the vector store at ``uri``.

    ``persist_dir/<collection>`` when given; otherwise ``<lite file>.bm25/<collection>`` for a
    Milvus Lite file. A Milvus server has no local folder, so ``persist_dir`` is required.

    Raises:
        ValueError: ``uri`` is a server and no ``persist_dir`` was given, or the collection name is
            empty or contains a path separator.
    """
    if not collection_name or "/" in collection_name or "\\" in collection_name:
        raise ValueError(f"collection_name {collection_name!r} must be a plain, non-empty name")
    if persist_dir is not None:
        return Path(persist_dir) / collection_name
    from llama_index_ext_advrag.milvus.connection import is_server_uri

    if is_server_uri(uri):
        raise ValueError(
            f"uri {uri!r} is a Milvus server, which keeps no local folder: pass persist_dir"
        )
    return Path(f"{uri}.bm25") / collection_name


def replace_folder(new: Path, target: Path) -> None:
    """Put the folder ``new`` at ``target`` by renames; an old ``target`` is removed after.

    Between the two renames ``target`` is briefly absent (a reader gets "no index", never a
    mix of old and new files)."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{uuid.uuid4().hex[:8]}")
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def top_k_indices(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the ``k`` best positive scores, best first, ties by index (deterministic)."""
    positive = np.flatnonzero(scores > 0)
    if positive.size == 0 or k <= 0:
        return []
    order = np.lexsort((positive, -scores[positive]))
    return [int(i) for i in positive[order[:k]]]


class JiebaBM25Retriever(ConfiguredRetriever):
    """Lexical retrieval with BM25 (bm25s), Chinese (jieba) + English word tokenisation, persistable.

    Named apart from ``llama-index-retrievers-bm25``'s ``BM25Retriever`` (English only) so both
    can be imported in one app; the old name here, :class:`BM25Retriever`, still works and warns.

    Args:
        nodes: the nodes to index (their text, without metadata). Node ids must be unique.
        similarity_top_k: results returned per query (only nodes sharing a term score > 0).
        tokenizer: the :class:`WordTokenizer`; default jieba search mode + English stemming.
        k1, b: BM25 parameters.
        method: a bm25s scoring variant (``"lucene"`` default).

    The settings are fields (``tokenizer``, ``k1``, ``b`` and ``method`` shape the index and
    are fixed once it is built); :meth:`to_dict` / ``from_dict(data, nodes=...)`` round-trip
    them, :meth:`persist` / :meth:`from_persist_dir` save and reload the index with them.

    Raises:
        ValueError: ``similarity_top_k < 1``, a bad ``k1``/``b``/``method``, duplicate node ids.

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> nodes = [TextNode(text="首富来自美国", id_="a"), TextNode(text="Cats purr", id_="b")]
        >>> [n.node.node_id for n in JiebaBM25Retriever(nodes, similarity_top_k=2).retrieve("美国")]
        ['a']
    """

    similarity_top_k: int = Field(
        default=DEFAULT_SIMILARITY_TOP_K,
        ge=1,
        description="Results returned per query (only nodes sharing a term score > 0).",
    )
    tokenizer: WordTokenizer = Field(
        default_factory=WordTokenizer,
        frozen=True,
        description="How texts and queries become terms (fixed once indexed).",
    )
    k1: float = Field(
        default=1.5, ge=0.0, frozen=True, description="BM25 term-frequency saturation."
    )
    b: float = Field(
        default=0.75, ge=0.0, le=1.0, frozen=True, description="BM25 length normalisation."
    )
    method: BM25Method = Field(
        default="lucene", frozen=True, description="The bm25s scoring variant."
    )

    _nodes: list[BaseNode] = PrivateAttr(default_factory=list)
    _index: Any = PrivateAttr(default=None)

    def __init__(
        self,
        nodes: Sequence[BaseNode] = (),
        tokenizer: WordTokenizer | None = None,
        **settings: Any,
    ) -> None:
        if tokenizer is not None:
            settings["tokenizer"] = tokenizer
        super().__init__(**settings)
        self._nodes = list(nodes)
        ids = [node.node_id for node in self._nodes]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"node id {duplicate!r} occurs more than once")
        self._index = self._build_index()

    @classmethod
    def class_name(cls) -> str:
        return "JiebaBM25Retriever"

    @classmethod
    def from_defaults(cls, nodes: Sequence[BaseNode], **kwargs: Any) -> JiebaBM25Retriever:
        """Build from nodes (``docstore`` users: pass ``list(docstore.docs.values())``)."""
        return cls(nodes=nodes, **kwargs)

    @property
    def nodes(self) -> list[BaseNode]:
        """The indexed nodes (a new list; the nodes themselves are shared)."""
        return list(self._nodes)

    def _build_index(self) -> Any:
        if not self._nodes:
            return None
        import bm25s

        texts = [node.get_content(metadata_mode=MetadataMode.NONE) for node in self._nodes]
        index = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
        index.index(self.tokenizer.tokenize_many(texts), show_progress=False)
        return index

    # --- persistence ---------------------------------------------------------------------------

    def persist(self, persist_dir: str | Path) -> Path:
        """Save the bm25s index, the nodes and the settings under ``persist_dir``.

        Everything is written to a temporary sibling folder first and swapped in by renames,
        so a failure part way (a full disk, a crash) leaves the previous index whole: no
        half-written index is ever at ``persist_dir``.

        Raises:
            OSError: writing failed (the previous index, if any, is kept).
        """
        folder = Path(persist_dir)
        folder.parent.mkdir(parents=True, exist_ok=True)
        staging = folder.with_name(f".{folder.name}.writing-{uuid.uuid4().hex[:8]}")
        try:
            staging.mkdir()
            self._write(staging)
            replace_folder(staging, folder)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        logger.info("Persisted BM25 index of %d nodes to %s", len(self._nodes), folder)
        return folder

    def _write(self, folder: Path) -> None:
        if self._index is not None:
            self._index.save(str(folder), show_progress=False)
        with open(folder / NODES_FILE, "w", encoding="utf-8") as out:
            for node in self._nodes:
                out.write(json.dumps(doc_to_json(node), ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
        config = {
            "format_version": FORMAT_VERSION,
            **self.to_dict(),
            "num_nodes": len(self._nodes),
        }
        # the config last: a folder without it is never loaded
        (folder / CONFIG_FILE).write_text(json.dumps(config, indent=2), encoding="utf-8")

    @classmethod
    def from_persist_dir(cls, persist_dir: str | Path, **overrides: Any) -> JiebaBM25Retriever:
        """Load an index saved with :meth:`persist`; ``overrides`` (e.g. ``similarity_top_k``)
        replace saved settings that do not change the index.

        Raises:
            FileNotFoundError: ``persist_dir`` holds no saved index.
        """
        folder = Path(persist_dir)
        config_path = folder / CONFIG_FILE
        if not config_path.is_file():
            raise FileNotFoundError(f"no BM25 index in {str(folder)!r} (missing {CONFIG_FILE})")
        config = json.loads(config_path.read_text(encoding="utf-8"))
        with open(folder / NODES_FILE, encoding="utf-8") as lines:
            nodes = [json_to_doc(json.loads(line)) for line in lines if line.strip()]
        expected = config.get("num_nodes")
        if expected is not None and expected != len(nodes):
            raise ValueError(
                f"BM25 index in {str(folder)!r} is incomplete: {CONFIG_FILE} records {expected} "
                f"nodes, {NODES_FILE} holds {len(nodes)}; persist it again"
            )
        options = {name: config[name] for name in setting_names(cls) if name in config}
        # indexes saved before chinese_characters existed were built without it
        options["tokenizer"] = WordTokenizer.from_dict(config["tokenizer"])
        options.update(overrides)
        retriever = cls(**options)  # no nodes yet: settings validated, nothing indexed
        retriever._attach_saved_index(folder, nodes)
        return retriever

    def _attach_saved_index(self, folder: Path, nodes: list[BaseNode]) -> None:
        """Take the nodes and the bm25s index saved in ``folder`` (instead of indexing)."""
        self._nodes = nodes
        if nodes:
            import bm25s

            self._index = bm25s.BM25.load(str(folder), show_progress=False)

    # --- retrieval -----------------------------------------------------------------------------

    def _scores(self, query: str) -> np.ndarray:
        tokens = self.tokenizer.tokenize(query)
        if self._index is None or not tokens:
            return np.zeros(len(self._nodes), dtype=np.float32)
        return np.asarray(self._index.get_scores(tokens))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        scores = self._scores(query_bundle.query_str)
        results = []
        for rank, index in enumerate(top_k_indices(scores, self.similarity_top_k), start=1):
            hit = copy_node_with_score(
                NodeWithScore(node=self._nodes[index], score=float(scores[index]))
            )
            add_trace(hit.node, TRACE_COMPONENT, {"rank": rank, "score": hit.score})
            results.append(hit)
        if not results:
            logger.debug("BM25 found no node sharing a term with %r", query_bundle.query_str)
        return results


class BM25Retriever(JiebaBM25Retriever):
    """Deprecated: the former name of :class:`JiebaBM25Retriever`, which it clashed with in
    apps that also use ``llama-index-retrievers-bm25``. Building one emits a
    ``DeprecationWarning``; everything else (settings, ``class_name``, data) is
    :class:`JiebaBM25Retriever`'s."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(
            "BM25Retriever from llama_index_ext_advrag is renamed JiebaBM25Retriever (the old "
            "name clashes with llama-index-retrievers-bm25); the old name will be removed",
            DeprecationWarning,
            stacklevel=2,
        )
        super().__init__(*args, **kwargs)


# Deprecated: the settings of earlier versions' ``config`` attribute (now fields).
BM25Config = settings_model(JiebaBM25Retriever, "BM25Config")

__all__ = [
    "BM25_METHODS",
    "BM25Config",
    "BM25Retriever",
    "JiebaBM25Retriever",
    "bm25_persist_dir",
    "top_k_indices",
]
