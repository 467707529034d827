"""Entity and keyword cues, and their overlap coefficient."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_ext_advrag.text import cue_overlap, extract_cues


def test_english_cues_keep_names_acronyms_identifiers_and_numbers() -> None:
    cues = extract_cues(
        "In 2023 the WHO said COVID-19 reached Harare, Zimbabwe. "
        "We call llama_index.core from SentenceSplitter with chunk_size 3.14 times."
    )
    assert cues == {
        "2023",
        "who",
        "covid-19",
        "harare",
        "zimbabwe",
        "llama_index.core",
        "sentencesplitter",
        "chunk_size",
        "3.14",
    }


def test_capitalised_sentence_openers_and_stop_words_are_not_cues() -> None:
    assert extract_cues("Patients recovered. Doctors agreed. The end.") == frozenset()
    assert extract_cues("- Apples are good\n# Bananas") == frozenset()
    assert extract_cues("we met Alice and Bob") == {"alice", "bob"}


def test_citation_numbers_and_single_characters_are_dropped() -> None:
    assert extract_cues("it rose [12] by 5 [3, 4] percent in Q") == frozenset()


def test_chinese_cues_are_nouns_and_names_of_two_or_more_characters() -> None:
    cues = extract_cues(
        "《黑神话：悟空》的故事可分为六个章节。例如重庆的大足石刻、山西省的小西天都在游戏中出现。"
    )
    assert {"悟空", "章节", "重庆", "山西省", "游戏", "故事"} <= cues
    assert not {"的", "可", "分为", "例如", "出现", "都在"} & cues  # function words and verbs
    assert all(len(cue) >= 2 for cue in cues)


def test_names_outside_jiebas_dictionary_are_kept() -> None:
    assert {"冯骥", "杨奇"} <= extract_cues("制作人是冯骥，美术是杨奇。")


def test_mixed_text_gives_both_kinds_of_cues() -> None:
    cues = extract_cues("游戏于2024年8月20日登录Windows及PlayStation 5平台")
    assert {"2024", "windows", "playstation", "游戏", "平台"} <= cues


@pytest.mark.parametrize("text", ["", "   ", "\n"])
def test_empty_text_has_no_cues(text: str) -> None:
    assert extract_cues(text) == frozenset()


def test_cues_are_lower_case_frozensets() -> None:
    cues = extract_cues("NASA and SpaceX met at MIT.")
    assert isinstance(cues, frozenset)
    assert cues == {"nasa", "spacex", "mit"}


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ({"a", "b"}, {"b", "c", "d"}, 0.5),
        ({"a"}, {"a", "b", "c"}, 1.0),
        ({"a", "b"}, {"c", "d"}, 0.0),
        ({"a", "b", "c", "d"}, {"c", "d", "e"}, 2 / 3),
        (set(), {"a"}, 0.0),
        ({"a"}, set(), 0.0),
        (set(), set(), 0.0),
    ],
)
def test_cue_overlap_hand_computed(a: set[str], b: set[str], expected: float) -> None:
    assert cue_overlap(frozenset(a), frozenset(b)) == pytest.approx(expected)


@settings(max_examples=200, deadline=None)
@given(st.frozensets(st.text(max_size=3)), st.frozensets(st.text(max_size=3)))
def test_cue_overlap_is_symmetric_and_bounded(a: frozenset[str], b: frozenset[str]) -> None:
    value = cue_overlap(a, b)
    assert value == cue_overlap(b, a)
    assert 0.0 <= value <= 1.0
    assert (value == 1.0) == bool(a and b and (a <= b or b <= a))


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_extract_cues_accepts_any_text(text: str) -> None:
    cues = extract_cues(text)
    assert all(cue == cue.lower() and len(cue) >= 2 for cue in cues)


def test_a_capital_right_after_a_sentence_break_or_a_word_is_read_correctly() -> None:
    # after ";" the capital opens a sentence (no cue); after a plain word it is a name (cue)
    assert extract_cues("x;Beta") == frozenset()
    assert extract_cues("a Beta") == frozenset({"beta"})
