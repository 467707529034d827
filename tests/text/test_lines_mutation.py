"""Line classification at its edges: the limits and context rules of headings and fences.

Each test pins one rule of :func:`scan_lines` at its boundary (found by mutation testing:
without them, an off-by-one or a ``continue`` turned into ``break`` left every test green).
"""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.text.lines import (
    MAX_NUMBERED_HEADING_CHARS,
    MAX_NUMBERED_HEADING_WORDS,
    MAX_SINGLE_LEVEL_HEADING_WORDS,
    LineKind,
    scan_lines,
)


def headings(text: str) -> list[tuple[str | None, int]]:
    return [(line.title, line.level) for line in scan_lines(text) if line.kind is LineKind.HEADING]


# --- Markdown (ATX) headings ----------------------------------------------------------------


@pytest.mark.parametrize("indent", [0, 1, 2, 3])
def test_up_to_three_spaces_of_indentation_keep_a_heading(indent: int) -> None:
    assert headings(" " * indent + "# Title") == [("Title", 1)]
    assert headings("Text.\n" + " " * indent + "## Title") == [("Title", 2)]


def test_four_spaces_make_indented_code_even_with_later_lines() -> None:
    assert headings("    # Not a heading\nmore text\n") == []
    assert headings("Text.\n    # Not a heading\nmore\n") == []


def test_indentation_is_counted_from_a_newline_at_the_start_of_the_text() -> None:
    assert headings("\n   # Title") == [("Title", 1)]
    assert headings("\n    # Title") == []


def test_title_keeps_what_is_not_a_space_or_tab() -> None:
    # CommonMark strips spaces and tabs only: a no-break space is part of the title, and a
    # closing sequence needs a space or tab before it.
    assert headings("# \u00a0Title") == [("\u00a0Title", 1)]
    assert headings("# Title\u00a0 ##") == [("Title\u00a0", 1)]
    assert headings("# Title\u00a0##") == [("Title\u00a0##", 1)]


def test_only_hashes_close_a_heading() -> None:
    assert headings("# Chapter X") == [("Chapter X", 1)]
    assert headings("# Chapter X ##") == [("Chapter X", 1)]


# --- Chinese chapter headings ----------------------------------------------------------------


def test_chapter_and_section_levels() -> None:
    assert headings("第三章 方法") == [("第三章 方法", 1)]
    assert headings("第三节 方法") == [("第三节 方法", 2)]
    assert headings("第2部 总结") == [("第2部 总结", 1)]


def test_chapter_heading_is_rejected_only_for_its_last_character() -> None:
    assert headings("第一章：序") == [("第一章：序", 1)]
    assert headings("第一章：序。") == []


# --- numbered headings: the candidate ----------------------------------------------------------


def test_numbered_heading_length_limit_is_inclusive() -> None:
    prefix = "2.3 "
    title = "A" + "b" * (MAX_NUMBERED_HEADING_CHARS - len(prefix) - 1)
    assert len(prefix + title) == MAX_NUMBERED_HEADING_CHARS
    assert headings(prefix + title) == [(prefix + title, 2)]
    assert headings(prefix + title + "c") == []


def test_numbered_heading_is_rejected_only_for_its_last_character() -> None:
    assert headings("3.1 Upgrading to 2.0") == [("3.1 Upgrading to 2.0", 2)]
    assert headings("3.1 Upgrading to 2.") == []


def test_word_limits_are_inclusive_and_depend_on_the_depth() -> None:
    single = " ".join(["Word"] * MAX_SINGLE_LEVEL_HEADING_WORDS)
    assert headings(f"1. {single}") == [(f"1. {single}", 1)]
    assert headings(f"1. {single} More") == []
    multi = " ".join(["Word"] * MAX_NUMBERED_HEADING_WORDS)
    assert headings(f"2.1 {multi}") == [(f"2.1 {multi}", 2)]
    assert headings(f"2.1 {multi} More") == []
    # A two-level number allows more words than a single-level one.
    eight = " ".join(["Word"] * 8)
    assert MAX_SINGLE_LEVEL_HEADING_WORDS < 8 <= MAX_NUMBERED_HEADING_WORDS
    assert headings(f"2.1 {eight}") == [(f"2.1 {eight}", 2)]
    assert headings(f"2. {eight}") == []


def test_a_line_with_an_equals_sign_is_a_formula_not_a_heading() -> None:
    assert headings("2.1 Let x = 5") == []
    assert headings("2. Let x = 5") == []
    assert headings("2.1 Let x be 5") == [("2.1 Let x be 5", 2)]


# --- numbered headings: the context ----------------------------------------------------------


def test_first_and_last_numbered_lines_are_headings_when_apart() -> None:
    # The first line's "previous line" is none (not the text's last line).
    text = "1. Introduction\n\nSome text.\n\n2. Methods"
    assert headings(text) == [("1. Introduction", 1), ("2. Methods", 1)]


def test_single_level_heading_as_the_last_line() -> None:
    assert headings("Text.\n\n1. Conclusion") == [("1. Conclusion", 1)]


def test_a_finished_sentence_before_starts_a_block() -> None:
    assert headings("Intro sentence.\n2.1 Methods") == [("2.1 Methods", 2)]
    assert headings("Intro sentence\n2.1 Methods") == []  # a hard-wrapped line


def test_a_blank_line_before_starts_a_block_after_any_line() -> None:
    assert headings("Some words without a stop\n\n2.1 Methods") == [("2.1 Methods", 2)]


def test_a_bare_number_line_below_makes_a_list() -> None:
    assert headings("1. Introduction\n2.\nThe second item.") == []


def test_a_year_below_is_not_a_list_number() -> None:
    assert headings("1. Introduction\n1995 was a good year.") == [("1. Introduction", 1)]


def test_a_rejected_candidate_does_not_stop_the_later_ones() -> None:
    # Rejected mid-paragraph, then a heading.
    assert headings("Some words\n2.1 Not here\n\n3.1 Methods") == [("3.1 Methods", 2)]
    # Rejected as a list (same depth directly below), then a heading.
    assert headings("2.1 Alpha\n2.2 Beta\n\nText.\n\n3.1 Methods") == [("3.1 Methods", 2)]
    # Rejected as a loose single-level list, then a heading.
    assert headings("1. Alpha\n\n2. Beta\n\nText.\n\n3.1 Methods") == [("3.1 Methods", 2)]


# --- fenced code -----------------------------------------------------------------------------


def test_an_empty_code_block_closes_on_the_next_line() -> None:
    lines = scan_lines("```\n```\nafter")
    assert [line.kind for line in lines] == [LineKind.CODE, LineKind.PLAIN]
    assert lines[1].start == len("```\n```\n")


def test_a_fence_with_an_info_string_does_not_close_a_block() -> None:
    text = "```\ncode\n```python\nmore\n```\nafter"
    lines = scan_lines(text)
    assert [line.kind for line in lines] == [LineKind.CODE, LineKind.PLAIN]
    assert text[lines[0].start : lines[0].end] == "```\ncode\n```python\nmore\n```"


def test_only_list_items_carry_a_body_start() -> None:
    text = "Plain text.\n\n- item\n\n# Title\n\n```\ncode\n```"
    lines = scan_lines(text)
    assert [line.kind for line in lines] == [
        LineKind.PLAIN,
        LineKind.LIST_ITEM,
        LineKind.HEADING,
        LineKind.CODE,
    ]
    assert [line.body_start for line in lines] == [-1, text.index("item"), -1, -1]
