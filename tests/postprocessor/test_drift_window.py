"""DriftAwareWindowPostprocessor: window growth, pruning, merging, conversation limits."""

from __future__ import annotations

import asyncio
import copy

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.schema import NodeWithScore, QueryBundle
from postprocessor._corpus import docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.postprocessor import DriftAwareWindowPostprocessor, drift_window
from llama_index_ext_advrag.postprocessor.calibration import BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM
from llama_index_ext_advrag.postprocessor.drift_window import (
    GrowthLimits,
    StopReason,
    WindowUnit,
    grow_window,
    prune_window,
    window_change_limits,
)
from llama_index_ext_advrag.trace import get_trace

EMBED = HashEmbedding(dim=64)


def limits(**overrides) -> GrowthLimits:
    values = {"min_sim": 0.3, "max_window_tokens": 1000, "max_expand_steps": 10,
              "drift_patience": 2, "drift_overlap": 0.2}  # fmt: skip
    return GrowthLimits(**{**values, **overrides})


def units(*sims: float, tokens: int = 10, sections=None) -> list[WindowUnit]:
    sections = sections or [None] * len(sims)
    return [WindowUnit(s, tokens, sec) for s, sec in zip(sims, sections, strict=True)]


def no_cues(index: int) -> frozenset[str]:
    return frozenset()


# --- growth maths, by hand ----------------------------------------------------------------------


def test_grows_towards_the_more_similar_side_until_below_min_sim() -> None:
    growth = grow_window(units(0.1, 0.5, 0.9, 0.6, 0.2), 2, limits(), no_cues)
    assert [(s["index"], s["side"]) for s in growth.added] == [(3, "right"), (1, "left")]
    assert (growth.left, growth.right, growth.stop) == (1, 3, StopReason.BELOW_MIN_SIM)


def test_a_side_closes_when_its_similarity_falls_two_steps_in_a_row() -> None:
    sims = units(0.2, 0.3, 0.4, 0.9, 0.8, 0.7, 0.6, 0.5)
    growth = grow_window(sims, 3, limits(min_sim=0.1), no_cues)
    assert [s["similarity"] for s in growth.added] == [0.8, 0.7, 0.4, 0.3]
    assert (growth.left, growth.right, growth.stop) == (1, 5, StopReason.DECLINING_SIMILARITY)
    assert growth.sides == {"right": "declining_similarity", "left": "declining_similarity"}
    # a candidate at or above prune_sim pays for itself: it is not a "decline"
    paying = grow_window(sims, 3, limits(min_sim=0.1, prune_sim=0.55), no_cues)
    assert (paying.left, paying.right) == (1, 6)


def test_token_budget_and_step_budget() -> None:
    sims = units(0.8, 0.8, 0.9, 0.8, 0.8)
    by_tokens = [WindowUnit(0.8, 10), WindowUnit(0.8, 10), WindowUnit(0.9, 50),
                 WindowUnit(0.8, 10), WindowUnit(0.8, 10)]  # fmt: skip
    growth = grow_window(by_tokens, 2, limits(max_window_tokens=75), no_cues)
    assert (growth.right - growth.left + 1, growth.stop) == (3, StopReason.MAX_WINDOW_TOKENS)
    growth = grow_window(sims, 2, limits(max_expand_steps=1), no_cues)
    assert (growth.left, growth.right, growth.stop) == (2, 3, StopReason.MAX_EXPAND_STEPS)
    growth = grow_window(sims, 2, limits(max_expand_steps=0), no_cues)
    assert (growth.left, growth.right) == (2, 2)


def test_never_crosses_a_section_boundary_and_reports_edges() -> None:
    sectioned = units(0.9, 0.8, 0.9, 0.8, 0.9, sections=["A", "B", "B", "B", "C"])
    growth = grow_window(sectioned, 2, limits(), no_cues)
    assert (growth.left, growth.right, growth.stop) == (1, 3, StopReason.SECTION_BOUNDARY)
    growth = grow_window(units(0.8, 0.9, 0.8), 1, limits(), no_cues)
    assert (growth.left, growth.right, growth.stop) == (0, 2, StopReason.DOCUMENT_EDGE)


