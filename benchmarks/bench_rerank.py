"""Late interaction (ColBERT) against the cross-encoder as the rerank judge, on COVID-QA.

Data: the COVID-QA papers cut into the 5,015 passages of <= 128 tokens that
``bench_crag.py`` uses, and its seeded question order; the first ``--calibration-questions``
questions are held out for fitting (Platt calibration, CRAG thresholds, the choice of the
ColBERT variant), the next ``--questions`` are evaluated.

1. Calibration: for each judge (and each ColBERT variant: kept dimensions, query augmentation)
   the raw values of 6 labelled pairs per calibration question (3 positives: passages of the
   question's paper holding the answer; 3 negatives: BM25's top passages from other papers),
   their ROC AUC, the fitted Platt calibration and CRAG thresholds. The ColBERT variant with the
   best AUC is evaluated.
2. Quality at equal tokens: bge-small-en-v1.5 (the default embedding, cached on disk) retrieves
   the top 20; each judge reranks them with ``JudgeRerankPostprocessor`` and the top
   k = 3 / 5 / 8 are kept. Answer coverage (a gold answer inside the context) and mean context
   tokens per pipeline and k; the paired difference ColBERT - cross-encoder per question with
   its bootstrap interval and the better / worse / same counts.
3. Speed: pairs/s of each judge on one thread (wall and process CPU), interleaved rounds over
   the same (query, 20 passages) lists.

    OMP_NUM_THREADS=1 python benchmarks/bench_rerank.py --questions 100
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_crag import calibrate, calibration_pairs, cpu_speed, load_covid  # noqa: E402
from common import DEFAULT_DATASETS, cached_bge_embedding, covidqa_path, write_results  # noqa: E402

from llama_index_ext_advrag.evaluation.paired import (  # noqa: E402
    count_changes,
    paired_bootstrap_intervals,
)
from llama_index_ext_advrag.judges import (  # noqa: E402
    BaseRelevanceJudge,
    ColbertRelevanceJudge,
    CrossEncoderRelevanceJudge,
    ScoreCalibration,
)
from llama_index_ext_advrag.postprocessor import JudgeRerankPostprocessor  # noqa: E402
from llama_index_ext_advrag.text import count_tokens  # noqa: E402

logger = logging.getLogger("bench_rerank")
KS = (3, 5, 8)
FIRST_STAGE_K = 20
COLBERT_VARIANTS: dict[str, dict[str, Any]] = {
    "colbert d128 aug": {"dimension": 128, "query_augmentation": True},
    "colbert d128": {"dimension": 128, "query_augmentation": False},
    "colbert d384 aug": {"dimension": 384, "query_augmentation": True},
}


def roc_auc(raw: list[float], labels: list[bool]) -> float:
    """Probability that a random positive outscores a random negative (ties count half)."""
    pos = np.array([r for r, lab in zip(raw, labels, strict=True) if lab])
    neg = np.array([r for r, lab in zip(raw, labels, strict=True) if not lab])
    greater = (pos[:, None] > neg[None, :]).mean()
    ties = (pos[:, None] == neg[None, :]).mean()
    return float(greater + ties / 2)


def calibrate_all(
    items: list[Any], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, BaseRelevanceJudge]]:
    """Fit every judge on the calibration questions; return the fits and the calibrated judges."""
    pairs = calibration_pairs(items)
    makers: dict[str, Any] = {
        "cross-encoder": lambda c: CrossEncoderRelevanceJudge(num_threads=1, calibration=c)
    }
    for label, options in COLBERT_VARIANTS.items():
        makers[label] = lambda c, o=options: ColbertRelevanceJudge(
            num_threads=1, calibration=c, **o
        )
    fits: dict[str, Any] = {}
    for label, make in makers.items():
        start = time.perf_counter()
        fit = calibrate(make(None), pairs, args)
        fit["auc"] = roc_auc(fit.pop("raw"), fit.pop("labels"))
        fit["seconds"] = time.perf_counter() - start
        fits[label] = fit
        logger.info("%s: %s", label, json.dumps(fit))
    best = max(COLBERT_VARIANTS, key=lambda label: fits[label]["auc"])
    fits["chosen_colbert_variant"] = best
    judges = {
        "cross-encoder": makers["cross-encoder"](
            ScoreCalibration(**fits["cross-encoder"]["calibration"])
        ),
        "colbert": makers[best](ScoreCalibration(**fits[best]["calibration"])),
    }
    return fits, judges


def evaluate(
    items: list[Any],
    passages: list[tuple[str, str]],
    judges: dict[str, BaseRelevanceJudge],
    retrieved: list[tuple[str, list[str]]],
) -> dict[str, Any]:
    """Coverage and tokens at each k for dense top k and dense top 20 reranked by each judge
    (``retrieved`` receives each question's top-20 texts)."""
    nodes = [TextNode(text=t, id_=f"p{i}") for i, (_, t) in enumerate(passages)]
    index = VectorStoreIndex(nodes, embed_model=cached_bge_embedding(), show_progress=False)
    retriever = index.as_retriever(similarity_top_k=FIRST_STAGE_K)
    rerankers = {
        name: JudgeRerankPostprocessor(judge=judge, top_n=max(KS)) for name, judge in judges.items()
    }
    pipelines = ["bge", *(f"bge20+{name}" for name in judges)]
    covered = {(p, k): [] for p in pipelines for k in KS}
    tokens: dict[tuple[str, int], list[int]] = {key: [] for key in covered}
    seconds = {name: 0.0 for name in judges}
    top20: list[bool] = []
    for number, item in enumerate(items):
        hits = retriever.retrieve(item.query)
        texts = [n.node.get_content() for n in hits]
        retrieved.append((item.query, texts))
        top20.append(item.answer("\n".join(texts)))
        orders = {"bge": hits}
        for name, reranker in rerankers.items():
            start = time.perf_counter()
            orders[f"bge20+{name}"] = reranker.postprocess_nodes(hits, query_str=item.query)
            seconds[name] += time.perf_counter() - start
        for pipeline, chosen in orders.items():
            for k in KS:
                context = "\n".join(n.node.get_content() for n in chosen[:k])
                covered[(pipeline, k)].append(item.answer(context))
                tokens[(pipeline, k)].append(count_tokens(context))
        if number % 25 == 24:
            logger.info("%d / %d questions", number + 1, len(items))
    out: dict[str, Any] = {"questions": len(items), "first_stage_k": FIRST_STAGE_K}
    out["coverage"] = {
        f"{p} k={k}": statistics.mean(map(float, covered[(p, k)])) for p in pipelines for k in KS
    }
    out["first_stage_top20_coverage"] = statistics.mean(map(float, top20))
    out["mean_tokens"] = {
        f"{p} k={k}": statistics.mean(tokens[(p, k)]) for p in pipelines for k in KS
    }
    out["rerank_ms_per_query"] = {n: 1000 * s / len(items) for n, s in seconds.items()}
    paired: dict[str, Any] = {}
    for k in KS:
        diff = np.array(covered[("bge20+colbert", k)], float) - np.array(
            covered[("bge20+cross-encoder", k)], float
        )
        interval = paired_bootstrap_intervals(diff)[0]
        paired[f"k={k}"] = {
            "colbert_minus_cross_encoder": interval._asdict(),
            "changes": count_changes(diff)._asdict(),
            "token_difference": statistics.mean(tokens[("bge20+colbert", k)])
            - statistics.mean(tokens[("bge20+cross-encoder", k)]),
        }
    out["paired"] = paired
    return out


def speed(
    judges: dict[str, BaseRelevanceJudge], lists: list[tuple[str, list[str]]], rounds: int
) -> dict[str, Any]:
    """Pairs/s per judge, rounds interleaved (A B A B ...) so load changes hit both alike."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in judges}
    for judge in judges.values():
        judge.judge(lists[0][0], lists[0][1][:2])  # load the model outside the timing
    for _ in range(rounds):
        for name, judge in judges.items():
            runs[name].append(cpu_speed(judge, lists))
    out: dict[str, Any] = {}
    for name, rows in runs.items():
        out[name] = {
            "pairs_per_round": rows[0]["pairs"],
            "pairs_per_wall_s": statistics.median(r["pairs_per_wall_s"] for r in rows),
            "pairs_per_cpu_s": statistics.median(r["pairs_per_cpu_s"] for r in rows),
        }
    if {"colbert", "cross-encoder"} <= set(out):
        out["colbert_over_cross_encoder_cpu"] = (
            out["colbert"]["pairs_per_cpu_s"] / out["cross-encoder"]["pairs_per_cpu_s"]
        )
    return out


def format_table(result: dict[str, Any]) -> list[str]:
    quality = result["quality"]
    lines = [
        f"COVID-QA rerank, {quality['questions']} held-out questions, bge top "
        f"{FIRST_STAGE_K} -> k (coverage @ mean tokens; top {FIRST_STAGE_K} itself "
        f"{quality['first_stage_top20_coverage']:.3f})",
        "| pipeline | " + " | ".join(f"k={k}" for k in KS) + " |",
        "|---|" + "---|" * len(KS),
    ]
    for pipeline in ("bge", "bge20+cross-encoder", "bge20+colbert"):
        cells = [
            f"{quality['coverage'][f'{pipeline} k={k}']:.3f} @ "
            f"{quality['mean_tokens'][f'{pipeline} k={k}']:.0f}"
            for k in KS
        ]
        lines.append(f"| {pipeline} | " + " | ".join(cells) + " |")
    for k, row in quality["paired"].items():
        diff, changes = row["colbert_minus_cross_encoder"], row["changes"]
        lines.append(
            f"paired {k}: colbert - cross-encoder {diff['mean']:+.3f} "
            f"[{diff['low']:+.3f}, {diff['high']:+.3f}], better/worse/same "
            f"{changes['better']}/{changes['worse']}/{changes['same']}, "
            f"token difference {row['token_difference']:+.1f}"
        )
    lines.append(f"rerank ms per query (20 passages): {json.dumps(quality['rerank_ms_per_query'])}")
    lines.append(f"speed (1 thread): {json.dumps(result['speed'])}")
    lines.append("calibration (AUC on the calibration pairs, Platt fit, CRAG thresholds):")
    for label, fit in result["calibration"].items():
        if isinstance(fit, dict):
            lines.append(
                f"  {label}: AUC {fit['auc']:.3f}, {json.dumps(fit['calibration'])}, "
                f"{json.dumps(fit['thresholds'])}, raw +{fit['raw_positive_mean']:.3f} / "
                f"-{fit['raw_negative_mean']:.3f}"
            )
    lines.append(f"  chosen ColBERT variant: {result['calibration']['chosen_colbert_variant']}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--calibration-questions", type=int, default=60)
    parser.add_argument("--target-precision", type=float, default=0.9)
    parser.add_argument("--max-positive-loss", type=float, default=0.05)
    parser.add_argument("--speed-questions", type=int, default=4)
    parser.add_argument("--speed-rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--skip-calibration", action="store_true", help="use the library's judges as they are"
    )
    parser.add_argument("--name", default="rerank_colbert")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.ERROR)
    items, passages = load_covid(
        covidqa_path(args.datasets), args.calibration_questions + args.questions, args.seed
    )
    calibration_items = items[: args.calibration_questions]
    held_out = items[args.calibration_questions :]
    if args.skip_calibration:  # ranking needs no calibration: the library's fitted constants
        fits: dict[str, Any] = {"chosen_colbert_variant": "library default"}
        judges: dict[str, BaseRelevanceJudge] = {
            "cross-encoder": CrossEncoderRelevanceJudge(num_threads=1),
            "colbert": ColbertRelevanceJudge(num_threads=1),
        }
    else:
        fits, judges = calibrate_all(calibration_items, args)
    result: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items() if k != "datasets"},
        "calibration": fits,
    }
    lists: list[tuple[str, list[str]]] = []
    result["quality"] = evaluate(held_out, passages, judges, lists)
    result["speed"] = speed(judges, lists[: args.speed_questions], args.speed_rounds)
    text = "\n".join(format_table(result))
    print(text)
    write_results(f"bench_{args.name}", text, result)


if __name__ == "__main__":
    main()
