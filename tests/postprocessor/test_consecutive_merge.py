"""ConsecutiveMergePostprocessor: adjacent hits merged, small gaps filled."""

from __future__ import annotations

import asyncio
import copy

import pytest
from llama_index.core.schema import NodeWithScore
from postprocessor._corpus import by_text, docstore_of, hits, plain_nodes, sentence_nodes

from llama_index_ext_advrag.postprocessor import ConsecutiveMergePostprocessor
from llama_index_ext_advrag.trace import get_trace


@pytest.fixture
def nodes():
    return sentence_nodes(embed=False)


def texts(results: list[NodeWithScore]) -> list[str]:
    return [r.node.get_content() for r in results]


def test_defaults_and_invalid_arguments(nodes) -> None:
    merge = ConsecutiveMergePostprocessor()
    assert (merge.fill_gaps, merge.max_gap) == (False, 2)
    assert merge.class_name() == "ConsecutiveMergePostprocessor"
    with pytest.raises(ValueError, match="fill_gaps=True needs vector_store= or docstore="):
        ConsecutiveMergePostprocessor(fill_gaps=True)
    with pytest.raises(ValueError, match="max_gap"):
        ConsecutiveMergePostprocessor(docstore=docstore_of(nodes), max_gap=0)
    assert merge.postprocess_nodes([]) == []


def test_adjacent_hits_merge_in_reading_order(nodes) -> None:
    results = hits(nodes, "After the storm", "Its lamp", "In 1901", "In 1901")
    before = copy.deepcopy([(r.node.get_content(), r.node.metadata) for r in results])
    output = ConsecutiveMergePostprocessor().postprocess_nodes(results)
    assert [(r.node.get_content(), r.node.metadata) for r in results] == before
    assert texts(output) == [
        "In 1901 a storm destroyed the northern pier. After the storm the town rebuilt the pier in granite.",
        "Its lamp was electrified in 1935.",
    ]
    assert [r.score for r in output] == [0.5, 0.49]
    trace = get_trace(output[0].node, "consecutive_merge")
    assert [m["role"] for m in trace["members"]] == ["hit", "hit"]
    assert trace["round_trips"] == 0 and trace["span"] == [4, 6]


def test_gaps_are_filled_only_when_asked_and_small_enough(nodes) -> None:
    docstore = docstore_of(nodes)
    results = hits(nodes, "The harbour of", "In 1901", "The bakery sells")  # gaps of 2 and 4
    assert len(ConsecutiveMergePostprocessor(docstore=docstore).postprocess_nodes(results)) == 3
    output = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True).postprocess_nodes(
        results
    )
    assert texts(output) == [
        "The harbour of Velmar was built in 1820. Its stone piers shelter forty fishing boats. "
        "The harbour master keeps a ledger of every boat. In 1901 a storm destroyed the northern pier.",
        "The bakery sells rye bread and almond cakes.",
    ]
    trace = get_trace(output[0].node, "consecutive_merge")
    assert [m["role"] for m in trace["members"]] == ["hit", "gap", "gap", "hit"]
    assert (trace["gaps_filled"], trace["round_trips"]) == (1, 1)
    wide = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True, max_gap=4)
    assert len(wide.postprocess_nodes(results)) == 1


def test_a_gap_missing_from_the_store_is_not_papered_over(nodes) -> None:
    missing = by_text(nodes, "Its stone piers").node_id
    docstore = docstore_of([n for n in nodes if n.node_id != missing])
    merge = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True)
    output = merge.postprocess_nodes(hits(nodes, "The harbour of", "In 1901"))
    assert len(output) == 2
    assert get_trace(output[0].node, "consecutive_merge")["gaps_unfilled"] == 1


def test_position_less_nodes_merge_by_relationships() -> None:
    chunks = plain_nodes(["one.", "two.", "three.", "four."])
    results = [NodeWithScore(node=chunks[2], score=0.9), NodeWithScore(node=chunks[1], score=0.8),
               NodeWithScore(node=chunks[0], score=0.1)]  # fmt: skip
    assert texts(ConsecutiveMergePostprocessor().postprocess_nodes(results)) == ["one. two. three."]


def test_sync_and_async_agree_and_round_trip(nodes) -> None:
    docstore = docstore_of(nodes)
    merge = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True, max_gap=3)
    results = hits(nodes, "The harbour of", "In 1901", "Its lamp", "The last keeper")
    assert texts(merge.postprocess_nodes(results)) == texts(
        asyncio.run(merge.apostprocess_nodes(results))
    )
    restored = ConsecutiveMergePostprocessor.from_dict(merge.to_dict(), docstore=docstore)
    assert (restored.fill_gaps, restored.max_gap) == (True, 3)


def test_milvus_gap_fill(milvus_uri, collection_name, nodes) -> None:
    from llama_index_ext_advrag.milvus import flush, open_vector_store

    vector_store = open_vector_store(milvus_uri, collection_name, dim=64)
    try:
        embedded = sentence_nodes()
        vector_store.add(embedded)
        flush(vector_store)
        merge = ConsecutiveMergePostprocessor(vector_store=vector_store, fill_gaps=True)
        output = merge.postprocess_nodes(hits(nodes, "The lighthouse", "The last keeper"))
        assert texts(output) == [
            "The lighthouse stands on a cliff. Its lamp was electrified in 1935. Keepers lived in "
            "the cottage below. The last keeper retired in 1990."
        ]
    finally:
        vector_store.client.drop_collection(collection_name)
