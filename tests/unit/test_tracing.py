"""The pack's decisions on OpenTelemetry spans: with OpenInference's LlamaIndex instrumentor and an
in-memory exporter, every component of the events table (docs/design.md) writes its facts onto
its own span as ``advrag.<component>.<fact>`` attributes (or span events for repeated facts),
bounded and JSON-safe, sync and async; OpenInference logs no warning for them; without a tracer
nothing is imported."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events import BaseEvent

from llama_index_ext_advrag.events import (
    CRAGActionEvent,
    CRAGResultEvent,
    DriftWindowEvent,
    HybridFusionEvent,
    TwoLayerRouteEvent,
)
from llama_index_ext_advrag.tracing import (
    DEFAULT_MAX_ATTRIBUTE_CHARS,
    DEFAULT_MAX_STRING_CHARS,
    OPENINFERENCE_HANDLER_LOGGER,
    AdvragSpanWriter,
    AttributeLimits,
    PackEventWarningFilter,
    event_attributes,
    install_span_writer,
)

pytest.importorskip("opentelemetry.sdk", reason="the dev group installs opentelemetry-sdk")
pytest.importorskip(
    "openinference.instrumentation.llama_index",
    reason="the dev group installs openinference-instrumentation-llama-index",
)

from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

# The events-table components of test_events_components (one call each, sync and async).
from unit.test_events_components import CALLS, MILVUS, MODES, TEXT, tables  # noqa: E402

# CALLS name -> the trace sub-key its span's attributes (or span events) carry.
COMPONENT_KEYS = {
    "AdaptiveSlidingWindowNodeParser": "sliding_window",
    "HierarchicalSentenceNodeParser": "hierarchical",
    "HierarchicalAutoMergingRetriever": "auto_merging",
    "TwoLayerMilvusRetriever": "two_layer",
    "RecursiveIndexNodeRetriever": "recursive",
    "HybridFusionRetriever": "hybrid_fusion",
    "PrevNextPostprocessor": "prev_next",
    "DriftAwareWindowPostprocessor": "drift_window",
    "ConsecutiveMergePostprocessor": "consecutive_merge",
    "WindowReplacementPostprocessor": "window_replacement",
    "JudgeRerankPostprocessor": "judge_rerank",
    "CRAGPostprocessor": "crag",
    "SelfRAGQueryEngine": "self_rag",
    "SafePandasQueryEngine": "pandas",
    "ContextCompressionPostprocessor": "compression",
    "SecondHopRetriever": "second_hop",
    "CrossEncoderRelevanceJudge": "judge",
    "EmbeddingRelevanceJudge": "judge",
    "LLMRelevanceJudge": "judge",
    "ColbertRelevanceJudge": "judge",
    "LanguageRoutedJudge": "judge",
}
PASSAGES = [s.strip() + "." for s in TEXT.split(".") if s.strip()]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """OpenInference's LlamaIndex instrumentor writing to an in-memory exporter."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield memory
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


def advrag_facts(span: ReadableSpan) -> dict[str, Any]:
    """The span's ``advrag.*`` attributes and those of its ``advrag.*`` span events."""
    facts = {k: v for k, v in (span.attributes or {}).items() if k.startswith("advrag.")}
    for event in span.events:
        if event.name.startswith("advrag."):
            facts[event.name] = True
            facts.update(dict(event.attributes or {}))
    return facts


def own_spans(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.split(".", 1)[0] == name]


def check_bounded(facts: dict[str, Any]) -> None:
    """Scalars or JSON text within the documented limits; no passage text."""
    for key, value in facts.items():
        assert isinstance(value, bool | int | float | str), (key, value)
        if isinstance(value, str):
            assert len(value) <= DEFAULT_MAX_ATTRIBUTE_CHARS, key
            if value[:1] in "[{":
                json.loads(value)
            assert not any(p in value for p in PASSAGES), (key, value)


