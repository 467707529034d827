"""What tracing costs a hybrid + CRAG query: p50 latency with the pack's span writer removed
(the baseline), with the writer present and no tracer (the default after ``import``), and with
OpenInference's LlamaIndex instrumentor and an in-memory exporter (with and without the writer).

The query is the quickstart's: sentence windows of ``data/en_manual.md``, ``HybridFusionRetriever``
over the dense (bge-small, one thread) and BM25 legs, ``CRAGPostprocessor`` with the offline
cross-encoder (one thread). Every question runs under every condition back to back (the
order rotated), so load changes hit them alike and the times pair up (median paired ratio). Phase 1 runs before any OpenTelemetry module is imported; phase 2
instruments. Each phase's ratios are to its own baseline. The writer's own time per event without
a tracer is timed directly as well.

Usage::

    nice -n 5 .venv/bin/python benchmarks/bench_tracing.py            # -> results/bench_tracing.*
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common import REPO_ROOT, write_results
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from llama_index_ext_advrag import (
    AdaptiveSlidingWindowNodeParser,
    CRAGPostprocessor,
    CrossEncoderRelevanceJudge,
    HybridFusionRetriever,
    JiebaBM25Retriever,
)
from llama_index_ext_advrag.evaluation import load_questions
from llama_index_ext_advrag.events import AdvragEvent, CRAGActionEvent
from llama_index_ext_advrag.models import load_default_embed_model
from llama_index_ext_advrag.tracing import AdvragSpanWriter, install_span_writer


def build_query(document: Path) -> Callable[[str], Any]:
    text = document.read_text(encoding="utf-8")
    windows = AdaptiveSlidingWindowNodeParser(preset="article").get_nodes_from_documents(
        [Document(text=text, id_=document.name)]
    )
    embed_model = load_default_embed_model(num_threads=1)
    hybrid = HybridFusionRetriever(
        [
            VectorStoreIndex(windows, embed_model=embed_model).as_retriever(similarity_top_k=5),
            JiebaBM25Retriever(windows, similarity_top_k=5),
        ],
        leg_names=["dense", "bm25"],
    )
    crag = CRAGPostprocessor(judge=CrossEncoderRelevanceJudge(num_threads=1), refine=False)

    def query(question: str) -> Any:
        return crag.postprocess_nodes(hybrid.retrieve(question), query_str=question)

    return query


def set_writer(present: bool) -> None:
    root = get_dispatcher()
    root.event_handlers[:] = [h for h in root.event_handlers if not isinstance(h, AdvragSpanWriter)]
    if present:
        install_span_writer()


def run_phase(
    conditions: dict[str, Callable[[], None]],
    query: Callable[[str], Any],
    questions: list[str],
    rounds: int,
) -> dict[str, list[float]]:
    """Seconds per query per condition: every question runs under every condition back to back
    (the order rotated from query to query), so that the times pair up."""
    times: dict[str, list[float]] = {name: [] for name in conditions}
    names = list(conditions)
    for round_index in range(rounds):
        for question_index, question in enumerate(questions):
            shift = (round_index + question_index) % len(names)
            for name in names[shift:] + names[:shift]:
                conditions[name]()
                started = time.perf_counter()
                query(question)
                times[name].append(time.perf_counter() - started)
    return times


def summary(times: dict[str, list[float]], baseline: str) -> dict[str, dict[str, float]]:
    """p50 per condition, its ratio to the baseline's p50, and the median and quartiles of the
    paired per-query ratios (same question, same round)."""
    base = statistics.median(times[baseline])
    rows = {}
    for name, values in times.items():
        paired = sorted(v / b for v, b in zip(values, times[baseline], strict=True))
        quartiles = statistics.quantiles(paired, n=4)
        rows[name] = {
            "queries": len(values),
            "p50_ms": statistics.median(values) * 1000,
            "ratio_of_p50": statistics.median(values) / base,
            "paired_ratio_median": statistics.median(paired),
            "paired_ratio_q1": quartiles[0],
            "paired_ratio_q3": quartiles[2],
        }
    return rows


def events_per_query(query: Callable[[str], Any], question: str) -> int:
    """How many of the pack's events one query emits (each one ``handle`` call)."""
    counter = EventCollector()
    root = get_dispatcher()
    root.add_event_handler(counter)
    try:
        query(question)
    finally:
        root.event_handlers.remove(counter)
    return len(counter.events)


