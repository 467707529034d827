"""CRAG's defaults on hard negatives: pick the keep rule on one set, report it on the others.

Sets (``crag_sets.py``): COVID-QA with hard negatives (same paper without the answer, other
papers' BM25 top passages), split by paper into a *selection* part and an *evaluation* part;
RGB zh (its own negatives: 30 held-out questions, the ones the e5 calibration was fitted on, and
60 evaluation questions); CMRC 2018 dev (hard negatives as for COVID-QA, 60 questions, never used
for any choice). Contexts of 5 passages at noise 0.2 / 0.4 / 0.6 / 0.8.

Judges: the packaged cross-encoder (English) and the e5 cosine judge (Chinese), each with the
library's calibration. Raw model values are cached on disk (``--cache``), so a re-run with other
thresholds does not score again.

Each judge's thresholds: ``lower`` is the ``q``-quantile of the judge's scores of positive
passages on its selection sample and ``upper`` the lowest score with precision 0.9 there.

``--rule pooled`` (default, issue #31): the selection sets are COVID-QA's selection papers (the
cross-encoder's sample), and RGB's 30 held-out questions with 100 CMRC questions whose documents
are not evaluated (``cmrc_select``; e5's pooled sample); a further 100 CMRC questions from
documents in neither (``cmrc_holdout``) are reported beside the 60 of ``cmrc_eval``. ``q``, the log-odds margin to the best
node (``keep_within``) and ``min_kept`` are chosen together on all selection sets, graded as
CRAG sees them (e5's scores aligned to the router's scale): the largest mean precision at noise
0.8 keeping >= 0.97 of positives and answers at every ratio of every selection set.
``--rule covid`` (the earlier run, ``bench_crag_defaults.txt``): ``q`` and the keep rule picked
on COVID-QA's selection papers alone, the same ``q`` giving e5 its thresholds from RGB's 30.
Reported on COVID-QA's evaluation papers, RGB's 60 evaluation questions and 60 CMRC questions.

    OMP_NUM_THREADS=1 python benchmarks/bench_crag_defaults.py --cache CACHE_DIR --phase score
    OMP_NUM_THREADS=1 python benchmarks/bench_crag_defaults.py --cache CACHE_DIR --name crag_keep
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_crag import NOISE_RATIOS, KeptTally, as_nodes, context_for  # noqa: E402
from common import DEFAULT_DATASETS, cmrc_path, covidqa_path, write_results  # noqa: E402
from crag_sets import (  # noqa: E402
    Item,
    rgb_items,
    squad_items,
)
from judge_score_cache import CachedRawJudge, RawScoreCache  # noqa: E402

from llama_index_ext_advrag import TRACE_KEY  # noqa: E402
from llama_index_ext_advrag.judges import (  # noqa: E402
    CrossEncoderRelevanceJudge,
    EmbeddingRelevanceJudge,
    LanguageRoutedJudge,
    ScoreCalibration,
)
from llama_index_ext_advrag.judges.calibration import pick_thresholds  # noqa: E402
from llama_index_ext_advrag.judges.cross_encoder import MS_MARCO_MINILM_CALIBRATION  # noqa: E402
from llama_index_ext_advrag.judges.embedding import MULTILINGUAL_E5_RGB_CALIBRATION  # noqa: E402
from llama_index_ext_advrag.judges.routed import align_score  # noqa: E402
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor  # noqa: E402
from llama_index_ext_advrag.postprocessor.crag import (  # noqa: E402
    decide_action,
    keep_back,
    keep_retrieved,
)

logger = logging.getLogger("bench_crag_defaults")
COVID_WINDOW_TOKENS = 128
CMRC_WINDOW_TOKENS = 160
SELECTION_PAPER_SHARE = 0.4


# ----- sets -----


def bench_crag_calibration_ids(path: Path, seed: int) -> set[str]:
    """The COVID-QA questions ``bench_crag.py`` fitted the cross-encoder's calibration on."""
    from bench_crag import load_covid

    items, _ = load_covid(path, 200, seed)
    random.Random(seed).shuffle(items)
    return {item.qid for item in items[:60]}


