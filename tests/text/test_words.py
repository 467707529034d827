"""Word tokenisation for BM25: Chinese (jieba), English (stemming, stop words), mixed text."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_ext_advrag.text.words import (
    CHINESE_STOP_WORDS,
    ENGLISH_STOP_WORDS,
    ChineseMode,
    WordTokenizer,
    cjk_share,
    cut_chinese,
    han_characters,
    tokenize_words,
)


def test_defaults() -> None:
    tokenizer = WordTokenizer()
    assert tokenizer.stem is True
    assert tokenizer.remove_stop_words is True
    assert tokenizer.chinese_mode is ChineseMode.SEARCH
    assert tokenizer.stemmer_language == "english"
    assert tokenizer.chinese_characters is True
    assert WordTokenizer.class_name() == "WordTokenizer"


def test_invalid_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="klingon"):
        WordTokenizer(stemmer_language="klingon")
    with pytest.raises(ValueError, match="fast"):
        WordTokenizer(chinese_mode="fast")  # type: ignore[arg-type]


def test_english_stems_lowercases_and_drops_stop_words() -> None:
    assert WordTokenizer()("The Viruses were SPREADING in the cities") == [
        "virus",
        "were",
        "spread",
        "citi",
    ]
    assert "the" in ENGLISH_STOP_WORDS


def test_english_without_stemming_or_stop_words() -> None:
    tokenizer = WordTokenizer(stem=False, remove_stop_words=False)
    assert tokenizer("The viruses") == ["the", "viruses"]


def test_chinese_search_mode_emits_sub_words() -> None:
    tokens = WordTokenizer()("新冠病毒的潜伏期")
    assert "潜伏期" in tokens and "潜伏" in tokens
    assert "的" not in tokens  # a stop word
    accurate = WordTokenizer(chinese_mode=ChineseMode.ACCURATE)("新冠病毒的潜伏期")
    assert "潜伏" not in accurate and "潜伏期" in accurate


def test_chinese_stop_words_kept_when_asked() -> None:
    assert "的" in WordTokenizer(remove_stop_words=False)("病毒的潜伏期")
    assert "的" in CHINESE_STOP_WORDS


def test_mixed_text_splits_runs_and_numbers() -> None:
    tokens = WordTokenizer()("2023年世界十大首富中有几位来自美国？SARS-CoV-2 studies")
    assert tokens[:2] == ["2023", "年"]
    assert "首富" in tokens and "美国" in tokens
    assert tokens[-4:] == ["sar", "cov", "2", "studi"]
    assert "？" not in tokens and "-" not in tokens


def test_empty_and_punctuation_only() -> None:
    tokenizer = WordTokenizer()
    assert tokenizer("") == []
    assert tokenizer("。，！？ ... --- ") == []
    assert tokenizer.tokenize_many(["", "cats"]) == [[], ["cat"]]


def test_cut_chinese_drops_whitespace() -> None:
    assert cut_chinese("首富来自美国", ChineseMode.ACCURATE) == ["首富", "来自", "美国"]


def test_round_trip() -> None:
    tokenizer = WordTokenizer(stem=False, chinese_mode=ChineseMode.ACCURATE)
    again = WordTokenizer.from_dict(tokenizer.to_dict())
    assert again == tokenizer
    assert tokenize_words("Cats 首富", stem=False) == ["cats", "首富", "首", "富"]
    assert tokenize_words("Cats 首富", chinese_characters=False) == ["cat", "首富"]


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=80))
def test_tokens_are_non_empty_and_never_whitespace_or_punctuation(text: str) -> None:
    for token in WordTokenizer()(text):
        assert token.strip() == token and token
        assert any(ch.isalnum() for ch in token)


def test_chinese_characters_follow_the_words_of_their_run() -> None:
    tokens = WordTokenizer(chinese_mode="accurate")("首富来自美国 rich")
    assert tokens == ["首富", "来自", "美国", "首", "富", "来", "自", "美", "国", "rich"]
    words_only = WordTokenizer(chinese_mode="accurate", chinese_characters=False)
    assert words_only("首富来自美国 rich") == ["首富", "来自", "美国", "rich"]


def test_chinese_characters_drop_stop_word_characters() -> None:
    tokens = WordTokenizer()("病毒的潜伏期")
    assert "的" not in tokens and "潜" in tokens and "毒" in tokens
    assert "的" in WordTokenizer(remove_stop_words=False)("病毒的潜伏期")


def test_han_characters_and_cjk_share() -> None:
    assert han_characters("首富") == ["首", "富"]
    assert han_characters("") == []
    assert cjk_share("") == 0.0
    assert cjk_share("。！ ...") == 0.0
    assert cjk_share("How long?") == 0.0
    assert cjk_share("潜伏期多长？") == 1.0
    assert cjk_share("NBA冠军") == pytest.approx(2 / 5)
    assert cjk_share("1998年的冠军") == 1.0  # digits are not letters of either language
    assert cjk_share("2019") == 0.0


def test_settings_saved_before_chinese_characters_load_without_them() -> None:
    saved = WordTokenizer().to_dict()
    del saved["chinese_characters"]
    assert WordTokenizer.from_dict(saved).chinese_characters is False
    assert WordTokenizer.from_dict(WordTokenizer().to_dict()) == WordTokenizer()
