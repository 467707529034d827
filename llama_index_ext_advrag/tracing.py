"""The pack's decisions on OpenTelemetry spans (Arize Phoenix, Langfuse, any OTLP backend).

The pack emits typed events (:mod:`llama_index_ext_advrag.events`) through LlamaIndex's
dispatcher inside each component's span. :class:`AdvragSpanWriter`, an event handler on the
root dispatcher, writes them onto the OpenTelemetry span of that component call: facts a call
decides once become span attributes ``advrag.<component>.<fact>``; facts a call repeats
(Self-RAG reflections, CRAG rounds, recursive hops) become span events named
``advrag.<component>.<kind>`` so none overwrites another. Values are JSON-safe and bounded:
scalars stay scalars, lists and dicts become JSON text with strings cut at
``max_string_chars``, lists at ``max_items`` and the whole text at ``max_attribute_chars``.
The events carry node ids, scores and labels, never passage text.

The span is the one OpenInference's LlamaIndex instrumentor opened for the component call
(``openinference.instrumentation.llama_index.get_current_span()``, its public accessor; its
spans are not made current in OpenTelemetry's context), else OpenTelemetry's current span.
Nothing is imported here: a tracer the application did not import is not looked for, so
without one the handler returns after two dictionary look-ups.

OpenInference's handler logs ``Unhandled event of type <name>`` for every event type it does
not know and offers no public way to register one; :class:`PackEventWarningFilter`, a
standard ``logging.Filter`` on its logger, drops that warning for the pack's events only.

Example:
    >>> from opentelemetry.sdk.trace import TracerProvider  # doctest: +SKIP
    >>> from openinference.instrumentation.llama_index import LlamaIndexInstrumentor  # doctest: +SKIP
    >>> LlamaIndexInstrumentor().instrument(tracer_provider=TracerProvider())  # doctest: +SKIP
    >>> # every CRAG call's span now carries advrag.crag.action, advrag.crag.grades, ...
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections import Counter
from collections.abc import Sized
from dataclasses import dataclass
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent

from llama_index_ext_advrag.events import (
    AdvragEvent,
    CRAGResultEvent,
    CRAGRoundEvent,
    DriftWindowEvent,
    HybridFusionEvent,
    RecursiveHopEvent,
    SelfRAGReflectionEvent,
)

logger = logging.getLogger(__name__)

ATTRIBUTE_PREFIX = "advrag"
DEFAULT_MAX_STRING_CHARS = 256
DEFAULT_MAX_ITEMS = 50
DEFAULT_MAX_ATTRIBUTE_CHARS = 4096
# The logger of OpenInference's LlamaIndex span handler (its "Unhandled event" warning).
OPENINFERENCE_HANDLER_LOGGER = "openinference.instrumentation.llama_index._handler"
OPENINFERENCE_MODULE = "openinference.instrumentation.llama_index"
OPENTELEMETRY_MODULE = "opentelemetry.trace"
UNHANDLED_PREFIX = "Unhandled event of type "
# Events a component call may emit several times: each becomes a span event of this kind.
SPAN_EVENT_KINDS: dict[type[AdvragEvent], str] = {
    CRAGRoundEvent: "round",
    SelfRAGReflectionEvent: "reflection",
    RecursiveHopEvent: "hop",
}
_BASE_FIELDS = frozenset(BaseEvent.model_fields) | {"component"}


@dataclass(frozen=True)
class AttributeLimits:
    """How much of a fact goes onto a span."""

    max_string_chars: int = DEFAULT_MAX_STRING_CHARS
    max_items: int = DEFAULT_MAX_ITEMS
    max_attribute_chars: int = DEFAULT_MAX_ATTRIBUTE_CHARS


def cut_text(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, the cut marked with an ellipsis."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)] + "…"


def json_safe(value: Any, max_string_chars: int, max_items: int) -> Any:
    """``value`` as JSON-ready data: strings cut, lists cut to ``max_items``, NaN/inf as None,
    unknown objects as their ``str``."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return cut_text(value, max_string_chars)
    if isinstance(value, dict):
        return {
            cut_text(str(k), max_string_chars): json_safe(v, max_string_chars, max_items)
            for k, v in list(value.items())[:max_items]
        }
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)[:max_items]
        return [json_safe(v, max_string_chars, max_items) for v in items]
    return cut_text(str(value), max_string_chars)


