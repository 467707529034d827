"""trace helpers: records merge into a new dict, the trace key is excluded once."""

from __future__ import annotations

from llama_index.core.schema import TextNode

from llama_index_ext_advrag.trace import TRACE_KEY, add_trace, exclude_trace_key, with_record


def test_with_record_copies_and_replaces_non_dicts() -> None:
    previous = {"a": 1}
    merged = with_record(previous, "b", 2)
    assert merged == {"a": 1, "b": 2} and previous == {"a": 1}
    assert with_record("not a dict", "b", 2) == {"b": 2}
    assert with_record(None, "b", 2) == {"b": 2}


def test_exclude_trace_key_appends_once() -> None:
    keys = ["x"]
    exclude_trace_key(keys)
    exclude_trace_key(keys)
    assert keys == ["x", TRACE_KEY]


def test_add_trace_records_and_hides_the_trace() -> None:
    node = TextNode(text="t", metadata={TRACE_KEY: {"a": 1}})
    add_trace(node, "b", {"stop": "edge"})
    add_trace(node, "c", 3)
    assert node.metadata[TRACE_KEY] == {"a": 1, "b": {"stop": "edge"}, "c": 3}
    assert node.excluded_llm_metadata_keys.count(TRACE_KEY) == 1
    assert node.excluded_embed_metadata_keys.count(TRACE_KEY) == 1
