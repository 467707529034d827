"""Event payloads of fixed shape are TypedDicts: pydantic checks their keys, keeps numbers as
given and lets a key it does not know through; the payloads left open are trace records."""

from __future__ import annotations

import typing

import pytest
from llama_index.core.bridge.pydantic import ValidationError
from llama_index.core.instrumentation.events import BaseEvent

from llama_index_ext_advrag import events
from llama_index_ext_advrag.events import (
    AdvragEvent,
    HybridFusionEvent,
    JudgeGradesEvent,
    JudgeRerankEvent,
    WindowReplacementEvent,
)
from llama_index_ext_advrag.judges import Grade

# (event, field): why the payload stays dict[str, Any].
OPEN_PAYLOADS = {
    ("AutoMergingEvent", "merges"): "the trace's merge records (_hierarchy)",
    ("AutoMergingEvent", "skipped"): "the trace's skipped-merge records",
    ("CRAGRoundEvent", "round"): "the trace's round record",
    ("ContextCompressionEvent", "nodes"): "the compression trace per node",
    ("DriftWindowEvent", "windows"): "the drift window's growth records",
    ("NeighbourExpansionEvent", "decision"): "prev-next or consecutive merge: two shapes",
    ("NeighbourExpansionEvent", "nodes"): "the trace's member records",
    ("PandasQueryEvent", "record"): "the pandas engine's trace record",
    ("RecursiveResultEvent", "results"): "node_id and the node's trace record",
    ("SecondHopEvent", "legs"): "the second hop's search records",
    ("SecondHopEvent", "skipped"): "skipped seeds and failures: two shapes",
    ("SecondHopEvent", "returned"): "the trace's summary per node",
    ("SelfRAGReflectionEvent", "detail"): "one shape per reflection kind",
    ("SelfRAGRouteEvent", "decision"): "the trace's retrieve record",
    ("TwoLayerRouteEvent", "route"): "the trace's route",
}


def _event_classes() -> list[type[AdvragEvent]]:
    return [
        value
        for value in vars(events).values()
        if isinstance(value, type) and issubclass(value, AdvragEvent) and value is not AdvragEvent
    ]


def _open(annotation: object) -> bool:
    """A ``dict[str, Any]`` payload, alone, in a list or optional."""
    if typing.get_origin(annotation) is dict:
        return typing.get_args(annotation)[1] is typing.Any
    return any(_open(arg) for arg in typing.get_args(annotation))


def test_the_payloads_left_open_are_the_listed_trace_records() -> None:
    found = {
        (kind.__name__, name)
        for kind in _event_classes()
        for name, field in kind.model_fields.items()
        if name not in BaseEvent.model_fields and _open(field.annotation)
    }
    assert found == set(OPEN_PAYLOADS)


def test_a_grade_goes_into_an_event_unchanged() -> None:
    grades = [
        Grade.from_score(0.75, "judge-a", raw=2.5).to_dict(),
        {"score": 1, "label": "relevant", "judge": "j", "raw": 3, "reason": None, "new": "kept"},
    ]
    event = JudgeGradesEvent(judge="judge-a", query="q", grades=grades)  # type: ignore[list-item]
    assert event.grades == grades
    assert type(event.grades[1]["score"]) is int and type(event.grades[1]["raw"]) is int


@pytest.mark.parametrize(
    "grade",
    [
        {"score": 0.5, "judge": "j", "raw": None, "reason": None},  # no label
        {"score": "high", "label": "relevant", "judge": "j", "raw": None, "reason": None},
    ],
)
def test_a_grade_of_another_shape_is_refused(grade: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        JudgeGradesEvent(judge="j", query="q", grades=[grade])  # type: ignore[list-item]


def test_optional_keys_of_a_rerank_record() -> None:
    graded = {"node_id": "n", "score": 0.5, "retrieval_rank": 2, "rank": 0}
    failed = {**graded, "error": "judge timed out"}
    event = JudgeRerankEvent(order=[graded, failed])  # type: ignore[list-item]
    assert event.order == [graded, failed]
    with pytest.raises(ValidationError):
        JudgeRerankEvent(order=[{"node_id": "n", "score": 0.5, "rank": 0}])  # type: ignore[list-item]


def test_fusion_and_window_payloads() -> None:
    legs = [{"leg": "dense", "weight": 1, "hits": 3, "degraded": None}]
    fused = [{"node_id": "a", "score": 0.9, "ranks": [0, None]}]
    lexical = {"backend": "bm25s", "reason": "no sparse field"}
    event = HybridFusionEvent(mode="rrf", legs=legs, fused=fused, lexical=lexical)  # type: ignore[arg-type]
    assert (event.legs, event.fused, event.lexical) == (legs, fused, lexical)
    assert type(event.legs[0]["weight"]) is int
    with pytest.raises(ValidationError):
        HybridFusionEvent(mode="rrf", legs=[{"leg": "dense"}], fused=[])  # type: ignore[list-item]
    kept = [{"node_id": "w", "rank": 1, "skipped_as_covered": ["x"]}]
    assert WindowReplacementEvent(kept=kept).kept == kept  # type: ignore[arg-type]
