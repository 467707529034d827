"""The node-layout contract, rule by rule: deterministic ids against uuid5, the annotated
values' validation, where a node sits, its neighbours' ids, and chains of position-less
nodes (cycles included)."""

from __future__ import annotations

import uuid

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.layout import (
    CHAIN_PREFIX,
    NODE_ID_NAMESPACE,
    UNIT_CUES_KEY,
    UNIT_TOKENS_KEY,
    DocumentNodeIds,
    Location,
    NodeLayout,
    deterministic_node_id,
    document_id_of,
    ids_are_computable,
    locate_all,
    relation_id,
    stored_cues,
    stored_tokens,
)


def uuid5_of(document_id: str, *parts: object) -> str:
    return str(uuid.uuid5(NODE_ID_NAMESPACE, "\x1f".join([document_id, *map(str, parts)])))


def node(node_id: str, metadata: dict | None = None, **links: str) -> TextNode:
    text_node = TextNode(id_=node_id, text=node_id, metadata=metadata or {})
    for relation, target in links.items():
        text_node.relationships[NodeRelationship[relation.upper()]] = RelatedNodeInfo(
            node_id=target
        )
    return text_node


@pytest.mark.parametrize(
    ("document_id", "parts"),
    [("doc", (0, 3)), ("doc", ("window", 4, 8)), ("文档/é.md", (1, 2, "centre")), ("d", ())],
)
def test_deterministic_ids_are_uuid5_of_the_document_and_the_parts(
    document_id: str, parts: tuple
) -> None:
    expected = uuid5_of(document_id, *parts)
    assert deterministic_node_id(document_id, *parts) == expected
    ids = DocumentNodeIds(document_id)
    assert ids(*parts) == expected
    assert ids(*parts) == expected  # the shared prefix is copied, not consumed
    assert uuid.UUID(expected).version == 5


def test_ids_differ_by_document_and_by_part_boundaries() -> None:
    assert deterministic_node_id("a", 1, 23) != deterministic_node_id("a", 12, 3)
    assert deterministic_node_id("a", 1) != deterministic_node_id("b", 1)


def test_document_id_of_prefers_the_source_relationship() -> None:
    assert document_id_of(node("n", {"document_id": "meta"}, source="src")) == "src"
    assert document_id_of(node("n", {"document_id": "meta"})) == "meta"
    assert document_id_of(node("n")) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 0), (7, 7), (-1, None), (True, None), (2.0, None), ("3", None), (None, None)],
)
def test_stored_tokens(value: object, expected: int | None) -> None:
    assert stored_tokens({UNIT_TOKENS_KEY: value}) == expected
    assert stored_tokens({}) is None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (["pump", "fan"], frozenset({"pump", "fan"})),
        (("pump",), frozenset({"pump"})),
        ([], frozenset()),
        (["pump", 3], None),
        ("pump", None),
        (None, None),
    ],
)
def test_stored_cues(value: object, expected: frozenset | None) -> None:
    assert stored_cues({UNIT_CUES_KEY: value}) == expected
    assert stored_cues({}) is None


def test_location_width_and_default_section() -> None:
    location = Location("d", 3, 7)
    assert location.width == 4 and location.section is None


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({"document_id": "d", "sentence_span": [2, 5]}, Location("d", 2, 5, None)),
        ({"document_id": 7, "sentence_span": (2, 3), "section_title": "Intro"},
         Location("7", 2, 3, "Intro")),
        ({"document_id": "d", "sentence_span": [2, 5], "section_title": 3}, Location("d", 2, 5)),
        ({"sentence_span": [2, 5]}, None),
        ({"document_id": "d"}, None),
        ({"document_id": "d", "sentence_span": "2-5"}, None),
        ({"document_id": "d", "sentence_span": [2, 5, 7]}, None),
        ({"document_id": "d", "sentence_span": [2]}, None),
        ({"document_id": "d", "sentence_span": [2.0, 5]}, None),
        ({"document_id": "d", "sentence_span": [2, "5"]}, None),
        ({"document_id": "d", "sentence_span": [5, 5]}, None),
        ({"document_id": "d", "sentence_span": [5, 4]}, None),
    ],
)  # fmt: skip
def test_locate(metadata: dict, expected: Location | None) -> None:
    assert NodeLayout().locate(node("n", metadata)) == expected


def test_locate_with_other_keys() -> None:
    layout = NodeLayout(document_id_key="doc", span_key="span", section_key="part")
    metadata = {"doc": "d", "span": [0, 1], "part": "P", "document_id": "x"}
    assert layout.locate(node("n", metadata)) == Location("d", 0, 1, "P")


def test_neighbour_ids_step_by_the_span_width_and_stop_before_zero() -> None:
    layout = NodeLayout()
    location = Location("d", 4, 6)
    assert layout.neighbour_id(location, 1) == deterministic_node_id("d", "window", 6, 8)
    assert layout.neighbour_id(location, -2) == deterministic_node_id("d", "window", 0, 2)
    assert layout.neighbour_id(location, -3) is None
    other = NodeLayout(id_unit="sentence")
    assert other.neighbour_id(location, 1) == deterministic_node_id("d", "sentence", 6, 8)


def test_relation_id() -> None:
    linked = node("n", next="m")
    assert relation_id(linked, NodeRelationship.NEXT) == "m"
    assert relation_id(linked, NodeRelationship.PREVIOUS) is None
    listed = node("n")  # a relationship may hold a list (as CHILD does): no single id
    listed.relationships[NodeRelationship.NEXT] = [RelatedNodeInfo(node_id="m")]
    assert relation_id(listed, NodeRelationship.NEXT) is None


def test_ids_are_computable_checks_next_first_then_previous() -> None:
    layout, location = NodeLayout(), Location("d", 2, 4)
    following = layout.neighbour_id(location, 1)
    preceding = layout.neighbour_id(location, -1)
    assert following is not None and preceding is not None
    assert ids_are_computable(node("n"), location, layout)
    assert ids_are_computable(node("n", next=following), location, layout)
    assert not ids_are_computable(node("n", next="other"), location, layout)
    assert ids_are_computable(node("n", previous=preceding), location, layout)
    assert not ids_are_computable(node("n", previous="other"), location, layout)
    # NEXT decides when both are known
    assert ids_are_computable(node("n", next=following, previous="other"), location, layout)
    assert not ids_are_computable(node("n", next="other", previous=preceding), location, layout)


def test_locate_all_chains_position_less_nodes_by_their_links() -> None:
    placed = node("p", {"document_id": "d", "sentence_span": [0, 2]})
    nodes = [
        node("b", previous="a", next="c"),
        placed,
        node("c", previous="b", next="gone"),
        node("a", next="b"),
        node("x", previous="outside"),  # its previous is not among the nodes: a head
    ]
    assert locate_all(nodes, NodeLayout()) == {
        "p": Location("d", 0, 2),
        "a": Location(f"{CHAIN_PREFIX}a", 0, 1),
        "b": Location(f"{CHAIN_PREFIX}a", 1, 2),
        "c": Location(f"{CHAIN_PREFIX}a", 2, 3),
        "x": Location(f"{CHAIN_PREFIX}x", 0, 1),
    }


def test_locate_all_breaks_a_cycle_at_its_first_node() -> None:
    nodes = [node("a", previous="b", next="b"), node("b", previous="a", next="a")]
    assert locate_all(nodes, NodeLayout()) == {
        "a": Location("chain:a", 0, 1),
        "b": Location("chain:a", 1, 2),
    }
    assert locate_all([], NodeLayout()) == {}
