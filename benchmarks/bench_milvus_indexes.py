"""Milvus index choice: FLAT, HNSW, IVF_FLAT, IVF_PQ on Milvus Lite and the Milvus server.

Vectors are synthetic but shaped like sentence embeddings (``--vectors`` of ``--dim``):
unit vectors drawn around ``--clusters`` topic centres with a shared anisotropic component, so
neighbourhoods are uneven as in real corpora; queries are fresh draws around the same centres
(not stored vectors). For every index type, built with the pack's presets
(``milvus.build_index_params``: IVF ``nlist`` ~ 4 sqrt(rows), HNSW M=16/efConstruction=200,
IVF_PQ m=dim/8; search ``nprobe`` nlist/8, HNSW ``ef`` 128):

* recall@k against the FLAT index's results on the same backend (and FLAT against numpy);
* p50 / p95 single-query latency;
* build time (create_index + load) and memory (RSS growth of the process holding the data:
  this process for Milvus Lite, which serves in-process; the server's process otherwise).

The vectors are inserted once per backend; index types are swapped on the same collection.

Usage::

    .venv/bin/python benchmarks/bench_milvus_indexes.py --vectors 200000
    .venv/bin/python benchmarks/bench_milvus_indexes.py --vectors 20000 --backends lite
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import write_results  # noqa: E402
from llama_index_ext_advrag.milvus import (  # noqa: E402
    build_index_params,
    build_search_params,
    is_server_uri,
    open_client,
)
from llama_index_ext_advrag.milvus.indexes import DEFAULT_NLIST  # noqa: E402

logger = logging.getLogger("bench_milvus_indexes")

INDEX_TYPES = ("FLAT", "HNSW", "IVF_FLAT", "IVF_PQ")
COLLECTION = "bench_index_choice"
INSERT_BATCH = 5000


def synthetic_vectors(count: int, dim: int, clusters: int, seed: int) -> tuple[np.ndarray, Any]:
    """Unit vectors around topic centres plus a shared low-rank component (embedding-like)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim)).astype(np.float32)
    shared = rng.standard_normal((8, dim)).astype(np.float32)  # corpus-wide directions
    weights = rng.zipf(1.6, clusters).astype(np.float64)  # uneven topic sizes
    probabilities = weights / weights.sum()

    def draw(n: int, generator: np.random.Generator) -> np.ndarray:
        topic = generator.choice(clusters, size=n, p=probabilities)
        noise = generator.standard_normal((n, dim)).astype(np.float32) * 1.1
        mix = generator.standard_normal((n, 8)).astype(np.float32) @ shared * 0.35
        vectors = centres[topic] + noise + mix
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    return draw(count, rng), draw


def process_rss(uri: str) -> int:
    """RSS in bytes of the process holding the data: the server's, or this one for Lite."""
    import psutil

    if not is_server_uri(uri):  # Milvus Lite serves from a child process of this one
        me = psutil.Process()
        return sum(p.memory_info().rss for p in [me, *me.children(recursive=True)])
    port = int(uri.rsplit(":", 1)[1].split("/")[0])
    for connection in psutil.net_connections(kind="tcp"):
        listening = connection.status == "LISTEN" and connection.pid
        if listening and connection.laddr and connection.laddr.port == port:
            return psutil.Process(connection.pid).memory_info().rss
    return 0


def insert(client: Any, vectors: np.ndarray) -> float:
    from pymilvus import DataType

    if client.has_collection(COLLECTION):
        client.drop_collection(COLLECTION)
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vector", DataType.FLOAT_VECTOR, dim=vectors.shape[1])
    client.create_collection(COLLECTION, schema=schema)
    started = time.perf_counter()
    for start in range(0, len(vectors), INSERT_BATCH):
        chunk = vectors[start : start + INSERT_BATCH]
        client.insert(COLLECTION, [{"id": start + i, "vector": v.tolist()}
                                   for i, v in enumerate(chunk)])  # fmt: skip
    client.flush(COLLECTION)
    return time.perf_counter() - started


def run_queries(client: Any, queries: np.ndarray, k: int,
                search: dict[str, Any]) -> tuple[list[list[int]], list[float]]:  # fmt: skip
    """One search per query: the ids found and each query's latency in ms."""
    latencies, found = [], []
    for query in queries:
        t0 = time.perf_counter()
        hits = client.search(COLLECTION, [query.tolist()], limit=k, search_params=search)
        latencies.append((time.perf_counter() - t0) * 1000)
        found.append([h["id"] for h in hits[0]])
    return found, latencies


def summarise(found: list[list[int]], latencies: list[float], flat: list[list[int]] | None,
              k: int) -> dict[str, float]:  # fmt: skip
    """p50 / p95 latency and recall@k against FLAT's results (against itself for FLAT)."""
    reference = flat if flat is not None else found
    recall = np.mean([len(set(f) & set(r)) / k for f, r in zip(found, reference, strict=True)])
    return {"p50_ms": float(np.percentile(latencies, 50)),
            "p95_ms": float(np.percentile(latencies, 95)), "recall": float(recall)}  # fmt: skip


