"""The pack's decisions in a real Arize Phoenix: the quickstart's hybrid + CRAG + window
replacement, drift-window and Self-RAG queries (MockLLM, the packaged offline models) go through
OpenInference's LlamaIndex instrumentor and the OTLP/HTTP exporter to a Phoenix server started
here (``tests/phoenix_service.py``), and are read back through Phoenix's REST API: the pack's
spans, their parent/child order and the ``advrag.*`` decision attributes are there.

Skipped when arize-phoenix is not installed (its own ``.venv-phoenix``), failed instead with
``ADVRAG_REQUIRE_SERVICES=1`` (``make test``)."""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.storage.docstore import SimpleDocumentStore
from phoenix_service import PhoenixServer, PhoenixUnavailable, running_phoenix, screenshot

from llama_index_ext_advrag import (
    AdaptiveSlidingWindowNodeParser,
    CRAGPostprocessor,
    CrossEncoderRelevanceJudge,
    DriftAwareWindowPostprocessor,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    SelfRAGQueryEngine,
    WindowReplacementPostprocessor,
)

pytestmark = pytest.mark.phoenix

REQUIRE_SERVICES = os.environ.get("ADVRAG_REQUIRE_SERVICES") == "1"
READ_BACK_TIMEOUT = 60.0
DOCUMENTS = [
    Document(
        id_="reset.md",
        text="Hold the RESET pinhole for 15 seconds to restore the factory settings. "
        "Release the clip when the LED blinks amber. The device then restarts on its own. "
        "Your saved networks are erased by a factory reset.",
    ),
    Document(
        id_="ports.md",
        text="Two Ferrobox peers sync over TCP port 7415. Open that port in both firewalls. "
        "The sync traffic is encrypted with TLS 1.3. A peer retries every 30 seconds.",
    ),
    Document(
        id_="travel.md",
        text="Hotels are capped at 180 euros per night in high-cost cities. Book through the "
        "travel desk. Taxis need a receipt. Meals are reimbursed up to 60 euros a day.",
    ),
]
QUESTION = "How long must the RESET pinhole be held for a factory reset?"


def _unavailable(message: str) -> None:
    if REQUIRE_SERVICES:
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="module")
def phoenix() -> Iterator[PhoenixServer]:
    try:
        with running_phoenix() as server:
            yield server
    except PhoenixUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="module")
def traced(phoenix: PhoenixServer, embed_model: Any) -> Iterator[str]:
    """Instrument LlamaIndex with an OTLP exporter to ``phoenix`` (a project of its own), run
    the four queries, flush, and yield the project name."""
    otlp = pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    project = f"advrag-{uuid.uuid4().hex[:8]}"
    provider = TracerProvider(resource=Resource({"openinference.project.name": project}))
    provider.add_span_processor(
        BatchSpanProcessor(otlp.OTLPSpanExporter(endpoint=f"{phoenix.base_url}/v1/traces"))
    )
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        run_queries(embed_model)
        assert provider.force_flush(timeout_millis=30_000)
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
    yield project


def run_queries(embed_model: Any) -> None:
    """The quickstart's engine with hybrid retrieval and CRAG; a drift window; Self-RAG."""
    windows = AdaptiveSlidingWindowNodeParser(preset="article").get_nodes_from_documents(DOCUMENTS)
    hybrid = HybridFusionRetriever(
        [
            VectorStoreIndex(windows, embed_model=embed_model).as_retriever(similarity_top_k=5),
            JiebaBM25Retriever(windows, similarity_top_k=5),
        ],
        leg_names=["dense", "bm25"],
    )
    judge = CrossEncoderRelevanceJudge(num_threads=1)
    engine = RetrieverQueryEngine.from_args(
        hybrid,
        llm=MockLLM(),
        node_postprocessors=[
            CRAGPostprocessor(judge=judge, refine=False),
            WindowReplacementPostprocessor(top_n=3),
        ],
    )
    engine.query(QUESTION)

    sentences = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        DOCUMENTS
    )
    docstore = SimpleDocumentStore()
    docstore.add_documents(sentences)
    drift = VectorStoreIndex(sentences, embed_model=embed_model).as_query_engine(
        similarity_top_k=3,
        llm=MockLLM(),
        node_postprocessors=[
            DriftAwareWindowPostprocessor(docstore=docstore, embed_model=embed_model)
        ],
    )
    drift.query(QUESTION)

    SelfRAGQueryEngine(retriever=hybrid, llm=MockLLM(), judge=judge).query(QUESTION)


@pytest.fixture(scope="module")
def spans(phoenix: PhoenixServer, traced: str) -> list[dict[str, Any]]:
    """The project's spans read back through Phoenix's REST API (bounded wait for ingestion)."""
    deadline = time.monotonic() + READ_BACK_TIMEOUT
    while True:
        found = phoenix.spans(traced) if project_exists(phoenix, traced) else []
        if any(s["name"].startswith("SelfRAGQueryEngine.") for s in found):
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"Phoenix holds {len(found)} spans of {traced}")
        time.sleep(0.5)


def project_exists(phoenix: PhoenixServer, project: str) -> bool:
    return any(p["name"] == project for p in phoenix.get_json("/v1/projects")["data"])


