"""The lexical leg inside Milvus (full-text search) against bm25s in the application.

``quality``: COVID-QA and CMRC 2018 as in ``bench_fusion.py`` (one node per sentence, its
window in metadata), every node stored in a Milvus Lite collection opened with
``full_text=`` (one collection per analyzer: ``pack``, ``standard``, ``jieba``). Rows, same
run and same questions: bm25s (``JiebaBM25Retriever``) alone, each Milvus analyzer alone, and
``HybridFusionRetriever`` (dense English-only leg over the same collection, MiniLM) with the
bm25s leg and with the Milvus ``pack`` leg, in rrf / min-max / z-score. Also the share of
questions whose top-k ids agree between bm25s and the Milvus ``pack`` leg.

``scale``: synthetic chunks (see :func:`synthetic_chunks`) at each size; per size and
backend a fresh child process ingests (timed), another serves: opens the store, loads its
lexical leg, runs hybrid queries at top 10 (p50/p95), and reports its RSS (the application).
Milvus Lite 3.x runs inside the process that opens a file, so here it runs in a process of
its own (:func:`lite_server`), as a server would, and its RSS is reported apart. The dense
leg uses a cheap deterministic embedding (``soak_queries.WordHashEmbedding``, hashed
whitespace-separated words): the lexical leg is what is measured.

    python benchmarks/bench_milvus_bm25.py quality --only cmrc --window-tokens 150
    python benchmarks/bench_milvus_bm25.py quality --only covidqa
    python benchmarks/bench_milvus_bm25.py scale --sizes 10000 100000 --work-dir DIR
"""

from __future__ import annotations

import argparse
import json
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
from soak_queries import DIM as HASH_DIM  # noqa: E402
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


def scale_child(args: argparse.Namespace) -> None:
    """One phase (ingest or serve) of one size and backend, in its own process: prints JSON."""
    model = json.loads(Path(args.model).read_text())
    db = args.uri
    persist = Path(args.work_dir) / f"bm25s_{args.size}"
    embed = WordHashEmbedding()
    full_text = "pack" if args.backend == "milvus" else None
    out: dict[str, Any] = {"size": args.size, "backend": args.backend, "phase": args.phase}
    if args.phase == "ingest":
        chunks = synthetic_chunks(model, args.size, seed=0)
        store = open_vector_store(
            db,
            "chunks",
            dim=HASH_DIM,
            overwrite=True,
            full_text=full_text,
            expected_rows=args.size,
        )
        started = time.perf_counter()
        batch = 5000
        for first in range(0, len(chunks), batch):
            nodes = [
                TextNode(text=t, id_=f"c{first + i}", embedding=embed._vector(t))
                for i, t in enumerate(chunks[first : first + batch])
            ]
            store.add(nodes)
        flush(store)
        out["milvus_ingest_s"] = time.perf_counter() - started
        if args.backend == "bm25s":
            started = time.perf_counter()
            nodes = [TextNode(text=t, id_=f"c{i}") for i, t in enumerate(chunks)]
            JiebaBM25Retriever(nodes).persist(persist)
            out["bm25s_index_s"] = time.perf_counter() - started
        out["ingest_s"] = out["milvus_ingest_s"] + out.get("bm25s_index_s", 0.0)
        out["bm25s_bytes"] = folder_bytes(persist) if args.backend == "bm25s" else 0
    else:
        queries = synthetic_queries(synthetic_chunks(model, min(args.size, 20_000)), args.queries)
        del model
        base = rss_mb()
        store = open_vector_store(db, "chunks", dim=HASH_DIM, expected_rows=args.size)
        index = VectorStoreIndex.from_vector_store(store, embed_model=embed)
        started = time.perf_counter()
        if args.backend == "milvus":
            lexical = MilvusBM25Retriever(store)
        else:
            lexical = JiebaBM25Retriever.from_persist_dir(persist)
        out["load_s"] = time.perf_counter() - started
        hybrid = HybridFusionRetriever(
            [index.as_retriever(), lexical],
            similarity_top_k=10,
            mode="score",
            leg_names=["dense", "bm25"],
        )
        for query in queries[:5]:  # warm-up
            hybrid.retrieve(query)
        latencies = []
        for query in queries:
            started = time.perf_counter()
            hybrid.retrieve(query)
            latencies.append((time.perf_counter() - started) * 1000)
        lat = np.asarray(latencies)
        out.update(
            p50_ms=float(np.percentile(lat, 50)),
            p95_ms=float(np.percentile(lat, 95)),
            app_rss_mb=rss_mb(),
            app_rss_before_mb=base,
            lexical=hybrid.lexical_choice.backend if hybrid.lexical_choice else None,
        )
    print("RESULT " + json.dumps(out), flush=True)