def test_topic_drift_after_patience_and_cue_less_sentences_are_neutral() -> None:
    cues = [frozenset(), frozenset({"pier"}), frozenset({"bakery"}), frozenset(),
            frozenset({"cake"}), frozenset({"rye"})]  # fmt: skip
    sims = units(0.1, 0.9, 0.6, 0.7, 0.8, 0.5)  # rising: no "declining" stop
    growth = grow_window(sims, 1, limits(min_sim=0.2), cues.__getitem__)
    # idx2 drifts (run 1), idx3 has no cues (neutral), idx4 drifts (run 2): stop before idx4.
    assert [s["cue_overlap"] for s in growth.added] == [0.0, None]
    assert (growth.left, growth.right, growth.stop) == (1, 3, StopReason.TOPIC_DRIFT)
    patient = grow_window(sims, 1, limits(min_sim=0.2, drift_patience=3), cues.__getitem__)
    assert patient.right == 4 and patient.stop is StopReason.TOPIC_DRIFT
    # idx4 (0.8) pays for itself: the drift run restarts and growth goes on to the edge
    paying = grow_window(sims, 1, limits(min_sim=0.2, prune_sim=0.75), cues.__getitem__)
    assert (paying.right, paying.stop) == (5, StopReason.BELOW_MIN_SIM)


def test_conversation_limits_override_soft_stops_only() -> None:
    growth = grow_window(
        units(0.1, 0.2, 0.9, 0.1, 0.1), 2, limits(min_sim=0.95, min_units=3), no_cues
    )
    assert growth.right - growth.left + 1 == 3 and growth.stop is StopReason.BELOW_MIN_SIM
    growth = grow_window(units(0.9, 0.9, 0.9, 0.9), 1, limits(max_units=2), no_cues)
    assert (growth.left, growth.right, growth.stop) == (1, 2, StopReason.MAX_WINDOW_CHANGE)
    assert window_change_limits(None, 2) == (1, None)
    assert window_change_limits(5, None) == (1, None)
    assert window_change_limits(5, 2) == (3, 7)
    assert window_change_limits(2, 4) == (1, 6)


def test_prune_keeps_anchor_and_reading_order() -> None:
    window = units(0.5, 0.1, 0.2, 0.6, 0.7)
    growth = grow_window(window, 2, limits(min_sim=0.0), no_cues)
    assert (growth.left, growth.right) == (0, 4)
    assert prune_window(window, growth, 2, prune_sim=0.55) == ([2, 3, 4], [0, 1])
    assert prune_window(window, growth, 2, prune_sim=0.55, min_units=4) == ([0, 2, 3, 4], [1])
    assert prune_window(window, growth, 2, prune_sim=0.99) == ([2], [0, 1, 3, 4])


# --- the postprocessor --------------------------------------------------------------------------


@pytest.fixture
def nodes():
    return sentence_nodes()


@pytest.fixture
def docstore(nodes):
    return docstore_of(nodes)


def query(text: str) -> QueryBundle:
    return QueryBundle(text, embedding=EMBED.get_query_embedding(text))


class ForbiddenEmbedding(HashEmbedding):
    """Fails if anything is embedded: the stored vectors and the bundle's must be used."""

    def _get_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("the query was embedded again")

    def _get_text_embedding(self, text: str) -> list[float]:
        raise AssertionError("a stored sentence was embedded again")


class CountingEmbedding(HashEmbedding):
    texts: int = 0

    def _get_text_embedding(self, text: str) -> list[float]:
        self.texts += 1
        return super()._get_text_embedding(text)


def window(store_kwargs, **kwargs) -> DriftAwareWindowPostprocessor:
    values = {"embed_model": ForbiddenEmbedding(dim=64), "min_sim": 0.1, "prune_sim": 0.2}
    return DriftAwareWindowPostprocessor(**store_kwargs, **{**values, **kwargs})


def texts(results: list[NodeWithScore]) -> list[str]:
    return [r.node.get_content() for r in results]


