"""text.cleaning: lone surrogates and over-long sentences, pinned exactly.

Each test states the value a correct implementation returns, so a changed bound, branch or
count fails here (these functions are in the mutation scope of ``make mutation``).
"""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.text import split_sentences
from llama_index_ext_advrag.text.cleaning import (
    DEFAULT_MAX_SENTENCE_CHARS,
    MIN_MAX_SENTENCE_CHARS,
    REPLACEMENT_CHARACTER,
    _cut_point,
    _follows_piece,
    check_text,
    check_texts,
    clean_value,
    cut_long_sentences,
    has_lone_surrogates,
    replace_lone_surrogates,
)
from llama_index_ext_advrag.text.sentences import Sentence


def test_constants() -> None:
    assert DEFAULT_MAX_SENTENCE_CHARS == 4_000
    assert MIN_MAX_SENTENCE_CHARS == 100
    assert REPLACEMENT_CHARACTER == "\ufffd"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", False),
        ("plain ascii", False),
        ("中文句子。", False),
        ("\ud7ff\ue000", False),  # the code points either side of the surrogate block
        ("\ud800", True),
        ("\udfff", True),
        ("x\udc00y", True),
        ("\U0001f600", False),  # a real astral character is not a surrogate in Python
    ],
)
def test_has_lone_surrogates(text: str, expected: bool) -> None:
    assert has_lone_surrogates(text) is expected


def test_replace_lone_surrogates_counts_and_replaces() -> None:
    assert replace_lone_surrogates("a\ud800b") == ("a\ufffdb", 1)
    assert replace_lone_surrogates("\udfff") == ("\ufffd", 1)
    assert replace_lone_surrogates("\ud800\ud800x\udc01") == ("\ufffd\ufffdx\ufffd", 3)


def test_replace_lone_surrogates_joins_a_pair() -> None:
    clean, count = replace_lone_surrogates("smile \ud83d\ude00!")
    assert clean == "smile \U0001f600!"
    assert count == 2


def test_replace_lone_surrogates_leaves_clean_text_as_is() -> None:
    text = "no surrogates here 中文"
    clean, count = replace_lone_surrogates(text)
    assert clean is text
    assert count == 0


def test_clean_value_nested_structures() -> None:
    value = {"k\ud800": ["ok", ("\udfff", 3)], "plain": {"inner": "x\ud801"}, "n": 7}
    clean, count = clean_value(value)
    assert count == 3
    assert clean == {"k\ufffd": ["ok", ("\ufffd", 3)], "plain": {"inner": "x\ufffd"}, "n": 7}
    assert isinstance(clean["k\ufffd"], list)
    assert isinstance(clean["k\ufffd"][1], tuple)
    # the input is not modified
    assert value == {"k\ud800": ["ok", ("\udfff", 3)], "plain": {"inner": "x\ud801"}, "n": 7}


def test_clean_value_returns_clean_inputs_unchanged() -> None:
    for value in ({"a": "b"}, ["a", 1], ("a", None), "text", 3, None, 2.5):
        clean, count = clean_value(value)
        assert clean is value
        assert count == 0


def test_clean_value_counts_keys_and_items_separately() -> None:
    clean, count = clean_value({"\ud800": "\ud800\ud800"})
    assert clean == {"\ufffd": "\ufffd\ufffd"}
    assert count == 3
    clean, count = clean_value(["\ud800", "ok", "\udc00\udc00"])
    assert clean == ["\ufffd", "ok", "\ufffd\ufffd"]
    assert count == 3


def test_clean_value_tuple_stays_tuple_and_list_stays_list() -> None:
    assert clean_value(("\ud800",)) == (("\ufffd",), 1)
    assert clean_value(["\ud800"]) == (["\ufffd"], 1)


def test_cut_point_prefers_the_last_whitespace_in_the_second_half() -> None:
    text = "aaaa bbbb cccc dddd eeee"
    # spaces at 4, 9, 14, 19; the second half of [start, limit) starts at start + (limit-start)//2
    assert _cut_point(text, 0, 20) == 20  # spaces 14 and 19 in [10, 20): after the last
    assert _cut_point(text, 0, 18) == 15  # spaces 9 and 14 in [9, 18)
    assert _cut_point(text, 5, 14) == 10  # space 9 in [9, 14)
    assert _cut_point(text, 0, 8) == 5  # space 4 in [4, 8)


