"""Run every benchmark in benchmarks/ with modest sizes (``make bench``).

Each benchmark runs in its own process, one after the other, with ``OMP_NUM_THREADS=1``; a
failing or skipped one is reported and the others still run. Sizes are chosen to finish in
minutes on 2 cores; pass ``--full`` for the sizes the committed results were measured with.
Tables go to ``.advrag/bench-results/`` (``--results-dir``), so the committed full-size results
in ``benchmarks/results/`` are not overwritten by a modest run.

Usage::

    .venv/bin/python benchmarks/run_all.py                      # all, modest sizes
    .venv/bin/python benchmarks/run_all.py --only ingest,fusion
    .venv/bin/python benchmarks/run_all.py --full --results-dir benchmarks/results
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

# name -> (script, modest arguments, full arguments); datasets come from --datasets.
BENCHMARKS: dict[str, tuple[str, list[str], list[str]]] = {
    "node_parsers": ("bench_node_parsers.py",
                     ["--parts", "covid,throughput", "--max-questions", "100"], []),
    "fusion": ("bench_fusion.py", ["--only", "cmrc", "--max-questions", "200", "--k", "5"], []),
    "auto_merging": ("bench_auto_merging.py", ["--max-questions", "100"], []),
    "two_layer": ("bench_two_layer.py", [], []),
    "postprocessors": ("bench_postprocessors.py",
                       ["--max-questions", "60", "--calibration-questions", "50",
                        "--latency-queries", "30"], []),
    "pandas_route": ("bench_pandas_route.py", ["--llm", "scripted"], []),
    "ingest": ("bench_ingest.py", ["--max-documents", "20"], []),
    "milvus_indexes": ("bench_milvus_indexes.py", ["--vectors", "20000", "--queries", "200"],
                       ["--vectors", "200000"]),
    "compare_covidqa": ("bench_compare.py", ["--max-questions", "100"], []),
}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--full", action="store_true", help="the committed results' sizes")
    parser.add_argument("--datasets", default=None, help="datasets folder (../shared/datasets)")
    parser.add_argument("--results-dir", default=str(REPO / ".advrag" / "bench-results"))
    args = parser.parse_args(argv)
    chosen = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    unknown = [n for n in chosen if n not in BENCHMARKS]
    if unknown:
        parser.error(f"unknown benchmark(s) {unknown}; known: {', '.join(BENCHMARKS)}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ADVRAG_BENCH_RESULTS": args.results_dir}
    outcome = {}
    for name in chosen:
        script, modest, full = BENCHMARKS[name]
        command = [sys.executable, str(HERE / script), *(full if args.full else modest)]
        if args.datasets and name not in ("milvus_indexes",):
            command += ["--datasets", args.datasets]
        print(f"== {name}: {' '.join(command[1:])}", flush=True)
        started = time.perf_counter()
        code = subprocess.call(command, cwd=REPO, env=env)
        outcome[name] = (code, time.perf_counter() - started)
    print("\nbenchmark          exit  seconds")
    for name, (code, seconds) in outcome.items():
        print(f"{name:18s} {code:4d} {seconds:8.0f}")
    print(f"tables in {args.results_dir}")
    return 0 if all(code == 0 for code, _ in outcome.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