def test_defaults_are_the_calibrated_thresholds_of_the_default_model(docstore) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore)
    assert (post.min_sim, post.prune_sim) == (None, None)  # the model's calibrated values
    assert post.thresholds() == (BGE_SMALL_MIN_SIM, BGE_SMALL_PRUNE_SIM, "bge-small-en")
    assert (post.max_expand_steps, post.drift_patience, post.max_window_change) == (12, 3, None)
    assert post.max_hole == 1
    assert post.max_window_tokens == 768
    assert post.class_name() == "DriftAwareWindowPostprocessor"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"min_sim": 1.5}, "min_sim"), ({"max_expand_steps": -1}, "max_expand_steps"),
     ({"drift_patience": 0}, "drift_patience"), ({"max_window_tokens": 0}, "max_window_tokens"),
     ({"max_window_change": -1}, "max_window_change")],
)  # fmt: skip
def test_invalid_arguments_name_the_field(docstore, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        DriftAwareWindowPostprocessor(docstore=docstore, **kwargs)


def test_empty_input_and_missing_query(docstore, nodes) -> None:
    post = window({"docstore": docstore})
    assert post.postprocess_nodes([], query("pier")) == []
    with pytest.raises(ValueError, match="needs the query"):
        post.postprocess_nodes(hits(nodes, "In 1901"))


def test_window_grows_along_the_topic_and_traces_every_decision(docstore, nodes) -> None:
    post = window({"docstore": docstore})
    results = hits(nodes, "In 1901")
    before = copy.deepcopy([(r.node.get_content(), r.node.metadata) for r in results])
    output = post.postprocess_nodes(
        results, query("the storm destroyed the pier, rebuilt in granite")
    )
    assert [(r.node.get_content(), r.node.metadata) for r in results] == before
    assert len(output) == 1
    text = output[0].get_content()
    assert "In 1901 a storm destroyed the northern pier." in text
    assert "After the storm the town rebuilt the pier in granite." in text
    assert "bakery" not in text  # another section
    trace = get_trace(output[0].node, "drift_window")
    assert trace["query_embedded"] is False and trace["embedded_units"] == 0
    assert trace["round_trips"] == 1
    (record,) = trace["records"]
    assert record["anchor"] == results[0].node.node_id
    assert record["stop"] == "below_min_sim"
    # every neighbour added was either kept (a member) or pruned, never both
    added = {a["id"] for a in record["added"]}
    pruned = {p["id"] for p in record["pruned"]}
    neighbours = {m["id"] for m in trace["members"] if m["role"] != "hit"}
    assert added == neighbours | pruned and not neighbours & pruned
    assert neighbours and pruned
    assert record["units"] == len(trace["members"]) == len(neighbours) + 1


def test_overlapping_windows_merge_and_the_anchor_survives_pruning(docstore, nodes) -> None:
    post = window({"docstore": docstore}, min_sim=-1.0, prune_sim=1.0)
    output = post.postprocess_nodes(hits(nodes, "In 1901", "After the storm"), query("pier"))
    assert texts(output) == [
        "In 1901 a storm destroyed the northern pier. After the storm the town rebuilt the pier "
        "in granite."
    ]
    trace = get_trace(output[0].node, "drift_window")
    assert len(trace["records"]) == 2 and all(r["pruned"] for r in trace["records"])
    # nothing stops growth but the section's end (right) and the document's start (left)
    assert [r["stop"] for r in trace["records"]] == ["document_edge"] * 2
    assert all(
        r["sides"] == {"right": "section_boundary", "left": "document_edge"}
        for r in trace["records"]
    )


def test_query_and_missing_vectors_are_embedded_once(nodes) -> None:
    bare = sentence_nodes(embed=False)
    model = CountingEmbedding(dim=64)
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(bare), embed_model=model)
    output = post.postprocess_nodes(hits(bare, "In 1901"), query_str="storm and pier")
    trace = get_trace(output[0].node, "drift_window")
    assert trace["query_embedded"] is True
    # the first fetch: 4 nodes each side; growth stopped before that edge. The hit itself is
    # not embedded: its similarity decides nothing (it is always kept).
    assert trace["embedded_units"] == model.texts == 8
    assert trace["round_trips"] == 1
    assert trace["records"][0]["anchor_similarity"] is None