def build_sets(args: argparse.Namespace) -> dict[str, list[Item]]:
    covid_file = covidqa_path(args.datasets)
    skip = bench_crag_calibration_ids(covid_file, args.seed)
    covid = squad_items(covid_file, COVID_WINDOW_TOKENS, 500, args.seed, skip)
    papers = sorted({it.doc_id for it in covid})
    random.Random(args.seed).shuffle(papers)
    chosen = set(papers[: round(SELECTION_PAPER_SHARE * len(papers))])
    cmrc = squad_items(
        cmrc_path(args.datasets),
        CMRC_WINDOW_TOKENS,
        args.zh_questions + 3 * (args.cmrc_selection_questions + args.cmrc_holdout_questions),
        args.seed,
    )
    cmrc_eval = cmrc[: args.zh_questions]
    eval_documents = {it.doc_id for it in cmrc_eval}
    later = [it for it in cmrc[args.zh_questions :] if it.doc_id not in eval_documents]
    cmrc_select = later[: args.cmrc_selection_questions]
    select_documents = {it.doc_id for it in cmrc_select}
    rgb = rgb_items(args.datasets / "rgb" / "zh_refine.json")
    random.Random(args.seed).shuffle(
        rgb
    )  # bench_crag's split: its first 30 fitted e5's calibration
    return {
        "covid_select": [it for it in covid if it.doc_id in chosen][: args.selection_questions],
        "covid_eval": [it for it in covid if it.doc_id not in chosen][: args.eval_questions],
        "rgb_select": rgb[:30],
        "rgb_eval": rgb[30 : 30 + args.zh_questions],
        "cmrc_select": cmrc_select,
        "cmrc_eval": cmrc_eval,
        "cmrc_holdout": [
            it for it in later[len(cmrc_select) :] if it.doc_id not in select_documents
        ][: args.cmrc_holdout_questions],
    }


def set_language(name: str) -> str:
    return "en" if name.startswith("covid") else "zh"


# ----- judges -----


def build_judges(cache: RawScoreCache) -> dict[str, CachedRawJudge]:
    from llama_index_ext_advrag.embeddings import MultilingualE5Embedding

    uncalibrated_ce = CrossEncoderRelevanceJudge(num_threads=1, calibration=ScoreCalibration())
    e5 = EmbeddingRelevanceJudge(embed_model=MultilingualE5Embedding(num_threads=1), name="e5")
    return {
        "en": CachedRawJudge(
            uncalibrated_ce, cache, "ce-msmarco-int8", MS_MARCO_MINILM_CALIBRATION
        ),
        "zh": CachedRawJudge(e5, cache, "e5-small-q4", MULTILINGUAL_E5_RGB_CALIBRATION),
    }


def score_sets(sets: dict[str, list[Item]], judges: dict[str, CachedRawJudge]) -> dict[str, Any]:
    """Every (question, passage) pair scored once: calibrated scores per item, cached raw."""
    scores: dict[str, Any] = {}
    for name, items in sets.items():
        judge = judges[set_language(name)]
        start = time.perf_counter()
        rows = []
        for index, item in enumerate(items):
            texts = item.positives + item.negatives
            grades = judge.judge(item.query, texts)
            rows.append([g.score for g in grades])
            if index % 10 == 9:
                logger.info("%s: %d/%d questions scored", name, index + 1, len(items))
        scores[name] = rows
        logger.info("%s: %d questions in %.0f s", name, len(items), time.perf_counter() - start)
    return scores


# ----- the keep rule, simulated on cached scores (the same rule CRAGPostprocessor applies) -----


@dataclass(frozen=True)
class Rule:
    upper: float
    lower: float
    keep_doubtful_when_correct: bool = True
    min_kept: int = 1
    min_kept_floor: float = 0.0
    keep_within: float | None = None


def simulate_keep(scores: list[float | None], rule: Rule) -> list[bool]:
    """What CRAG (no corrective retrieval) keeps of a context with these grades."""
    action = decide_action(scores, rule.upper, rule.lower)
    if action is None:
        return [True] * len(scores)
    keep = keep_retrieved(
        scores, action, rule.upper, rule.lower, rule.keep_doubtful_when_correct, rule.keep_within
    )
    for index in keep_back(scores, keep, rule.min_kept, rule.min_kept_floor):
        keep[index] = True
    return keep