def bounded_json(value: Any, limits: AttributeLimits) -> tuple[str, int]:
    """``value`` as JSON text of at most ``max_attribute_chars`` characters, and how many of its
    top-level items the text holds: fewer items (halving) until it fits, else a marker saying
    how long it was."""
    items = limits.max_items
    while True:
        safe = json_safe(value, limits.max_string_chars, items)
        text = json.dumps(safe, ensure_ascii=False, separators=(",", ":"))
        if len(text) <= limits.max_attribute_chars:
            return text, len(safe) if isinstance(safe, list | dict) else 1
        if items == 0:
            return json.dumps({"truncated": True, "chars": len(text)}), 0
        items //= 2


def attribute_values(
    name: str, value: Any, limits: AttributeLimits
) -> dict[str, bool | int | float | str]:
    """``name``'s OpenTelemetry attribute: a scalar as it is, the rest as bounded JSON text,
    with ``<name>_total`` (the number of items) when the text holds fewer; None: nothing."""
    if value is None:
        return {}
    if isinstance(value, bool | int):
        return {name: value}
    if isinstance(value, float):
        return {name: value} if math.isfinite(value) else {}
    if isinstance(value, str):
        return {name: cut_text(value, limits.max_string_chars)}
    text, kept = bounded_json(value, limits)
    total = len(value) if isinstance(value, Sized) else kept
    return {name: text, f"{name}_total": total} if kept < total else {name: text}


def derived_facts(event: AdvragEvent) -> dict[str, Any]:
    """Summaries a tracer can filter on without parsing JSON (counts per decision)."""
    if isinstance(event, DriftWindowEvent):
        return {"stops": dict(Counter(str(w.get("stop")) for w in event.windows))}
    if isinstance(event, CRAGResultEvent):
        return {"kept_count": len(event.kept), "dropped_count": len(event.dropped)}
    if isinstance(event, HybridFusionEvent):
        return {"hits": {str(leg.get("leg")): leg.get("hits") for leg in event.legs}}
    return {}


def event_facts(event: AdvragEvent) -> dict[str, Any]:
    """The event's own fields (not BaseEvent's id, time, span and tags) and derived summaries."""
    facts = {
        name: getattr(event, name) for name in type(event).model_fields if name not in _BASE_FIELDS
    }
    facts.update(derived_facts(event))
    return facts


def event_attributes(
    event: AdvragEvent, limits: AttributeLimits | None = None
) -> dict[str, bool | int | float | str]:
    """The event's facts as ``advrag.<component>.<fact>`` attributes (None values left out)."""
    limits = limits or AttributeLimits()
    prefix = f"{ATTRIBUTE_PREFIX}.{event.component}."
    attributes: dict[str, bool | int | float | str] = {}
    for name, value in event_facts(event).items():
        attributes.update(attribute_values(prefix + name, value, limits))
    return attributes


def span_event_name(event: AdvragEvent) -> str | None:
    """``advrag.<component>.<kind>`` for an event a call repeats, None for a once-per-call one."""
    kind = SPAN_EVENT_KINDS.get(type(event))
    return None if kind is None else f"{ATTRIBUTE_PREFIX}.{event.component}.{kind}"


def pack_event_names() -> frozenset[str]:
    """The class names of the pack's events (subclasses included)."""
    names, pending = set(), [AdvragEvent]
    while pending:
        kind = pending.pop()
        names.add(kind.__qualname__)
        pending.extend(kind.__subclasses__())
    return frozenset(names)


