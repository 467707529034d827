"""Self-RAG against always-retrieve with a local LLM: a pilot on the answer run's sample.

Both rows use the same model, the same retrieval (``hybrid`` at k=5) and the same questions:
the first ``--covidqa`` / ``--cmrc`` questions of ``bench_answers.py``'s samples plus the 16
unanswerable questions of ``benchmarks/answers_unanswerable.jsonl`` (never used to tune).
Always-retrieve is ``bench_answers.py``'s generation (one call, LlamaIndex's QA prompt, the
``AnswerEvaluator`` cache); Self-RAG is the ``self-rag`` compare pipeline (the engine with its
defaults: offline ISREL, the retrieve decision from ISREL, a refusal without evidence). Fact
recall and token F1 come from the gold answers (no judge); a refusal is ``bench_answers``'s
``REFUSAL`` pattern. Each Self-RAG answer is kept with its trace in ``--rows`` (resumable).

``--tune`` swaps in the tuning set, the one to pick Self-RAG's defaults on: answerable
questions of the same corpora outside the answer run's samples (``TUNE_COVIDQA`` COVID-QA
questions of papers 61-98 and ``TUNE_CMRC`` CMRC questions of its last 100 paragraphs, drawn
with ``TUNE_SEED``) and the unanswerable questions of
``benchmarks/answers_unanswerable_tune.jsonl``; its rows go to ``rows_tune_<variant>.jsonl``.
``--variant`` names the engine settings compared there (``VARIANTS``; ``pipeline``: the
``self-rag`` compare pipeline as it is).

Usage (an LLM server must answer at ``--port``: ``benchmarks/llm_server.py``)::

    nice -n 5 python benchmarks/pilot_self_rag_answers.py run --port 8742
    python benchmarks/pilot_self_rag_answers.py report
    nice -n 5 python benchmarks/pilot_self_rag_answers.py run --tune --variant pipeline
    python benchmarks/pilot_self_rag_answers.py report --tune --variant pipeline --name ''
    python benchmarks/pilot_self_rag_answers.py gate     # the ISREL gate on the whole samples
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import bench_answers as answers_run  # noqa: E402
from benchmarks.common import DEFAULT_DATASETS, REPO_ROOT, write_results  # noqa: E402
from llama_index_ext_advrag.query_engine.self_rag_critique import QA_SYSTEM_PROMPT  # noqa: E402

logger = logging.getLogger("pilot_self_rag")

WORK_DIR = REPO_ROOT / ".advrag" / "self-rag-pilot"
ROWS = WORK_DIR / "rows.jsonl"
K = answers_run.NATURAL_K
TUNE_UNANSWERABLE = Path(__file__).with_name("answers_unanswerable_tune.jsonl")
TUNE_SEED = 4103
TUNE_COVIDQA = 16
TUNE_CMRC = 8
# engine settings compared on the tuning set, over the self-rag pipeline's own
VARIANTS: dict[str, dict[str, Any]] = {
    "pipeline": {},
    # LlamaIndex's query engines' chat QA system message before the prompts
    "qa-system": {"system_prompt": QA_SYSTEM_PROMPT},
    "retrieved-qa": {"system_prompt": QA_SYSTEM_PROMPT, "generation_passages": "retrieved"},
    # ISREL decides whether to answer; the generation sends always-retrieve's message
    "retrieved": {"generation_passages": "retrieved"},
    # and ISSUP / ISUSE read from first-token log-probabilities
    "retrieved-logprobs": {"generation_passages": "retrieved", "critique_logprobs": True},
}


def _rows_path(args: argparse.Namespace) -> Path:
    """The rows of ``args``' set and variant (``rows.jsonl``: the report set's first pilot)."""
    if args.tune:
        return WORK_DIR / f"rows_tune_{args.variant}.jsonl"
    return ROWS if args.variant == "pipeline" else WORK_DIR / f"rows_{args.variant}.jsonl"


def tuning_questions(data: Any, datasets: Path) -> None:
    """Replace ``data``'s questions by the tuning set (before its index context is built):
    answerable questions of the same corpus outside the run's sample, and the tuning
    unanswerable questions."""
    import random

    from llama_index_ext_advrag.evaluation.questions import Question, read_questions

    sampled = set(data.ids)
    pool = [q for q in read_questions(str(data.corpus)).questions
            if q.id not in sampled and any(a.strip() for g in q.answer_groups for a in g)]  # fmt: skip
    count = TUNE_COVIDQA if data.name == "covidqa" else TUNE_CMRC
    data.questions = random.Random(TUNE_SEED).sample(pool, count)
    data.unanswerable = [
        Question(x["id"], x["question"], (), lang=x["lang"])
        for x in map(json.loads, TUNE_UNANSWERABLE.read_text(encoding="utf-8").splitlines())
        if x["corpus"] == data.name
    ]


def _self_rag_engine(pipeline: Any, variant: str) -> Any:
    """The self-rag pipeline's engine at k, with ``variant``'s settings over its own."""
    engine = pipeline._engine(K)
    return engine.with_settings(**VARIANTS[variant])


def _rows(path: Path = ROWS) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return {f"{r['dataset']}:{r['id']}": r for r in rows}


def _slim(trace: dict[str, Any]) -> dict[str, Any]:
    """The trace's decisions (the passages' text left out)."""
    keep = ("retrieve", "stop_reason", "answer_kind", "llm_calls", "engine_llm_calls",
            "judged_texts", "seconds", "defaults", "iterations")  # fmt: skip
    return {k: trace.get(k) for k in keep}


def run(args: argparse.Namespace) -> int:
    from llama_index_ext_advrag.evaluation.answer_metrics import fact_recall, token_f1
    from llama_index_ext_advrag.evaluation.answers import AnswerEvaluator, pipeline_key
    from llama_index_ext_advrag.evaluation.compare import context_text

    answers_run.WORK_DIR = WORK_DIR  # the datasets' corpora and indexes live here, not in the run's
    WORK_DIR.mkdir(parents=True, exist_ok=True)
    for _ in range(60):  # a busy single-request server answers late
        if answers_run.server_up(args.port):
            break
        time.sleep(10)
    else:
        raise SystemExit(f"no LLM server at port {args.port}")
    llm = answers_run.make_llm(args.port, args.timeout)
    evaluator = AnswerEvaluator(llm, WORK_DIR / "cache", timeout=args.timeout)
    # several variants run one after the other on each question: with always-retrieve's
    # messages their generations reuse its prompt on the server
    variants = args.variant.split(",")
    paths = {v: _rows_path(argparse.Namespace(**{**vars(args), "variant": v})) for v in variants}
    done = {v: _rows(path) for v, path in paths.items()}
    outs = {v: path.open("a", encoding="utf-8") for v, path in paths.items()}
    # the refusals first (Self-RAG refuses without an LLM call; always-retrieve's refusals only
    # with --unanswerable-baseline), then the answerable questions, both rows on each
    # (one process: the critique's prompt must follow its generation's on the server)
    plan = [("covidqa", slice(None), True), ("cmrc", slice(None), True),
            ("covidqa", slice(0, args.covidqa), False), ("cmrc", slice(0, args.cmrc), False)]  # fmt: skip
    datasets: dict[str, Any] = {}
    try:
        for name, part, unanswerable in plan:
            if args.only and f"{name}:{'u' if unanswerable else 'a'}" not in args.only.split(","):
                continue
            if name not in datasets:
                datasets[name] = answers_run.Dataset(name, args.datasets, llm)
                if args.tune:
                    tuning_questions(datasets[name], args.datasets)
            data = datasets[name]
            questions = (data.unanswerable if unanswerable else data.questions)[part]
            hybrid = data.pipeline("hybrid")
            engines = {v: _self_rag_engine(data.pipeline("self-rag"), v) for v in variants}
            for question in questions:
                todo = [v for v in variants if f"{name}:{question.id}" not in done[v]]
                if not todo:
                    continue
                bundle = data.bundle(question.id)
                started = time.perf_counter()
                made = None
                if not unanswerable or args.unanswerable_baseline:
                    context = context_text(hybrid.retrieve(bundle, K))
                    made = evaluator.generate(pipeline_key(hybrid), question.question, context)
                base_s = time.perf_counter() - started
                for variant in todo:
                    started = time.perf_counter()
                    response = engines[variant].query(question.question)
                    self_s = time.perf_counter() - started
                    trace = response.metadata["advrag_trace"]["self_rag"]
                    answer = str(response)
                    groups = question.answer_groups
                    row = {
                        "dataset": name, "id": question.id, "question": question.question,
                        "unanswerable": unanswerable, "gold": [list(g) for g in groups],
                        "base": None if made is None else {
                            "answer": made.answer, "seconds": round(base_s, 1),
                            "cached": made.cached, "calls": 1,
                            "fact_recall": fact_recall(made.answer, groups),
                            "token_f1": token_f1(made.answer, groups),
                            "refused": bool(answers_run.REFUSAL.search(made.answer))},
                        "self_rag": {"answer": answer, "seconds": round(self_s, 1),
                                     "calls": trace["llm_calls"],
                                     "fact_recall": fact_recall(answer, groups),
                                     "token_f1": token_f1(answer, groups),
                                     "refused": bool(answers_run.REFUSAL.search(answer)),
                                     "trace": _slim(trace)},
                    }  # fmt: skip
                    outs[variant].write(json.dumps(row, ensure_ascii=False) + "\n")
                    outs[variant].flush()
                    logger.info("%s %s %s: base %.0f s %r | self-rag %.0f s, %d calls, %s: %r",
                                variant, name, question.id, base_s, made and made.answer[:60], self_s,
                                trace["llm_calls"], trace["answer_kind"], answer[:60])  # fmt: skip
    finally:
        for out in outs.values():
            out.close()
    for data in datasets.values():
        data.close()
    return 0


def gate(args: argparse.Namespace) -> int:
    """No LLM: on every sample question, whether a retrieved passage passes ISREL (else
    Self-RAG refuses) and whether the gold answer is in the retrieved / the kept passages."""
    from llama_index.core.schema import MetadataMode

    from llama_index_ext_advrag.evaluation.compare import answer_groups_covered, context_text
    from llama_index_ext_advrag.judges.base import GradeLabel

    answers_run.WORK_DIR = WORK_DIR
    lines = ["The ISREL gate on the answer run's samples (hybrid k=5, no LLM)", ""]
    data_out: dict[str, Any] = {}
    for name in ("covidqa", "cmrc"):
        data = answers_run.Dataset(name, args.datasets, None)
        if args.tune:
            tuning_questions(data, args.datasets)
        hybrid = data.pipeline("hybrid")
        judge = data.context().relevance_judge()
        for unanswerable in (False, True):
            questions = data.unanswerable if unanswerable else data.questions
            counts = {"n": 0, "refused": 0, "gold_retrieved": 0, "gold_kept": 0,
                      "refused_with_gold_retrieved": 0, "kept_passages": 0}  # fmt: skip
            for question in questions:
                nodes = hybrid.retrieve(data.bundle(question.id), K)
                texts = [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]
                grades = judge.judge(question.question, texts)
                scores = [g.score if g.score is not None else -1.0 for g in grades]
                with_gold = [round(s, 3) for s, t in zip(scores, texts, strict=True)
                             if not unanswerable
                             and answer_groups_covered(t, question.answer_groups)]  # fmt: skip
                lines.append(f"  {name} {'u' if unanswerable else 'a'} {question.id}: max ISREL "
                             f"{max(scores, default=-1):.3f}, with gold {with_gold}")  # fmt: skip
                kept = [n for n, g in zip(nodes, grades, strict=True)
                        if g.label is not GradeLabel.IRRELEVANT]  # fmt: skip
                counts["n"] += 1
                counts["kept_passages"] += len(kept)
                counts["refused"] += not kept
                if not unanswerable:
                    groups = question.answer_groups
                    in_all = answer_groups_covered(context_text(nodes), groups)
                    counts["gold_retrieved"] += in_all
                    counts["gold_kept"] += bool(kept) and answer_groups_covered(
                        context_text(kept), groups
                    )
                    counts["refused_with_gold_retrieved"] += (not kept) and in_all
            label = f"{name} {'unanswerable' if unanswerable else 'answerable'}"
            data_out[label] = counts
            lines.append(f"{label}: {counts}")
        data.close()
    text = "\n".join(lines)
    print(text)
    if args.name:
        write_results(args.name + "_gate", text, data_out)
    return 0


def summarise(rows: list[dict[str, Any]], title: str) -> tuple[list[str], dict[str, Any]]:
    """Per dataset and kind of question: both rows' figures and the paired differences."""
    from llama_index_ext_advrag.evaluation.paired import paired_bootstrap_intervals

    lines = [title, ""]
    data: dict[str, Any] = {"pilot": True, "k": K, "groups": {}}
    for name in ("covidqa", "cmrc", "all"):
        for unanswerable in (False, True):
            group = [r for r in rows if (name == "all" or r["dataset"] == name)
                     and r["unanswerable"] is unanswerable]  # fmt: skip
            if not group:
                continue
            label = f"{name} {'unanswerable' if unanswerable else 'answerable'}"
            entry: dict[str, Any] = {"n": len(group)}
            for side in ("base", "self_rag"):
                if any(r[side] is None for r in group):
                    continue
                entry[side] = {
                    "calls_per_question": sum(r[side]["calls"] for r in group) / len(group),
                    "seconds_per_question": sum(r[side]["seconds"] for r in group) / len(group),
                    "refused": sum(r[side]["refused"] for r in group),
                }
                if not unanswerable:
                    for metric in ("fact_recall", "token_f1"):
                        entry[side][metric] = sum(float(r[side][metric]) for r in group) / len(
                            group
                        )
            kinds: dict[str, int] = {}
            for r in group:
                kind = r["self_rag"]["trace"]["answer_kind"]
                kinds[kind] = kinds.get(kind, 0) + 1
            entry["self_rag_answer_kinds"] = kinds
            lines.append(f"## {label} (n={len(group)})")
            for side, title in (("base", "always-retrieve"), ("self_rag", "Self-RAG")):
                if side not in entry:
                    lines.append(f"{title:16s} not run on these questions")
                    continue
                e = entry[side]
                metrics = (f"fact recall {e['fact_recall']:.3f}, token F1 {e['token_f1']:.3f}, "
                           if not unanswerable else "")  # fmt: skip
                lines.append(f"{title:16s} {metrics}refused {e['refused']}/{len(group)}, "
                             f"{e['calls_per_question']:.2f} LLM calls, "
                             f"{e['seconds_per_question']:.1f} s per question")  # fmt: skip
            lines.append(f"Self-RAG answer kinds: {kinds}")
            if not unanswerable and all(r["base"] is not None for r in group):
                for metric in ("fact_recall", "token_f1"):
                    diffs = [float(r["self_rag"][metric]) - float(r["base"][metric])
                             for r in group]  # fmt: skip
                    interval = paired_bootstrap_intervals(diffs)[0]
                    better = sum(d > 0 for d in diffs)
                    worse = sum(d < 0 for d in diffs)
                    entry[f"{metric}_difference"] = {"mean": interval.mean, "low": interval.low,
                                                     "high": interval.high, "better": better,
                                                     "worse": worse}  # fmt: skip
                    lines.append(f"paired Self-RAG - always-retrieve {metric}: "
                                 f"{interval.mean:+.3f} [{interval.low:+.3f}, {interval.high:+.3f}]"
                                 f" ({better} better, {worse} worse)")  # fmt: skip
            lines.append("")
            data["groups"][label] = entry
    return lines, data


