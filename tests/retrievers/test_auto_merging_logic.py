"""Pure merge logic of the hierarchical auto-merging retriever (unit tier, no Milvus)."""

from __future__ import annotations

import asyncio

import pytest
from llama_index.core.schema import NodeRelationship, TextNode

from llama_index_ext_advrag.retrievers._auto_merging_store import split_hierarchy
from llama_index_ext_advrag.retrievers._hierarchy import (
    POSITION_END_KEY,
    POSITION_KEY,
    Entry,
    MergeSession,
    ScoreAggregation,
    aggregate_scores,
    assign_positions,
    drop_contained,
    merge_round,
    node_span,
    order_for_reading,
)
from llama_index_ext_advrag.retrievers.auto_merging import HierarchicalAutoMergingRetriever


def words(text: str) -> int:
    return len(text.split())


def hierarchy(doc: str = "doc") -> dict[str, TextNode]:
    """R -> A(a1, a2, a3), B(b1, b2), C(c1, c2); texts concatenate, one word per leaf."""
    tree = {"R": ["A", "B", "C"], "A": ["a1", "a2", "a3"], "B": ["b1", "b2"], "C": ["c1", "c2"]}
    leaves = [x for kids in tree.values() for x in kids if x not in tree]

    def text(name: str) -> str:
        return " ".join(text(k) for k in tree[name]) if name in tree else f"w{name}"

    nodes = {
        name: TextNode(id_=f"{doc}-{name}", text=text(name))
        for name in [*tree, *leaves]  # parents first, leaves after (core's order differs)
    }
    for parent, kids in tree.items():
        nodes[parent].relationships[NodeRelationship.CHILD] = [
            nodes[k].as_related_node_info() for k in kids
        ]
        for kid in kids:
            nodes[kid].relationships[NodeRelationship.PARENT] = nodes[parent].as_related_node_info()
    source = TextNode(id_=doc, text="").as_related_node_info()
    for node in nodes.values():
        node.relationships[NodeRelationship.SOURCE] = source
    return nodes


def stored(doc: str = "doc") -> dict[str, TextNode]:
    """The hierarchy as the retriever stores it (with positions), keyed by short name."""
    raw = hierarchy(doc)
    leaves, parents = split_hierarchy(list(raw.values()))
    by_id = {n.node_id: n for n in [*leaves, *parents]}
    return {name: by_id[node.node_id] for name, node in raw.items()}  # type: ignore[misc]


def entry(node: TextNode, score: float) -> Entry:
    return Entry(node=node, score=score, leaf_ids=(node.node_id,), tokens=words(node.text))


def run(hits: list[Entry], parents: dict[str, TextNode], **kwargs) -> tuple[list[Entry], int]:
    session = MergeSession(hits, token_counter=words, **kwargs)
    fetches = 0
    while (ids := session.pending_parent_ids()) is not None:
        fetches += bool(ids)
        session.advance({i: parents[i] for i in ids if i in parents})
    return session.final_entries(), fetches


def test_positions_are_preorder_with_subtree_ends() -> None:
    nodes = hierarchy()
    positions = assign_positions(list(nodes.values()))
    pos = {name: positions[n.node_id] for name, n in nodes.items()}
    assert pos["R"] == (0, 10, 0)  # 11 nodes: positions 0..10
    assert pos["A"] == (1, 4, 1)
    assert pos["a1"] == (2, 2, 2) and pos["a3"] == (4, 4, 2)
    assert pos["B"] == (5, 7, 1)
    assert pos["c2"] == (10, 10, 2)
    assert pos["C"] == (8, 10, 1)


def test_split_hierarchy_copies_and_hides_positions() -> None:
    nodes = hierarchy()
    leaves, parents = split_hierarchy(list(nodes.values()))
    assert {n.node_id for n in leaves} == {
        f"doc-{x}" for x in ("a1", "a2", "a3", "b1", "b2", "c1", "c2")
    }
    assert len(parents) == 4
    assert POSITION_KEY not in nodes["a1"].metadata  # the caller's node is untouched
    assert POSITION_KEY in leaves[0].excluded_embed_metadata_keys
    assert POSITION_KEY in leaves[0].excluded_llm_metadata_keys


def test_split_hierarchy_rejects_empty_and_duplicates() -> None:
    with pytest.raises(ValueError, match="empty"):
        split_hierarchy([])
    node = TextNode(id_="x", text="x")
    with pytest.raises(ValueError, match="unique"):
        split_hierarchy([node, node])


