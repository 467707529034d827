"""The lexical leg inside Milvus (full-text search) against bm25s in the application.

``quality``: COVID-QA and CMRC 2018 as in ``bench_fusion.py`` (one node per sentence, its
window in metadata), every node stored in a Milvus Lite collection opened with
``full_text=`` (one collection per analyzer: ``pack``, ``standard``, ``jieba``). Rows, same
run and same questions: bm25s (``JiebaBM25Retriever``) alone, each Milvus analyzer alone, and
``HybridFusionRetriever`` (dense English-only leg over the same collection, MiniLM) with the
bm25s leg and with the Milvus ``pack`` leg, in rrf / min-max / z-score. Also the share of
questions whose top-k ids agree between bm25s and the Milvus ``pack`` leg.

``lite-server``: serves a Milvus Lite file from a process of its own (:class:`LiteServer`).
The scale runs (10k to 1M chunks) are ``bench_milvus_bm25_scale.py``, which uses this
module's synthetic chunks (:func:`synthetic_chunks`).

    python benchmarks/bench_milvus_bm25.py quality --only cmrc --window-tokens 150
    python benchmarks/bench_milvus_bm25.py quality --only covidqa
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench_fusion import (  # noqa: E402
    MemoRetriever,
    evaluate,
    first_questions,
    format_rows,
    window_nodes,
)
from common import (  # noqa: E402
    DEFAULT_DATASETS,
    cached_minilm_embedding,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.schema import MetadataMode, TextNode  # noqa: E402
from soak_queries import WordHashEmbedding  # noqa: E402

from llama_index_ext_advrag.milvus import flush, open_vector_store  # noqa: E402
from llama_index_ext_advrag.retrievers import (  # noqa: E402
    HybridFusionRetriever,
    JiebaBM25Retriever,
    MilvusBM25Retriever,
)
from llama_index_ext_advrag.text import split_sentences  # noqa: E402

logger = logging.getLogger("bench_milvus_bm25")
ANALYZERS = ("pack", "standard", "jieba")


# --- quality -------------------------------------------------------------------------------


def embed_nodes(nodes: list[TextNode], embed_model: BaseEmbedding) -> None:
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    started = time.perf_counter()
    vectors = embed_model.get_text_embedding_batch(texts, show_progress=False)
    for node, vector in zip(nodes, vectors, strict=True):
        node.embedding = vector
    logger.info("embedded %d nodes in %.0fs", len(nodes), time.perf_counter() - started)


def top_agreement(a: MemoRetriever, b: MemoRetriever, k: int) -> dict[str, float]:
    """Share of memoised queries whose top-k ids are equal (as lists and as sets)."""
    same_list = same_set = 0
    for query, left in a.memo.items():
        right = b.memo.get(query, [])
        ids_a = [r.node.node_id for r in left[:k]]
        ids_b = [r.node.node_id for r in right[:k]]
        same_list += ids_a == ids_b
        same_set += set(ids_a) == set(ids_b)
    n = max(len(a.memo), 1)
    return {"k": k, "same_order": same_list / n, "same_set": same_set / n}


def run_quality(name: str, corpus: Any, args: argparse.Namespace) -> dict[str, Any]:
    nodes, sentences_of = window_nodes(corpus.documents, args.radius, args.window_tokens)
    logger.info("%s: %d sentence nodes, %d questions", name, len(nodes), len(corpus.questions))
    # --lexical-only: no model; the vector field holds hashed words and no dense/fusion rows
    embed_model = WordHashEmbedding() if args.lexical_only else cached_minilm_embedding()
    embed_nodes(nodes, embed_model)
    top = max(max(args.k), args.leg_top_k)
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    stores, ingest = {}, {}
    for analyzer in ANALYZERS:
        store = open_vector_store(
            work / f"quality_{name}.db",
            f"{name}_{analyzer}",
            dim=len(nodes[0].embedding or []),
            overwrite=True,
            full_text=analyzer,
            expected_rows=len(nodes),
        )
        started = time.perf_counter()
        store.add(nodes)
        flush(store)
        ingest[analyzer] = time.perf_counter() - started
        stores[analyzer] = store
    started = time.perf_counter()
    bm25s_leg = JiebaBM25Retriever(nodes, similarity_top_k=top)
    ingest["bm25s (index build)"] = time.perf_counter() - started
    index = VectorStoreIndex.from_vector_store(stores["pack"], embed_model=embed_model)
    dense = MemoRetriever(index.as_retriever(similarity_top_k=top))
    lexical = {"bm25s": MemoRetriever(bm25s_leg)}
    for analyzer in ANALYZERS:
        leg = MilvusBM25Retriever(stores[analyzer], similarity_top_k=top)
        lexical[f"milvus {analyzer}"] = MemoRetriever(leg)
    retrievers: dict[str, Any] = {} if args.lexical_only else {"dense (MiniLM, Milvus)": dense}
    retrievers.update({f"{label} leg": leg for label, leg in lexical.items()})
    common = {
        "similarity_top_k": max(args.k),
        "leg_top_k": args.leg_top_k,
        "leg_names": ["dense", "bm25"],
        "english_only_legs": ["dense"],
    }
    modes = {"rrf": {"mode": "rrf"}, "min-max": {"mode": "score"}}
    modes["z-score"] = {"mode": "score", "normalization": "zscore"}
    for backend in () if args.lexical_only else ("bm25s", "milvus pack"):
        for mode, options in modes.items():
            legs = [dense, lexical[backend]]
            retrievers[f"fusion {mode} + {backend}"] = HybridFusionRetriever(
                legs, **common, **options
            )
    rows = []
    for label, retriever in retrievers.items():
        rows.extend(evaluate(label, retriever.retrieve, corpus, args.k, sentences_of))
    for row in rows:
        row["dataset"] = name
    agreement = {
        f"milvus {analyzer}": [
            top_agreement(lexical["bm25s"], lexical[f"milvus {analyzer}"], k) for k in args.k
        ]
        for analyzer in ANALYZERS
    }
    return {"rows": rows, "agreement": agreement, "ingest_s": ingest, "nodes": len(nodes)}


def quality(args: argparse.Namespace) -> None:
    tables, results = [], {}
    if args.only in (None, "cmrc"):
        cmrc = first_questions(load_squad(cmrc_path(args.datasets)), args.max_questions or 1000)
        results["cmrc2018"] = run_quality("cmrc2018", cmrc, args)
    if args.only in (None, "covidqa"):
        covid = load_squad(covidqa_path(args.datasets), max_questions=args.max_questions or 300)
        results["covidqa"] = run_quality("covidqa", covid, args)
    for name, result in results.items():
        tables.append(format_rows(name, result["rows"], "bm25s leg"))
        lines = [f"top-k agreement with the bm25s leg ({name}):"]
        for label, entries in result["agreement"].items():
            cells = ", ".join(
                f"k={e['k']} same order {e['same_order']:.3f} same set {e['same_set']:.3f}"
                for e in entries
            )
            lines.append(f"  {label}: {cells}")
        ingest = ", ".join(f"{k} {v:.1f}s" for k, v in result["ingest_s"].items())
        lines.append(f"ingest ({result['nodes']} nodes, Milvus Lite, embedded before): {ingest}")
        tables.append("\n".join(lines))
    settings = (
        f"radius={args.radius} window_tokens={args.window_tokens} leg_top_k={args.leg_top_k}"
        f" lexical_only={args.lexical_only}"
    )
    text = "\n\n".join([f"# bench_milvus_bm25 quality ({settings})", *tables])
    print(text)
    name = "milvus_bm25_quality" + (f"_{args.only}" if args.only else "")
    name += "_lexical" if args.lexical_only else ""
    name += f"_wt{args.window_tokens}" if args.window_tokens else ""
    write_results(
        name, text, {"settings": {**vars(args), "datasets": "../shared/datasets"}, **results}
    )


# --- scale ---------------------------------------------------------------------------------


def corpus_model(datasets: Path) -> dict[str, Any]:
    """Word frequencies and sentence lengths (in words) of COVID-QA's and CMRC's sentences:
    English words split on whitespace, Chinese words cut by jieba (accurate mode)."""
    import jieba

    model: dict[str, Any] = {}
    for language, path in (("en", covidqa_path(datasets)), ("zh", cmrc_path(datasets))):
        words: Counter[str] = Counter()
        lengths = []
        for text in load_squad(path).documents.values():
            for sentence in split_sentences(text):
                cut = sentence.text.split() if language == "en" else jieba.lcut(sentence.text)
                cut = [w for w in cut if w.strip()]
                if cut:
                    words.update(cut)
                    lengths.append(min(len(cut), 120))
        vocabulary, counts = zip(*words.most_common(), strict=True)
        model[language] = {"words": list(vocabulary), "counts": list(counts), "lengths": lengths}
    return model


def synthetic_chunks(model: dict[str, Any], count: int, seed: int = 0) -> list[str]:
    """``count`` chunks, alternately English- and Chinese-shaped: a sentence length drawn from
    the real sentences' lengths, then words drawn by their real frequency (unigram model);
    English words joined by spaces, Chinese without. Deterministic for a seed."""
    rng = random.Random(seed)
    tables = {}
    for language, data in model.items():
        cumulative = np.cumsum(np.asarray(data["counts"], dtype=np.float64))
        tables[language] = (data["words"], cumulative / cumulative[-1], data["lengths"])
    np_rng = np.random.default_rng(seed)
    chunks = []
    for i in range(count):
        language = "en" if i % 2 == 0 else "zh"
        words, cdf, lengths = tables[language]
        length = rng.choice(lengths)
        picks = np.searchsorted(cdf, np_rng.random(length))
        joiner = " " if language == "en" else ""
        chunks.append(joiner.join(words[j] for j in picks))
    return chunks


def synthetic_queries(chunks: Sequence[str], count: int, seed: int = 1) -> list[str]:
    """Queries of 3-8 consecutive words of a chunk (characters for a Chinese one)."""
    rng = random.Random(seed)
    queries = []
    while len(queries) < count:
        text = chunks[rng.randrange(len(chunks))]
        parts = text.split() if text.isascii() else list(text)
        if len(parts) < 3:
            continue
        size = rng.randint(3, min(8, len(parts)))
        start = rng.randrange(len(parts) - size + 1)
        joiner = " " if text.isascii() else ""
        queries.append(joiner.join(parts[start : start + size]))
    return queries


def folder_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder (0 when absent)."""
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def rss_mb(pid: int | None = None) -> float:
    import psutil

    return psutil.Process(pid or os.getpid()).memory_info().rss / 2**20


