"""Neighbour addressing and the batched fetch shared by the neighbour postprocessors."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.schema import TextNode
from postprocessor._corpus import by_text, docstore_of, plain_nodes, sentence_nodes

from llama_index_ext_advrag.layout import (
    Location,
    NodeLayout,
    ids_are_computable,
    locate_all,
)
from llama_index_ext_advrag.postprocessor._neighbours import (
    DocstoreNeighbourStore,
    FetchPlan,
    NeighbourRequest,
    build_neighbour_store,
)


class CountingStore(DocstoreNeighbourStore):
    """A docstore-backed store that records every batched query."""

    def __init__(self, docstore, layout=None) -> None:
        super().__init__(docstore, layout)
        self.queries: list[list[str]] = []

    def get_nodes(self, node_ids, with_embeddings):
        self.queries.append(list(node_ids))
        return super().get_nodes(node_ids, with_embeddings)


def test_layout_locates_parser_nodes_and_computes_their_neighbour_ids() -> None:
    nodes = sentence_nodes(embed=False)
    layout = NodeLayout()
    harbour = [n for n in nodes if n.metadata["document_id"] == "harbour"]
    for index, node in enumerate(harbour):
        location = layout.locate(node)
        assert location == Location("harbour", index, index + 1, location.section)
        assert ids_are_computable(node, location, layout)
        if index + 1 < len(harbour):
            assert layout.neighbour_id(location, 1) == harbour[index + 1].node_id
        if index >= 2:
            assert layout.neighbour_id(location, -2) == harbour[index - 2].node_id
    assert layout.neighbour_id(layout.locate(harbour[0]), -1) is None
    assert layout.locate(harbour[1]).section == "The harbour"


@pytest.mark.parametrize(
    "metadata",
    [{}, {"document_id": "d"}, {"document_id": "d", "sentence_span": [3, 3]},
     {"document_id": "d", "sentence_span": "3-4"}, {"document_id": "d", "sentence_span": [1.0, 2]}],
)  # fmt: skip
def test_layout_rejects_missing_or_malformed_positions(metadata: dict) -> None:
    assert NodeLayout().locate(TextNode(text="x", metadata=metadata)) is None


def test_ids_not_computable_when_relationships_disagree() -> None:
    first, second = plain_nodes(["a", "b"])
    first.metadata.update({"document_id": "d", "sentence_span": [0, 1]})
    layout = NodeLayout()
    assert not ids_are_computable(first, layout.locate(first), layout)


def test_locate_all_orders_position_less_nodes_by_chains() -> None:
    nodes = plain_nodes(["a", "b", "c", "d", "e"])
    picked = [nodes[3], nodes[0], nodes[1], nodes[4]]
    locations = locate_all(picked, NodeLayout())
    assert locations["plain-0"] == Location("chain:plain-0", 0, 1)
    assert locations["plain-1"] == Location("chain:plain-0", 1, 2)
    assert locations["plain-3"] == Location("chain:plain-3", 0, 1)  # "c" is missing: new chain
    assert locations["plain-4"] == Location("chain:plain-3", 1, 2)


def test_computed_ids_need_one_round_trip_for_all_hits() -> None:
    nodes = sentence_nodes(embed=False)
    store = CountingStore(docstore_of(nodes))
    requests = [
        NeighbourRequest(by_text(nodes, "In 1901"), 2, 2),
        NeighbourRequest(by_text(nodes, "After the storm"), 2, 2),  # overlaps the first
        NeighbourRequest(by_text(nodes, "Its lamp"), 3, 3),  # runs off both document edges
    ]
    result = store.fetch(requests)
    assert result.round_trips == 1 and len(store.queries) == 1
    texts = [[n.get_content()[:12] for n in hood.nodes] for hood in result.neighbourhoods]
    assert texts[0] == [
        "Its stone pi",
        "The harbour ",
        "In 1901 a st",
        "After the st",
        "The granite ",
    ]
    assert texts[1][2] == "After the st" and len(texts[1]) == 5
    assert texts[2] == ["The lighthou", "Its lamp was", "Keepers live", "The last kee"]
    assert result.neighbourhoods[2].anchor_index == 1


def test_position_less_nodes_are_walked_one_round_per_hop_shared_by_hits() -> None:
    nodes = plain_nodes([f"s{i}" for i in range(10)])
    store = CountingStore(docstore_of(nodes))
    requests = [NeighbourRequest(nodes[2], 3, 3), NeighbourRequest(nodes[7], 3, 3)]
    result = store.fetch(requests)
    # hops 1 and 2 are one query each for both hits; hop 3 of each hit was already fetched as
    # hop 2 of the other, so nothing is asked twice.
    assert result.round_trips == 2
    assert sorted(i for query in store.queries for i in query) == [
        f"plain-{i}" for i in (0, 1, 3, 4, 5, 6, 8, 9)
    ]
    assert [n.get_content() for n in result.neighbourhoods[0].nodes] == [
        "s0", "s1", "s2", "s3", "s4", "s5"
    ]  # fmt: skip
    assert [n.get_content() for n in result.neighbourhoods[1].nodes] == [
        "s4", "s5", "s6", "s7", "s8", "s9"
    ]  # fmt: skip


def test_walk_rounds_grow_with_hops_not_with_hits() -> None:
    nodes = plain_nodes([f"s{i}" for i in range(30)])
    store = CountingStore(docstore_of(nodes))
    result = store.fetch([NeighbourRequest(nodes[i], 3, 3) for i in (4, 12, 20)])
    assert result.round_trips == 3
    assert [len(q) for q in store.queries] == [6, 6, 6]


def test_fetch_plan_with_nothing_to_fetch_is_done_at_once() -> None:
    node = sentence_nodes(embed=False)[4]
    plan = FetchPlan([NeighbourRequest(node, 0, 0)], NodeLayout(), with_embeddings=False)
    assert plan.pending() == []
    assert plan.result()[0].nodes == [node]


def test_anchor_is_fetched_for_its_vector() -> None:
    nodes = sentence_nodes()
    anchor = by_text(nodes, "In 1901").model_copy()
    anchor.embedding = None
    store = CountingStore(docstore_of(nodes))
    result = store.fetch([NeighbourRequest(anchor, 0, 0)], with_embeddings=True)
    assert store.queries == [[anchor.node_id]]
    assert result.neighbourhoods[0].anchor.embedding is not None


def test_sync_and_async_fetch_agree() -> None:
    nodes = sentence_nodes(embed=False)
    store = DocstoreNeighbourStore(docstore_of(nodes))
    requests = [NeighbourRequest(by_text(nodes, "The bakery sells"), 2, 1)]
    sync = store.fetch(requests)
    async_ = asyncio.run(store.afetch(requests))
    assert [n.node_id for n in sync.neighbourhoods[0].nodes] == [
        n.node_id for n in async_.neighbourhoods[0].nodes
    ]
    assert sync.round_trips == async_.round_trips == 1


def test_store_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        build_neighbour_store(None, None)
    with pytest.raises(ValueError, match="exactly one"):
        build_neighbour_store(object(), docstore_of([]))
    with pytest.raises(ValueError, match="BaseDocumentStore, got dict"):
        build_neighbour_store(None, {})
    with pytest.raises(ValueError, match="MilvusVectorStore, got str"):
        build_neighbour_store("milvus.db", None)
