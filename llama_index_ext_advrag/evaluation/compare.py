"""Run pipelines over questions at several k and score every context.

Per question and k: answer coverage (every answer group has an alternative inside the context
handed to the LLM, whitespace- and case-normalised), the rank of the first context node that
matches the gold evidence (hit@k, MRR), the context tokens and, at the main k, the query
latency (the question is embedded once beforehand and shared by all pipelines, so latency is
retrieval plus postprocessing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llama_index.core.callbacks import CBEventType
from llama_index.core.callbacks.base_handler import BaseCallbackHandler
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from tqdm.auto import tqdm

from llama_index_ext_advrag.evaluation.metrics import normalize_for_match
from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.layout import document_id_of
from llama_index_ext_advrag.text import count_tokens

logger = logging.getLogger(__name__)

DEFAULT_KS = (1, 2, 3, 5, 8)
MIN_CONTAINED_CHARS = 20  # a node inside an evidence passage counts only when this long


@dataclass(frozen=True)
class QuestionResult:
    """One question answered by one pipeline at one k."""

    pipeline: str
    question_id: str
    question_type: str
    probe: bool
    k: int
    covered: bool | None  # None: the question has no answer string
    evidence_rank: int | None  # 1-based rank of the first gold node; 0 missed; None no gold
    context_tokens: int
    nodes: int
    latency_ms: float | None  # measured at the main k only
    llm_calls: int


def context_text(nodes: Sequence[NodeWithScore]) -> str:
    """The context as the LLM sees it: node texts joined by blank lines, no metadata."""
    return "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)


def answer_groups_covered(context: str, groups: Sequence[Sequence[str]]) -> bool:
    """Every group has at least one alternative inside ``context`` (normalised)."""
    haystack = normalize_for_match(context)
    return all(
        any(normalize_for_match(a) in haystack for a in group if a.strip()) for group in groups
    )


def node_document_id(node: NodeWithScore) -> str | None:
    return document_id_of(node.node)


def evidence_rank(nodes: Sequence[NodeWithScore], question: Question) -> int | None:
    """1-based rank of the first node matching the gold evidence, 0 when none does, ``None``
    when the question carries no evidence. A node matches a gold document id, or an evidence
    text that it contains or (when at least ``MIN_CONTAINED_CHARS`` long) lies inside."""
    if not question.has_evidence:
        return None
    evidence = [normalize_for_match(e) for e in question.evidence_texts if e.strip()]
    docs = set(question.evidence_docs)
    for rank, node in enumerate(nodes, start=1):
        if docs and node_document_id(node) in docs:
            return rank
        text = normalize_for_match(node.node.get_content(metadata_mode=MetadataMode.NONE))
        for gold in evidence:
            if gold in text or (len(text) >= MIN_CONTAINED_CHARS and text in gold):
                return rank
    return 0


class LLMCallCounter(BaseCallbackHandler):
    """Counts LLM calls (completion and chat events) seen by a callback manager."""

    def __init__(self) -> None:
        super().__init__(event_starts_to_ignore=[], event_ends_to_ignore=[])
        self.calls = 0

    def on_event_start(
        self,
        event_type: CBEventType,
        payload: Any = None,
        event_id: str = "",
        parent_id: str = "",
        **kwargs: Any,
    ) -> str:
        if event_type == CBEventType.LLM:
            self.calls += 1
        return event_id

    def on_event_end(
        self, event_type: CBEventType, payload: Any = None, event_id: str = "", **kwargs: Any
    ) -> None:
        return None

    def start_trace(self, trace_id: str | None = None) -> None:
        return None

    def end_trace(self, trace_id: str | None = None, trace_map: Any = None) -> None:
        return None


def attach_counter(llm: Any) -> LLMCallCounter:
    """Count ``llm``'s calls (no-op counter when there is no LLM)."""
    counter = LLMCallCounter()
    if llm is not None and getattr(llm, "callback_manager", None) is not None:
        llm.callback_manager.add_handler(counter)
    return counter


def embed_questions(
    questions: Sequence[Question], embed_model: Any, show_progress: bool = True
) -> list[QueryBundle]:
    """One QueryBundle per question with its embedding set, shared by every pipeline."""
    bundles = []
    for question in tqdm(
        questions, desc="embedding questions", disable=not show_progress, leave=False
    ):
        bundles.append(
            QueryBundle(
                question.question, embedding=embed_model.get_query_embedding(question.question)
            )
        )
    return bundles