def test_cut_point_ignores_whitespace_in_the_first_half() -> None:
    text = "a bcdefghijklmnopqrstuvwxyz"
    # the only space is at 1, before the floor (0 + 20 // 2 = 10): hard cut at the limit
    assert _cut_point(text, 0, 20) == 20


def test_cut_point_uses_clause_punctuation_when_there_is_no_whitespace() -> None:
    text = "abcdefghijkl,mnopqrstuvwxyz"
    assert _cut_point(text, 0, 20) == 13
    text_cjk = "一二三四五六七八九十一二，三四五六七八九十一二三"
    assert _cut_point(text_cjk, 0, 20) == 13


def test_cut_point_whitespace_beats_punctuation() -> None:
    text = "abcdefghijk mnop,rstuvwxyz"
    assert _cut_point(text, 0, 20) == 12  # the space, although the comma comes later


def test_cut_point_backs_off_combining_marks() -> None:
    text = "a" * 19 + "e\u0301\u0301" + "b" * 10
    # limit 21 falls on a combining mark: the cut moves back while text[cut] is combining,
    # 21 -> 20 -> 19 ('e' is not combining), so 'e' keeps its accents.
    assert _cut_point(text, 0, 21) == 19  # the accented letter goes whole to the next piece
    assert _cut_point(text, 0, 23) == 23  # a plain letter at the limit: no back-off


def test_cut_point_stops_backing_off_at_the_floor() -> None:
    text = "a" * 10 + "\u0301" * 20
    assert _cut_point(text, 0, 20) == 10


def test_cut_long_sentences_rejects_a_small_bound() -> None:
    with pytest.raises(ValueError, match="at least 100 characters, got 99"):
        cut_long_sentences("x", [], max_chars=99)
    assert cut_long_sentences("", [], max_chars=100) == ([], 0)


def test_cut_long_sentences_keeps_short_sentences() -> None:
    source = "Short one. Another short one."
    sentences = split_sentences(source)
    out, cut = cut_long_sentences(source, sentences, max_chars=100)
    assert cut == 0
    assert out == list(sentences)
    assert isinstance(out, list)


def test_cut_long_sentences_boundary_length_is_not_cut() -> None:
    source = "w" * 100
    sentence = Sentence(text=source, start=0, end=100)
    assert cut_long_sentences(source, [sentence], max_chars=100) == ([sentence], 0)
    source = "w" * 101
    sentence = Sentence(text=source, start=0, end=101)
    out, cut = cut_long_sentences(source, [sentence], max_chars=100)
    assert cut == 1
    assert [(p.start, p.end) for p in out] == [(0, 100), (100, 101)]


def test_cut_long_sentences_pieces_are_exact_and_bounded() -> None:
    words = " ".join(f"Word{i:03d}" for i in range(120))  # 959 characters, no full stop
    source = "Intro. " + words + ". Outro."
    sentences = split_sentences(source)
    out, cut = cut_long_sentences(source, sentences, max_chars=100)
    assert cut == 1
    assert out[0].text == "Intro." and not out[0].cut
    assert out[-1].text == "Outro." and not out[-1].cut
    pieces = out[1:-1]
    assert len(pieces) >= 10
    for piece in pieces:
        assert piece.cut
        assert source[piece.start : piece.end] == piece.text
        assert len(piece.text) <= 100
        assert piece.text == piece.text.strip()
    # whitespace cuts: no word is split
    assert " ".join(p.text for p in pieces) == words + "."
    # nothing lost, in order
    assert [p.start for p in out] == sorted(p.start for p in out)


def test_cut_long_sentences_without_breaks_cuts_between_characters() -> None:
    source = "x" * 250
    out, cut = cut_long_sentences(source, [Sentence(text=source, start=0, end=250)], 100)
    assert cut == 1
    assert [(p.start, p.end) for p in out] == [(0, 100), (100, 200), (200, 250)]
    assert all(p.cut for p in out)


def test_cut_long_sentences_heading_flag_on_the_first_piece_only() -> None:
    source = "y" * 230
    heading = Sentence(
        text=source, start=0, end=230, is_heading=True, section_title="T", section_index=2
    )
    out, _ = cut_long_sentences(source, [heading], 100)
    assert [p.is_heading for p in out] == [True, False, False]
    assert {p.section_title for p in out} == {"T"}
    assert {p.section_index for p in out} == {2}
    plain = Sentence(text=source, start=0, end=230)
    out, _ = cut_long_sentences(source, [plain], 100)
    assert [p.is_heading for p in out] == [False, False, False]