def test_a_hit_that_is_another_hits_neighbour_gets_its_similarity(nodes) -> None:
    bare = sentence_nodes(embed=False)
    model = CountingEmbedding(dim=64)
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(bare), embed_model=model, min_sim=-1.0, prune_sim=-1.0
    )
    output = post.postprocess_nodes(
        hits(bare, "In 1901", "After the storm"), query_str="storm and pier"
    )
    records = get_trace(output[0].node, "drift_window")["records"]
    second_hit = hits(bare, "After the storm")[0].node.node_id
    added = {step["id"]: step["similarity"] for r in records for step in r["added"]}
    assert isinstance(added[second_hit], float)  # embedded as a neighbour, not left unknown
    assert all(isinstance(similarity, float) for similarity in added.values())


def test_default_embed_model_is_resolved_once_per_postprocessor(nodes, spy) -> None:
    resolved = spy(
        drift_window,
        "resolve_embed_model",
        record=lambda explicit: explicit,
        returns=HashEmbedding(dim=64),
    )
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(sentence_nodes(embed=False)))
    assert resolved == []  # never in __init__
    for question in ("storm and pier", "In 1901"):
        post.postprocess_nodes(hits(nodes, "In 1901"), query_str=question)
    asyncio.run(post.apostprocess_nodes(hits(nodes, "In 1901"), query_str="storm"))
    assert resolved == [None]


def test_windows_reaching_the_fetch_edge_are_fetched_wider_on_that_side_only(monkeypatch) -> None:
    from llama_index.core import Document

    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
    from llama_index_ext_advrag.postprocessor import _window_session

    text = " ".join(f"Sentence {i} talks about harbours." for i in range(30))
    long_nodes = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        [Document(text=text, id_="long")]
    )
    for node in long_nodes:
        node.embedding = EMBED.get_text_embedding(node.get_content())
    docstore = docstore_of(long_nodes)
    post = window({"docstore": docstore}, min_sim=-1.0, prune_sim=-1.0, drift_patience=100)
    results = hits(long_nodes, "Sentence 15 ")
    staged = post.postprocess_nodes(results, query("harbours"))
    trace = get_trace(staged[0].node, "drift_window")
    # 4 each side, then 4 more on each side that ran out, then the last 4: 12 steps in all
    assert trace["round_trips"] == 3 and trace["records"][0]["stop"] == "max_expand_steps"
    # 12 steps spread over both sides: 21 rows, not the 25 (hit + 12 each side) of a wide fetch
    assert trace["fetched"] == 21
    monkeypatch.setattr(_window_session, "FIRST_FETCH_STEPS", 12)
    one_shot = post.postprocess_nodes(results, query("harbours"))
    assert texts(one_shot) == texts(staged)
    assert get_trace(one_shot[0].node, "drift_window")["round_trips"] == 1
    assert get_trace(one_shot[0].node, "drift_window")["fetched"] == 25
    # near the document's start the left side ends for good: only the right side is widened
    monkeypatch.setattr(_window_session, "FIRST_FETCH_STEPS", 4)
    early = post.postprocess_nodes(hits(long_nodes, "Sentence 2 "), query("harbours"))
    early_trace = get_trace(early[0].node, "drift_window")
    assert early_trace["fetched"] == 1 + 2 + 12  # sentences 0-1 before, 3-14 after (4+4+4)
    assert early_trace["records"][0]["sides"].get("left") == "document_edge"


def test_max_window_change_limits_the_jump_between_turns(docstore, nodes) -> None:
    post = window({"docstore": docstore}, min_sim=-1.0, prune_sim=-1.0, max_window_change=1)
    first = post.postprocess_nodes(hits(nodes, "The harbour master"), query("pier"))
    wide = get_trace(first[0].node, "drift_window")["records"][0]["units"]
    assert wide == 7  # the whole first section: its heading and six sentences
    post.min_sim, post.prune_sim = 0.99, 0.99
    second = post.postprocess_nodes(hits(nodes, "The harbour master"), query("pier"))
    assert get_trace(second[0].node, "drift_window")["records"][0]["units"] == wide - 1
    post.reset_conversation()
    third = post.postprocess_nodes(hits(nodes, "The harbour master"), query("pier"))
    assert get_trace(third[0].node, "drift_window")["records"][0]["units"] == 1