def run_questions(
    pipeline: Any,
    questions: Sequence[Question],
    bundles: Sequence[QueryBundle],
    ks: Sequence[int],
    main_k: int,
    counter: LLMCallCounter | None = None,
    show_progress: bool = True,
    on_error: Callable[[Question, Exception], None] | None = None,
) -> list[QuestionResult]:
    """Answer every question with ``pipeline`` at ``main_k`` (timed) and at each of ``ks``."""
    ks = sorted(set(ks) | {main_k})
    others = [k for k in ks if k != main_k]
    counter = counter or LLMCallCounter()
    results = []
    for question, bundle in tqdm(
        list(zip(questions, bundles, strict=True)),
        desc=pipeline.name,
        disable=not show_progress,
        leave=False,
    ):
        before = counter.calls
        started = time.perf_counter()
        nodes = pipeline.retrieve(bundle, main_k)
        latency = (time.perf_counter() - started) * 1000
        calls = counter.calls - before
        results.append(
            score(pipeline.name, question, main_k, nodes, latency_ms=latency, llm_calls=calls)
        )
        if others and hasattr(pipeline, "warm"):
            pipeline.warm(bundle, max(others))
        for k in others:
            before = counter.calls
            nodes = pipeline.retrieve(bundle, k)
            calls = counter.calls - before
            results.append(
                score(pipeline.name, question, k, nodes, latency_ms=None, llm_calls=calls)
            )
    return results


def score(
    pipeline: str,
    question: Question,
    k: int,
    nodes: Sequence[NodeWithScore],
    *,
    latency_ms: float | None,
    llm_calls: int,
) -> QuestionResult:
    context = context_text(nodes)
    return QuestionResult(
        pipeline=pipeline,
        question_id=question.id,
        question_type=question.type,
        probe=question.probe,
        k=k,
        covered=answer_groups_covered(context, question.answer_groups)
        if question.answerable
        else None,
        evidence_rank=evidence_rank(nodes, question),
        context_tokens=count_tokens(context),
        nodes=len(nodes),
        latency_ms=latency_ms,
        llm_calls=llm_calls,
    )


@dataclass(frozen=True)
class Summary:
    """A pipeline at one k over a group of questions (``None`` where nothing was measurable)."""

    pipeline: str
    k: int
    group: str
    questions: int
    answerable: int
    coverage: float | None
    hit: float | None
    mrr: float | None
    mean_tokens: float
    p95_tokens: float
    p50_latency_ms: float | None
    p95_latency_ms: float | None
    llm_calls: int


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile with linear interpolation (numpy's default)."""
    return float(np.percentile(np.asarray(values, dtype=float), q)) if values else float("nan")


def summarize(results: Sequence[QuestionResult], group: str = "all") -> Summary:
    """Aggregate the results of one pipeline at one k."""
    if not results:
        raise ValueError("summarize needs at least one result")
    covered = [r.covered for r in results if r.covered is not None]
    ranks = [r.evidence_rank for r in results if r.evidence_rank is not None]
    latencies = [r.latency_ms for r in results if r.latency_ms is not None]
    tokens = [r.context_tokens for r in results]
    return Summary(
        pipeline=results[0].pipeline,
        k=results[0].k,
        group=group,
        questions=len(results),
        answerable=len(covered),
        coverage=sum(covered) / len(covered) if covered else None,
        hit=sum(r > 0 for r in ranks) / len(ranks) if ranks else None,
        mrr=sum(1 / r for r in ranks if r > 0) / len(ranks) if ranks else None,
        mean_tokens=float(np.mean(tokens)),
        p95_tokens=percentile(tokens, 95),
        p50_latency_ms=percentile(latencies, 50) if latencies else None,
        p95_latency_ms=percentile(latencies, 95) if latencies else None,
        llm_calls=sum(r.llm_calls for r in results),
    )


def summarize_all(results: Sequence[QuestionResult], by_type: bool = False) -> list[Summary]:
    """One summary per (pipeline, k), plus per question type when ``by_type``."""
    groups: dict[tuple[str, int, str], list[QuestionResult]] = {}
    for r in results:
        groups.setdefault((r.pipeline, r.k, "all"), []).append(r)
        if by_type:
            groups.setdefault((r.pipeline, r.k, r.question_type), []).append(r)
    return [summarize(members, group) for (_, _, group), members in groups.items()]


__all__ = [
    "DEFAULT_KS",
    "LLMCallCounter",
    "QuestionResult",
    "Summary",
    "answer_groups_covered",
    "attach_counter",
    "context_text",
    "embed_questions",
    "evidence_rank",
    "percentile",
    "run_questions",
    "score",
    "summarize",
    "summarize_all",
]
