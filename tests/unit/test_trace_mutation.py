"""Trace helpers: copy_metadata copies lists and plain values as well as dicts, and get_trace
without a component returns the whole trace. Kills the mutants of trace.py test_trace leaves
alive (mutation testing, issue #39)."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.trace import add_trace, copy_metadata, get_trace

pytestmark = pytest.mark.unit


def test_lists_and_plain_values_are_copied() -> None:
    value = [1, {"a": [2]}, "x"]
    copied = copy_metadata(value)
    assert copied == value and copied is not value and copied[1]["a"] is not value[1]["a"]
    assert copy_metadata("x") == "x" and copy_metadata(None) is None


def test_the_whole_trace_without_a_component() -> None:
    node = TextNode(text="t")
    add_trace(node, "crag", {"action": "correct"})
    add_trace(node, "window", {"grew": 2})
    assert get_trace(node) == {"crag": {"action": "correct"}, "window": {"grew": 2}}
    assert get_trace(node, "window") == {"grew": 2}