def test_sync_and_async_agree(docstore, nodes) -> None:
    post = window({"docstore": docstore})
    results = hits(nodes, "After the storm", "Its lamp", "The bakery sells")
    bundle = query("granite pier and almond cakes")
    sync = post.postprocess_nodes(results, bundle)
    async_ = asyncio.run(post.apostprocess_nodes(results, bundle))
    assert texts(sync) == texts(async_)
    assert [get_trace(r.node, "drift_window") for r in sync] == [
        get_trace(r.node, "drift_window") for r in async_
    ]


def test_to_dict_round_trip(docstore) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore, min_sim=0.2, max_window_change=2)
    data = post.to_dict()
    assert "docstore" not in data and "embed_model" not in data
    restored = DriftAwareWindowPostprocessor.from_dict(data, docstore=docstore)
    assert (restored.min_sim, restored.max_window_change) == (0.2, 2)
    assert restored.layout == post.layout


def test_milvus_vectors_are_used_and_fetched_in_one_query(
    milvus_uri, collection_name, nodes
) -> None:
    from llama_index_ext_advrag.milvus import flush, open_vector_store

    vector_store = open_vector_store(milvus_uri, collection_name, dim=64)
    try:
        vector_store.add(nodes)
        flush(vector_store)
        results = hits(nodes, "After the storm", "Its lamp", "In 1901")
        bundle = query("storm pier granite lamp")
        from_milvus = window({"vector_store": vector_store})
        output = from_milvus.postprocess_nodes(results, bundle)
        assert texts(output) == texts(
            window({"docstore": docstore_of(nodes)}).postprocess_nodes(results, bundle)
        )
        trace = get_trace(output[0].node, "drift_window")
        assert trace["round_trips"] == 1 and trace["embedded_units"] == 0
        assert texts(asyncio.run(from_milvus.apostprocess_nodes(results, bundle))) == texts(output)
    finally:
        vector_store.client.drop_collection(collection_name)


# --- rules that must show at the postprocessor level (issue 20) ---------------------------------


def test_max_hole_keeps_short_gaps_between_kept_units() -> None:
    # anchor 0; 1 is a one-unit hole, 3-4 a two-unit hole before the kept 5
    window = units(0.6, 0.1, 0.7, 0.1, 0.1, 0.8)
    growth = grow_window(window, 0, limits(min_sim=0.0), no_cues)
    assert (growth.left, growth.right, growth.stop) == (0, 5, StopReason.DOCUMENT_EDGE)
    assert prune_window(window, growth, 0, prune_sim=0.5) == ([0, 2, 5], [1, 3, 4])
    assert prune_window(window, growth, 0, prune_sim=0.5, max_hole=1) == ([0, 1, 2, 5], [3, 4])
    assert prune_window(window, growth, 0, prune_sim=0.5, max_hole=2) == (list(range(6)), [])
    # a gap at the window's edge is no hole: nothing kept beyond it
    edge = units(0.9, 0.1, 0.1)
    edge_growth = grow_window(edge, 0, limits(min_sim=0.0), no_cues)
    assert prune_window(edge, edge_growth, 0, prune_sim=0.5, max_hole=3) == ([0], [1, 2])


def controlled_nodes(sentences: list[str], sims: list[float], doc_id: str = "ctl"):
    """One node per sentence whose stored vector has cosine ``sims[i]`` to ``CONTROL_QUERY``."""
    from llama_index.core import Document

    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser

    parser = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1)
    built = parser.get_nodes_from_documents([Document(text=" ".join(sentences), id_=doc_id)])
    assert [n.get_content() for n in built] == sentences
    for node, sim in zip(built, sims, strict=True):
        node.embedding = [sim, (1.0 - sim * sim) ** 0.5]
    return built


CONTROL_QUERY = QueryBundle("controlled", embedding=[1.0, 0.0])


def controlled_window(nodes, **kwargs) -> DriftAwareWindowPostprocessor:
    values = {"embed_model": ForbiddenEmbedding(dim=2), "min_sim": 0.05, "drift_patience": 100}
    return DriftAwareWindowPostprocessor(docstore=docstore_of(nodes), **{**values, **kwargs})