def simulate(
    items: list[Item], rows: list[list[float | None]], ratio: float, rule: Rule | None
) -> dict[str, float]:
    tally = KeptTally(count_tokens=False)
    for item, scores in zip(items, rows, strict=True):
        npos = len(item.positives)
        negatives = round(5 * ratio)
        if npos < 5 - negatives or len(item.negatives) < negatives:
            continue
        chosen = list(range(5 - negatives)) + [npos + i for i in range(negatives)]
        texts = item.positives + item.negatives
        keep = [True] * 5 if rule is None else simulate_keep([scores[i] for i in chosen], rule)
        kept_idx = [i for i, k in zip(chosen, keep, strict=True) if k]
        flags = [i < npos for i in kept_idx]
        tally.add(flags, item.answer("\n".join(texts[i] for i in kept_idx)))
    return tally.summary()


SELECTION_QUANTILES = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3)
SELECTION_MARGIN = 0.02  # the selection set must reach target + margin (0.95 + 0.02)
TARGET_KEEP = 0.95
UPPER_PRECISION = 0.9


def positive_scores(items: list[Item], rows: list[list[float | None]]) -> tuple[list, list]:
    scores, labels = [], []
    for item, row in zip(items, rows, strict=True):
        for index, score in enumerate(row):
            if score is not None:
                scores.append(score)
                labels.append(index < len(item.positives))
    return scores, labels


def thresholds_for(
    items: list[Item], rows: list[list[float | None]], quantile: float
) -> tuple[float, float]:
    """(upper, lower): upper at precision 0.9, lower the ``quantile`` of the positives' scores."""
    scores, labels = positive_scores(items, rows)
    upper = pick_thresholds(scores, labels, UPPER_PRECISION).upper
    lower = float(np.quantile([s for s, lab in zip(scores, labels, strict=True) if lab], quantile))
    return max(upper, lower), lower


def select_rule(items: list[Item], rows: list[list[float | None]]) -> dict[str, Any]:
    """The rule with the best precision at noise 0.8 among those keeping >= 0.97 of positives
    and answers at every ratio on the selection set (and never dropping everything)."""
    candidates = []
    for quantile in SELECTION_QUANTILES:
        upper, lower = thresholds_for(items, rows, quantile)
        for doubtful in (True, False):
            for min_kept in (0, 1, 2):
                rule = Rule(upper, lower, doubtful, min_kept)
                cells = {str(r): simulate(items, rows, r, rule) for r in NOISE_RATIOS}
                feasible = all(
                    min(c["keep_positive"], c["answer_in_context"])
                    >= TARGET_KEEP + SELECTION_MARGIN
                    for c in cells.values()
                )
                candidates.append(
                    {
                        "quantile": quantile,
                        "rule": rule.__dict__,
                        "cells": cells,
                        "feasible": feasible,
                    }
                )
    # Never dropping everything (min_kept >= 1) is a requirement, not a choice; among the
    # feasible rules the best precision at 0.8 wins, ties to the smaller min_kept.
    feasible = [c for c in candidates if c["feasible"] and c["rule"]["min_kept"] >= 1]
    best = max(
        feasible,
        key=lambda c: (round(c["cells"]["0.8"]["kept_precision"], 6), -c["rule"]["min_kept"]),
    )
    return {"chosen": best, "candidates": candidates}


SELECTION_MARGINS = (None, 1.5, 2.0, 2.5, 3.0, 4.0)
POOLED_SELECTION = {"en": ("covid_select",), "zh": ("rgb_select", "cmrc_select")}


def pooled_thresholds(
    sets: dict[str, list[Item]], rows: dict[str, Any], quantile: float
) -> dict[str, tuple[float, float]]:
    """Each language's (upper, lower) from its pooled selection sets."""
    out = {}
    for language, names in POOLED_SELECTION.items():
        items = [it for name in names for it in sets[name]]
        out[language] = thresholds_for(items, [r for name in names for r in rows[name]], quantile)
    return out


def aligned_rows(
    rows: list[list[float | None]], source: tuple[float, float], target: tuple[float, float]
) -> list[list[float | None]]:
    """Scores on the router's scale (``align_score``), as CRAG sees a routed judge's."""
    (upper, lower), (to_upper, to_lower) = source, target
    return [
        [None if s is None else align_score(s, (lower, upper), (to_lower, to_upper)) for s in row]
        for row in rows
    ]


