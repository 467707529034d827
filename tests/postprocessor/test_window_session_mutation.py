"""One drift-window call's state, exactly (kills the mutants of postprocessor/_window_session.py
that test_drift_window.py leaves): which held node a fetch keeps, the counters summed over
rounds, the nodes not fetched again, batches of the wrong length refused, and each window's
record (anchor similarity, added and pruned units, roles, the hit's own node) through the
public postprocessor, sync and async."""

from __future__ import annotations

import asyncio
import math

import numpy as np
import pytest
from advrag_testing import HashEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from postprocessor._corpus import by_text, docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.layout import NodeLayout
from llama_index_ext_advrag.plan import drive, run_call
from llama_index_ext_advrag.postprocessor import DriftAwareWindowPostprocessor
from llama_index_ext_advrag.postprocessor._growth import GrowthLimits
from llama_index_ext_advrag.postprocessor._neighbours import (
    DocstoreNeighbourStore,
    FetchResult,
    Neighbourhood,
)
from llama_index_ext_advrag.postprocessor._window_session import WindowSession, _rounded
from llama_index_ext_advrag.trace import get_trace

EMBED = HashEmbedding(dim=64)
LIMITS = GrowthLimits(
    min_sim=-1.0, max_window_tokens=1000, max_expand_steps=2, drift_patience=100,
    drift_overlap=0.0, prune_sim=-1.0,
)  # fmt: skip


def session(*hit_nodes: TextNode) -> WindowSession:
    found = [NodeWithScore(node=n, score=0.7) for n in hit_nodes]
    return WindowSession(found, [1.0, 0.0], limits=LIMITS, layout=NodeLayout(), max_hole=1)


def text_node(node_id: str, vector: list[float] | None = None) -> TextNode:
    return TextNode(text=node_id.upper(), id_=node_id, embedding=vector)


def test_rounded_similarities() -> None:
    assert _rounded(math.nan) is None
    assert _rounded(0.123456) == 0.1235
    assert _rounded(-0.5) == -0.5


def test_absorb_keeps_the_held_node_unless_the_new_one_brings_a_vector() -> None:
    anchor = text_node("h")
    state = session(anchor)
    held = {
        "vv": text_node("vv", [1.0, 0.0]),
        "vn": text_node("vn", [1.0, 0.0]),
        "nv": text_node("nv"),
        "nn": text_node("nn"),
    }
    new = {
        "vv": text_node("vv", [0.0, 1.0]),
        "vn": text_node("vn"),
        "nv": text_node("nv", [0.0, 1.0]),
        "nn": text_node("nn"),
    }
    state.absorb(FetchResult([Neighbourhood(anchor, after=list(held.values()))], 1, 4))
    state.absorb(FetchResult([Neighbourhood(anchor, after=list(new.values()))], 2, 3))
    assert state.nodes["vv"] is held["vv"] and state.nodes["vn"] is held["vn"]
    assert state.nodes["nv"] is new["nv"] and state.nodes["nn"] is held["nn"]
    assert (state.round_trips, state.rows_read) == (3, 7)


def test_absorb_reports_the_neighbours_without_a_vector_once() -> None:
    anchor = text_node("h")
    state = session(anchor)
    with_vector, bare = text_node("a", [0.0, 1.0]), text_node("b")
    missing = state.absorb(FetchResult([Neighbourhood(anchor, [with_vector], [bare])], 1, 2))
    assert missing == {"b": "B"}
    assert state.vectors == {"a": [0.0, 1.0]}
    state.add_vectors(["b"], [[1.0, 1.0]])
    state.add_vectors(["c"], [[1.0, 0.5]])
    assert state.embedded == 2
    with pytest.raises(ValueError):
        state.add_vectors(["d", "e"], [[1.0, 0.0]])  # a short batch is refused, not dropped


def test_absorb_refuses_a_fetch_of_the_wrong_length() -> None:
    anchor = text_node("h")
    state = session(anchor)
    with pytest.raises(ValueError):
        state.absorb(FetchResult([Neighbourhood(anchor), Neighbourhood(anchor)], 1, 0))


def test_known_nodes_are_all_but_hits_without_a_vector() -> None:
    first, second = text_node("h1"), text_node("h2")
    state = session(first, second)
    state.nodes = {n: text_node(n) for n in ("h1", "h2", "n1", "n2")}
    state.vectors = {"h2": [1.0, 0.0], "n1": [0.0, 1.0]}
    assert set(state.known()) == {"h2", "n1", "n2"}