def test_cut_long_sentences_counts_each_long_sentence_once() -> None:
    source = "a" * 150 + " " + "b" * 150
    sentences = [Sentence("a" * 150, 0, 150), Sentence("b" * 150, 151, 301)]
    out, cut = cut_long_sentences(source, sentences, 100)
    assert cut == 2
    assert [(p.start, p.end) for p in out] == [(0, 100), (100, 150), (151, 251), (251, 301)]


def test_cut_long_sentences_skips_whitespace_only_pieces() -> None:
    # a cut that leaves only spaces produces no empty piece, and offsets skip the spaces
    source = "z" * 60 + " " * 150 + "q" * 10
    sentence = Sentence(text=source, start=0, end=len(source))
    out, cut = cut_long_sentences(source, [sentence], 100)
    assert cut == 1
    # pieces [0, 100) "z"*60 + spaces, [100, 200) spaces only (dropped), [200, 220)
    assert [(p.start, p.end) for p in out] == [(0, 60), (210, 220)]
    assert [p.text for p in out] == ["z" * 60, "q" * 10]


def test_follows_piece() -> None:
    sentence = Sentence("a" * 300, 10, 310)
    assert not _follows_piece([], sentence)
    assert not _follows_piece([Sentence("x", 0, 1, cut=True)], sentence)  # before it
    assert not _follows_piece([Sentence("a", 10, 11)], sentence)  # not a piece
    assert _follows_piece([Sentence("a", 10, 110, cut=True)], sentence)  # its first piece
    assert _follows_piece([Sentence("a", 309, 310, cut=True)], sentence)  # its last char
    assert not _follows_piece([Sentence("a", 310, 311, cut=True)], sentence)  # after it


def test_cut_point_backs_off_a_single_combining_mark_by_one() -> None:
    text = "a" * 19 + "e\u0301" + "b" * 10  # the mark at 20 belongs to the 'e' at 19
    assert _cut_point(text, 0, 20) == 19
    assert _cut_point(text, 0, 21) == 21


def test_cut_long_sentences_a_sentence_of_exactly_the_bound_stays_whole_beside_a_long_one() -> None:
    source = "a" * 100 + " " + "b" * 150
    sentences = [Sentence("a" * 100, 0, 100), Sentence("b" * 150, 101, 251)]
    out, cut = cut_long_sentences(source, sentences, 100)
    assert cut == 1
    assert out[0] == sentences[0]  # not cut, not flagged
    assert [(p.start, p.end, p.cut) for p in out] == [
        (0, 100, False),
        (101, 201, True),
        (201, 251, True),
    ]


def test_cut_long_sentences_a_last_piece_of_exactly_the_bound_is_not_cut_again() -> None:
    source = "x" * 160 + " " + "y" * 39  # 200 characters, one space at 160
    out, cut = cut_long_sentences(source, [Sentence(source, 0, 200)], 100)
    assert cut == 1
    # first piece: no break in [50, 100) -> hard cut at 100; the rest is exactly 100 characters
    # and stays one piece (cutting it again would break at the space at 160)
    assert [(p.start, p.end) for p in out] == [(0, 100), (100, 200)]
    source = "x" * 200
    out, _ = cut_long_sentences(source, [Sentence(source, 0, 200)], 100)
    assert [(p.start, p.end) for p in out] == [(0, 100), (100, 200)]


def test_check_texts_names_the_position_and_type_of_a_non_string() -> None:
    with pytest.raises(TypeError, match=r"^texts\[2\] must be a str, got NoneType$"):
        check_texts(["a", "b", None])
    with pytest.raises(TypeError, match=r"^texts must be a sequence of str, got int$"):
        check_texts(5)
    with pytest.raises(TypeError, match="got a single str; wrap it in a list"):
        check_texts("abc")
    with pytest.raises(TypeError, match=r"^query must be a str, got bytes$"):
        check_text(b"abc", "query")


def test_check_texts_replaces_surrogates_in_a_new_list() -> None:
    texts = ("ok", "bad \ud800", "\ud83d\ude00")
    assert check_texts(texts) == (["ok", "bad \ufffd", "\U0001f600"], 3)
    clean = ["a", "b"]
    checked, count = check_texts(clean)
    assert (checked, count) == (clean, 0) and checked is not clean
    assert check_text("x\udfff") == ("x\ufffd", 1)
