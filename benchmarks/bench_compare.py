"""``advrag compare`` on COVID-QA: every offline pipeline, the report committed under docs/.

The same code path as the command (``run_compare``): the 98 papers of the SQuAD-style file
are the corpus and its questions the labelled set (answers are alternatives; the gold
evidence is the question's paper). Wall time of the whole run (ingest included, a fresh index
unless ``--reuse``) is printed and recorded, with the CPU time, since this machine is shared.

Usage (the embedding model uses both cores; on a machine shared with other jobs, set
``OMP_NUM_THREADS=1``: torch's two threads spin-wait on a busy core and run slower than one)::

    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_compare.py            # all 1,380 q
    OMP_NUM_THREADS=2 .venv/bin/python benchmarks/bench_compare.py --max-questions 100
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import DEFAULT_DATASETS, REPO_ROOT, covidqa_path, write_results  # noqa: E402
from llama_index_ext_advrag.evaluation.report import terminal_report  # noqa: E402
from llama_index_ext_advrag.evaluation.session import CompareOptions, run_compare  # noqa: E402

logger = logging.getLogger("bench_compare")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--max-questions", type=int, default=0, help="first N (0: all 1,380)")
    parser.add_argument("--max-documents", type=int, default=0,
                        help="first N papers and only their questions (0: all 98)")  # fmt: skip
    parser.add_argument("--pipelines", default="", help="comma-separated (default: all offline)")
    parser.add_argument("--out", type=Path, default=None,
                        help="report folder (default docs/compare_covidqa for all questions, "
                        "else .advrag/bench-compare)")  # fmt: skip
    parser.add_argument("--uri", default=None, help="Milvus URI (default: a fresh Lite file)")
    parser.add_argument("--reuse", action="store_true", help="keep indexes between runs")
    parser.add_argument("--name", default=None, help="benchmarks/results/<name>.* (default "
                        "compare_covidqa, or compare_covidqa_sample for a subset)")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("bm25s", "jieba", "milvus_lite", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    # Milvus Lite's gRPC server logs each AllocTimestamp call it does not implement (pymilvus
    # falls back) as an ERROR with a traceback; the CLI silences it the same way
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    dataset = covidqa_path(args.datasets)
    full = args.max_questions <= 0 and args.max_documents <= 0
    tmp_holder = tempfile.TemporaryDirectory(prefix="bench-compare-subset-")
    if args.max_documents > 0:  # a smaller SQuAD file: the first N papers with their questions
        raw = json.loads(dataset.read_text(encoding="utf-8"))
        raw["data"] = raw["data"][: args.max_documents]
        dataset = Path(tmp_holder.name) / f"covidqa_first{args.max_documents}.json"
        dataset.write_text(json.dumps(raw), encoding="utf-8")
    out = args.out or (REPO_ROOT / ("docs/compare_covidqa" if full else ".advrag/bench-compare"))
    state = REPO_ROOT / ".advrag" / "bench-compare-state"
    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        uri = args.uri or (str(state / "covidqa.db") if args.reuse else str(Path(tmp) / "c.db"))
        options = CompareOptions(
            docs=[str(dataset)], questions=str(dataset),
            pipelines=[p for p in args.pipelines.split(",") if p] or None,
            uri=uri, out=str(out), state_dir=str(state if args.reuse else Path(tmp) / "state"),
            max_questions=args.max_questions or None, use_llm=False, show_progress=False,
            doc_type="auto",
            extra_settings={"dataset": "COVID-QA 200423 (deepset, Apache-2.0)"
                            + (f", first {args.max_documents} papers" if args.max_documents else ""),
                            "command": "benchmarks/bench_compare.py"
                            + (f" --max-questions {args.max_questions}" if args.max_questions else "")
                            + (f" --max-documents {args.max_documents}" if args.max_documents else "")},
        )  # fmt: skip
        started, cpu = time.perf_counter(), time.process_time()
        run, files = run_compare(options)
        wall, cpu_s = time.perf_counter() - started, time.process_time() - cpu
    load = os.getloadavg()[0]
    text = terminal_report(run) + (
        f"\n\nwall {wall / 60:.1f} min, CPU {cpu_s / 60:.1f} min (this process), "
        f"load average at the end {load:.1f} on {os.cpu_count()} cores"
    )
    report = files["report"]
    body = report.read_text(encoding="utf-8")
    body = re.sub(re.escape(str(REPO_ROOT)) + r"/?", "", body)  # no machine paths
    body += f"\n## Run\n\nwall {wall / 60:.1f} min, CPU {cpu_s / 60:.1f} min, load {load:.1f}\n"
    report.write_text(body, encoding="utf-8")
    print(text)  # the benchmark's report is its output
    tmp_holder.cleanup()
    name = args.name or ("compare_covidqa" if full else "compare_covidqa_sample")
    write_results(name, text,
                  {"wall_s": wall, "cpu_s": cpu_s, "load": load,
                   "questions": len({r.question_id for r in run.results})})  # fmt: skip


if __name__ == "__main__":
    main()