def report(args: argparse.Namespace) -> int:
    """The pilot's figures from its rows (no LLM); for a variant on the report set, the first
    pilot's (``rows.jsonl``) follow as "before"."""
    which = "tuning set" if args.tune else "report set"
    title = (f"Self-RAG ({args.variant}) against always-retrieve (hybrid k=5, one generation), "
             f"{which}")  # fmt: skip
    lines, data = summarise(list(_rows(_rows_path(args)).values()), title)
    data["variant"] = {"name": args.variant, "settings": VARIANTS[args.variant], "set": which}
    if not args.tune and args.variant != "pipeline" and ROWS.is_file():
        before, before_data = summarise(
            list(_rows(ROWS).values()), "# before: the defaults of the first pilot, same questions"
        )
        lines += ["", *before]
        data["before"] = before_data
    text = "\n".join(lines)
    print(text)
    if args.name:
        write_results(args.name, text, data)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("run", "report", "gate"))
    parser.add_argument("--port", type=int, default=8742)
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--covidqa", type=int, default=20, help="answerable COVID-QA questions")
    parser.add_argument("--cmrc", type=int, default=6, help="answerable CMRC questions")
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--only", default="",
                        help="segments to run, e.g. cmrc:u,cmrc:a (u: unanswerable)")  # fmt: skip
    parser.add_argument("--unanswerable-baseline", action="store_true",
                        help="always-retrieve on the unanswerable questions too")  # fmt: skip
    parser.add_argument("--name", default="self_rag_pilot", help="results name ('' : print)")
    parser.add_argument("--tune", action="store_true",
                        help="the tuning set (see the module docstring), not the report set")  # fmt: skip
    parser.add_argument("--variant", default="pipeline",
                        help="engine settings (VARIANTS) over the self-rag pipeline's; run: "
                             "several, comma-separated")  # fmt: skip
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    return {"run": run, "report": report, "gate": gate}[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
