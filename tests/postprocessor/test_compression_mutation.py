"""Compression's pure selection (postprocessor/_compression.py) with exact values: z-scores,
combined scores, spans, token estimates, and budgets that sit exactly on the edge of what the
greedy choice estimates and what the exact count then trims, with a character count so every
token is visible (kills the module's mutants that test_compression.py leaves)."""

from __future__ import annotations

import math

import pytest

from llama_index_ext_advrag.postprocessor._compression import (
    Candidate,
    assemble,
    candidates_of,
    combine_scores,
    cut_passages,
    estimate_tokens,
    select_within_budget,
    standardise,
)


def test_standardise_exact() -> None:
    assert standardise([0.0, 4.0]).tolist() == [-1.0, 1.0]  # std 2: divided, not multiplied
    assert standardise([1.0, 3.0, None]).tolist() == [-1.0, 1.0, -1.0]
    assert standardise([1.0, 3.0, math.inf, math.nan]).tolist() == [-1.0, 1.0, -1.0, -1.0]
    assert standardise([2.0, 2.0]).tolist() == [0.0, 0.0]
    assert standardise([None, None]).tolist() == [0.0, 0.0]
    assert standardise([5.0, None]).tolist() == [0.0, 0.0]


CANDIDATES = [Candidate(0, 0, 0, 1, "a"), Candidate(0, 1, 2, 3, "b"), Candidate(1, 0, 0, 1, "c")]


def test_combined_scores_weigh_each_signal() -> None:
    judge, cosine = [0.0, 1.0, 2.0], [2.0, 0.0, 1.0]
    z = math.sqrt(1.5)  # z-scores of (0, 1, 2): (-1.22, 0, 1.22)
    assert combine_scores(CANDIDATES, None, cosine, 1.0, 0.5, 0.0) == pytest.approx(
        [0.5 * z, -0.5 * z, 0.0]
    )
    assert combine_scores(CANDIDATES, judge, cosine, 1.0, 0.5, 0.0) == pytest.approx(
        [-z + 0.5 * z, -0.5 * z, z]
    )
    rank = [1 / math.sqrt(2)] * 2 + [-math.sqrt(2)]  # passages 0, 0, 1: earlier is higher
    assert combine_scores(CANDIDATES, judge, None, 1.0, 1.0, 2.0) == pytest.approx(
        [-z + 2 * rank[0], 2 * rank[1], z + 2 * rank[2]]
    )
    assert combine_scores(CANDIDATES, judge, None, 1.0, 1.0, 0.0) == pytest.approx([-z, 0.0, z])


def test_candidates_keep_their_offsets_and_spans_join_runs() -> None:
    sentences = cut_passages(["Aa. Bb. Cc.", "  "])
    assert candidates_of(sentences) == [
        Candidate(0, 0, 0, 3, "Aa."), Candidate(0, 1, 4, 7, "Bb."), Candidate(0, 2, 8, 11, "Cc.")
    ]  # fmt: skip
    assert assemble("Aa. Bb. Cc.", sentences[0], {0, 2}, " … ") == ("Aa. … Cc.", [(0, 3), (8, 11)])
    assert assemble("Aa. Bb. Cc.", sentences[0], {1, 2}, " … ") == ("Bb. Cc.", [(4, 11)])


def test_estimates_count_a_separator_between_runs() -> None:
    assert estimate_tokens([3, 4, 5], {0, 2}, 2) == 10
    assert estimate_tokens([3, 4, 5], {0, 1, 2}, 2) == 12
    assert estimate_tokens([3, 4, 5, 6], {0, 2}, 7) == 15


def select(texts: list[str], scores: list[float], budget: int, **kwargs: object) -> list[set[int]]:
    sentences = cut_passages(texts)
    chosen = select_within_budget(
        texts,
        sentences,
        candidates_of(sentences),
        scores,
        budget,
        int(kwargs.get("neighbours", 0)),  # type: ignore[call-overload]
        str(kwargs.get("separator", " … ")),
        kwargs.get("count", len),  # type: ignore[arg-type]
    )
    assert chosen.tokens <= budget
    return chosen.kept


def test_a_run_separator_is_counted_while_choosing() -> None:
    # {0, 2} costs 3 + 3 + 3 (" … ") = 9 > 8: the adjacent {0, 1} (6) is kept instead
    assert select(["Aa. Bb. Cc."], [3.0, 1.0, 2.0], 8) == [{0, 1}]
    # without a separator {0, 2} costs 6 and fits
    assert select(["Aa. Bb. Cc."], [3.0, 1.0, 2.0], 6, separator="") == [{0, 2}]


def test_a_new_passage_costs_its_blank_line_while_choosing() -> None:
    # "Cccc." would need 3 + 2 + 5 = 10 > 9: it is passed over, and "Ee." (3 + 2 + 3) fits
    texts = ["Aa.", "Cccc.", "Ee."]
    assert select(texts, [3.0, 2.0, 1.0], 9) == [{0}, set(), {0}]


def test_a_blank_line_is_counted_after_a_one_token_passage() -> None:
    def words(text: str) -> int:
        return len(text.split()) + text.count("\n\n")

    # a second passage costs 1 + 1 (its blank line) + 1 = 3 > 2; "Bb." joins "Aa." instead
    assert select(["Aa. Bb.", "Cc."], [3.0, 1.0, 2.0], 2, count=words) == [{0, 1}, set()]


def test_sentences_already_kept_are_skipped_not_the_end() -> None:
    scores = [1.0, 3.0, 2.0, 0.5]  # the best one keeps its neighbours; then the next passage
    assert select(["Aa. Bb. Cc.", "Dd."], scores, 100, neighbours=1) == [{0, 1, 2}, {0}]


def test_the_exact_count_drops_the_lowest_scored_then_the_later_one() -> None:
    # the spans hold the spaces the per-sentence estimate leaves out: 16 characters > 14
    assert select(["Aa. Bb.", "Cc. Dd."], [5.0, 1.0, 1.0, 5.0], 14) == [{0, 1}, {1}]
    # one passage: 11 > 9; of the two lowest-scored, the later sentence goes
    assert select(["Aa. Bb. Cc."], [5.0, 1.0, 1.0], 9) == [{0, 1}]
    # the lowest score goes first, whatever its place
    assert select(["Aa. Bb."], [1.0, 2.0], 6) == [{1}]


def test_standardise_within_three_groups_each_on_its_own_scale() -> None:
    from llama_index_ext_advrag.postprocessor._compression import standardise_within

    # with three sources, each group's z-scores come from its own members only (with two, the
    # members of the other group would give the same numbers)
    z = standardise_within(
        [1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 7.0], ["a", "a", "b", "b", "c", "c", "c"]
    )
    assert z.round(6).tolist()[:4] == [-1.0, 1.0, -1.0, 1.0]
    assert z[6] < z[4] < z[5]


def test_substitute_refuses_a_length_mismatch() -> None:
    from llama_index_ext_advrag.postprocessor._compression import substitute

    with pytest.raises(ValueError):
        substitute([0.1, 0.2, 0.3], [0, 1], [0.9], "e5")
