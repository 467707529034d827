"""The span writer's helpers (tracing.py) with exact values and stand-in tracer modules: the cut
of a string, JSON-safe values and their bounds, attribute values, the warning filter and where it
is attached, which span is written to, the writer's own limits, a tracer failure logged at debug
level, and the writer's installation (kills the module's mutants test_tracing.py leaves; no
tracer is imported here)."""

from __future__ import annotations

import logging
import sys
import types
from typing import Any

import pytest
from llama_index.core.instrumentation import get_dispatcher

from llama_index_ext_advrag.events import CRAGActionEvent
from llama_index_ext_advrag.tracing import (
    OPENINFERENCE_HANDLER_LOGGER,
    OPENINFERENCE_MODULE,
    OPENTELEMETRY_MODULE,
    AdvragSpanWriter,
    AttributeLimits,
    PackEventWarningFilter,
    attribute_values,
    bounded_json,
    current_otel_span,
    cut_text,
    install_span_writer,
    json_safe,
    silence_unhandled_pack_events,
)


class Named:
    def __init__(self, text: str) -> None:
        self.text = text

    def __str__(self) -> str:
        return self.text


def test_cut_text_keeps_a_text_of_exactly_the_limit() -> None:
    assert cut_text("abcd", 4) == "abcd"
    assert cut_text("abcde", 4) == "abc…"
    assert cut_text("ab", 0) == "…"


def test_json_safe_bounds_nested_values_and_objects() -> None:
    assert json_safe({"a": [1, 2, 3]}, 10, 2) == {"a": [1, 2]}
    assert json_safe([[1, 2, 3], [4]], 10, 2) == [[1, 2], [4]]
    assert json_safe(Named("x" * 20), 5, 3) == "xxxx…"
    assert json_safe(Named("ok"), 5, 3) == "ok"


def test_bounded_json_text_and_items() -> None:
    limits = AttributeLimits(max_string_chars=100, max_items=8, max_attribute_chars=100)
    assert bounded_json(["é", 1], limits) == ('["é",1]', 2)
    assert bounded_json(5, limits) == ("5", 1)
    exact = AttributeLimits(max_string_chars=100, max_items=8, max_attribute_chars=7)
    assert bounded_json(["é", 1], exact) == ('["é",1]', 2)
    # eight items do not fit in 20 characters, four do (halving, not thirds)
    halving = AttributeLimits(max_string_chars=100, max_items=8, max_attribute_chars=20)
    assert bounded_json(list(range(100, 108)), halving) == ("[100,101,102,103]", 4)
    long = AttributeLimits(max_string_chars=100, max_items=4, max_attribute_chars=10)
    assert bounded_json("x" * 50, long) == ('{"truncated": true, "chars": 52}', 0)


def test_attribute_values_of_floats_and_objects() -> None:
    limits = AttributeLimits()
    assert attribute_values("n", 1.5, limits) == {"n": 1.5}
    assert attribute_values("n", float("inf"), limits) == {}
    assert attribute_values("n", Named("thing"), limits) == {"n": '"thing"'}


def test_the_filter_passes_other_records() -> None:
    record = logging.LogRecord("x", logging.WARNING, __file__, 1, "something else", None, None)
    assert PackEventWarningFilter().filter(record) is True
    unhandled = logging.LogRecord(
        "x", logging.WARNING, __file__, 1, "Unhandled event of type CRAGActionEvent", None, None
    )
    assert PackEventWarningFilter().filter(unhandled) is False


@pytest.fixture
def openinference_logger() -> Any:
    target = logging.getLogger(OPENINFERENCE_HANDLER_LOGGER)
    kept = list(target.filters)
    for f in kept:
        target.removeFilter(f)
    yield target
    for f in list(target.filters):
        target.removeFilter(f)
    for f in kept:
        target.addFilter(f)


def pack_filters(target: logging.Logger) -> list[Any]:
    return [f for f in target.filters if isinstance(f, PackEventWarningFilter)]


def test_the_filter_is_attached_once_to_openinference_s_logger(openinference_logger: Any) -> None:
    root_filters = list(logging.getLogger().filters)
    silence_unhandled_pack_events()
    silence_unhandled_pack_events()
    assert len(pack_filters(openinference_logger)) == 1
    assert len(openinference_logger.filters) == 1
    assert logging.getLogger().filters == root_filters