def test_merges_above_ratio_with_max_and_mean_scores() -> None:
    s = stored()
    parents = {n.node_id: n for k, n in s.items() if k.isupper()}
    hits = [entry(s["a1"], 0.9), entry(s["a2"], 0.8), entry(s["b1"], 0.5)]
    result, fetches = run(hits, parents)
    assert [e.node_id for e in result] == ["doc-A", "doc-b1"]  # B: 1/2 is not > 0.5
    assert result[0].score == pytest.approx(0.9)
    assert result[0].leaf_ids == ("doc-a1", "doc-a2")
    record = result[0].merges[0]
    assert record["children_total"] == 3 and record["ratio"] == pytest.approx(2 / 3, abs=1e-4)
    assert fetches == 2  # round 1: A, B; round 2: R (A merged) - one batched fetch per level
    mean, _ = run(hits, parents, aggregation=ScoreAggregation.MEAN)
    assert mean[0].score == pytest.approx(0.85)


def test_ratio_equal_to_threshold_does_not_merge() -> None:
    s = stored()
    parents = {n.node_id: n for k, n in s.items() if k.isupper()}
    result, _ = run([entry(s["b1"], 0.7)], parents)
    assert [e.node_id for e in result] == ["doc-b1"]
    merged, _ = run([entry(s["b1"], 0.7)], parents, merge_ratio=0.49)
    assert [e.node_id for e in merged] == ["doc-B"]


def test_merges_up_the_levels_and_absorbs_contained_leaves() -> None:
    s = stored()
    parents = {n.node_id: n for k, n in s.items() if k.isupper()}
    hits = [
        entry(s["a1"], 0.9), entry(s["a2"], 0.5), entry(s["c1"], 0.6),
        entry(s["c2"], 0.4), entry(s["b2"], 0.3),
    ]  # fmt: skip
    result, _ = run(hits, parents)
    assert [e.node_id for e in result] == ["doc-R"]  # A and C merged, then R (2/3); b2 absorbed
    root = result[0]
    assert set(root.leaf_ids) == {"doc-a1", "doc-a2", "doc-c1", "doc-c2", "doc-b2"}
    assert root.merges[-1]["absorbed"] == ["doc-b2"]
    first = {m["parent_id"]: m["leaf_ids"] for m in root.merges}
    assert first == {
        "doc-A": ["doc-a1", "doc-a2"],
        "doc-C": ["doc-c1", "doc-c2"],
        "doc-R": ["doc-a1", "doc-a2", "doc-b2", "doc-c1", "doc-c2"],
    }
    assert root.score == pytest.approx(0.9)
    assert [m["round"] for m in root.merges] == [1, 1, 2]


def test_budget_stops_merging_and_is_traced() -> None:
    s = stored()
    parents = {n.node_id: n for k, n in s.items() if k.isupper()}
    hits = [entry(s["a1"], 0.9), entry(s["a2"], 0.8), entry(s["c1"], 0.7), entry(s["c2"], 0.6)]
    # leaves: 4 words; A has 3 words, C 2 words -> merging A: 4-2+3 = 5, then C: 5-2+2 = 5
    result, _ = run(hits, parents, max_context_tokens=5)
    assert [e.node_id for e in result] == ["doc-A", "doc-C"]
    assert sum(e.tokens for e in result) == 5  # R (7 words) would exceed the budget
    assert result[0].skipped[0]["parent_id"] == "doc-R"
    tight, _ = run(hits, parents, max_context_tokens=4)
    # A first (best score) would give 4-2+3 = 5 > 4: refused; C gives 4-2+2 = 4: merged
    assert [e.node_id for e in tight] == ["doc-a1", "doc-a2", "doc-C"]
    assert tight[0].skipped[0]["parent_id"] == "doc-A" and not tight[2].skipped


def test_missing_parent_is_not_merged() -> None:
    s = stored()
    result, _ = run([entry(s["b1"], 0.5), entry(s["b2"], 0.4)], parents={})
    assert [e.node_id for e in result] == ["doc-b1", "doc-b2"]


def test_empty_input() -> None:
    result, fetches = run([], {})
    assert result == [] and fetches == 0


def test_reading_order_within_document_best_document_first() -> None:
    s, t = stored("d1"), stored("d2")
    entries = [entry(s["c1"], 0.2), entry(t["b1"], 0.9), entry(s["a1"], 0.5), entry(t["a2"], 0.1)]
    ordered = order_for_reading(entries)
    assert [e.node_id for e in ordered] == ["d2-a2", "d2-b1", "d1-a1", "d1-c1"]


def test_merge_round_leaves_input_untouched() -> None:
    s = stored()
    parents = {n.node_id: n for k, n in s.items() if k.isupper()}
    hits = [entry(s["a1"], 0.9), entry(s["a2"], 0.8)]
    snapshot = list(hits)
    merge_round(
        hits, parents, merge_ratio=0.5, aggregation=ScoreAggregation.MAX,
        max_context_tokens=None, token_counter=words,
    )  # fmt: skip
    assert hits == snapshot and "advrag_trace" not in s["a1"].metadata