def lite_server(db: Path) -> None:
    """Serve the Milvus Lite file ``db`` from this process (Milvus Lite 3.x runs in the
    process that opens it; the scale runs keep it out of the measured application), print its
    uri, and serve until stdin closes."""
    from milvus_lite.server_manager import server_manager_instance

    uri = server_manager_instance.start_and_get_uri(str(db))
    print(f"URI {uri}", flush=True)
    sys.stdin.read()
    server_manager_instance.release_all()


class LiteServer:
    """A :func:`lite_server` child process: ``uri``, ``rss_mb()``, ``stop()``."""

    def __init__(self, db: Path, timeout: float = 300.0) -> None:
        command = [sys.executable, __file__, "lite-server", "--db", str(db)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + timeout
        line = ""
        while not line.startswith("URI ") and time.monotonic() < deadline:
            line = self.process.stdout.readline() if self.process.stdout else ""
            if not line and self.process.poll() is not None:
                raise RuntimeError(f"Milvus Lite server for {db} exited {self.process.returncode}")
        if not line.startswith("URI "):
            self.stop()
            raise RuntimeError(f"Milvus Lite server for {db} did not start in {timeout:.0f}s")
        self.uri = line.split()[1]

    def rss_mb(self) -> float:
        return rss_mb(self.process.pid)

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    q = sub.add_parser("quality")
    q.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    q.add_argument("--only", choices=["cmrc", "covidqa"], default=None)
    q.add_argument("--max-questions", type=int, default=None)
    q.add_argument("--k", type=int, nargs="+", default=[1, 3, 5, 10])
    q.add_argument("--radius", type=int, default=1)
    q.add_argument("--window-tokens", type=int, default=0)
    q.add_argument("--leg-top-k", type=int, default=30)
    q.add_argument("--work-dir", type=Path, required=True, help="Milvus Lite files go here")
    q.add_argument(
        "--lexical-only", action="store_true", help="the lexical legs alone (no embedding model)"
    )
    ls = sub.add_parser("lite-server")
    ls.add_argument("--db", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "sentence_transformers", "bm25s", "jieba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.command == "lite-server":
        lite_server(args.db)
        return
    quality(args)


if __name__ == "__main__":
    main()
