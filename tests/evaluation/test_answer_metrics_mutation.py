"""Answer metrics by hand: SQuAD's normalisation, fact recall's contiguous match, token F1's
precision and recall, the mean over answer groups, and the hallucination flag's three states
(kills the mutants of evaluation/answer_metrics.py)."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.evaluation.answer_metrics import (
    answer_sentences,
    answer_tokens,
    fact_recall,
    hallucinated,
    token_f1,
)


def test_normalisation() -> None:
    assert answer_tokens("An Apple, THE pear; a plum!") == ["apple", "pear", "plum"]
    assert answer_tokens("Straße «x» 3.5") == ["strasse", "x", "35"]  # casefold, not lower
    assert answer_tokens("the") == [] and answer_tokens("") == []
    assert answer_tokens("theme another") == ["theme", "another"]  # whole words only
    assert answer_tokens("在7月，Beijing天气") == ["在", "7", "月", "beijing", "天", "气"]


def test_fact_recall_needs_every_group_contiguous_and_in_order() -> None:
    answer = "The pump runs at 3.5 bar in normal use."
    assert fact_recall(answer, [["3.5 bar"], ["normal use"]]) is True
    assert fact_recall(answer, [["3.5 bar"], ["abnormal use"]]) is False
    assert fact_recall(answer, [["bar 3.5"]]) is False  # order matters
    assert fact_recall(answer, [["pump at"]]) is False  # contiguous only
    assert fact_recall(answer, [["use"]]) is True  # the last token is reached
    assert fact_recall(answer, [["The pump"]]) is True  # and the first
    assert fact_recall(answer, [["7 bar", "3.5 bar"]]) is True  # any alternative
    assert fact_recall("use", [["normal use"]]) is False  # needle longer than the answer


def test_fact_recall_ignores_alternatives_and_groups_without_tokens() -> None:
    assert fact_recall("anything", []) is None
    assert fact_recall("anything", [["the", "!"], []]) is None
    assert fact_recall("a pump", [["", "pump"], ["..."]]) is True
    assert fact_recall("", [["pump"]]) is False


def test_token_f1_by_hand() -> None:
    # prediction 4 tokens, gold 2, 1 shared: P 1/4, R 1/2, F1 = 2PR/(P+R) = 1/3
    assert token_f1("pump runs at pressure", [["pump valve"]]) == pytest.approx(1 / 3)
    # the best alternative of a group, then the mean over the groups: (1.0 + 0.0) / 2
    assert token_f1("pump valve", [["tank", "pump valve"], ["boiler"]]) == 0.5
    assert token_f1("x", [["y"]]) == 0.0
    assert token_f1("x", []) is None and token_f1("x", [["the"], []]) is None
    # a group without tokens is left out of the mean, not counted as 0
    assert token_f1("pump", [["pump"], ["a"]]) == 1.0
    assert token_f1("", [["pump"]]) == 0.0


def test_answer_sentences_drop_the_empty_ones() -> None:
    # "..." is a sentence of its own to the segmenter, without a token: not graded
    assert answer_sentences("It runs.\n\n...\n\n It stops!  ") == ["It runs.", "It stops!"]
    assert answer_sentences("") == []


@pytest.mark.parametrize(
    ("supported", "expected"),
    [
        ([], False),
        ([True, True], False),
        ([True, False], True),
        ([None, False], True),
        ([True, None], None),
        ([None], None),
    ],
)
def test_hallucinated(supported: list[bool | None], expected: bool | None) -> None:
    assert hallucinated(supported) is expected