def select_pooled_rule(sets: dict[str, list[Item]], rows: dict[str, Any]) -> dict[str, Any]:
    """``q``, ``keep_within`` and ``min_kept`` picked on every selection set together (see the
    module docstring); ties go to the rule that keeps more (no or a wider margin, then the
    smaller ``min_kept``)."""
    names = [n for ns in POOLED_SELECTION.values() for n in ns]
    candidates = []
    for quantile in SELECTION_QUANTILES:
        thresholds = pooled_thresholds(sets, rows, quantile)
        scaled = {
            n: rows[n]
            if set_language(n) == "en"
            else aligned_rows(rows[n], thresholds["zh"], thresholds["en"])
            for n in names
        }
        for margin in SELECTION_MARGINS:
            for min_kept in (1, 2):
                rule = Rule(*thresholds["en"], True, min_kept, keep_within=margin)
                cells = {
                    n: {str(r): simulate(sets[n], scaled[n], r, rule) for r in NOISE_RATIOS}
                    for n in names
                }
                worst = min(
                    min(c["keep_positive"], c["answer_in_context"])
                    for table in cells.values()
                    for c in table.values()
                )
                precision = statistics.mean(cells[n]["0.8"]["kept_precision"] for n in names)
                candidates.append(
                    {
                        "quantile": quantile,
                        "thresholds": thresholds,
                        "rule": rule.__dict__,
                        "worst_keep": worst,
                        "mean_precision_0.8": precision,
                        "feasible": worst >= TARGET_KEEP + SELECTION_MARGIN,
                        "cells": cells,
                    }
                )
    feasible = [c for c in candidates if c["feasible"]]
    best = max(
        feasible,
        key=lambda c: (
            round(c["mean_precision_0.8"], 6),
            c["rule"]["keep_within"] or float("inf"),
            -c["rule"]["min_kept"],
        ),
    )
    return {"chosen": best, "candidates": candidates}