def test_a_session_window_holds_the_hit_and_its_neighbours_with_the_hit_score() -> None:
    nodes = sentence_nodes()
    found = hits(nodes, "In 1901")
    vector = EMBED.get_query_embedding("storm")
    state = WindowSession(found, vector, limits=LIMITS, layout=NodeLayout(), max_hole=1)
    store = DocstoreNeighbourStore(docstore_of(nodes))
    requests = state.requests()
    fetched = drive(
        store.fetching(requests, light=True, known=state.known(), anchor_vectors=False), run_call
    )
    state.absorb(fetched)
    state.grow()
    piece, size, _ = state.windows[0]
    assert size == 3
    hit_id = found[0].node.node_id
    assert sorted((m.node.node_id == hit_id, m.role) for m in piece.members.values()) == [
        (False, "neighbour"), (False, "neighbour"), (True, "hit")
    ]  # fmt: skip
    assert [m.score for m in piece.members.values()] == [0.5, 0.5, 0.5]
    assert piece.members[hit_id].node is found[0].node


def cosine(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_window_record_through_the_postprocessor(mode: str) -> None:
    nodes = sentence_nodes()
    found = hits(nodes, "In 1901", "After the storm")
    for hit in found:  # the hits as the caller holds them: not the stored text
        hit.node.set_content(hit.node.get_content() + " [as retrieved]")
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(nodes), embed_model=EMBED, min_sim=-1.0, prune_sim=0.99,
        max_expand_steps=2, max_hole=0, drift_patience=100,
    )  # fmt: skip
    bundle = QueryBundle("storm and pier", embedding=EMBED.get_query_embedding("storm and pier"))
    if mode == "sync":
        output = post.postprocess_nodes(found, bundle)
    else:
        output = asyncio.run(post.apostprocess_nodes(found, bundle))
    (result,) = output
    assert result.node.get_content().count("[as retrieved]") == 2
    trace = get_trace(result.node, "drift_window")
    vectors = {n.node_id: n.embedding for n in nodes}
    hit_ids = [h.node.node_id for h in found]

    def similarity(node_id: str) -> float:
        return round(cosine(bundle.embedding, vectors[node_id]), 4)

    records = trace["records"]
    # each hit is the other's neighbour: its vector, hence its similarity, is known
    assert [r["anchor_similarity"] for r in records] == [similarity(i) for i in hit_ids]
    assert any(round(cosine(bundle.embedding, vectors[i]), 5) != similarity(i) for i in hit_ids)
    for record in records:
        assert record["pruned"], "prune_sim=0.99 prunes the neighbours"
        for unit in record["pruned"]:
            assert unit == {"id": unit["id"], "similarity": similarity(unit["id"])}
        for step in record["added"]:
            assert "index" not in step and step["id"] in vectors
    roles = {m["id"]: m["role"] for m in trace["members"]}
    assert {i: roles[i] for i in hit_ids} == dict.fromkeys(hit_ids, "hit")
    assert set(roles.values()) <= {"hit", "neighbour"}


def test_rows_are_summed_over_the_rounds_and_known_nodes_not_fetched_again() -> None:
    from llama_index.core import Document

    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser

    text = " ".join(f"Sentence {i} talks about harbours." for i in range(30))
    parser = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1)
    long_nodes = parser.get_nodes_from_documents([Document(text=text, id_="long")])
    bundle = QueryBundle("harbours", embedding=EMBED.get_query_embedding("harbours"))
    for embedded in (True, False):  # stored vectors, or none (embedded at query time)
        for node in long_nodes:
            node.embedding = EMBED.get_text_embedding(node.get_content()) if embedded else None
        post = DriftAwareWindowPostprocessor(
            docstore=docstore_of(long_nodes), embed_model=EMBED, min_sim=-1.0, prune_sim=-1.0,
            drift_patience=100,
        )  # fmt: skip
        output = post.postprocess_nodes(hits(long_nodes, "Sentence 15 "), bundle)
        trace = get_trace(output[0].node, "drift_window")
        # three rounds of 4 + 4, 4 + 4 and 2 + 2 neighbours: each row read once
        assert (trace["round_trips"], trace["rows_read"], trace["fetched"]) == (3, 20, 21)
        assert trace["embedded_units"] == (0 if embedded else 20)
    assert by_text(long_nodes, "Sentence 15 ").node_id in {n.node_id for n in long_nodes}


def test_cues_come_from_the_annotation_when_stored() -> None:
    from llama_index_ext_advrag.layout import UNIT_CUES_KEY
    from llama_index_ext_advrag.text import extract_cues

    state = session(text_node("h"))
    annotated = TextNode(text="Velmar harbour", id_="a", metadata={UNIT_CUES_KEY: ["zeppelin"]})
    plain = TextNode(text="Velmar harbour", id_="p")
    assert state.cues_of(annotated) == frozenset({"zeppelin"})
    assert state.cues_of(plain) == extract_cues("Velmar harbour") != frozenset({"zeppelin"})