class EventCollector(BaseEventHandler):
    events: list[Any] = []

    @classmethod
    def class_name(cls) -> str:
        return "EventCollector"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, AdvragEvent):
            self.events.append(event)


def writer_cost_ns(repeat: int) -> float:
    """Nanoseconds of one ``AdvragSpanWriter.handle`` call without a tracer (best of 5)."""
    writer = AdvragSpanWriter()
    event = CRAGActionEvent(query="q", action="correct", grades=[{"node_id": "n", "score": 0.9}])
    best = min(timeit.repeat(lambda: writer.handle(event), number=repeat, repeat=5))
    return best / repeat * 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--document", type=Path, default=REPO_ROOT / "data" / "en_manual.md")
    parser.add_argument("--questions", type=Path, default=REPO_ROOT / "data" / "qa.jsonl")
    parser.add_argument("--max-questions", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--name", default="bench_tracing")
    args = parser.parse_args(argv)

    questions = [
        q.question for q in load_questions(args.questions) if q.source == args.document.name
    ][: args.max_questions]
    query = build_query(args.document)
    for question in questions:  # warm-up: models loaded, caches filled
        query(question)

    assert not any(m.startswith("opentelemetry") for m in sys.modules), "imported too early"
    phase1 = run_phase(
        {"baseline": lambda: set_writer(False), "writer, no tracer": lambda: set_writer(True)},
        query,
        questions,
        args.rounds,
    )
    handle_ns = writer_cost_ns(20_000)
    per_query = events_per_query(query, questions[0])

    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()

    def tracer(on: bool, writer: bool) -> Callable[[], None]:
        def switch() -> None:
            if instrumentor.is_instrumented_by_opentelemetry:
                instrumentor.uninstrument()
            if on:
                instrumentor.instrument(tracer_provider=provider)
            set_writer(writer)
            exporter.clear()

        return switch

    phase2 = run_phase(
        {
            "baseline (tracer modules imported)": tracer(False, False),
            "tracer, no writer": tracer(True, False),
            "tracer + writer": tracer(True, True),
        },
        query,
        questions,
        args.rounds,
    )
    tracer(False, True)()

    data = {
        "document": args.document.name,
        "questions": len(questions),
        "rounds": args.rounds,
        "phase1_no_opentelemetry_imported": summary(phase1, "baseline"),
        "phase2_instrumented": summary(phase2, "baseline (tracer modules imported)"),
        "writer_handle_ns_without_tracer": handle_ns,
        "events_per_query": per_query,
        "writer_share_of_p50_without_tracer": handle_ns
        * 1e-9
        * per_query
        / (statistics.median(phase1["baseline"])),
    }
    lines = [
        f"hybrid (dense + BM25) + CRAG (cross-encoder) on {args.document.name}: "
        f"{len(questions)} questions x {args.rounds} rounds per condition, interleaved",
        f"{'condition':36s} {'p50 ms':>8s} {'p50 ratio':>9s} {'paired ratio (q1-q3)':>22s}",
    ]
    for phase in ("phase1_no_opentelemetry_imported", "phase2_instrumented"):
        lines.append(f"-- {phase}")
        for name, row in data[phase].items():  # type: ignore[union-attr]
            lines.append(
                f"{name:36s} {row['p50_ms']:8.1f} {row['ratio_of_p50']:9.3f} "
                f"{row['paired_ratio_median']:8.3f} ({row['paired_ratio_q1']:.3f}-"
                f"{row['paired_ratio_q3']:.3f})"
            )
    lines.append(
        f"writer.handle() per event without a tracer: {handle_ns:.0f} ns; {per_query} events per "
        f"query: {data['writer_share_of_p50_without_tracer']:.1e} of the baseline p50"
    )
    text = "\n".join(lines)
    print(text)
    write_results(args.name, text, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
