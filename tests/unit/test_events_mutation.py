"""The pack's events name themselves: a handler that dispatches on ``class_name()`` (as
LlamaIndex's own handlers and exporters do) tells them apart, and the base class is the one
``isinstance`` filter (kills the mutants of every ``class_name`` in events.py)."""

from __future__ import annotations

import inspect

import pytest
from llama_index.core.instrumentation.events import BaseEvent

from llama_index_ext_advrag import events

EVENT_CLASSES = [
    cls
    for _, cls in inspect.getmembers(events, inspect.isclass)
    if issubclass(cls, events.AdvragEvent) and cls.__module__ == events.__name__
]


def test_every_exported_event_is_checked() -> None:
    assert sorted(cls.__name__ for cls in EVENT_CLASSES) == sorted(events.__all__)


@pytest.mark.parametrize("cls", EVENT_CLASSES, ids=lambda cls: cls.__name__)
def test_class_name_is_the_class_name(cls: type[BaseEvent]) -> None:
    assert cls.class_name() == cls.__name__
    assert issubclass(cls, BaseEvent)


def test_class_names_are_distinct() -> None:
    names = [cls.class_name() for cls in EVENT_CLASSES]
    assert len(set(names)) == len(names) == 22