def test_aggregate_scores() -> None:
    assert aggregate_scores([0.2, 0.6], ScoreAggregation.MAX) == 0.6
    assert aggregate_scores([0.2, 0.6], ScoreAggregation.MEAN) == pytest.approx(0.4)
    assert aggregate_scores([], ScoreAggregation.MEAN) == 0.0


class FakeStore:
    """A vector store whose sync and async clients record being closed."""

    def __init__(self) -> None:
        self.client = self._Client()
        self._async_milvusclient = self._AsyncClient()

    class _Client:
        closed = 0

        def close(self) -> None:
            self.closed += 1

    class _AsyncClient:
        closed = 0

        async def close(self) -> None:
            self.closed += 1


def test_close_closes_both_stores_shared_with_the_copies() -> None:
    leaves, parents = FakeStore(), FakeStore()
    retriever = HierarchicalAutoMergingRetriever(leaves, parents, similarity_top_k=3)
    copy = retriever.with_settings(similarity_top_k=5, merge_ratio=0.25)
    assert (copy.similarity_top_k, copy.merge_ratio, retriever.similarity_top_k) == (5, 0.25, 3)
    assert copy.vector_store is leaves  # the copy reuses the open stores
    copy.close()
    assert (leaves.client.closed, parents.client.closed) == (1, 1)
    asyncio.run(retriever.aclose())
    assert (leaves.client.closed, parents.client.closed) == (2, 2)
    assert (leaves._async_milvusclient.closed, parents._async_milvusclient.closed) == (1, 1)


