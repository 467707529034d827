"""The two-layer retriever's routing helpers: a route hit's trace record, how summary hits are
ranked (unit name, cue weight 0, hits without a unit key, lists of unequal length) and how
detail rows are ordered (part numbers, a zero similarity). Kills the mutants of
retrievers/_routing.py test_two_layer_units leaves alive (mutation testing, issue #39)."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.retrievers._routing import (
    KEY_FIELD,
    NAME_FIELD,
    PART_FIELD,
    RouteHit,
    fetched_details,
    rank_routes,
    searched_details,
)

pytestmark = pytest.mark.unit


def summary(key: str | None, name: str | None = None) -> TextNode:
    metadata: dict[str, object] = {} if key is None else {KEY_FIELD: key}
    if name is not None:
        metadata[NAME_FIELD] = name
    return TextNode(text=f"summary of {name or key}", metadata=metadata)


def detail(node_id: str, key: str, part: object = None) -> TextNode:
    metadata: dict[str, object] = {KEY_FIELD: key}
    if part is not None:
        metadata[PART_FIELD] = part
    return TextNode(text=node_id, id_=node_id, metadata=metadata)


def test_a_route_hit_traces_its_numbers_rounded_to_six_places() -> None:
    hit = RouteHit("sheet-1", "Sales 2019", 0.12345678, 0.1000004, 1 / 3)
    assert hit.as_trace() == {
        "unit_key": "sheet-1",
        "unit_name": "Sales 2019",
        "score": 0.123457,
        "similarity": 0.1,
        "cue_overlap": 0.333333,
    }


def test_hits_carry_the_unit_name_or_else_the_key() -> None:
    hits = rank_routes([summary("k1", "Sales 2019"), summary("k2")], [0.9, 0.8], "sales", 5, 0.0)
    assert [(h.unit_key, h.unit_name, h.similarity) for h in hits] == [
        ("k1", "Sales 2019", 0.9),
        ("k2", "k2", 0.8),
    ]


def test_cue_weight_zero_records_no_overlap_and_a_query_without_cues_adds_nothing() -> None:
    (hit,) = rank_routes([summary("k", "Sales 2019")], [0.5], "sales in 2019", 1, 0.0)
    assert (hit.score, hit.cue_overlap) == (0.5, 0.0)
    (hit,) = rank_routes([summary("k", "Sales 2019")], [0.5], "sales in 2019", 1, 0.25)
    assert (hit.score, hit.cue_overlap) == (0.75, 1.0)  # the year is a shared cue
    (hit,) = rank_routes([summary("k", "Sales 2019")], [0.5], "what were the sales", 1, 0.25)
    assert (hit.score, hit.cue_overlap) == (0.5, 0.0)  # the query has no cue


def test_hits_without_a_key_or_repeating_one_are_skipped_not_the_end() -> None:
    hits = [summary(None, "orphan"), summary("k1"), summary("k1"), summary("k2")]
    ranked = rank_routes(hits, [0.99, 0.5, 0.95, 0.4], "q", 5, 0.0)
    assert [(h.unit_key, h.similarity) for h in ranked] == [("k1", 0.5), ("k2", 0.4)]


def test_unequal_lists_pair_what_both_have() -> None:
    assert [h.unit_key for h in rank_routes([summary("a"), summary("b")], [0.5], "q", 5, 0.0)] == [
        "a"
    ]
    route = [RouteHit("a", "a", 1.0, 1.0, 0.0)]
    rows = searched_details(route, [detail("x", "a"), detail("y", "a")], [0.3])
    assert [r.node.node_id for r in rows] == ["x"]


def test_fetched_details_follow_part_numbers_a_missing_or_odd_part_counting_as_zero() -> None:
    route = [RouteHit("u", "u", 0.7, 0.7, 0.0)]
    nodes = [detail("a", "u", 1), detail("b", "u"), detail("c", "u", 2), detail("d", "u", "3")]
    rows = fetched_details(route, nodes)
    assert [r.node.node_id for r in rows] == ["b", "d", "a", "c"]
    assert {r.score for r in rows} == {0.7}


def test_searched_details_rank_a_zero_similarity_last() -> None:
    route = [RouteHit("u", "u", 1.0, 1.0, 0.0)]
    rows = searched_details(route, [detail("zero", "u"), detail("half", "u")], [0.0, 0.5])
    assert [(r.node.node_id, r.score) for r in rows] == [("half", 0.5), ("zero", 0.0)]
