"""Sentence-end rules at their edges (found by mutation testing: each input below is cut
differently when one condition of the rule is flipped, and no other test noticed).
"""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.text import paragraph_breaks, split_sentences


def texts(text: str) -> list[str]:
    sentences = split_sentences(text)
    for sentence in sentences:
        assert text[sentence.start : sentence.end] == sentence.text
    return [sentence.text for sentence in sentences]


# --- single newlines inside a block ----------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "The cat sat\nquietly on the mat.",  # the next line starts lower-case
        "See the figure\n(left panel) for details.",  # ... or with an opening bracket
    ],
)
def test_a_hard_wrapped_line_continues_the_sentence(text: str) -> None:
    assert texts(text) == [text]


def test_a_capitalised_line_after_a_plain_word_is_a_new_unit() -> None:
    assert texts("Title line\nXavier arrived.") == ["Title line", "Xavier arrived."]


@pytest.mark.parametrize("indent", [" ", "\t", "  "])
def test_any_indentation_continues_a_list_item(indent: str) -> None:
    text = f"- Item one\n{indent}continued here"
    assert texts(text) == [text]


def test_a_line_after_a_heading_or_code_block_is_its_own_unit() -> None:
    assert texts("# Notes on\nthe method.") == ["# Notes on", "the method."]
    assert texts("```\ncode\n```\nthen more text.") == ["```\ncode\n```", "then more text."]


# --- periods ---------------------------------------------------------------------------------


def test_a_period_after_a_non_latin_letter_is_not_an_abbreviation() -> None:
    assert texts("We met at the café. Then we left.") == ["We met at the café.", "Then we left."]


def test_only_a_letter_right_before_the_period_makes_an_initial() -> None:
    # "A" ends the first line; the period starts the next: not the initial "A."
    assert texts("It was written by A\n. Smith went home.") == [
        "It was written by A\n.",
        "Smith went home.",
    ]


def test_a_period_between_a_number_and_chinese_is_not_an_end() -> None:
    assert texts("详见图2.该图显示了结果。") == ["详见图2.该图显示了结果。"]
    assert texts("构建完成.游戏上线。") == ["构建完成.", "游戏上线。"]


@pytest.mark.parametrize("dots", ["..", "..."])
def test_dotted_ellipsis_before_a_number_does_not_end(dots: str) -> None:
    text = f"We waited{dots} 3 hours passed."
    assert texts(text) == [text]
    assert texts(f"Wait{dots} 他来了。") == [f"Wait{dots}", "他来了。"]


def test_a_list_marker_letter_is_not_a_sentence() -> None:
    assert texts("a. Apples are red.") == ["a. Apples are red."]
    assert texts("i. Apples are red.") == ["i. Apples are red."]


# --- exclamation and question marks, ellipsis characters, CJK stops ---------------------------


@pytest.mark.parametrize("mark", ["!", "?", "…!", "…?"])
def test_exclamation_or_question_ends_before_a_number(mark: str) -> None:
    assert texts(f"Wow{mark} 3 people came.") == [f"Wow{mark}", "3 people came."]


def test_ellipsis_character_ends_before_a_capital_not_a_number() -> None:
    assert texts("We waited… Then he left.") == ["We waited…", "Then he left."]
    assert texts("Wait… I left.") == ["Wait…", "I left."]
    assert texts("We waited… 3 hours passed.") == ["We waited… 3 hours passed."]
    assert texts("Wait… 2号楼见。") == ["Wait… 2号楼见。"]


@pytest.mark.parametrize(
    "text, first",
    [
        ("他沉默了…… 3天后才回来。", "他沉默了……"),
        ("好…… 3天后再说。", "好……"),
        ("我用Go写…… 3天后完成了。", "我用Go写……"),
    ],
)
def test_ellipsis_after_chinese_ends_before_anything(text: str, first: str) -> None:
    assert texts(text) == [first, text[len(first) :].strip()]


def test_only_a_quotation_closer_before_to_keeps_the_japanese_sentence() -> None:
    # 「…。」と言った is one sentence; after a bare 。, とても starts a new one.
    assert texts("本を読んだ。とても面白かった。") == ["本を読んだ。", "とても面白かった。"]
    assert texts("「行こう。」Xさんが来た。") == ["「行こう。」", "Xさんが来た。"]


# --- paragraph breaks ------------------------------------------------------------------------


def test_paragraph_breaks_by_hand() -> None:
    text = "One. Two.\n\nThree.\n \nFour.\nFive."
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == ["One.", "Two.", "Three.", "Four.", "Five."]
    assert paragraph_breaks(text, sentences) == [False, True, True, False, False]
    assert paragraph_breaks("One.", split_sentences("One.")) == [False]
    assert paragraph_breaks("", []) == []