def scale(args: argparse.Namespace) -> None:
    work = Path(args.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    model_path = work / "corpus_model.json"
    if not model_path.exists():
        model_path.write_text(json.dumps(corpus_model(args.datasets)), encoding="utf-8")
    rows = []
    results_file = work / "scale_rows.jsonl"
    if args.report_only:  # the rows of the sizes that finished (a long run cut short)
        rows = [json.loads(line) for line in results_file.read_text().splitlines() if line]
        rows = [row for row in rows if row["size"] in args.sizes]
        args.sizes = sorted({row["size"] for row in rows})
    for size in [] if args.report_only else args.sizes:
        for backend in args.backends:
            row: dict[str, Any] = {"size": size, "backend": backend, "queries": args.queries}
            db = work / f"scale_{backend}_{size}.db"
            for phase in ("ingest", "serve"):
                server = LiteServer(db)
                try:
                    command = [
                        sys.executable,
                        __file__,
                        "scale-child",
                        "--size",
                        str(size),
                        "--backend",
                        backend,
                        "--phase",
                        phase,
                        "--work-dir",
                        str(work),
                        "--model",
                        str(model_path),
                        "--queries",
                        str(args.queries),
                        "--uri",
                        server.uri,
                    ]
                    done = subprocess.run(
                        command,
                        capture_output=True,
                        text=True,
                        timeout=args.timeout,
                        check=False,
                    )
                    row[f"lite_server_rss_{phase}_mb"] = server.rss_mb()
                finally:
                    server.stop()
                found = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
                if done.returncode or not found:
                    raise RuntimeError(f"{command} failed:\n{done.stderr[-3000:]}")
                row.update(json.loads(found[-1][len("RESULT ") :]))
            row["milvus_bytes"] = folder_bytes(db)
            row.pop("phase", None)
            rows.append(row)
            with open(results_file, "a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")
            logger.info("%s", row)
    rows.sort(key=lambda row: (row["size"], row["backend"] != "milvus"))
    text = format_scale(rows, args.queries)
    print(text)
    sizes = "_".join(f"{s // 1000}k" for s in sorted(args.sizes))
    write_results(
        f"milvus_bm25_scale_{sizes}", text, {"settings": portable_args(args), "rows": rows}
    )


def portable_args(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k, v in vars(args).items() if k not in ("work_dir", "datasets", "func")}


def format_scale(rows: list[dict[str, Any]], queries: int) -> str:
    header = (
        f"{'chunks':>9s} {'lexical leg':12s} {'ingest s':>9s} {'load s':>7s} {'app RSS MB':>10s}"
        f" {'Lite RSS MB':>11s} {'p50 ms':>8s} {'p95 ms':>8s} {'Milvus MB':>9s} {'bm25s MB':>8s}"
    )
    title = f"## hybrid top 10 (min-max), {queries} queries, synthetic chunks, Milvus Lite 3.2.2"
    lines = [title, header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['size']:9d} {r['backend']:12s} {r['ingest_s']:9.1f} {r['load_s']:7.2f}"
            f" {r['app_rss_mb']:10.0f} {r['lite_server_rss_serve_mb']:11.0f}"
            f" {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['milvus_bytes'] / 2**20:9.0f}"
            f" {(r['bm25s_bytes'] if r['backend'] == 'bm25s' else 0) / 2**20:8.0f}"
        )
    return "\n".join(lines)


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
    s = sub.add_parser("scale")
    s.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    s.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    s.add_argument("--queries", type=int, default=50)
    s.add_argument(
        "--backends", nargs="+", choices=["milvus", "bm25s"], default=["milvus", "bm25s"]
    )
    s.add_argument("--timeout", type=float, default=4 * 3600, help="per child process, seconds")
    s.add_argument("--work-dir", type=Path, required=True)
    s.add_argument(
        "--report-only", action="store_true", help="write the results of the finished sizes"
    )
    c = sub.add_parser("scale-child")
    for name in ("--size", "--queries"):
        c.add_argument(name, type=int, required=True)
    c.add_argument("--backend", choices=["milvus", "bm25s"], required=True)
    c.add_argument("--phase", choices=["ingest", "serve"], required=True)
    c.add_argument("--work-dir", type=Path, required=True)
    c.add_argument("--model", type=Path, required=True)
    c.add_argument("--uri", required=True, help="the Milvus Lite server's uri")
    ls = sub.add_parser("lite-server")
    ls.add_argument("--db", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "sentence_transformers", "bm25s", "jieba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    if args.command == "lite-server":
        lite_server(args.db)
        return
    {"quality": quality, "scale": scale, "scale-child": scale_child}[args.command](args)


if __name__ == "__main__":
    main()
