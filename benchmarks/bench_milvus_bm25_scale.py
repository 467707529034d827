"""The Milvus full-text lexical leg at 10k, 100k and 1M chunks, against bm25s in the application.

``profile``: where ingest time goes on Milvus Lite, at one size (10k by default). Each
configuration gets a fresh Lite file served by a process of its own; timed apart: cutting the
nodes into the pack's terms (in the application), the inserts (Milvus Lite, including its BM25
function), the flush, and the first dense and BM25 searches (Lite builds a segment's index
when it is first searched). Configurations: a dense-only collection (no BM25 function), the
integration's ``store.add`` at several batch sizes, and the pipelined path (the next batch is
cut into terms while a writer thread inserts the previous one with ``MilvusClient.insert``,
rows built by the store's own ``terms_rows``).

``scale``: per size, every phase in a process of its own, Milvus Lite in another:

* ``ingest``: synthetic chunks (:func:`bench_milvus_bm25.synthetic_chunks`: alternately
  English- and Chinese-shaped, a unigram model of COVID-QA and CMRC 2018 sentences, seed 0)
  into one collection with ``full_text="pack"`` through the pipelined path, then flush and a
  first search of each leg;
* ``bm25s``: the same chunks into ``JiebaBM25Retriever``, persisted (the bm25s leg's ingest);
* ``serve-milvus`` / ``serve-bm25s``: open the store, load the lexical leg, run hybrid queries
  (``HybridFusionRetriever``, min-max, top 10) and report the process' RSS: the application.
  ``serve-bm25s`` then also builds the Milvus-leg hybrid and runs both over the same queries,
  interleaved query by query, so the latency ratio Milvus leg / bm25s leg comes from one
  process under one load.

Dense vectors are synthetic: seeded random unit vectors (64-d) for the chunks, hashed words
(``soak_queries.WordHashEmbedding``) for the queries; the lexical leg and the application's
memory are what is measured, not embedding quality. The load average is recorded beside
every time.

    python benchmarks/bench_milvus_bm25_scale.py profile --size 10000 --work-dir DIR
    python benchmarks/bench_milvus_bm25_scale.py scale --sizes 10000 100000 --work-dir DIR
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402
from bench_milvus_bm25 import (  # noqa: E402
    LiteServer,
    corpus_model,
    folder_bytes,
    rss_mb,
    synthetic_chunks,
    synthetic_queries,
)
from common import DEFAULT_DATASETS, write_results  # noqa: E402
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from soak_queries import DIM, WordHashEmbedding  # noqa: E402

from llama_index_ext_advrag.milvus import flush, open_vector_store  # noqa: E402
from llama_index_ext_advrag.milvus.full_text import SPARSE_FIELD  # noqa: E402
from llama_index_ext_advrag.milvus.limits import check_storable_nodes  # noqa: E402
from llama_index_ext_advrag.retrievers import (  # noqa: E402
    HybridFusionRetriever,
    JiebaBM25Retriever,
    MilvusBM25Retriever,
)

logger = logging.getLogger("bench_milvus_bm25_scale")
COLLECTION = "chunks"


def load() -> float:
    """The 1-minute load average (the machine is shared: times are read beside it)."""
    return os.getloadavg()[0]


def unit_vectors(count: int, first: int = 0, seed: int = 0) -> np.ndarray:
    """``count`` random unit vectors (64-d) for the batch starting at row ``first``, seeded by
    ``(seed, first)``: the same batches give the same vectors."""
    out = np.random.default_rng([seed, first]).standard_normal((count, DIM))
    return out / np.linalg.norm(out, axis=1, keepdims=True)


def batch_nodes(chunks: Sequence[str], first: int) -> list[TextNode]:
    vectors = unit_vectors(len(chunks), first)
    return [
        TextNode(text=text, id_=f"c{first + i}", embedding=vectors[i].tolist())
        for i, text in enumerate(chunks)
    ]


def open_store(uri: str, size: int, full_text: str | None, batch: int, overwrite: bool) -> Any:
    return open_vector_store(
        uri,
        COLLECTION,
        dim=DIM,
        overwrite=overwrite,
        full_text=full_text,
        expected_rows=size,
        batch_size=batch,
    )


def ingest(
    store: Any, chunks: Sequence[str], batch: int, how: str, budget: float | None = None
) -> dict[str, Any]:
    """Write ``chunks`` in batches of ``batch`` rows: ``add`` (the store's own ``add``), or
    ``pipelined`` (terms of batch i+1 cut while a writer thread inserts batch i); no batch is
    started after ``budget`` seconds. Returns the seconds spent per stage (stages overlap when
    pipelined) and in all, the rows written, and (rows, seconds) every 10 batches."""
    spent: dict[str, Any] = {"nodes": 0.0, "terms": 0.0, "insert": 0.0, "insert_wait": 0.0}
    spent["progress"] = []
    started = time.perf_counter()
    written = 0

    def timed_insert(rows: list[dict[str, Any]]) -> None:
        begun = time.perf_counter()
        store.client.insert(COLLECTION, rows)
        spent["insert"] += time.perf_counter() - begun

    with ThreadPoolExecutor(max_workers=1) as writer:
        pending: Future[None] | None = None
        for first in range(0, len(chunks), batch):
            if budget is not None and time.perf_counter() - started > budget:
                logger.info("budget of %.0f s spent: %d of %d rows", budget, written, len(chunks))
                break
            begun = time.perf_counter()
            nodes = batch_nodes(chunks[first : first + batch], first)
            spent["nodes"] += time.perf_counter() - begun
            if how == "add":
                begun = time.perf_counter()
                store.add(nodes)
                spent["insert"] += time.perf_counter() - begun
                written += len(nodes)
                continue
            begun = time.perf_counter()
            check_storable_nodes(nodes)
            rows = store.terms_rows(nodes)
            spent["terms"] += time.perf_counter() - begun
            begun = time.perf_counter()
            if pending is not None:
                pending.result()
            spent["insert_wait"] += time.perf_counter() - begun
            pending = writer.submit(timed_insert, rows)
            written += len(rows)
            if first // batch % 10 == 9:
                spent["progress"].append((written, time.perf_counter() - started))
                logger.info("%d rows sent, load %.1f", written, load())
        if pending is not None:
            pending.result()
    spent["total"] = time.perf_counter() - started
    spent["rows"] = written
    return spent


def first_searches(store: Any) -> dict[str, float]:
    """Seconds of the first dense and the first BM25 search (Lite builds indexes lazily)."""
    out = {}
    begun = time.perf_counter()
    store.client.search(COLLECTION, data=[[1.0] + [0.0] * (DIM - 1)], limit=10)
    out["first_dense_search_s"] = time.perf_counter() - begun
    if store.writes_terms():
        begun = time.perf_counter()
        store.client.search(
            COLLECTION,
            data=["virus"],
            anns_field=SPARSE_FIELD,
            limit=10,
            search_params={"params": {"drop_ratio_search": 0}},
        )
        out["first_bm25_search_s"] = time.perf_counter() - begun
    return out


# --- profile ---------------------------------------------------------------------------------


PROFILE_CONFIGS = (
    ("dense only (no BM25 function), store.add 5000", None, "add", 5000),
    ("store.add, batch 100 (integration default)", "pack", "add", 100),
    ("store.add, batch 5000", "pack", "add", 5000),
    ("store.add, batch 20000", "pack", "add", 20000),
    ("pipelined, batch 5000", "pack", "pipelined", 5000),
    ("pipelined, batch 20000", "pack", "pipelined", 20000),
)


def profile(args: argparse.Namespace) -> None:
    work = Path(args.work_dir)
    chunks = synthetic_chunks(load_model(work, args.datasets), args.size, seed=0)
    rows = []
    for label, full_text, how, batch in PROFILE_CONFIGS:
        db = work / "profile.db"
        shutil.rmtree(db, ignore_errors=True)
        db.unlink(missing_ok=True)
        server = LiteServer(db)
        try:
            load_before = load()
            store = open_store(server.uri, args.size, full_text, batch, overwrite=True)
            spent = ingest(store, chunks, batch, how)
            begun = time.perf_counter()
            flush(store)
            spent["flush"] = time.perf_counter() - begun
            spent.update(first_searches(store))
            row = {"config": label, "batch": batch, "how": how, "full_text": full_text}
            row.update(spent, load_before=load_before, load_after=load(), rows=args.size)
            row["rows_per_s"] = spent["rows"] / (spent["total"] + spent["flush"])
            row.pop("progress")
            row["lite_rss_mb"] = server.rss_mb()
        finally:
            server.stop()
        logger.info("%s", row)
        rows.append(row)
    text = format_profile(rows, args.size)
    logger.info("\n%s", text)
    write_results(f"bench_milvus_bm25_scale_profile_{args.size // 1000}k", text, {"rows": rows})


def format_profile(rows: list[dict[str, Any]], size: int) -> str:
    header = (
        f"{'configuration':44s} {'terms s':>8s} {'insert s':>8s} {'total s':>8s}"
        f" {'flush s':>7s} {'rows/s':>7s} {'1st dense s':>11s} {'1st BM25 s':>10s} {'load':>9s}"
    )
    title = (
        f"## Milvus Lite 3.2.2 ingest of {size} synthetic chunks, pack terms unless said"
        " (terms = cutting in the application; insert = Lite incl. its BM25 function;"
        " pipelined stages overlap; rows/s = rows / (total + flush))"
    )
    lines = [title, header, "-" * len(header)]
    for r in rows:
        bm25 = r.get("first_bm25_search_s")
        lines.append(
            f"{r['config']:44s} {r['terms']:8.1f} {r['insert']:8.1f} {r['total']:8.1f}"
            f" {r['flush']:7.1f} {r['rows_per_s']:7.0f} {r['first_dense_search_s']:11.2f}"
            f" {'-' if bm25 is None else f'{bm25:.2f}':>10s}"
            f" {r['load_before']:4.1f}-{r['load_after']:<4.1f}"
        )
    lines.append("(store.add rows: the terms are cut inside add, so 'insert' includes them)")
    return "\n".join(line.rstrip() for line in lines)


# --- scale -----------------------------------------------------------------------------------


def load_model(work: Path, datasets: Path) -> dict[str, Any]:
    work.mkdir(parents=True, exist_ok=True)
    path = work / "corpus_model.json"
    if not path.exists():
        path.write_text(json.dumps(corpus_model(datasets)), encoding="utf-8")
    return json.loads(path.read_text(encoding="utf-8"))


def latencies_ms(retrievers: dict[str, Any], queries: Sequence[str]) -> dict[str, list[float]]:
    """Per retriever, the milliseconds of each query; retrievers interleaved query by query
    (order reversed every other query) so that load changes hit them alike."""
    out: dict[str, list[float]] = {name: [] for name in retrievers}
    for i, query in enumerate(queries):
        names = list(retrievers) if i % 2 == 0 else list(reversed(retrievers))
        for name in names:
            begun = time.perf_counter()
            retrievers[name].retrieve(query)
            out[name].append((time.perf_counter() - begun) * 1000)
    return out


def summary(values: list[float]) -> dict[str, float]:
    array = np.asarray(values)
    return {"p50_ms": float(np.percentile(array, 50)), "p95_ms": float(np.percentile(array, 95))}


def scale_child(args: argparse.Namespace) -> None:
    """One phase of one size, in its own process: prints ``RESULT {json}``."""
    work = Path(args.work_dir)
    persist = work / f"bm25s_{args.size}"
    out: dict[str, Any] = {"phase": args.phase, "load_before": load()}
    if args.phase in ("ingest", "bm25s"):
        chunks = synthetic_chunks(load_model(work, args.datasets), args.size, seed=0)
        if args.phase == "ingest":
            store = open_store(args.uri, args.size, "pack", args.batch, overwrite=True)
            spent = ingest(store, chunks, args.batch, "pipelined", args.ingest_budget)
            begun = time.perf_counter()
            flush(store)
            spent["flush"] = time.perf_counter() - begun
            out["rows_written"], out["progress"] = spent.pop("rows"), spent.pop("progress")
            out.update({f"{k}_s": v for k, v in spent.items()}, **first_searches(store))
        else:
            begun = time.perf_counter()
            nodes = [TextNode(text=t, id_=f"c{i}") for i, t in enumerate(chunks)]
            JiebaBM25Retriever(nodes).persist(persist)
            out["bm25s_build_s"] = time.perf_counter() - begun
            out["bm25s_bytes"] = folder_bytes(persist)
            out["peak_rss_mb"] = rss_mb()
    else:
        model = load_model(work, args.datasets)
        queries = synthetic_queries(synthetic_chunks(model, min(args.size, 20_000)), args.queries)
        del model
        out["app_rss_start_mb"] = rss_mb()
        store = open_store(args.uri, args.size, None, 1000, overwrite=False)
        index = VectorStoreIndex.from_vector_store(store, embed_model=WordHashEmbedding())
        settings = {"similarity_top_k": 10, "mode": "score", "leg_names": ["dense", "bm25"]}
        begun = time.perf_counter()
        legs = {"milvus": MilvusBM25Retriever(store)} if args.phase == "serve-milvus" else {}
        if args.phase == "serve-bm25s":
            legs["bm25s"] = JiebaBM25Retriever.from_persist_dir(persist)
        out["load_s"] = time.perf_counter() - begun
        hybrids = {
            name: HybridFusionRetriever([index.as_retriever(), leg], **settings)
            for name, leg in legs.items()
        }
        latencies_ms(hybrids, queries[:5])  # warm-up
        timed = latencies_ms(hybrids, queries)
        out["app_rss_mb"] = rss_mb()  # this process, with only its own lexical leg
        out.update({f"{name}_{k}": v for name, ms in timed.items() for k, v in summary(ms).items()})
        if args.phase == "serve-bm25s":  # both hybrids, interleaved, in one process
            hybrids["milvus"] = HybridFusionRetriever(
                [index.as_retriever(), MilvusBM25Retriever(store)], **settings
            )
            latencies_ms(hybrids, queries[:5])
            paired = latencies_ms(hybrids, queries)
            for name, ms in paired.items():
                out.update({f"paired_{name}_{k}": v for k, v in summary(ms).items()})
            ratios = np.asarray(paired["milvus"]) / np.asarray(paired["bm25s"])
            out["paired_ratio_median"] = float(np.median(ratios))
        out["lexical"] = {name: h.lexical_choice.backend for name, h in hybrids.items()}
    out["load_after"] = load()
    print("RESULT " + json.dumps(out), flush=True)


def run_phase(args: argparse.Namespace, size: int, phase: str, uri: str) -> dict[str, Any]:
    command = [
        sys.executable, __file__, "scale-child", "--size", str(size), "--phase", phase,
        "--work-dir", str(args.work_dir), "--datasets", str(args.datasets), "--uri", uri,
        "--queries", str(args.queries), "--batch", str(args.batch),
    ]  # fmt: skip
    if args.ingest_budget is not None:
        command += ["--ingest-budget", str(args.ingest_budget)]
    begun = time.perf_counter()
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=args.timeout, check=False
    )
    found = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode or not found:
        raise RuntimeError(f"phase {phase} at {size} failed:\n{done.stderr[-3000:]}")
    result = json.loads(found[-1][len("RESULT ") :])
    result["wall_s"] = time.perf_counter() - begun
    logger.info("%d %s: %s", size, phase, result)
    return result


def scale(args: argparse.Namespace) -> None:
    work = Path(args.work_dir)
    load_model(work, args.datasets)
    results_file = work / "scale_rows.jsonl"
    for size in args.sizes:
        db = work / f"scale_{size}.db"
        row: dict[str, Any] = {"size": size, "queries": args.queries, "batch": args.batch}
        server = LiteServer(db)
        try:
            for phase in args.phases:
                row[phase] = run_phase(args, size, phase, server.uri)
                row[phase]["lite_rss_mb"] = server.rss_mb()
            row["milvus_bytes"] = folder_bytes(db)
        finally:
            server.stop()
        if not args.keep:
            shutil.rmtree(db, ignore_errors=True)
            db.unlink(missing_ok=True)
            shutil.rmtree(work / f"bm25s_{size}", ignore_errors=True)
        with open(results_file, "a", encoding="utf-8") as out:
            out.write(json.dumps(row) + "\n")
    rows = [json.loads(line) for line in results_file.read_text().splitlines() if line]
    rows = sorted({row["size"]: row for row in rows if row["size"] in args.report}.values(),
                  key=lambda row: row["size"])  # fmt: skip
    if rows:
        text = format_scale(rows)
        logger.info("\n%s", text)
        name = "_".join(f"{row['size'] // 1000}k" for row in rows)
        write_results(f"bench_milvus_bm25_scale_{name}", text, {"rows": rows})


def format_scale(rows: list[dict[str, Any]]) -> str:
    lines = [
        "## Milvus Lite 3.2.2, synthetic chunks, hybrid min-max top 10"
        f" ({rows[0]['queries']} queries), pack terms; load = 1-min load average (2 cores)",
        "",
        "ingest (Milvus: pipelined terms + insert, batch"
        f" {rows[0]['batch']}, then flush and a first search per leg; bm25s: build + persist)",
        f"{'chunks':>9s} {'milvus s':>9s} {'rows/s':>7s} {'flush s':>7s} {'1st BM25 s':>10s}"
        f" {'Lite RSS MB':>11s} {'Milvus MB':>9s} {'bm25s s':>8s} {'bm25s MB':>8s} {'load':>9s}",
    ]
    for r in rows:
        ing, bm = r.get("ingest", {}), r.get("bm25s", {})
        total = ing.get("total_s", 0.0) + ing.get("flush_s", 0.0)
        written = ing.get("rows_written", r["size"])
        lines.append(
            f"{written:9d} {total:9.0f} {written / max(total, 1e-9):7.0f}"
            f" {ing.get('flush_s', 0.0):7.1f} {ing.get('first_bm25_search_s', 0.0):10.1f}"
            f" {ing.get('lite_rss_mb', 0.0):11.0f} {r.get('milvus_bytes', 0) / 2**20:9.0f}"
            f" {bm.get('bm25s_build_s', 0.0):8.0f} {bm.get('bm25s_bytes', 0) / 2**20:8.0f}"
            f" {ing.get('load_before', 0.0):4.1f}-{ing.get('load_after', 0.0):<4.1f}"
        )
    lines += [
        "",
        "serving (each lexical leg alone in its own process: app RSS; then, in the bm25s"
        " process, both hybrids interleaved query by query: paired p50/p95 and the median"
        " per-query ratio Milvus leg / bm25s leg)",
        f"{'chunks':>9s} {'leg':7s} {'app RSS MB':>10s} {'load s':>7s} {'p50 ms':>8s}"
        f" {'p95 ms':>8s} {'paired p50':>10s} {'paired p95':>10s} {'ratio':>6s} {'load':>9s}",
    ]
    for r in rows:
        for leg in ("milvus", "bm25s"):
            serve = r.get(f"serve-{leg}", {})
            paired = r.get("serve-bm25s", {})
            if not serve:
                continue
            ratio = paired.get("paired_ratio_median") if leg == "milvus" else None
            lines.append(
                f"{r['size']:9d} {leg:7s} {serve['app_rss_mb']:10.0f} {serve['load_s']:7.2f}"
                f" {serve[f'{leg}_p50_ms']:8.1f} {serve[f'{leg}_p95_ms']:8.1f}"
                f" {paired.get(f'paired_{leg}_p50_ms', float('nan')):10.1f}"
                f" {paired.get(f'paired_{leg}_p95_ms', float('nan')):10.1f}"
                f" {'' if ratio is None else f'{ratio:.2f}':>6s}"
                f" {serve['load_before']:4.1f}-{serve['load_after']:<4.1f}"
            )
    return "\n".join(line.rstrip() for line in lines)


PHASES = ("ingest", "bm25s", "serve-milvus", "serve-bm25s")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("profile")
    p.add_argument("--size", type=int, default=10_000)
    s = sub.add_parser("scale")
    s.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000],
                   help="sizes to measure; none (`--sizes` alone) only writes the results")  # fmt: skip
    s.add_argument("--phases", nargs="+", choices=PHASES, default=list(PHASES))
    s.add_argument("--report", type=int, nargs="+", default=[10_000, 100_000, 1_000_000],
                   help="the sizes (from earlier runs too) to write into the results")  # fmt: skip
    s.add_argument("--keep", action="store_true", help="keep the Lite file and bm25s index")
    s.add_argument("--timeout", type=float, default=1800, help="per phase, seconds")
    c = sub.add_parser("scale-child")
    c.add_argument("--size", type=int, required=True)
    c.add_argument("--phase", choices=PHASES, required=True)
    c.add_argument("--uri", required=True, help="the Milvus Lite server's uri")
    for command in (s, c):
        command.add_argument(
            "--ingest-budget", type=float, default=None, help="stop inserting after S seconds"
        )
        command.add_argument("--queries", type=int, default=100)
        command.add_argument("--batch", type=int, default=5000, help="rows per insert")
    for command in (p, s, c):
        command.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
        command.add_argument("--work-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "bm25s", "jieba", "grpc._server"):
        logging.getLogger(noisy).setLevel(logging.CRITICAL if noisy == "grpc._server" else 30)
    {"profile": profile, "scale": scale, "scale-child": scale_child}[args.command](args)


if __name__ == "__main__":
    main()