def frontier(candidates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The best selection precision at noise 0.8 for each worst-case keep level."""
    rows = []
    for level in (1.0, 0.99, 0.98, 0.97, 0.96, 0.95, 0.93, 0.9, 0.85):
        fits = [c for c in candidates if c["worst_keep"] >= level - 1e-9]
        if fits:
            best = max(fits, key=lambda c: c["mean_precision_0.8"])
            rows.append(
                {
                    "worst_keep_at_least": level,
                    "mean_precision_0.8": round(best["mean_precision_0.8"], 3),
                    "worst_keep": round(best["worst_keep"], 3),
                    "quantile": best["quantile"],
                    "keep_within": best["rule"]["keep_within"],
                    "min_kept": best["rule"]["min_kept"],
                }
            )
    return rows


def ranking_quality(items: list[Item], rows: list[list[float | None]]) -> dict[str, float]:
    """Per question: AUC of positives over negatives, and how often the 0.8 context's positive
    is graded first among its 5 passages."""
    pairs, first, questions = [], 0, 0
    for item, row in zip(items, rows, strict=True):
        npos = len(item.positives)
        positives = [s for s in row[:npos] if s is not None]
        negatives = [s for s in row[npos:] if s is not None]
        pairs += [float(p > n) + 0.5 * (p == n) for p in positives for n in negatives]
        if row[0] is not None and len(negatives) >= 4:
            questions += 1
            first += all(row[0] > n for n in negatives[:4])
    return {"auc": float(np.mean(pairs)), "positive_first_at_noise_0.8": first / questions}


# ----- CRAG itself on the sets (public API, through the cached judges) -----

OLD_DEFAULTS = {"en": (0.626, 0.051), "zh": (0.686, 0.202)}  # before the rule (issue #31)
# --rule covid's pick (bench_crag_defaults.txt), the defaults before the pooled selection
PREVIOUS_DEFAULTS = {"en": (0.680, 0.035), "zh": (0.674, 0.177)}


def evaluate(
    items: list[Item], ratio: float, post: CRAGPostprocessor | None, seed: int
) -> dict[str, Any]:
    rng = random.Random(seed)
    tally = KeptTally()
    kept_back = 0
    for item in items:
        context = context_for(item, ratio, rng)
        if context is None:
            continue
        nodes = as_nodes(context, item.qid)
        originals = {n.node.node_id: t for n, t in zip(nodes, context, strict=True)}
        result = nodes if post is None else post.postprocess_nodes(nodes, query_str=item.query)
        flags = [originals[n.node.node_id] in item.positives for n in result]
        final = "\n".join(n.node.get_content() for n in result)
        tally.add(flags, item.answer(final), final)
        kept_back += sum(
            n.node.metadata.get(TRACE_KEY, {}).get("crag", {}).get("kept_by") == "min_kept"
            for n in result
        )
    return {**tally.summary(), "kept_back_by_min_kept": kept_back}


def variants(
    router: LanguageRoutedJudge, name: str, previous: LanguageRoutedJudge | None = None
) -> dict[str, CRAGPostprocessor | None]:
    """The rows of a set; refinement (strips graded one by one) on COVID-QA's evaluation
    papers only, to bound the run's time."""
    language = set_language(name)
    old_upper, old_lower = OLD_DEFAULTS[language]
    rows: dict[str, CRAGPostprocessor | None] = {
        "none (all 5)": None,
        "old defaults": CRAGPostprocessor(
            judge=router.judges[language],
            upper=old_upper,
            lower=old_lower,
            keep_doubtful_when_correct=False,
            min_kept=0,
            keep_within=None,
            refine=False,
            max_rounds=0,
        ),  # fmt: skip
    }
    if previous is not None:
        rows["previous defaults"] = CRAGPostprocessor(judge=previous, refine=False, max_rounds=0)
    rows["new defaults"] = CRAGPostprocessor(judge=router, refine=False, max_rounds=0)
    if name == "covid_eval":
        rows["new defaults + refinement"] = CRAGPostprocessor(judge=router, max_rounds=0)
    return rows


def covid_selection(sets: dict[str, list[Item]], rows: dict[str, Any]) -> dict[str, Any]:
    """``--rule covid``: the keep rule and ``q`` picked on COVID-QA's selection papers alone."""
    selection = select_rule(sets["covid_select"], rows["covid_select"])
    chosen = selection["chosen"]
    rule = chosen["rule"]
    thresholds = {"en": (rule["upper"], rule["lower"])}
    if "rgb_select" in sets:
        thresholds["zh"] = thresholds_for(
            sets["rgb_select"], rows["rgb_select"], chosen["quantile"]
        )
    return {
        "set": "covid_select",
        "chosen": chosen,
        "thresholds": thresholds,
        "candidates": [
            {"quantile": c["quantile"], **{k: c["rule"][k] for k in ("lower", "keep_doubtful_when_correct", "min_kept")},
             "feasible": c["feasible"],
             "cells": {r: [round(c["cells"][r][k], 3) for k in ("kept_precision", "keep_positive", "mean_kept")] for r in c["cells"]}}
            for c in selection["candidates"]
        ],
    }  # fmt: skip


def measure_speed(sets: dict[str, list[Item]], judges: dict[str, CachedRawJudge]) -> dict[str, Any]:
    """Uncached pairs per second (one thread), CPU and wall, 40 pairs per set."""
    out = {}
    for name in ("covid_eval", "rgb_eval", "cmrc_eval"):
        inner = judges[set_language(name)]._inner
        work = [(it.query, (it.positives[:1] + it.negatives[:3])) for it in sets[name][-10:]]
        inner.judge("warm up", ["warm up"])
        wall, cpu = time.perf_counter(), time.process_time()
        for query, texts in work:
            inner.judge(query, texts)
        count = sum(len(t) for _, t in work)
        out[name] = {
            "judge": inner.name,
            "pairs": count,
            "mean_chars": statistics.mean(len(t) for _, ts in work for t in ts),
            "pairs_per_cpu_s": count / (time.process_time() - cpu),
            "pairs_per_wall_s": count / (time.perf_counter() - wall),
        }
        logger.info("speed %s: %s", name, out[name])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--cache", type=Path, required=True, help="raw judge scores (SQLite)")
    parser.add_argument("--phase", choices=["score", "all"], default="all")
    parser.add_argument("--selection-questions", type=int, default=80)
    parser.add_argument("--eval-questions", type=int, default=150)
    parser.add_argument("--zh-questions", type=int, default=60)
    parser.add_argument("--cmrc-selection-questions", type=int, default=100)
    parser.add_argument(
        "--cmrc-holdout-questions",
        type=int,
        default=100,
        help="more CMRC questions for reporting, documents in neither cmrc_eval nor cmrc_select",
    )
    parser.add_argument(
        "--rule", choices=["pooled", "covid"], default="pooled", help="see the module docstring"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="crag_defaults")
    parser.add_argument("--sets", nargs="*", help="only these sets (covid_select is needed)")
    parser.add_argument("--speed", action="store_true", help="also time the judges uncached")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    cache = RawScoreCache(args.cache)
    sets = {name: items for name, items in build_sets(args).items() if items}
    if args.sets:
        sets = {name: sets[name] for name in args.sets}
    logger.info("sets: %s", {k: len(v) for k, v in sets.items()})
    judges = build_judges(cache)
    rows = score_sets(sets, judges)
    if args.phase == "score":
        return
    results: dict[str, Any] = {
        "args": {k: str(v) for k, v in vars(args).items() if k not in ("datasets", "cache")},
        "sizes": {k: len(v) for k, v in sets.items()},
    }
    previous = None
    if args.rule == "covid":
        results["selection"] = covid_selection(sets, rows)
    else:
        selection = select_pooled_rule(sets, rows)
        chosen = selection["chosen"]
        results["selection"] = {
            "sets": POOLED_SELECTION,
            "chosen": {k: v for k, v in chosen.items() if k != "cells"},
            "chosen_cells": chosen["cells"],
            "thresholds": chosen["thresholds"],
            "keep_within": chosen["rule"]["keep_within"],
            "min_kept": chosen["rule"]["min_kept"],
            "frontier": frontier(selection["candidates"]),
            "candidates": [
                {"quantile": c["quantile"], "keep_within": c["rule"]["keep_within"],
                 "min_kept": c["rule"]["min_kept"], "worst_keep": round(c["worst_keep"], 4),
                 "mean_precision_0.8": round(c["mean_precision_0.8"], 4)}
                for c in selection["candidates"]
            ],
        }  # fmt: skip
        previous_judges = build_judges(cache)
        for language, (upper, lower) in PREVIOUS_DEFAULTS.items():
            previous_judges[language].default_upper = upper
            previous_judges[language].default_lower = lower
        previous = LanguageRoutedJudge(dict(previous_judges))
    thresholds = results["selection"]["thresholds"]
    for language, (upper, lower) in thresholds.items():  # what the judges carry (3 decimals)
        judges[language].default_upper = round(upper, 3)
        judges[language].default_lower = round(lower, 3)
        judges[language].default_keep_within = results["selection"].get("keep_within")
    router = LanguageRoutedJudge({"en": judges["en"], "zh": judges["zh"]})
    results["quality"] = {name: ranking_quality(sets[name], rows[name]) for name in sets}
    if args.speed:
        results["speed"] = measure_speed(sets, judges)
    results["tables"] = {}
    # COVID-QA's evaluation papers last: its refinement row grades strips, the slow part
    for name in sorted(sets, key=lambda n: n == "covid_eval"):
        results["tables"][name] = {
            label: {str(r): evaluate(sets[name], r, post, args.seed) for r in NOISE_RATIOS}
            for label, post in variants(router, name, previous).items()
        }
        logger.info("%s done", name)
        write_results(f"bench_{args.name}", format_results(results), results)
    print(format_results(results))


def format_results(results: dict[str, Any]) -> str:
    lines = [f"sizes (questions): {results['sizes']}"]
    selection = results["selection"]
    chosen = selection["chosen"]
    picked_on = selection.get("sets", selection.get("set"))
    lines.append(
        f"rule picked on {picked_on}: quantile {chosen['quantile']}, rule {chosen['rule']}"
    )
    lines.append(f"thresholds (upper, lower): {selection['thresholds']}")
    for row in selection.get("frontier", []):
        lines.append(f"selection frontier: {json.dumps(row)}")
    lines.append(f"ranking quality: {json.dumps(results['quality'])}")
    header = "set / row".ljust(44) + "".join(f"noise {r}".rjust(26) for r in NOISE_RATIOS)
    lines += ["", header, " " * 44 + "    prec / keep+ / answer / kept" * len(NOISE_RATIOS)]
    for name, table in results["tables"].items():
        for label, cells in table.items():
            text = f"{name} {label}".ljust(44)
            for r in NOISE_RATIOS:
                c = cells[str(r)]
                text += (
                    f"{c['kept_precision']:.2f} / {c['keep_positive']:.2f} / "
                    f"{c['answer_in_context']:.2f} / {c['mean_kept']:.1f}"
                ).rjust(26)
            lines.append(text)
        counts = {r: c["questions"] for r, c in next(iter(table.values())).items()}
        lines.append(f"  questions per noise ratio: {counts}")
    if "speed" in results:
        lines.append(f"speed (one thread, uncached): {json.dumps(results['speed'])}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
