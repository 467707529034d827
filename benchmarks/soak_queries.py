"""Soak: thousands of queries in a row through the pack's pipeline, on Milvus Lite and a server.

Per backend, one synthetic corpus (deterministic, no dataset needed) is parsed with the sliding
window parser and stored with ``open_vector_store``; then ``--queries`` queries run one after
the other through two pipelines, interleaved query by query so that both see the same machine
load:

* ``pack``: ``HybridFusionRetriever`` (dense Milvus leg + BM25) followed by
  ``DriftAwareWindowPostprocessor`` over the same store;
* ``core``: the baseline, core's ``VectorIndexRetriever`` over the same store.

Reported per backend and pipeline: errors, resident memory (RSS) growth from the end of the
first ``--window`` queries (warm-up) to the end, and the p95 latency of the last ``--window``
queries over the first ``--window`` (the targets: 0 errors, growth < 10 %, drift <= 1.2x). RSS is
the process' (both pipelines share it), read from /proc. The p95 of every window is printed
too, and the pack's drift over the core's drift in the same run: machine load moves both
pipelines (they are interleaved), growth inside the pack moves only the pack's.

Usage::

    nohup .venv/bin/python benchmarks/soak_queries.py > soak_queries.log 2>&1 &
    .venv/bin/python benchmarks/soak_queries.py --queries 300 --backends lite   # quick look
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from llama_index.core import Document, StorageContext, VectorStoreIndex  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402

from benchmarks.common import write_results  # noqa: E402
from llama_index_ext_advrag import (  # noqa: E402
    AdaptiveSlidingWindowNodeParser,
    DriftAwareWindowPostprocessor,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    UnitAnnotator,
)
from llama_index_ext_advrag.milvus import flush, open_client, open_vector_store  # noqa: E402

DIM = 64
WORDS = [
    "virus",
    "incubation",
    "period",
    "masks",
    "spread",
    "vaccine",
    "dose",
    "cells",
    "protein",
    "lung",
    "fever",
    "cough",
    "patients",
    "hospital",
    "study",
    "trial",
    "results",
    "symptoms",
    "children",
    "adults",
    "risk",
    "transmission",
    "infection",
    "immune",
    "response",
    "antibody",
    "testing",
    "sample",
    "data",
    "model",
    "analysis",
    "outbreak",
]


class WordHashEmbedding(BaseEmbedding):
    """Bag of hashed words (deterministic, no model): the soak measures the pipeline and the
    store, not an embedding model."""

    @classmethod
    def class_name(cls) -> str:
        return "WordHashEmbedding"

    def _vector(self, text: str) -> list[float]:
        vector = np.zeros(DIM)
        for word in text.lower().split():
            vector[int(hashlib.md5(word.encode()).hexdigest()[:8], 16) % DIM] += 1.0
        norm = np.linalg.norm(vector) or 1.0
        return (vector / norm).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def corpus(documents: int, seed: int = 0) -> list[Document]:
    rng = np.random.default_rng(seed)
    out = []
    for d in range(documents):
        sentences = [
            " ".join(rng.choice(WORDS, size=int(rng.integers(6, 14)))).capitalize() + "."
            for _ in range(int(rng.integers(5, 12)))
        ]
        out.append(Document(text=" ".join(sentences), id_=f"doc{d}"))
    return out


def queries(count: int, seed: int = 1) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 6)))) for _ in range(count)]


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def p95(values: list[float]) -> float:
    return float(np.percentile(values, 95)) if values else float("nan")


def build(uri: str, collection: str, documents: list[Document]) -> dict[str, Any]:
    embed = WordHashEmbedding()
    nodes = AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(documents)
    nodes = UnitAnnotator()(nodes)
    store = open_vector_store(uri, collection, dim=DIM, overwrite=True, expected_rows=len(nodes))
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    flush(store)
    hybrid = HybridFusionRetriever(
        [index.as_retriever(similarity_top_k=10), JiebaBM25Retriever(nodes)],
        leg_names=["dense", "bm25"],
        similarity_top_k=5,
    )
    window = DriftAwareWindowPostprocessor(vector_store=store, embed_model=embed)
    core = index.as_retriever(similarity_top_k=5)
    return {
        "nodes": len(nodes),
        "pipelines": {
            "pack": lambda q: window.postprocess_nodes(hybrid.retrieve(q), query_str=q),
            "core": core.retrieve,
        },
    }


def soak(uri: str, backend: str, args: argparse.Namespace) -> dict[str, Any]:
    collection = f"soak_{os.getpid()}_{backend}"
    built = build(uri, collection, corpus(args.documents))
    pipelines = built["pipelines"]
    latencies: dict[str, list[float]] = {name: [] for name in pipelines}
    errors: dict[str, list[str]] = {name: [] for name in pipelines}
    empty = dict.fromkeys(pipelines, 0)
    rss = {"start": rss_bytes()}
    started = time.perf_counter()
    for i, query in enumerate(queries(args.queries)):
        for name, run in pipelines.items():
            t0 = time.perf_counter()
            try:
                if not run(query):
                    empty[name] += 1
            except Exception as error:  # counted: the target is zero
                errors[name].append(f"{i}: {type(error).__name__}: {error}"[:300])
                if len(errors[name]) == 1:
                    traceback.print_exc()
            latencies[name].append(time.perf_counter() - t0)
        if i + 1 == args.window:
            rss["warm"] = rss_bytes()
        if (i + 1) % 200 == 0:
            print(f"  {backend}: {i + 1} queries, rss {rss_bytes() / 2**20:.0f} MiB", flush=True)
    rss["end"] = rss_bytes()
    client = open_client(uri)
    try:
        client.drop_collection(collection)
    finally:
        client.close()
    report: dict[str, Any] = {
        "backend": backend,
        "nodes": built["nodes"],
        "queries": args.queries,
        "seconds": round(time.perf_counter() - started, 1),
        "rss_mib": {k: round(v / 2**20, 1) for k, v in rss.items()},
        "rss_growth_after_warmup": round(rss["end"] / rss["warm"] - 1, 4),
        "rss_growth_from_start": round(rss["end"] / rss["start"] - 1, 4),
        "pipelines": {},
    }
    w = args.window
    for name in pipelines:
        first, last = latencies[name][:w], latencies[name][-w:]
        report["pipelines"][name] = {
            "errors": len(errors[name]),
            "first_errors": errors[name][:3],
            "empty_results": empty[name],
            "p50_ms": round(float(np.median(latencies[name])) * 1000, 2),
            "p95_first_ms": round(p95(first) * 1000, 2),
            "p95_last_ms": round(p95(last) * 1000, 2),
            "p95_drift": round(p95(last) / p95(first), 3),
            "p95_by_window_ms": [
                round(p95(latencies[name][start : start + w]) * 1000, 2)
                for start in range(0, len(latencies[name]) - w + 1, w)
            ],
        }
    pack, core = report["pipelines"].get("pack"), report["pipelines"].get("core")
    if pack and core:
        # The same-run baseline: pack's drift over core's drift. Machine load moves both
        # pipelines (interleaved query by query); a growth of the pack's own moves only this.
        report["pack_drift_over_core_drift"] = round(pack["p95_drift"] / core["p95_drift"], 3)
        windows = zip(pack["p95_by_window_ms"], core["p95_by_window_ms"], strict=True)
        report["pack_over_core_p95_by_window"] = [round(a / b, 2) for a, b in windows]
    return report


def render(reports: list[dict[str, Any]]) -> str:
    lines = [
        "backend  pipeline  queries  errors  p50 ms  p95 first  p95 last  drift  "
        "RSS growth (after warm-up / from start)"
    ]
    for report in reports:
        for name, figures in report["pipelines"].items():
            lines.append(
                f"{report['backend']:8s} {name:9s} {report['queries']:7d} {figures['errors']:7d} "
                f"{figures['p50_ms']:7.2f} {figures['p95_first_ms']:10.2f} "
                f"{figures['p95_last_ms']:9.2f} {figures['p95_drift']:6.3f}  "
                f"{report['rss_growth_after_warmup']:+.1%} / {report['rss_growth_from_start']:+.1%}"
            )
    for report in reports:
        for name, figures in report["pipelines"].items():
            series = " ".join(f"{value:.0f}" for value in figures["p95_by_window_ms"])
            lines.append(f"{report['backend']:8s} {name:9s} p95 per window (ms): {series}")
        if "pack_drift_over_core_drift" in report:
            ratios = " ".join(f"{r:.2f}" for r in report["pack_over_core_p95_by_window"])
            lines.append(f"{report['backend']:8s} pack p95 / core p95 per window: {ratios}")
            lines.append(
                f"{report['backend']:8s} pack drift / core drift (same run): "
                f"{report['pack_drift_over_core_drift']:.3f}"
            )
    lines.append(
        "targets: 0 errors, p95 drift <= 1.2 (last window / first window), RSS growth < 10%"
    )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--window", type=int, default=200, help="queries in the first/last window")
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--backends", default="lite,server")
    parser.add_argument("--server-uri", default="http://127.0.0.1:19530")
    parser.add_argument("--token", default="")
    parser.add_argument("--name", default="soak_queries")
    args = parser.parse_args()
    if args.queries < 2 * args.window:
        parser.error(f"--queries must be at least twice --window ({2 * args.window})")
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    reports = []
    for backend in args.backends.split(","):
        if backend == "lite":
            uri = str(Path(tempfile.mkdtemp(prefix="advrag-soak-")) / "soak.db")
        elif backend == "server":
            uri = args.server_uri
        else:
            parser.error(f"unknown backend {backend!r}: use lite and/or server")
        print(f"soak on {backend}: {args.queries} queries", flush=True)
        reports.append(soak(uri, backend, args))
        print(render(reports[-1:]), flush=True)
    text = render(reports)
    print(text)
    write_results(args.name, text, {"args": vars(args), "reports": reports})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