class PackEventWarningFilter(logging.Filter):
    """Drops OpenInference's ``Unhandled event of type X`` warning when X is one of the pack's
    events (the pack writes them onto the span itself); every other record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if not message.startswith(UNHANDLED_PREFIX):
            return True
        return message[len(UNHANDLED_PREFIX) :].strip() not in pack_event_names()


def silence_unhandled_pack_events() -> None:
    """Attach :class:`PackEventWarningFilter` to OpenInference's handler logger (once)."""
    target = logging.getLogger(OPENINFERENCE_HANDLER_LOGGER)
    if not any(isinstance(f, PackEventWarningFilter) for f in target.filters):
        target.addFilter(PackEventWarningFilter())


def current_otel_span() -> Any:
    """The recording OpenTelemetry span of the current LlamaIndex span, else OpenTelemetry's
    current span, else None. Only modules the application already imported are consulted."""
    openinference = sys.modules.get(OPENINFERENCE_MODULE)
    if openinference is not None:
        span = openinference.get_current_span()
        if span is not None and span.is_recording():
            return span
    otel = sys.modules.get(OPENTELEMETRY_MODULE)
    if otel is not None:
        span = otel.get_current_span()
        if span.is_recording():
            return span
    return None


class AdvragSpanWriter(BaseEventHandler):
    """Writes the pack's events onto the current OpenTelemetry span (see the module docstring).

    One instance is registered on LlamaIndex's root dispatcher when the package is imported
    (:func:`install_span_writer`); with no tracer imported it does nothing.

    Args:
        max_string_chars: Characters kept of any string inside a fact.
        max_items: Items kept of any list or dict inside a fact.
        max_attribute_chars: Characters of one attribute's JSON text at most.
    """

    max_string_chars: int = Field(
        default=DEFAULT_MAX_STRING_CHARS, ge=16, le=65536, description="Chars kept per string."
    )
    max_items: int = Field(
        default=DEFAULT_MAX_ITEMS, ge=1, le=10000, description="Items kept per list or dict."
    )
    max_attribute_chars: int = Field(
        default=DEFAULT_MAX_ATTRIBUTE_CHARS,
        ge=64,
        le=1_000_000,
        description="Chars of one attribute's JSON text at most.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "AdvragSpanWriter"

    @property
    def limits(self) -> AttributeLimits:
        return AttributeLimits(self.max_string_chars, self.max_items, self.max_attribute_chars)

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if not isinstance(event, AdvragEvent):
            return
        if OPENINFERENCE_MODULE in sys.modules:
            silence_unhandled_pack_events()
        try:
            span = current_otel_span()
            if span is None:
                return
            attributes = event_attributes(event, self.limits)
            name = span_event_name(event)
            if name is None:
                span.set_attributes(attributes)
            else:
                span.add_event(name, attributes=attributes)
        except Exception:  # a tracer's failure never fails the query (the dispatcher agrees)
            logger.debug("%s not written onto the span", type(event).__name__, exc_info=True)


def install_span_writer() -> AdvragSpanWriter:
    """Register one :class:`AdvragSpanWriter` on the root dispatcher (idempotent) and return it.

    To change its limits, set its fields; to turn it off, remove it from
    ``get_dispatcher().event_handlers``."""
    root = get_dispatcher()
    for handler in root.event_handlers:
        if isinstance(handler, AdvragSpanWriter):
            return handler
    writer = AdvragSpanWriter()
    root.add_event_handler(writer)
    if OPENINFERENCE_MODULE in sys.modules:
        silence_unhandled_pack_events()
    return writer


__all__ = [
    "ATTRIBUTE_PREFIX",
    "AdvragSpanWriter",
    "AttributeLimits",
    "PackEventWarningFilter",
    "current_otel_span",
    "event_attributes",
    "install_span_writer",
    "silence_unhandled_pack_events",
    "span_event_name",
]
