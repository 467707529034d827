"""Do probe questions rank pipelines like real questions? Kendall tau on COVID-QA and CMRC.

A subset of a SQuAD-style dataset (the first N paragraphs and their labelled questions) is
ingested once per parser; every offline pipeline answers the labelled questions and each kind
of probe question made from the same paragraphs, through the code of ``advrag compare``. Each
question set ranks the pipelines by their mean coverage advantage over the baseline at equal
context tokens (what the recommendation reads; the baseline is 0); the ranking by each probe
style is compared with the ranking by the labelled questions with Kendall's tau-b (scipy).

Probe sets: the offline styles of ``make_probe_questions`` and, for reference, the former
offline probe (the sentence's six rarest words, rarest first).

Usage (a shared machine: one thread, low priority)::

    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_probes.py --dataset covidqa \
        --max-documents 10 --shortest --probes 80
    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_probes.py --dataset cmrc \
        --max-documents 20 --probes 80
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scipy import stats  # noqa: E402

from benchmarks.common import DEFAULT_DATASETS, cmrc_path, covidqa_path, write_results  # noqa: E402
from llama_index_ext_advrag.evaluation.compare import (  # noqa: E402
    embed_questions,
    run_questions,
    summarize_all,
)
from llama_index_ext_advrag.evaluation.decision import versus_baseline  # noqa: E402
from llama_index_ext_advrag.evaluation.probes import (  # noqa: E402
    ProbeStyle,
    make_probe_questions,
    surface_tokenizer,
    terms_by_rarity,
)
from llama_index_ext_advrag.evaluation.questions import Question, load_questions  # noqa: E402
from llama_index_ext_advrag.evaluation.report import CompareRun  # noqa: E402
from llama_index_ext_advrag.evaluation.session import (  # noqa: E402
    CompareOptions,
    build_context,
    prepare_models,
    select_pipelines,
)
from llama_index_ext_advrag.evaluation.sources import load_corpus  # noqa: E402
from llama_index_ext_advrag.text import split_sentences  # noqa: E402

logger = logging.getLogger("bench_probes")
FORMER = "former: 6 rarest words"


def subset_file(dataset: Path, max_documents: int, folder: Path, shortest: bool = False) -> Path:
    """The first (or, with ``shortest``, the shortest) ``max_documents`` paragraphs of a
    SQuAD-style file, with their questions."""
    raw = json.loads(dataset.read_text(encoding="utf-8"))
    articles = raw["data"]
    if shortest:  # one paragraph per article (COVID-QA's papers): by length
        articles = sorted(articles, key=lambda a: sum(len(p["context"]) for p in a["paragraphs"]))
    kept, left = [], max_documents
    for article in articles:
        if left <= 0:
            break
        paragraphs = article["paragraphs"][:left]
        left -= len(paragraphs)
        kept.append({**article, "paragraphs": paragraphs})
    path = folder / f"{dataset.stem}_{'shortest' if shortest else 'first'}{max_documents}.json"
    path.write_text(json.dumps({"data": kept}, ensure_ascii=False), encoding="utf-8")
    return path


def former_probes(documents: list[Any], probes: list[Question]) -> list[Question]:
    """The same sampled sentences asked the former way: their six rarest words."""
    from collections import Counter

    tokenizer = surface_tokenizer()
    frequency: Counter[str] = Counter()
    total = 0
    for document in documents:
        for unit in split_sentences(document.text):
            frequency.update({t for t in tokenizer(unit.text) if len(t) > 1 or not t.isascii()})
            total += 1
    out = []
    for probe in probes:
        [sentence] = probe.evidence_texts
        rare = terms_by_rarity(sentence, frequency, total, tokenizer)[:6]
        joiner = "" if all(not t.isascii() for t in rare) else " "
        out.append(
            dataclasses.replace(probe, question=joiner.join(rare), answer_groups=((sentence,),))
        )
    return out


def advantages(run: CompareRun) -> dict[str, float]:
    """Mean coverage advantage over the baseline at equal tokens (baseline 0; pipelines with
    no common token range left out)."""
    out = {run.baseline: 0.0}
    for versus in versus_baseline(run):
        if versus.advantage is not None:
            out[versus.pipeline] = versus.advantage
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=("covidqa", "cmrc"), required=True)
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--max-documents", type=int, default=12)
    parser.add_argument("--shortest", action="store_true",
                        help="the shortest documents instead of the first (COVID-QA)")  # fmt: skip
    parser.add_argument("--probes", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pipelines", default="", help="comma-separated (default: all offline)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("bm25s", "jieba", "milvus_lite", "faiss", "httpx"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    source = covidqa_path(args.datasets) if args.dataset == "covidqa" else cmrc_path(args.datasets)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-probes-") as tmp:
        subset = subset_file(source, args.max_documents, Path(tmp), args.shortest)
        documents = load_corpus([subset])
        options = CompareOptions(
            docs=[str(subset)], questions=str(subset), uri=str(Path(tmp) / "m.db"),
            state_dir=str(Path(tmp) / "state"), use_llm=False, show_progress=False,
            pipelines=[p for p in args.pipelines.split(",") if p] or None,
        )  # fmt: skip
        embed_model, _, decision = prepare_models(options, documents)
        chosen = select_pipelines(options.pipelines, None, None)
        sets: dict[str, list[Question]] = {"labelled": load_questions(str(subset))}
        for style in ProbeStyle:
            sets[style.value] = make_probe_questions(
                documents, args.probes, seed=args.seed, style=style
            )
        sets[FORMER] = former_probes(documents, sets[ProbeStyle.MASKED.value])
        context = build_context(options, documents, embed_model, None)
        context.store.warm_up()
        context.store.start_heartbeat()
        bundles = {
            name: embed_questions(qs, context.embed_model, False) for name, qs in sets.items()
        }
        results: dict[str, list[Any]] = {name: [] for name in sets}
        try:
            for entry in chosen:
                logger.info("pipeline %s", entry.name)
                pipeline = entry.build(context)
                for name, questions in sets.items():
                    results[name] += run_questions(
                        pipeline, questions, bundles[name], ks=options.ks, main_k=options.k,
                        show_progress=False,
                    )  # fmt: skip
                if hasattr(pipeline, "close"):
                    pipeline.close()
                context.store.release()
        finally:
            context.store.close()
    ks = sorted(set(options.ks) | {options.k})
    runs = {
        name: CompareRun(name, "baseline", options.k, ks, summarize_all(rows), rows, [], {},
                         probe=name != "labelled")
        for name, rows in results.items()
    }  # fmt: skip
    scores = {name: advantages(run) for name, run in runs.items()}
    real = scores["labelled"]
    lines = [
        f"{args.dataset}: {'shortest' if args.shortest else 'first'} {args.max_documents} "
        f"paragraphs, {len(documents)} documents, "
        f"{len(sets['labelled'])} labelled questions, {args.probes} probes per style "
        f"(seed {args.seed}); embedding {type(decision.model).__name__}",
        "",
        "Mean coverage advantage over the baseline at equal tokens, per question set:",
    ]
    names = sorted(real, key=lambda n: -real[n])
    header = f"{'pipeline':18s}" + "".join(f"{s[:22]:>24s}" for s in scores)
    lines += [header] + [
        f"{n:18s}" + "".join(f"{scores[s].get(n, float('nan')):>+24.3f}" for s in scores)
        for n in names
    ]
    taus: dict[str, dict[str, float]] = {}
    lines += ["", "Kendall tau-b against the labelled ranking (pipelines comparable in both):"]
    for name, score in scores.items():
        if name == "labelled":
            continue
        common = [n for n in names if n in score]
        tau, p_value = stats.kendalltau([real[n] for n in common], [score[n] for n in common])
        taus[name] = {"tau": float(tau), "p": float(p_value), "pipelines": len(common)}
        top = max(common, key=lambda n: score[n])
        lines.append(
            f"  {name:24s} tau {tau:+.3f} (p {p_value:.3f}, {len(common)} pipelines); top: {top}"
        )
    hybrid_k1 = {
        name: next((s.coverage for s in run.summaries
                    if s.pipeline == "hybrid" and s.k == 1 and s.group == "all"), None)
        for name, run in runs.items()
    }  # fmt: skip
    lines += ["", "hybrid coverage at k=1 per question set: "
              + ", ".join(f"{n} {v:.3f}" for n, v in hybrid_k1.items() if v is not None)]  # fmt: skip
    wall = time.perf_counter() - started
    lines.append(f"\nwall {wall / 60:.1f} min")
    text = "\n".join(lines)
    print(text)  # the benchmark's report is its output
    write_results(
        f"probes_{args.dataset}",
        text,
        {"scores": scores, "tau": taus, "hybrid_k1": hybrid_k1, "wall_s": wall,
         "documents": len(documents), "labelled": len(sets["labelled"]), "probes": args.probes,
         "command": f"benchmarks/bench_probes.py --dataset {args.dataset} --max-documents "
                    f"{args.max_documents} --probes {args.probes} --seed {args.seed}"
                    + (" --shortest" if args.shortest else "")},
    )  # fmt: skip


if __name__ == "__main__":
    main()
