"""The one set of character classes, stop words and the jieba loader."""

from __future__ import annotations

import re

from llama_index_ext_advrag.evaluation.metrics import normalize_for_match
from llama_index_ext_advrag.text import charsets
from llama_index_ext_advrag.text.charsets import (
    CJK,
    CJK_TEXT,
    HAN,
    JIEBA_CHARS,
    is_cjk,
    is_cjk_text,
    load_jieba,
)
from llama_index_ext_advrag.text.cues import CHINESE_CUE_STOP_WORDS, ENGLISH_CUE_STOP_WORDS
from llama_index_ext_advrag.text.words import CHINESE_STOP_WORDS, ENGLISH_STOP_WORDS, cjk_share

CODE_POINTS = [chr(c) for c in range(0x20, 0x30000) if not 0xD800 <= c <= 0xDFFF]


def test_is_cjk_text_agrees_with_the_class_on_every_code_point() -> None:
    pattern = re.compile(f"[{CJK_TEXT}]")
    assert [c for c in CODE_POINTS if is_cjk_text(c) != bool(pattern.fullmatch(c))] == []


def test_classes_nest() -> None:
    """Han and jieba's domain lie inside CJK, and CJK inside CJK text."""
    cjk_text = re.compile(f"[{CJK_TEXT}]")
    for narrow, wide in ((HAN, CJK), (JIEBA_CHARS, CJK), (CJK, CJK_TEXT)):
        inside = re.compile(f"[{narrow}]")
        outside = re.compile(f"[{wide}]") if wide != CJK_TEXT else cjk_text
        assert all(outside.fullmatch(c) for c in CODE_POINTS if inside.fullmatch(c))


def test_examples_by_script() -> None:
    assert [is_cjk(c) for c in "中か한ㄅ𠀀"] == [True] * 5
    assert [is_cjk(c) for c in "a1。，Ж"] == [False] * 5
    assert [is_cjk_text(c) for c in "。，（"] == [True] * 3
    # Hangul is CJK text: a Korean query is as unreadable to an English-only model
    assert cjk_share("한국어") == 1.0 and cjk_share("Seoul 서울") == 2 / 7
    assert normalize_for_match("서울 特别 市") == "서울特别市"


def test_one_stop_word_set_per_language() -> None:
    assert words_module_sets_are_the_charsets_ones()
    assert ENGLISH_STOP_WORDS < ENGLISH_CUE_STOP_WORDS
    assert CHINESE_STOP_WORDS < CHINESE_CUE_STOP_WORDS
    assert "fig" in ENGLISH_CUE_STOP_WORDS and "fig" not in ENGLISH_STOP_WORDS


def words_module_sets_are_the_charsets_ones() -> bool:
    return (
        ENGLISH_STOP_WORDS is charsets.ENGLISH_STOP_WORDS
        and CHINESE_STOP_WORDS is charsets.CHINESE_STOP_WORDS
    )


def test_jieba_is_loaded_once() -> None:
    assert load_jieba() is load_jieba()
    assert load_jieba().lcut("首富来自美国") == ["首富", "来自", "美国"]