def test_postprocessor_fills_a_one_sentence_hole_only_with_max_hole() -> None:
    sentences = [f"Sentence {word} is here." for word in ("alpha", "beta", "gamma", "delta")]
    nodes = controlled_nodes(sentences, [0.9, 0.1, 0.8, 0.1])
    results = hits(nodes, "Sentence alpha")
    filled = controlled_window(nodes, prune_sim=0.5, max_hole=1).postprocess_nodes(
        results, CONTROL_QUERY
    )
    assert texts(filled) == [" ".join(sentences[:3])]
    record = get_trace(filled[0].node, "drift_window")["records"][0]
    assert [p["id"] for p in record["pruned"]] == [nodes[3].node_id]
    cut = controlled_window(nodes, prune_sim=0.5, max_hole=0).postprocess_nodes(
        results, CONTROL_QUERY
    )
    assert "beta" not in " ".join(texts(cut)) and "gamma" in " ".join(texts(cut))
    record = get_trace(cut[0].node, "drift_window")["records"][0]
    assert [p["id"] for p in record["pruned"]] == [nodes[1].node_id, nodes[3].node_id]


def test_postprocessor_stops_at_the_token_budget() -> None:
    from llama_index_ext_advrag.text import count_tokens

    sentences = [f"Sentence number {word} talks about harbours." for word in
                 ("one", "two", "three", "four", "five", "six", "seven")]  # fmt: skip
    nodes = controlled_nodes(sentences, [0.5] * 7)
    sizes = [count_tokens(s) for s in sentences]
    budget = sizes[3] + sizes[4] + sizes[5]  # the hit and two more (equal similarities: right)
    post = controlled_window(nodes, prune_sim=-1.0, max_window_tokens=budget)
    output = post.postprocess_nodes(hits(nodes, "Sentence number four"), CONTROL_QUERY)
    record = get_trace(output[0].node, "drift_window")["records"][0]
    assert record["stop"] == "max_window_tokens"
    assert (record["units"], record["tokens"]) == (3, budget)
    assert texts(output) == [" ".join(sentences[3:6])]
    wide = controlled_window(nodes, prune_sim=-1.0, max_window_tokens=budget + sizes[6])
    wider = wide.postprocess_nodes(hits(nodes, "Sentence number four"), CONTROL_QUERY)
    record = get_trace(wider[0].node, "drift_window")["records"][0]
    assert (record["stop"], record["units"]) == ("max_window_tokens", 4)
    assert texts(wider) == [" ".join(sentences[3:7])]
    # without a budget in the way the window reaches the document's edges
    free = controlled_window(nodes, prune_sim=-1.0).postprocess_nodes(
        hits(nodes, "Sentence number four"), CONTROL_QUERY
    )
    assert get_trace(free[0].node, "drift_window")["records"][0]["stop"] == "document_edge"
    assert texts(free) == [" ".join(sentences)]


def test_postprocessor_stops_on_topic_drift_after_patience() -> None:
    years = ["1801", "1802", "1803", "1901", "1905", "1906", "1907"]
    drifting = [f"The report concerns the year {year}." for year in years]
    nodes = controlled_nodes(drifting, [0.5] * 7)
    # nothing pays (prune_sim above every similarity), so each new year is a drift
    post = controlled_window(nodes, prune_sim=0.9, drift_patience=2)
    output = post.postprocess_nodes(hits(nodes, "The report concerns the year 1901"), CONTROL_QUERY)
    record = get_trace(output[0].node, "drift_window")["records"][0]
    assert record["stop"] == "topic_drift"
    # ties go right: 1905 drifts (run 1), then 1906 would be the second drift in a row
    assert [a["id"] for a in record["added"]] == [nodes[4].node_id]
    assert [a["cue_overlap"] for a in record["added"]] == [0.0]
    # the same similarities with one shared topic: no drift, growth runs to the edges
    shared = [f"The report of {year} concerns the year 1901." for year in years]
    same_topic = controlled_nodes(shared, [0.5] * 7, doc_id="shared")
    post = controlled_window(same_topic, prune_sim=0.9, drift_patience=2)
    output = post.postprocess_nodes(hits(same_topic, "The report of 1901"), CONTROL_QUERY)
    record = get_trace(output[0].node, "drift_window")["records"][0]
    assert record["stop"] == "document_edge" and len(record["added"]) == 6