def sweep_params(index_type: str, built: dict[str, Any], k: int) -> list[dict[str, Any]]:
    """Search settings around the preset's, to choose its default: IVF nprobe, HNSW ef."""
    kind = index_type.upper()
    if kind.startswith("IVF"):
        nlist = int(built.get("nlist", DEFAULT_NLIST))
        values = sorted({v for v in (8, 16, 32, 64, 128, 256, 512) if v <= nlist})
        return [{"params": {"nprobe": v}} for v in values]
    if kind.startswith("HNSW"):
        return [{"params": {"ef": v}} for v in (16, 32, 64, 128, 256) if v >= k]
    return []


def measure(client: Any, uri: str, index_type: str, rows: int, dim: int, queries: np.ndarray,
            k: int, flat: list[list[int]] | None, raw: bool = False,
            sweep: bool = False) -> dict[str, Any]:  # fmt: skip
    row: dict[str, Any] = {"index": index_type + (" (raw)" if raw else "")}
    try:
        client.release_collection(COLLECTION)
        for name in client.list_indexes(COLLECTION):
            client.drop_index(COLLECTION, name)
        before = process_rss(uri)
        if raw:  # bypass the pack's presets (and its Lite fallback for IVF_PQ)
            params = client.prepare_index_params()
            params.add_index("vector", index_type=index_type, metric_type="COSINE",
                             params={"nlist": 128, "m": dim // 8, "nbits": 8})  # fmt: skip
        else:
            params = build_index_params(
                client, "vector", preset=index_type, metric="COSINE", num_rows=rows, dim=dim
            )
        started = time.perf_counter()
        client.create_index(COLLECTION, params)
        client.load_collection(COLLECTION)
        row["build_s"] = time.perf_counter() - started
        row["rss_growth_mb"] = (process_rss(uri) - before) / 2**20
        described = client.describe_index(COLLECTION, client.list_indexes(COLLECTION)[0])
        row["built_as"] = described.get("index_type", index_type)
        flat_view = {**described, **(described.get("params") or {})}  # Lite nests them
        built = {
            key: flat_view[key] for key in ("nlist", "M", "efConstruction") if key in flat_view
        }
        row["build_params"] = built
        # the search parameters the pack uses for this index (nprobe sized from the built nlist)
        search = build_search_params(str(row["built_as"]), built, top_k=k)
        found, latencies = run_queries(client, queries, k, search)
        row.update(summarise(found, latencies, flat, k), search=search, _found=found)
        if sweep:
            row["sweep"] = [
                {"search": params, **summarise(*run_queries(client, queries, k, params), flat, k)}
                for params in sweep_params(str(row["built_as"]), built, k)
            ]
    except Exception as exc:  # an index type the backend cannot build or load
        row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        logger.warning("%s: %s", index_type, row["error"])
    return row


def write_chart(report: dict[str, Any], path: Path) -> None:
    """recall@k against p50 latency, one panel per backend: a marker per index type at the
    presets' search setting and, after ``--sweep``, a line through its nprobe / ef values."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    backends = report["backends"]
    figure, panels = plt.subplots(
        1, max(len(backends), 1), figsize=(6 * max(len(backends), 1), 4.5)
    )
    panels = panels if hasattr(panels, "__len__") else [panels]
    for axes, (backend, data) in zip(panels, backends.items(), strict=False):
        for row in data["rows"]:
            if "error" in row:
                continue
            points = axes.scatter(row["p50_ms"], row["recall"], s=60)
            sweep = row.get("sweep") or []
            if sweep:
                axes.plot([p["p50_ms"] for p in sweep], [p["recall"] for p in sweep], alpha=0.5,
                          color=points.get_facecolor()[0], marker=".")  # fmt: skip
                for p in sweep:
                    value = next(iter(p["search"]["params"].values()))
                    axes.annotate(str(value), (p["p50_ms"], p["recall"]), fontsize=6,
                                  xytext=(2, -8), textcoords="offset points")  # fmt: skip
            axes.annotate(f"{row['index']} (build {row['build_s']:.0f} s)",
                          (row["p50_ms"], row["recall"]), fontsize=8, xytext=(4, 4),
                          textcoords="offset points")  # fmt: skip
        name = "Milvus Lite" if backend == "lite" else "Milvus 2.3 server"
        axes.set_title(f"{name}: {report['args']['vectors']:,} x {report['args']['dim']}-d")
        axes.set_xscale("log")
        axes.set_xlabel("p50 query latency (ms, log scale); small numbers: nprobe / ef")
        axes.set_ylabel(f"recall@{report['args']['k']} vs FLAT")
        axes.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vectors", type=int, default=200_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--backends", default="lite,server")
    parser.add_argument(
        "--index-types",
        default=",".join(INDEX_TYPES),
        help="comma-separated; FLAT always runs first (the recall reference)",
    )
    parser.add_argument("--sweep", action="store_true",
                        help="also measure IVF nprobe / HNSW ef around the presets' values")  # fmt: skip
    parser.add_argument("--server-uri", default="http://127.0.0.1:19530")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="milvus_indexes", help="results file name")
    parser.add_argument("--chart", type=Path, default=None, help="also write this PNG chart")
    parser.add_argument("--chart-from", type=Path, nargs="+", default=None,
                        help="only draw --chart from results JSON written earlier "
                             "(several: one panel per backend)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.chart_from is not None:
        import json

        reports = [json.loads(p.read_text(encoding="utf-8")) for p in args.chart_from]
        merged = {"args": reports[0]["args"], "backends": {}}
        for one in reports:
            merged["backends"].update(one["backends"])
        write_chart(merged, args.chart)
        return
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    vectors, draw = synthetic_vectors(args.vectors, args.dim, args.clusters, args.seed)
    queries = draw(args.queries, np.random.default_rng(args.seed + 1))
    exact = np.argsort(-(queries @ vectors.T), axis=1)[:, : args.k]
    report: dict[str, Any] = {"args": vars(args), "backends": {}}
    lines = [
        f"Milvus index choice: {args.vectors:,} synthetic {args.dim}-d unit vectors "
        f"({args.clusters} topics), {args.queries} queries, top-{args.k}, COSINE",
    ]
    with tempfile.TemporaryDirectory(prefix="bench-index-") as tmp:
        for backend in args.backends.split(","):
            uri = str(Path(tmp) / "lite.db") if backend == "lite" else args.server_uri
            try:
                client = open_client(uri)
            except Exception as exc:
                lines.append(f"{backend}: not reachable ({exc})")
                continue
            insert_s = insert(client, vectors)
            rows = []
            flat_ids: list[list[int]] | None = None
            wanted = [t.strip().upper() for t in args.index_types.split(",") if t.strip()]
            unknown = sorted(set(wanted) - set(INDEX_TYPES))
            if unknown:
                parser.error(f"--index-types: unknown {unknown}; expected some of {INDEX_TYPES}")
            for index_type in ["FLAT", *[t for t in INDEX_TYPES if t in wanted and t != "FLAT"]]:
                row = measure(client, uri, index_type, args.vectors, args.dim, queries, args.k,
                              flat_ids, sweep=args.sweep)  # fmt: skip
                found = row.pop("_found", None)
                if index_type == "FLAT" and found is not None:
                    flat_ids = found
                    row["recall_vs_numpy"] = float(np.mean(
                        [len(set(f) & set(e.tolist())) / args.k for f, e in zip(found, exact, strict=True)]
                    ))  # fmt: skip
                rows.append(row)
                logger.info("%s %s", backend, row)
            if not is_server_uri(uri):  # does Lite itself build IVF_PQ? (the preset falls back)
                row = measure(client, uri, "IVF_PQ", args.vectors, args.dim, queries[:20], args.k,
                              flat_ids[:20] if flat_ids else None, raw=True)  # fmt: skip
                row.pop("_found", None)
                rows.append(row)
            client.drop_collection(COLLECTION)
            client.close()
            report["backends"][backend] = {"insert_s": insert_s, "rows": rows}
            lines.append(f"\n{backend} ({'server' if is_server_uri(uri) else 'Milvus Lite'}), "
                         f"insert {insert_s:.0f} s")  # fmt: skip
            lines.append(f"{'index':14s} {'built as':9s} {'recall@k':>8s} {'p50 ms':>7s} "
                         f"{'p95 ms':>7s} {'build s':>8s} {'RSS +MB':>8s}  search")  # fmt: skip
            for row in rows:
                if "error" in row:
                    lines.append(f"{row['index']:14s} not supported: {row['error']}")
                    continue
                lines.append(
                    f"{row['index']:14s} {row['built_as']:9s} {row['recall']:8.3f} "
                    f"{row['p50_ms']:7.2f} {row['p95_ms']:7.2f} {row['build_s']:8.1f} "
                    f"{row['rss_growth_mb']:8.0f}  {row['search']['params'] or ''}"
                )
            for row in rows:
                for point in row.get("sweep", []):
                    lines.append(f"  sweep {row['index']:8s} {str(point['search']['params']):16s} "
                                 f"recall {point['recall']:.3f}  p50 {point['p50_ms']:7.2f} ms  "
                                 f"p95 {point['p95_ms']:7.2f} ms")  # fmt: skip
            flat = next((r for r in rows if r["index"] == "FLAT" and "error" not in r), None)
            if flat is not None:
                lines.append(f"FLAT vs numpy exact: recall {flat['recall_vs_numpy']:.3f}")
    text = "\n".join(lines)
    print(text)  # the benchmark's report is its output
    write_results(args.name, text, report)
    if args.chart is not None:
        write_chart(report, args.chart)


if __name__ == "__main__":
    main()