def named(spans: list[dict[str, Any]], prefix: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"].startswith(prefix)]


def ancestors(span: dict[str, Any], spans: list[dict[str, Any]]) -> list[str]:
    """Names of the span's parents, nearest first."""
    by_id = {s["context"]["span_id"]: s for s in spans}
    names, parent = [], span.get("parent_id")
    while parent in by_id:
        names.append(by_id[parent]["name"])
        parent = by_id[parent].get("parent_id")
    return names


def test_crag_decisions_on_its_span_under_the_query(spans: list[dict[str, Any]]) -> None:
    (crag,) = named(spans, "CRAGPostprocessor._postprocess_nodes")
    attributes = crag["attributes"]
    assert attributes["advrag.crag.action"] in {"correct", "ambiguous", "incorrect"}
    grades = json.loads(attributes["advrag.crag.grades"])
    assert grades and all({"node_id", "score", "label"} <= set(g) for g in grades)
    assert attributes["advrag.crag.kept_count"] >= 1
    assert "RetrieverQueryEngine._query" in ancestors(crag, spans)
    judges = [
        s
        for s in named(spans, "CrossEncoderRelevanceJudge.")
        if s["parent_id"] == crag["context"]["span_id"]
    ]
    assert judges and "advrag.judge.grades" in judges[0]["attributes"]
    # no passage text: a sentence of the documents is in no advrag attribute
    assert not any("15 seconds" in str(v) for k, v in attributes.items() if k.startswith("advrag."))


def test_hybrid_legs_on_its_span_with_the_legs_as_children(spans: list[dict[str, Any]]) -> None:
    hybrid = named(spans, "HybridFusionRetriever._retrieve")[0]
    legs = json.loads(hybrid["attributes"]["advrag.hybrid_fusion.legs"])
    assert [leg["leg"] for leg in legs] == ["dense", "bm25"]
    assert json.loads(hybrid["attributes"]["advrag.hybrid_fusion.hits"]).keys() == {"dense", "bm25"}
    children = {
        s["name"].split(".")[0] for s in spans if s.get("parent_id") == hybrid["context"]["span_id"]
    }
    assert {"VectorIndexRetriever", "JiebaBM25Retriever"} <= children, children
    (replacement,) = named(spans, "WindowReplacementPostprocessor._postprocess_nodes")
    assert json.loads(replacement["attributes"]["advrag.window_replacement.kept"])


def test_drift_window_stops_on_its_span(spans: list[dict[str, Any]]) -> None:
    (drift,) = named(spans, "DriftAwareWindowPostprocessor._postprocess_nodes")
    stops = json.loads(drift["attributes"]["advrag.drift_window.stops"])
    assert stops and sum(stops.values()) >= 1
    assert json.loads(drift["attributes"]["advrag.drift_window.windows"])


def test_self_rag_route_answer_and_reflection_events(spans: list[dict[str, Any]]) -> None:
    (engine,) = named(spans, "SelfRAGQueryEngine.custom_query")
    attributes = engine["attributes"]
    assert json.loads(attributes["advrag.self_rag.decision"])["method"] == "no_llm"
    assert attributes["advrag.self_rag.answer_kind"]
    reflections = [e for e in engine["events"] if e["name"] == "advrag.self_rag.reflection"]
    assert reflections and reflections[0]["attributes"]["advrag.self_rag.reflection"] == "isrel"
    assert "HybridFusionRetriever._retrieve" in {
        s["name"] for s in spans if engine["context"]["span_id"] in ancestors_ids(s, spans)
    }


def ancestors_ids(span: dict[str, Any], spans: list[dict[str, Any]]) -> list[str]:
    by_id = {s["context"]["span_id"]: s for s in spans}
    ids, parent = [], span.get("parent_id")
    while parent in by_id:
        ids.append(parent)
        parent = by_id[parent].get("parent_id")
    return ids


def test_phoenix_filters_spans_on_a_decision(
    phoenix: PhoenixServer, traced: str, spans: list[dict[str, Any]]
) -> None:
    """Phoenix's span filter (GraphQL ``filterCondition``) selects CRAG's span by its action."""
    (crag,) = named(spans, "CRAGPostprocessor._postprocess_nodes")
    action = crag["attributes"]["advrag.crag.action"]
    (project,) = [p for p in phoenix.get_json("/v1/projects")["data"] if p["name"] == traced]
    query = (
        "query($id: ID!, $filter: String!) { node(id: $id) { ... on Project {"
        " spans(first: 50, filterCondition: $filter) { edges { node { name } } } } } }"
    )

    def names(condition: str) -> list[str]:
        body = {"query": query, "variables": {"id": project["id"], "filter": condition}}
        answer = phoenix.post_json("/graphql", body)
        assert not answer.get("errors"), answer
        return [e["node"]["name"] for e in answer["data"]["node"]["spans"]["edges"]]

    assert names(f"advrag.crag.action == '{action}'") == ["CRAGPostprocessor._postprocess_nodes"]
    assert names("advrag.crag.action == 'no such action'") == []


def test_screenshot_of_the_crag_trace(
    phoenix: PhoenixServer, traced: str, spans: list[dict[str, Any]], tmp_path: Path
) -> None:
    """With ADVRAG_PHOENIX_SCREENSHOT=FILE, a PNG of Phoenix's page of the CRAG trace, its CRAG
    span selected (docs/tracing_phoenix_crag.png was taken this way); otherwise skipped."""
    target = os.environ.get("ADVRAG_PHOENIX_SCREENSHOT")
    if not target:
        pytest.skip("set ADVRAG_PHOENIX_SCREENSHOT=FILE to take the screenshot")
    (crag,) = named(spans, "CRAGPostprocessor._postprocess_nodes")
    (project,) = [p for p in phoenix.get_json("/v1/projects")["data"] if p["name"] == traced]
    trace = crag["context"]["trace_id"]
    url = f"{phoenix.base_url}/projects/{project['id']}/traces/{trace}?selectedSpanNodeId={crag['id']}"
    screenshot(url, Path(target))
    assert Path(target).stat().st_size > 10_000
