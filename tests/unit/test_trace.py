"""trace helpers: records merge into a new dict, the trace key is excluded once."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag.trace import (
    TRACE_KEY,
    add_trace,
    copy_metadata,
    copy_node_with_score,
    exclude_trace_key,
    with_record,
)


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


class Tag:
    """A metadata value that is not a plain type (copied through copy.deepcopy)."""

    def __init__(self, items: list[int]) -> None:
        self.items = items


def test_copy_metadata_copies_every_nested_container_and_deep_copies_the_rest() -> None:
    tag = Tag([1])
    metadata = {"a": [1, {"b": [2, 3]}], "t": (1, [4]), "tag": tag, "s": "x", "n": None}
    copied = copy_metadata(metadata)
    assert copied == {**metadata, "tag": copied["tag"]}
    copied["a"][1]["b"].append(9)
    copied["a"].append(0)
    copied["t"][1].append(5)
    copied["tag"].items.append(2)
    assert metadata == {"a": [1, {"b": [2, 3]}], "t": (1, [4]), "tag": tag, "s": "x", "n": None}
    assert tag.items == [1]


def test_a_copied_node_leaves_the_callers_metadata_and_trace_untouched() -> None:
    node = TextNode(text="t", metadata={TRACE_KEY: {"a": {"steps": [1]}}, "w": ["x"]})
    copied = copy_node_with_score(NodeWithScore(node=node, score=0.5))
    add_trace(copied.node, "b", 2)
    copied.node.metadata["w"].append("y")
    copied.node.metadata[TRACE_KEY]["a"]["steps"].append(2)
    assert node.metadata == {TRACE_KEY: {"a": {"steps": [1]}}, "w": ["x"]}
    assert copied.score == 0.5 and copied.node is not node
