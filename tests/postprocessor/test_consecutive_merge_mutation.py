"""Consecutive merge's gap filling and record, exactly (kills the mutants of
postprocessor/consecutive_merge.py that test_consecutive_merge.py leaves): every missing gap
counted and the next gap still filled, the record's keys, the hits of a filled piece (neither
gap fillers nor the hits around the gap lost), the separator, one store query without vectors
and none without a gap, a given vector store checked, the exact error, and ``hit_pieces``'
members. Sync and async give the same output."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from llama_index.core.schema import NodeWithScore
from postprocessor._corpus import by_text, docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.layout import NodeLayout, locate_all
from llama_index_ext_advrag.postprocessor.consecutive_merge import (
    ConsecutiveMergePostprocessor,
    hit_pieces,
)
from llama_index_ext_advrag.trace import get_trace

MODES = ["sync", "async"]
LIGHTHOUSE_THREE = (
    "The lighthouse stands on a cliff. Its lamp was electrified in 1935. "
    "Keepers lived in the cottage below."
)


@pytest.fixture
def nodes():
    return sentence_nodes(embed=False)


def run(post: ConsecutiveMergePostprocessor, mode: str, results: list[NodeWithScore]):
    if mode == "sync":
        return post.postprocess_nodes(results)
    return asyncio.run(post.apostprocess_nodes(results))


def without(nodes, *starts: str):
    missing = {by_text(nodes, s).node_id for s in starts}
    return docstore_of([n for n in nodes if n.node_id not in missing])


@pytest.mark.parametrize("mode", MODES)
def test_every_missing_gap_is_counted_and_later_gaps_still_filled(nodes, mode: str) -> None:
    results = hits(nodes, "The harbour of", "In 1901", "The lighthouse", "Keepers lived")
    both_missing = without(nodes, "Its stone piers", "Its lamp")
    output = run(
        ConsecutiveMergePostprocessor(docstore=both_missing, fill_gaps=True), mode, results
    )
    trace = get_trace(output[0].node, "consecutive_merge")
    assert (trace["gaps_filled"], trace["gaps_unfilled"], trace["round_trips"]) == (0, 2, 1)
    assert len(output) == 4
    first_missing = without(nodes, "Its stone piers")
    output = run(
        ConsecutiveMergePostprocessor(docstore=first_missing, fill_gaps=True), mode, results
    )
    assert [o.node.get_content() for o in output][2:] == [LIGHTHOUSE_THREE]
    trace = get_trace(output[2].node, "consecutive_merge")
    assert (trace["fill_gaps"], trace["gaps_filled"], trace["gaps_unfilled"]) == (True, 1, 1)


@pytest.mark.parametrize("mode", MODES)
def test_a_filled_piece_keeps_exactly_its_hits(nodes, mode: str) -> None:
    results = hits(nodes, "The lighthouse", "Keepers lived")
    merge = ConsecutiveMergePostprocessor(docstore=docstore_of(nodes), fill_gaps=True)
    (output,) = run(merge, mode, results)
    trace = get_trace(output.node, "consecutive_merge")
    assert trace["hits"] == [r.node.node_id for r in results]
    assert [m["role"] for m in trace["members"]] == ["hit", "gap", "hit"]
    assert (output.node.node_id, output.score) == (results[0].node.node_id, 0.5)
    # the best hit is the right one: it is kept as well
    results = hits(nodes, "Keepers lived", "The lighthouse")
    (output,) = run(merge, mode, results)
    assert (output.node.node_id, output.score) == (results[0].node.node_id, 0.5)
    assert get_trace(output.node, "consecutive_merge")["hits"] == [
        r.node.node_id for r in results[::-1]
    ]
    assert get_trace(output.node, "consecutive_merge")["fill_gaps"] is True


@pytest.mark.parametrize("mode", MODES)
def test_the_separator_joins_the_texts(nodes, mode: str) -> None:
    results = hits(nodes, "The lighthouse", "Keepers lived")
    merge = ConsecutiveMergePostprocessor(
        docstore=docstore_of(nodes), fill_gaps=True, separator="\n"
    )
    (output,) = run(merge, mode, results)
    assert output.node.get_content() == LIGHTHOUSE_THREE.replace(". ", ".\n")


class Spy:
    def __init__(self, store: Any) -> None:
        self.store, self.calls = store, []

    def get_nodes(self, ids, with_embeddings):
        self.calls.append((list(ids), with_embeddings))
        return self.store.get_nodes(ids, with_embeddings)

    async def aget_nodes(self, ids, with_embeddings):
        self.calls.append((list(ids), with_embeddings))
        return await self.store.aget_nodes(ids, with_embeddings)


@pytest.mark.parametrize("mode", MODES)
def test_one_query_without_vectors_and_none_without_a_gap(nodes, mode: str) -> None:
    merge = ConsecutiveMergePostprocessor(docstore=docstore_of(nodes), fill_gaps=True)
    spy = Spy(merge._store)
    merge._store = spy  # type: ignore[assignment]
    run(merge, mode, hits(nodes, "The lighthouse", "Its lamp"))
    assert spy.calls == []
    run(merge, mode, hits(nodes, "The lighthouse", "Keepers lived"))
    assert spy.calls == [([by_text(nodes, "Its lamp").node_id], False)]


def test_a_given_vector_store_is_kept_and_checked() -> None:
    with pytest.raises(ValueError, match="vector_store must be a MilvusVectorStore, got str"):
        ConsecutiveMergePostprocessor(vector_store="not a store")
    message = "^fill_gaps=True needs vector_store= or docstore= to fetch the gaps$"
    with pytest.raises(ValueError, match=message):
        ConsecutiveMergePostprocessor(fill_gaps=True)


def test_hit_pieces_keep_each_hits_score(nodes) -> None:
    results = hits(nodes, "The lighthouse", "Keepers lived")
    locations = locate_all((r.node for r in results), NodeLayout())
    pieces = hit_pieces(results, locations)
    assert [p.rank for p in pieces] == [0, 1]
    assert [(m.role, m.score) for p in pieces for m in p.members.values()] == [
        ("hit", 0.5),
        ("hit", 0.49),
    ]