def test_settings_defaults_and_invalid_values() -> None:
    retriever = HierarchicalAutoMergingRetriever()  # no stores: the settings alone
    assert (retriever.similarity_top_k, retriever.merge_ratio) == (12, 0.5)
    assert retriever.score_aggregation is ScoreAggregation.MAX
    assert retriever.max_context_tokens is None
    for bad in ({"merge_ratio": 1.5}, {"similarity_top_k": 0}, {"max_context_tokens": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            HierarchicalAutoMergingRetriever(**bad)
        with pytest.raises(ValueError, match=next(iter(bad))):
            retriever.with_settings(**bad)
    with pytest.raises(ValueError, match="median"):
        HierarchicalAutoMergingRetriever(score_aggregation="median")
    retriever.score_aggregation = "mean"  # a validated write
    assert retriever.score_aggregation is ScoreAggregation.MEAN
    with pytest.raises(ValueError, match="merge_ratio"):
        retriever.merge_ratio = -0.1


def test_positions_of_stored_nodes_give_containment() -> None:
    s = stored()
    a, a1, b1 = s["A"], s["a1"], s["b1"]
    assert a.metadata[POSITION_KEY] <= a1.metadata[POSITION_KEY] <= a.metadata[POSITION_END_KEY]
    assert not a.metadata[POSITION_KEY] <= b1.metadata[POSITION_KEY] <= a.metadata[POSITION_END_KEY]


# --- mutation-testing kills (issue 20) --------------------------------------------------------


def linked(parent: TextNode, *children: TextNode, listed: bool = True) -> None:
    """Point ``children`` at ``parent`` (and list them as its children when ``listed``)."""
    for child in children:
        child.relationships[NodeRelationship.PARENT] = parent.as_related_node_info()
    if listed:
        parent.relationships[NodeRelationship.CHILD] = [c.as_related_node_info() for c in children]


def test_positions_skip_missing_children_and_reach_unlisted_nodes() -> None:
    root, a, b, orphan = (TextNode(id_=n, text=n) for n in ("R", "A", "B", "X"))
    ghost = TextNode(id_="ghost", text="")  # listed as a child, never stored
    linked(root, ghost, a, b)
    linked(root, orphan, listed=False)  # points at R, but R does not list it
    positions = assign_positions([root, a, b, orphan])
    assert positions == {"R": (0, 2, 0), "A": (1, 1, 1), "B": (2, 2, 1), "X": (3, 3, 0)}


def test_drop_contained_uses_inclusive_spans_per_document() -> None:
    s, t = stored("d1"), stored("d2")
    kept = drop_contained([entry(s["R"], 0.5), entry(s["C"], 0.4)])
    assert [e.node_id for e in kept] == ["d1-R"]  # C ends where R ends: inside, not around
    kept = drop_contained([entry(s["A"], 0.5), entry(s["a3"], 0.4)])
    assert [e.node_id for e in kept] == ["d1-A"]  # the last child shares A's end
    # the same positions in another document, or a node without positions, are not inside
    kept = drop_contained([entry(s["A"], 0.5), entry(t["a1"], 0.4)])
    assert [e.node_id for e in kept] == ["d1-A", "d2-a1"]
    foreign = TextNode(id_="foreign", text="x")
    foreign.relationships[NodeRelationship.SOURCE] = s["a1"].relationships[NodeRelationship.SOURCE]
    kept = drop_contained([entry(foreign, 0.5), entry(s["A"], 0.4)])
    assert [e.node_id for e in kept] == ["foreign", "d1-A"]


def test_node_span_needs_both_keys_and_foreign_nodes_read_by_offset() -> None:
    half = TextNode(id_="half", text="x", metadata={POSITION_KEY: 3})
    assert node_span(half) is None
    first, second = TextNode(id_="f1", text="x"), TextNode(id_="f2", text="y")
    first.start_char_idx, second.start_char_idx = 40, 7
    undated = TextNode(id_="f0", text="z")  # no offset: read as 0, stable among equals
    ordered = order_for_reading([entry(first, 0.5), entry(undated, 0.5), entry(second, 0.5)])
    assert [e.node_id for e in ordered] == ["f0", "f2", "f1"]
    zero = TextNode(id_="z0", text="z")
    zero.start_char_idx = 0
    ordered = order_for_reading([entry(undated, 0.5), entry(zero, 0.5)])
    assert [e.node_id for e in ordered] == ["f0", "z0"]


def test_merge_records_are_complete_and_round_defaults_to_one() -> None:
    s = stored()
    parents = {n.node_id: n for k, n in s.items() if k.isupper()}
    merged, changed = merge_round(
        [entry(s["a1"], 0.9), entry(s["a2"], 0.8)], parents, merge_ratio=0.5,
        aggregation=ScoreAggregation.MAX, max_context_tokens=None, token_counter=words,
    )  # fmt: skip
    assert changed is True
    assert merged[0].merges == (
        {"parent_id": "doc-A", "round": 1, "children_retrieved": ["doc-a1", "doc-a2"],
         "children_total": 3, "ratio": 0.6667, "absorbed": [], "leaf_ids": ["doc-a1", "doc-a2"]},
    )  # fmt: skip
    hits = [entry(s["a1"], 0.9), entry(s["a2"], 0.8), entry(s["c1"], 0.7), entry(s["c2"], 0.6)]
    result, _ = run(hits, parents, max_context_tokens=5)
    assert result[0].skipped[0] == {
        "parent_id": "doc-R", "reason": "max_context_tokens", "tokens_after_merge": 7,
        "max_context_tokens": 5,
    }  # fmt: skip


def test_a_parent_without_a_child_list_counts_as_one_child() -> None:
    parent, child = TextNode(id_="P", text="p"), TextNode(id_="c", text="c")
    linked(parent, child, listed=False)
    merged, _ = merge_round(
        [entry(child, 0.5)], {"P": parent}, merge_ratio=0.5,
        aggregation=ScoreAggregation.MAX, max_context_tokens=None, token_counter=words,
    )  # fmt: skip
    assert [e.node_id for e in merged] == ["P"]


def test_the_budget_goes_to_the_best_scoring_parent() -> None:
    s, t = stored("d1"), stored("d2")
    parents = {n.node_id: n for d in (s, t) for k, n in d.items() if k.isupper()}
    hits = [entry(s["a1"], 0.3), entry(s["a2"], 0.2), entry(t["a1"], 0.9), entry(t["a2"], 0.8)]
    # leaves: 4 words; either A merge adds one word; a budget of 5 allows one of them
    merged, _ = merge_round(
        hits, parents, merge_ratio=0.5, aggregation=ScoreAggregation.MAX,
        max_context_tokens=5, token_counter=words,
    )  # fmt: skip
    assert sorted(e.node_id for e in merged) == ["d1-a1", "d1-a2", "d2-A"]


def test_a_candidate_absorbed_earlier_in_the_round_does_not_stop_the_others() -> None:
    s, t = stored("d1"), stored("d2")
    parents = {n.node_id: n for d in (s, t) for k, n in d.items() if k.isupper()}
    hits = [
        entry(s["B"], 0.9), entry(s["C"], 0.8),  # R: 2 of 3 children, best score: first
        entry(s["a1"], 0.5), entry(s["a2"], 0.4),  # A: its children lie inside R: absorbed
        entry(t["a1"], 0.2), entry(t["a2"], 0.1),  # another document's A: still merges
    ]  # fmt: skip
    merged, _ = merge_round(
        hits, parents, merge_ratio=0.5, aggregation=ScoreAggregation.MAX,
        max_context_tokens=None, token_counter=words,
    )  # fmt: skip
    assert sorted(e.node_id for e in merged) == ["d1-R", "d2-A"]
