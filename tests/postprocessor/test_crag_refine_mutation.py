"""CRAG's strip selection by hand: a score equal to the threshold keeps its strip, an unknown
score ranks like a perfect one (not above it), under a budget each passage's best strip goes
first and best first, then the others best first, and the result is in reading order whatever
the input order (kills the mutants of postprocessor/crag_refine.py that test_crag*.py leave)."""

from __future__ import annotations

from llama_index_ext_advrag.postprocessor.crag_refine import Strip, select_strips


def strips(*passages: int) -> list[Strip]:
    position: dict[int, int] = {}
    out = []
    for passage in passages:
        position[passage] = position.get(passage, -1) + 1
        out.append(Strip(passage, position[passage], 0, 1, "x", 10))
    return out


def test_a_score_at_the_threshold_is_kept() -> None:
    assert select_strips(strips(0, 0), [0.5, 0.6], 0.5) == [0, 1]


def test_an_unknown_score_ranks_like_a_perfect_one_not_above_it() -> None:
    # two passages, room for one strip: the tie goes to the first
    assert select_strips(strips(0, 1), [1.0, None], 0.5, token_budget=10) == [0]
    assert select_strips(strips(0, 1), [None, 1.0], 0.5, token_budget=10) == [0]


def test_under_a_budget_the_best_passage_comes_first() -> None:
    assert select_strips(strips(0, 1), [0.6, 0.9], 0.5, token_budget=10) == [1]


def test_under_a_budget_the_other_strips_come_best_first() -> None:
    assert select_strips(strips(0, 0, 0), [0.9, 0.6, 0.8], 0.5, token_budget=20) == [0, 2]


def test_the_result_is_in_reading_order_whatever_the_input_order() -> None:
    given = [Strip(1, 0, 0, 1, "x", 10), Strip(0, 1, 0, 1, "x", 10), Strip(0, 0, 0, 1, "x", 10)]
    assert select_strips(given, [0.9, 0.9, 0.9], 0.5) == [2, 1, 0]
