"""Sentence segmentation: CJK and Latin rules, newlines, list items, offsets."""

from __future__ import annotations

import dataclasses

import pytest

from llama_index_ext_advrag.text import Sentence, split_sentences

SEED = (
    "《黑神话：悟空》的故事可分为六个章节。每个章节结尾，附有二维和三维的动画过场！"
    "游戏的设定融合了中国的文化和自然地标？例如重庆的大足石刻、山西省的小西天都在游戏中出现。"
    "游戏也融入了佛教和道教的哲学元素。"
)


def texts(text: str) -> list[str]:
    sentences = split_sentences(text)
    for sentence in sentences:
        assert text[sentence.start : sentence.end] == sentence.text
    return [sentence.text for sentence in sentences]


# --- Chinese and Japanese ---------------------------------------------------------------------


def test_seed_example_gives_five_sentences() -> None:
    assert texts(SEED) == [
        "《黑神话：悟空》的故事可分为六个章节。",
        "每个章节结尾，附有二维和三维的动画过场！",
        "游戏的设定融合了中国的文化和自然地标？",
        "例如重庆的大足石刻、山西省的小西天都在游戏中出现。",
        "游戏也融入了佛教和道教的哲学元素。",
    ]


def test_core_sentence_window_parser_keeps_seed_example_in_one_node() -> None:
    """The motivating gap: LlamaIndex core's NLTK splitter does not cut Chinese."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceWindowNodeParser

    nodes = SentenceWindowNodeParser.from_defaults().get_nodes_from_documents([Document(text=SEED)])
    assert len(nodes) == 1
    assert len(split_sentences(SEED)) == 5


def test_semicolon_and_ellipsis_end_chinese_sentences() -> None:
    assert texts("他犹豫了……最后还是走了；天黑了。") == ["他犹豫了……", "最后还是走了；", "天黑了。"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("他说：“你好。”然后走了。", ["他说：“你好。”", "然后走了。"]),
        ("「行くぞ！」彼は叫んだ。", ["「行くぞ！」", "彼は叫んだ。"]),
        ("（注：这是备注。）下一句。", ["（注：这是备注。）", "下一句。"]),
        ("书名是《西游记。》下一句。", ["书名是《西游记。》", "下一句。"]),
        ("【重要！】请注意。", ["【重要！】", "请注意。"]),
        ("他问：‘真的吗？’我点头。", ["他问：‘真的吗？’", "我点头。"]),
    ],
)
def test_closing_quotes_and_brackets_stay_with_their_sentence(
    text: str, expected: list[str]
) -> None:
    assert texts(text) == expected


def test_japanese_quotation_followed_by_particle_is_not_cut() -> None:
    assert texts("「こんにちは。」と言った。次の文。") == ["「こんにちは。」と言った。", "次の文。"]


def test_repeated_terminators_form_one_end() -> None:
    assert texts("真的吗？！太好了！！！走吧。") == ["真的吗？！", "太好了！！！", "走吧。"]


def test_ascii_punctuation_between_chinese_sentences() -> None:
    assert texts("构建了世界观.游戏上线后大卖!玩家很多?是的") == [
        "构建了世界观.",
        "游戏上线后大卖!",
        "玩家很多?",
        "是的",
    ]


def test_citation_markers_stay_with_the_sentence_they_follow() -> None:
    assert texts("销量超过1800万份。[9][10]两周内登顶。") == [
        "销量超过1800万份。[9][10]",
        "两周内登顶。",
    ]
    assert texts("It sold well.[3] Then it stopped.") == ["It sold well.[3]", "Then it stopped."]


def test_chinese_decimal_is_not_cut() -> None:
    assert texts("增长了3.5倍。很快。") == ["增长了3.5倍。", "很快。"]


# --- English ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sentence",
    [
        "Fruit, e.g. apples, is healthy.",
        "Fruit, i.e. apples and pears, is healthy.",
        "Dr. Watson met Mr. Holmes and Mrs. Hudson.",
        "The U.S. Army and the U.K. Navy met.",
        "Smith et al. reported similar results.",
        "As shown in Fig. 3 and Eq. 2, it converges.",
        "See accession No. 5 and vol. 12 for details.",
        "J. R. R. Tolkien wrote it.",
        "Pi is about 3.14 and e is about 2.718.",
        "Upgrade from v1.2.3 to version 2.0 today.",
        "Wait... what happened here?",
        "It costs approx. 5 dollars vs. 7 dollars elsewhere.",
    ],
)
def test_english_abbreviations_decimals_and_ellipses_do_not_cut(sentence: str) -> None:
    assert texts(f"{sentence} Next sentence here.") == [sentence, "Next sentence here."]


def test_urls_and_emails_are_not_cut() -> None:
    text = (
        "Read https://docs.llamaindex.ai/en/stable/api.html?q=1#x!y today. "
        "Mail jane.doe@example.co.uk for help! Visit www.example.org/a.b now."
    )
    assert texts(text) == [
        "Read https://docs.llamaindex.ai/en/stable/api.html?q=1#x!y today.",
        "Mail jane.doe@example.co.uk for help!",
        "Visit www.example.org/a.b now.",
    ]


def test_url_at_sentence_end_keeps_its_period_with_the_sentence() -> None:
    assert texts("See https://example.com/page. It helps.") == [
        "See https://example.com/page.",
        "It helps.",
    ]


def test_ellipsis_before_a_capital_ends_a_sentence() -> None:
    assert texts("He paused... Then he left.") == ["He paused...", "Then he left."]


def test_sentence_end_before_digit_quote_and_bracket() -> None:
    assert texts('It grew in 2020. 5 cases followed. "Quoted," she said. (Aside.) End.') == [
        "It grew in 2020.",
        "5 cases followed.",
        '"Quoted," she said.',
        "(Aside.)",
        "End.",
    ]


def test_question_and_exclamation_marks_followed_by_lowercase_do_not_cut() -> None:
    assert texts('"Really?" he asked. Yes! Ok? fine.') == [
        '"Really?" he asked.',
        "Yes!",
        "Ok? fine.",
    ]


def test_soft_abbreviations_end_before_a_sentence_opener() -> None:
    assert texts("It was made in the U.S. The rest came later.") == [
        "It was made in the U.S.",
        "The rest came later.",
    ]
    assert texts("We thank Smith et al. The data are public.") == [
        "We thank Smith et al.",
        "The data are public.",
    ]


def test_etc_ends_a_sentence_before_a_capital_only() -> None:
    assert texts("Apples, pears, etc. are fruit. Dogs, cats, etc. Birds too.") == [
        "Apples, pears, etc. are fruit.",
        "Dogs, cats, etc.",
        "Birds too.",
    ]


def test_letterless_fragments_are_glued_to_a_neighbour() -> None:
    assert texts("See Table S2. 2.5. Sequence analysis follows.") == [
        "See Table S2.",
        "2.5. Sequence analysis follows.",
    ]
    assert texts("Reid AH. Origin of the virus. 1997;275:1793-6.") == [
        "Reid AH.",
        "Origin of the virus. 1997;275:1793-6.",
    ]


def test_mixed_chinese_and_english() -> None:
    text = "LlamaIndex 是一个框架。It supports Milvus. 我们用它做RAG！Great."
    assert texts(text) == [
        "LlamaIndex 是一个框架。",
        "It supports Milvus.",
        "我们用它做RAG！",
        "Great.",
    ]


# --- newlines and list items ------------------------------------------------------------------


def test_blank_line_always_ends_a_sentence() -> None:
    assert texts("no terminal punctuation\n\nsecond paragraph starts lower") == [
        "no terminal punctuation",
        "second paragraph starts lower",
    ]
    assert texts("没有句号\n \n第二段") == ["没有句号", "第二段"]


def test_hard_wrapped_english_lines_are_joined() -> None:
    text = "The virus was isolated from\nbats in 2019, and it spread to\nhumans later. It is the\nUnited States that reported it."
    assert texts(text) == [
        "The virus was isolated from\nbats in 2019, and it spread to\nhumans later.",
        "It is the\nUnited States that reported it.",
    ]


def test_a_one_word_line_is_read_as_its_own_word() -> None:
    # the word before the newline was read from the text's start when its line had no space,
    # so text before the line changed the cut (found by the whitespace property test)
    assert texts("Summary\nSee\nA\nCase report.") == ["Summary", "See", "A\nCase report."]
    assert texts("A\n。") == texts("  \nA\n。\n\t ") == ["A\n。"]


def test_single_newline_between_structural_lines_ends_a_sentence() -> None:
    assert texts("2009-10-07\nDOI:10.1371/journal.pone.0007211\nLicense:cc-by") == [
        "2009-10-07",
        "DOI:10.1371/journal.pone.0007211",
        "License:cc-by",
    ]
    assert texts("玩法\n《黑神话：悟空》是一款游戏\n平台\nPlayStation 5") == [
        "玩法",
        "《黑神话：悟空》是一款游戏",
        "平台",
        "PlayStation 5",
    ]


def test_chinese_line_ending_in_a_comma_continues() -> None:
    assert texts("游戏上线后，\n迅速登顶榜首。") == ["游戏上线后，\n迅速登顶榜首。"]


@pytest.mark.parametrize(
    "items",
    [
        ["- first item", "- second item"],
        ["* first item", "+ second item"],
        ["• first", "• second"],
        ["1. first", "2. second", "3. third"],
        ["1) first", "2) second"],
        ["(a) first", "(b) second"],
        ["a) first", "b) second"],
        ["i. first", "ii. second", "iii. third"],
        ["一、第一项", "二、第二项"],
        ["（一）第一项", "（二）第二项"],
        ["1、第一项", "2、第二项"],
    ],
)
def test_list_items_are_their_own_units(items: list[str]) -> None:
    text = "Intro line without a stop\n" + "\n".join(items) + "\nafter the list."
    result = texts(text)
    assert result[0] == "Intro line without a stop"
    assert result[1 : 1 + len(items)] == items
    assert result[-1] == "after the list."


def test_list_item_marker_is_not_a_sentence_and_long_items_are_split() -> None:
    text = "19. Reid AH, Fanning TG. Origin of the virus. Science.\n20. Next reference."
    assert texts(text) == [
        "19. Reid AH, Fanning TG.",
        "Origin of the virus.",
        "Science.",
        "20. Next reference.",
    ]


def test_bare_list_marker_joins_the_next_line() -> None:
    assert texts("1.\nSwerdlow DL, Finelli L.\n2.\nOther ref.") == [
        "1.\nSwerdlow DL, Finelli L.",
        "2.\nOther ref.",
    ]


def test_indented_lowercase_line_continues_a_list_item() -> None:
    assert texts("- a long item that\n  continues here\n- next") == [
        "- a long item that\n  continues here",
        "- next",
    ]


def test_dash_number_and_bold_are_not_list_items() -> None:
    assert texts("The temperature was\n-5 degrees and\n**bold** text.") == [
        "The temperature was\n-5 degrees and\n**bold** text."
    ]


def test_fenced_code_block_is_one_unit_and_not_markdown() -> None:
    text = "Intro.\n```python\n# comment\nx = 1. Y = 2.\n```\nAfter."
    sentences = split_sentences(text)
    assert [s.text for s in sentences] == [
        "Intro.",
        "```python\n# comment\nx = 1. Y = 2.\n```",
        "After.",
    ]
    assert not any(s.is_heading for s in sentences)


def test_unclosed_fence_runs_to_the_end() -> None:
    assert texts("```\ncode. More.\n\n# still code") == ["```\ncode. More.\n\n# still code"]


# --- offsets and the dataclass ----------------------------------------------------------------


def test_offsets_strip_surrounding_whitespace() -> None:
    text = "  \n\t Hello world.   Second one.  \n\n  第三句。 "
    sentences = split_sentences(text)
    assert [(s.start, s.end) for s in sentences] == [(5, 17), (20, 31), (37, 41)]
    assert [s.text for s in sentences] == ["Hello world.", "Second one.", "第三句。"]


@pytest.mark.parametrize("text", ["", " ", "\n\n\t ", "\u3000\u2028\x85"])
def test_empty_or_whitespace_text_gives_no_sentences(text: str) -> None:
    assert split_sentences(text) == []


def test_text_without_punctuation_is_one_sentence() -> None:
    assert split_sentences("hello world") == [Sentence("hello world", 0, 11)]


def test_sentence_is_frozen_with_contract_defaults() -> None:
    sentence = Sentence("a", 0, 1)
    assert (sentence.is_heading, sentence.section_title, sentence.section_index) == (False, None, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        sentence.text = "b"  # type: ignore[misc]