def test_the_events_table_is_covered() -> None:
    """Every component of CALLS that emits events is checked below (UnitAnnotator, the
    embeddings and the BM25 retrievers emit none: their spans are enough)."""
    silent = {
        "UnitAnnotator",
        "JiebaBM25Retriever",
        "MilvusBM25Retriever",
        "BgeSmallOnnxEmbedding",
        "MultilingualE5Embedding",
        "CachedEmbedding",
    }
    assert set(COMPONENT_KEYS) | silent == set(CALLS)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=pytest.mark.milvus_lite) if n in MILVUS else n
        for n in sorted(COMPONENT_KEYS)
    ],
)
def test_component_span_carries_its_decisions(
    name: str,
    mode: str,
    tmp_path: Path,
    exporter: InMemorySpanExporter,
    caplog: pytest.LogCaptureFixture,
) -> None:
    build, call = CALLS[name]
    component = build(tmp_path)
    with caplog.at_level(logging.WARNING, logger=OPENINFERENCE_HANDLER_LOGGER):
        call(component, mode)
    key = COMPONENT_KEYS[name]
    spans = own_spans(list(exporter.get_finished_spans()), name)
    carrying = [s for s in spans if any(k.startswith(f"advrag.{key}.") for k in advrag_facts(s))]
    assert carrying, f"{name} ({mode}): no advrag.{key}.* on {[s.name for s in spans]}"
    for span in carrying:
        check_bounded(advrag_facts(span))
    unhandled = [r.getMessage() for r in caplog.records if "Unhandled event" in r.getMessage()]
    assert unhandled == []
    close = getattr(component, "close", None)
    if callable(close):
        close()


@pytest.mark.parametrize("mode", MODES)
def test_crag_span_attributes(mode: str, exporter: InMemorySpanExporter) -> None:
    build, call = CALLS["CRAGPostprocessor"]
    call(build(Path()), mode)
    (span,) = [s for s in exporter.get_finished_spans() if s.name.startswith("CRAGPostprocessor._")]
    attributes = span.attributes or {}
    assert attributes["advrag.crag.action"] == "correct"
    grades = json.loads(str(attributes["advrag.crag.grades"]))
    assert [g["score"] for g in grades] == [0.9, 0.1]
    assert attributes["advrag.crag.kept_count"] == 1
    assert attributes["advrag.crag.dropped_count"] == 1
    assert attributes["advrag.crag.query"] == "beta two"


@pytest.mark.parametrize("mode", MODES)
def test_self_rag_reflections_are_span_events(mode: str, exporter: InMemorySpanExporter) -> None:
    build, call = CALLS["SelfRAGQueryEngine"]
    call(build(Path()), mode)
    spans = own_spans(list(exporter.get_finished_spans()), "SelfRAGQueryEngine")
    events = [e for s in spans for e in s.events if e.name == "advrag.self_rag.reflection"]
    kinds = [(e.attributes or {})["advrag.self_rag.reflection"] for e in events]
    assert "isrel" in kinds and len(events) >= 2, kinds
    attributes = {k: v for s in spans for k, v in (s.attributes or {}).items()}
    assert "advrag.self_rag.answer_kind" in attributes
    assert "advrag.self_rag.reflection" not in attributes  # repeated facts: events only


@pytest.mark.parametrize("mode", MODES)
def test_table_route_decision_on_the_recursive_span(
    mode: str, exporter: InMemorySpanExporter
) -> None:
    from unit.test_events_components import retrieve

    retrieve(tables(), mode, "what is the total amount in Sales?")
    facts: dict[str, Any] = {}
    for span in exporter.get_finished_spans():
        facts.update(advrag_facts(span))
    assert facts["advrag.named_route.decision"] == "named"
    assert json.loads(str(facts["advrag.named_route.names"])) == ["Sales"]


def test_plain_opentelemetry_current_span_without_openinference() -> None:
    """No LlamaIndex instrumentor: the facts go to the span current in the user's code."""
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("app")
    build, call = CALLS["CRAGPostprocessor"]
    with tracer.start_as_current_span("app.query"):
        call(build(Path()), "sync")
    (span,) = memory.get_finished_spans()
    assert (span.attributes or {})["advrag.crag.action"] == "correct"
    provider.shutdown()