def test_async_widens_the_fetch_like_sync() -> None:
    from llama_index.core import Document

    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser

    text = " ".join(f"Sentence {i} talks about harbours." for i in range(30))
    long_nodes = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        [Document(text=text, id_="long")]
    )
    for node in long_nodes:
        node.embedding = EMBED.get_text_embedding(node.get_content())
    post = window(
        {"docstore": docstore_of(long_nodes)}, min_sim=-1.0, prune_sim=-1.0, drift_patience=100
    )
    results = hits(long_nodes, "Sentence 15 ")
    staged = asyncio.run(post.apostprocess_nodes(results, query("harbours")))
    trace = get_trace(staged[0].node, "drift_window")
    assert trace["round_trips"] == 3 and trace["fetched"] == 21
    assert trace["records"][0]["stop"] == "max_expand_steps"
    assert len(trace["records"][0]["added"]) == 12
    sync = post.postprocess_nodes(results, query("harbours"))
    assert texts(staged) == texts(sync)
    assert get_trace(sync[0].node, "drift_window") == trace


# --- mutation-testing kills (issue 20) --------------------------------------------------------


def test_drift_overlap_at_the_threshold_is_no_drift_and_a_match_resets_the_run() -> None:
    a, ab, ac, xy, z = (frozenset(s) for s in ({"a"}, {"a", "b"}, {"a", "c"}, {"x", "y"}, {"z"}))
    # window {a, b}; candidate {a, c} overlaps exactly 0.5: at the threshold, not below it
    cues = [ab, ac, frozenset()].__getitem__
    growth = grow_window(units(0.9, 0.8, 0.7), 0, limits(drift_patience=1, drift_overlap=0.5), cues)
    assert (growth.right, growth.stop) == (2, StopReason.DOCUMENT_EDGE)
    # drift, match (run back to 0), drift: two drifts, never two in a row
    cues = [a, xy, a, z, frozenset()].__getitem__
    growth = grow_window(units(0.9, 0.8, 0.8, 0.8, 0.8), 0, limits(drift_patience=2), cues)
    assert (growth.right, growth.stop) == (4, StopReason.DOCUMENT_EDGE)


def test_a_closed_side_leaves_the_other_side_growing() -> None:
    growth = grow_window(units(0.9, 0.8, 0.8, 0.8), 0, limits(min_sim=0.0), no_cues)
    assert (growth.left, growth.right) == (0, 3)
    assert growth.sides == {"left": "document_edge", "right": "document_edge"}


def test_prune_keeps_units_at_prune_sim_and_restores_the_best_ones() -> None:
    window = units(0.9, 0.5, 0.3, 0.1, 0.4)
    growth = grow_window(window, 0, limits(min_sim=0.0, prune_sim=0.0), no_cues)  # no decline
    assert (growth.left, growth.right) == (0, 4)
    assert prune_window(window, growth, 0, prune_sim=0.5) == ([0, 1], [2, 3, 4])
    # below min_units the most similar dropped units come back (0.4, then 0.3), not the first
    assert prune_window(window, growth, 0, prune_sim=0.5, min_units=3) == ([0, 1, 4], [2, 3])
    assert prune_window(window, growth, 0, prune_sim=0.5, min_units=4) == ([0, 1, 2, 4], [3])


def test_lazy_units_read_stored_tokens_and_memoise_only_known_similarities() -> None:
    from llama_index.core.schema import TextNode

    from llama_index_ext_advrag.layout import NodeLayout, locate_all
    from llama_index_ext_advrag.postprocessor._growth import LazyUnits

    nodes = sentence_nodes(embed=False)[:2]
    nodes[0] = TextNode(id_="annotated", text="Some words here.", metadata={"unit_tokens": 99})
    locations = locate_all(nodes, NodeLayout())
    memo: dict = {}
    first = LazyUnits(nodes, {nodes[0].node_id: 0.5}, locations, memo)
    assert first[0].tokens == 99  # the annotated count, not a recount
    assert str(first[1].similarity) == "nan" and nodes[1].node_id not in memo
    # the vector arrived later: a new view sees it, the unknown was not memoised
    later = LazyUnits(nodes, {nodes[0].node_id: 0.5, nodes[1].node_id: 0.7}, locations, memo)
    assert later[1].similarity == 0.7 and memo[nodes[1].node_id].similarity == 0.7
