"""The second hop's pure logic (retrievers/_hops.py) beyond test_second_hop.py: which entity cues
a passage adds and in what order, the cue cut to ``max_cues`` in the hop-2 query, and newcomers
merged by fused score (kills the module's mutants those tests leave)."""

from __future__ import annotations

from llama_index.core.schema import TextNode

from llama_index_ext_advrag.layout import UNIT_CUES_KEY
from llama_index_ext_advrag.retrievers._hops import (
    HopCue,
    HopQuery,
    hop_queries,
    merge_hops,
    new_entity_cues,
)
from llama_index_ext_advrag.retrievers.fusion import FusedHit


def test_cues_come_from_the_text_alone_not_its_metadata() -> None:
    node = TextNode(text="The pump runs at 3.5 bar near Oslo.", metadata={"title": "Ferro Works"})
    assert new_entity_cues(node, "What pressure?", 5) == ["3.5", "oslo"]


def test_a_cue_the_question_holds_even_inside_a_word_is_left_out() -> None:
    node = TextNode(text="Each pump of Ferro leaks.", metadata={UNIT_CUES_KEY: ["pump", "Ferro"]})
    assert new_entity_cues(node, "Do the pumps leak?", 5) == ["ferro"]


def test_cues_follow_their_first_place_in_the_passage_and_absent_ones_go_last() -> None:
    text = "Alpha met Beta, then Alpha left."
    node = TextNode(text=text, metadata={UNIT_CUES_KEY: ["Zulu", "beta", "alpha"]})
    assert new_entity_cues(node, "Who met?", 5) == ["alpha", "beta", "zulu"]
    assert new_entity_cues(node, "Who met?", 2) == ["alpha", "beta"]


def test_hop_queries_carry_their_cue_cut_to_max_cues() -> None:
    seeds = [
        TextNode(id_="s1", text="Alpha met Beta.", metadata={UNIT_CUES_KEY: ["alpha", "beta"]}),
        TextNode(id_="s2", text="Gamma.", metadata={UNIT_CUES_KEY: ["gamma"]}),
    ]
    queries, skipped = hop_queries("Who met?", seeds, HopCue.ENTITIES, 32, 1)
    assert queries == [
        HopQuery("hop2:1", "s1", "alpha", "Who met? alpha"),
        HopQuery("hop2:2", "s2", "gamma", "Who met? gamma"),
    ]
    assert skipped == []


def test_newcomers_enter_by_fused_score_not_by_id() -> None:
    hits = [FusedHit("a", 0.5, (1, None), (0.5, None)), FusedHit("x", 0.1, (None, 2), (None, 0.1)),
            FusedHit("y", 0.3, (None, 1), (None, 0.3)), FusedHit("b", 0.05, (2, None), (0.05, None))]  # fmt: skip
    assert [h.node_id for h in merge_hops(["a", "b"], hits, 1, 4)] == ["a", "y", "x", "b"]
    assert [h.node_id for h in merge_hops(["a", "b"], hits, 1, 2)] == ["a", "y"]