def test_no_tracer_no_import_and_no_change() -> None:
    """Without a tracer imported, the package imports no OpenTelemetry module and a CRAG call
    returns what it returns with the writer removed from the root dispatcher."""
    code = (
        "import sys\n"
        "from llama_index.core.instrumentation import get_dispatcher\n"
        "from llama_index.core.schema import NodeWithScore, TextNode\n"
        "import llama_index_ext_advrag\n"
        "from llama_index_ext_advrag.judges import BaseRelevanceJudge\n"
        "from llama_index_ext_advrag.postprocessor import CRAGPostprocessor\n"
        "from llama_index_ext_advrag.tracing import AdvragSpanWriter\n"
        "class J(BaseRelevanceJudge):\n"
        "    def _judge(self, q, texts):\n"
        "        return [self.grade(0.9 if 'beta' in t else 0.1) for t in texts]\n"
        "def run():\n"
        "    nodes = [NodeWithScore(node=TextNode(id_=t, text=t), score=0.5) for t in ['beta', 'cat', 'x']]\n"
        "    out = CRAGPostprocessor(judge=J(), refine=False).postprocess_nodes(nodes, query_str='beta')\n"
        "    return [(n.node.node_id, n.score, n.node.metadata) for n in out]\n"
        "root = get_dispatcher()\n"
        "assert any(isinstance(h, AdvragSpanWriter) for h in root.event_handlers)\n"
        "with_writer = run()\n"
        "root.event_handlers[:] = [h for h in root.event_handlers if not isinstance(h, AdvragSpanWriter)]\n"
        "print(with_writer == run(), len(with_writer))\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry', 'openinference'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    same, count, modules = result.stdout.split()
    assert (same, modules) == ("True", "[]"), result.stdout + result.stderr
    assert int(count) > 0


def test_writer_is_registered_once_on_the_root_dispatcher() -> None:
    writer = install_span_writer()
    assert install_span_writer() is writer
    writers = [h for h in get_dispatcher().event_handlers if isinstance(h, AdvragSpanWriter)]
    assert writers == [writer]


class ForeignEvent(BaseEvent):
    @classmethod
    def class_name(cls) -> str:
        return "ForeignEvent"


def warning_record(name: str) -> logging.LogRecord:
    return logging.LogRecord(
        OPENINFERENCE_HANDLER_LOGGER, logging.WARNING, "", 0, f"Unhandled event of type {name}",
        None, None,
    )  # fmt: skip


def test_filter_drops_only_the_packs_unhandled_warnings() -> None:
    keep = PackEventWarningFilter().filter
    assert not keep(warning_record("CRAGActionEvent"))
    assert not keep(warning_record("WindowReplacementEvent"))
    assert keep(warning_record("ForeignEvent"))
    assert keep(warning_record("AdvragEventLookalike"))


def test_other_events_still_warn(exporter: InMemorySpanExporter, caplog) -> None:
    """The filter leaves OpenInference's warning for a foreign event type alone."""
    dispatcher = get_dispatcher("tests.tracing")

    @dispatcher.span
    def emit() -> None:
        dispatcher.event(ForeignEvent())
        dispatcher.event(CRAGActionEvent(query="q", action="correct"))

    with caplog.at_level(logging.WARNING, logger=OPENINFERENCE_HANDLER_LOGGER):
        emit()
    messages = [r.getMessage() for r in caplog.records]
    assert any("ForeignEvent" in m for m in messages), messages
    assert not any("CRAGActionEvent" in m for m in messages), messages


# --- the attribute values: pure functions ----------------------------------------------------


def test_attributes_are_bounded_and_json_safe() -> None:
    legs = [
        {"leg": f"leg{i}", "weight": 0.5, "hits": i, "degraded": "x" * 1000} for i in range(500)
    ]
    event = HybridFusionEvent(
        mode="rrf", legs=legs, fused=[{"node_id": "n", "score": float("nan"), "ranks": [0]}]
    )
    attributes = event_attributes(event)
    assert attributes["advrag.hybrid_fusion.mode"] == "rrf"
    text = str(attributes["advrag.hybrid_fusion.legs"])
    assert len(text) <= DEFAULT_MAX_ATTRIBUTE_CHARS
    parsed = json.loads(text)
    assert 0 < len(parsed) < 500
    assert len(parsed[0]["degraded"]) == DEFAULT_MAX_STRING_CHARS
    assert parsed[0]["degraded"].endswith("…")
    assert json.loads(str(attributes["advrag.hybrid_fusion.fused"])) == [
        {"node_id": "n", "score": None, "ranks": [0]}
    ]


def test_limits_are_the_writers_fields() -> None:
    event = TwoLayerRouteEvent(query="q" * 100, route=[{"s": 1}] * 10, details_mode="search")
    attributes = event_attributes(event, AttributeLimits(20, 3, 4096))
    assert attributes["advrag.two_layer.query"] == "q" * 19 + "…"
    assert len(json.loads(str(attributes["advrag.two_layer.route"]))) == 3
    assert attributes["advrag.two_layer.route_total"] == 10
    small = event_attributes(event, AttributeLimits(20, 3, 10))  # 3 items: 25 chars; 1: 9
    assert json.loads(str(small["advrag.two_layer.route"])) == [{"s": 1}]
    assert small["advrag.two_layer.route_total"] == 10
    tiny = event_attributes(event, AttributeLimits(20, 3, 1))
    assert json.loads(str(tiny["advrag.two_layer.route"])) == {"truncated": True, "chars": 2}
    assert "advrag.two_layer.route_total" not in event_attributes(event)
    with pytest.raises(ValueError):
        AdvragSpanWriter(max_items=0)


def test_drift_stop_reasons_are_counted() -> None:
    event = DriftWindowEvent(
        windows=[{"stop": "topic_drift"}, {"stop": "topic_drift"}, {"stop": "max_expand_steps"}],
        thresholds="defaults",
    )
    attributes = event_attributes(event)
    assert json.loads(str(attributes["advrag.drift_window.stops"])) == {
        "topic_drift": 2,
        "max_expand_steps": 1,
    }
    assert "advrag.drift_window.round_trips" in attributes


@pytest.mark.parametrize("mode", MODES)
def test_hybrid_hits_per_leg(mode: str, exporter: InMemorySpanExporter) -> None:
    build, call = CALLS["HybridFusionRetriever"]
    call(build(Path()), mode)
    facts: dict[str, Any] = {}
    for span in own_spans(list(exporter.get_finished_spans()), "HybridFusionRetriever"):
        facts.update(advrag_facts(span))
    legs = json.loads(str(facts["advrag.hybrid_fusion.legs"]))
    assert [leg["leg"] for leg in legs] == ["bm25", "fixed"]
    assert json.loads(str(facts["advrag.hybrid_fusion.hits"])) == {
        leg["leg"]: leg["hits"] for leg in legs
    }
    assert json.loads(str(facts["advrag.hybrid_fusion.hits"]))["fixed"] == 1


def test_crag_counts_kept_and_dropped() -> None:
    kept = [{"node_id": node_id, "source": "retrieved", "score": 0.8} for node_id in "ab"]
    grade = {"score": 0.1, "label": "irrelevant", "judge": "j", "raw": None, "reason": None}
    dropped = [{"node_id": "c", "source": "retrieved", "grade": grade, "why": "grade"}]
    event = CRAGResultEvent(action="ambiguous", kept=kept, dropped=dropped)
    attributes = event_attributes(event)
    assert (attributes["advrag.crag.kept_count"], attributes["advrag.crag.dropped_count"]) == (2, 1)
    assert "advrag.crag.error" not in attributes  # None: left out