class Span:
    def __init__(self, recording: bool = True, fail: bool = False) -> None:
        self.recording, self.fail = recording, fail
        self.attributes: dict[str, Any] = {}

    def is_recording(self) -> bool:
        return self.recording

    def set_attributes(self, attributes: dict[str, Any]) -> None:
        if self.fail:
            raise RuntimeError("exporter down")
        self.attributes.update(attributes)


def tracer_module(name: str, span: Span | None) -> types.ModuleType:
    module = types.ModuleType(name)
    module.get_current_span = lambda: span  # type: ignore[attr-defined]
    return module


def test_openinference_s_span_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    ours, otel = Span(), Span()
    monkeypatch.setitem(sys.modules, OPENINFERENCE_MODULE, tracer_module("oi", ours))
    monkeypatch.setitem(sys.modules, OPENTELEMETRY_MODULE, tracer_module("ot", otel))
    assert current_otel_span() is ours
    monkeypatch.setitem(sys.modules, OPENINFERENCE_MODULE, tracer_module("oi", Span(False)))
    assert current_otel_span() is otel


def test_the_writer_uses_its_limits_and_attaches_the_filter(
    monkeypatch: pytest.MonkeyPatch, openinference_logger: Any
) -> None:
    span = Span()
    monkeypatch.setitem(sys.modules, OPENINFERENCE_MODULE, tracer_module("oi", span))
    writer = AdvragSpanWriter(max_string_chars=16)
    writer.handle(CRAGActionEvent(query="q" * 40, action="correct"))
    assert span.attributes["advrag.crag.query"] == "q" * 15 + "…"
    assert len(pack_filters(openinference_logger)) == 1
    assert AdvragSpanWriter.class_name() == "AdvragSpanWriter"


def test_no_filter_without_openinference(
    monkeypatch: pytest.MonkeyPatch, openinference_logger: Any
) -> None:
    monkeypatch.delitem(sys.modules, OPENINFERENCE_MODULE, raising=False)
    monkeypatch.setitem(sys.modules, OPENTELEMETRY_MODULE, tracer_module("ot", Span()))
    AdvragSpanWriter().handle(CRAGActionEvent(query="q", action="correct"))
    assert pack_filters(openinference_logger) == []


def test_a_failing_span_is_logged_at_debug_level(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, openinference_logger: Any
) -> None:
    monkeypatch.setitem(sys.modules, OPENINFERENCE_MODULE, tracer_module("oi", Span(fail=True)))
    with caplog.at_level(logging.DEBUG, logger="llama_index_ext_advrag.tracing"):
        AdvragSpanWriter().handle(CRAGActionEvent(query="q", action="correct"))
    [record] = [r for r in caplog.records if r.name == "llama_index_ext_advrag.tracing"]
    assert record.getMessage() == "CRAGActionEvent not written onto the span"
    assert record.exc_info is not None and str(record.exc_info[1]) == "exporter down"


def test_install_registers_one_writer(
    monkeypatch: pytest.MonkeyPatch, openinference_logger: Any
) -> None:
    root = get_dispatcher()
    others = [h for h in root.event_handlers if not isinstance(h, AdvragSpanWriter)]
    monkeypatch.setattr(root, "event_handlers", others)
    monkeypatch.setitem(sys.modules, OPENINFERENCE_MODULE, tracer_module("oi", None))
    writer = install_span_writer()
    assert isinstance(writer, AdvragSpanWriter) and root.event_handlers[-1] is writer
    assert install_span_writer() is writer
    assert [h for h in root.event_handlers if isinstance(h, AdvragSpanWriter)] == [writer]
    assert len(pack_filters(openinference_logger)) == 1


def test_install_without_openinference_attaches_no_filter(
    monkeypatch: pytest.MonkeyPatch, openinference_logger: Any
) -> None:
    root = get_dispatcher()
    others = [h for h in root.event_handlers if not isinstance(h, AdvragSpanWriter)]
    monkeypatch.setattr(root, "event_handlers", others)
    monkeypatch.delitem(sys.modules, OPENINFERENCE_MODULE, raising=False)
    install_span_writer()
    assert pack_filters(openinference_logger) == []
