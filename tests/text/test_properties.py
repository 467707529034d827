"""Property tests: offsets and coverage hold for any text, including arbitrary Unicode."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_ext_advrag.text import find_sections, split_sentences

# Pieces that exercise every rule: terminators, closers, abbreviations, decimals, URLs,
# list markers, headings, fences, CJK and whitespace of all kinds.
PIECES = [
    "。",
    "！",
    "？",
    "；",
    "…",
    "……",
    "!",
    "?",
    ".",
    "...",
    " ",
    "  ",
    "\n",
    "\n\n",
    "\t",
    "\r\n",
    "\u3000",
    "\u2028",
    "」",
    "』",
    "”",
    "’",
    "）",
    "》",
    "】",
    '"',
    "'",
    ")",
    "(",
    "[1]",
    "# ",
    "## ",
    "###### ",
    "#",
    "- ",
    "* ",
    "1. ",
    "2) ",
    "(a) ",
    "一、",
    "1.2 ",
    "第一章 ",
    "```",
    "~~~",
    "e.g.",
    "i.e.",
    "Dr.",
    "U.S.",
    "et al.",
    "Fig.",
    "3.14",
    "v1.2.3",
    "https://x.org/a?b=1.",
    "a@b.co",
    "Hello",
    "world",
    "the",
    "Introduction",
    "中文",
    "游戏",
    "悟空",
    "カタカナ",
    "한국어",
    "A",
    "z",
    "2023",
    "\u00a0",
    "\x0b",
    "\x85",
]
structured_text = st.lists(st.sampled_from(PIECES), max_size=40).map("".join)
any_text = st.one_of(st.text(), structured_text, st.text(alphabet="。.!? \n#-1a中」"))


def check_offsets(text: str) -> None:
    sentences = split_sentences(text)
    covered = [False] * len(text)
    previous_end = 0
    for sentence in sentences:
        assert text[sentence.start : sentence.end] == sentence.text
        assert sentence.text and sentence.text == sentence.text.strip()
        assert sentence.start >= previous_end  # ascending, no overlap
        previous_end = sentence.end
        for index in range(sentence.start, sentence.end):
            covered[index] = True
    missed = [
        char for char, hit in zip(text, covered, strict=True) if not hit and not char.isspace()
    ]
    assert missed == []
    if not text.strip():
        assert sentences == []


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_sentences_slice_cover_and_never_overlap(text: str) -> None:
    check_offsets(text)


@settings(max_examples=200, deadline=None)
@given(any_text)
def test_section_metadata_is_consistent(text: str) -> None:
    sentences = split_sentences(text)
    sections = find_sections(text)
    if not text.strip():
        assert sections == []
        return
    assert sections[0].start == 0 and sections[-1].end == len(text)
    for left, right in zip(sections, sections[1:], strict=False):
        assert left.end == right.start
    by_index = {section.index: section for section in sections}
    index = 0
    for sentence in sentences:
        if sentence.is_heading:
            index += 1
        assert sentence.section_index == index
        section = by_index[sentence.section_index]
        assert section.start <= sentence.start and sentence.end <= section.end
        assert sentence.section_title == section.title


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=30).map("".join))
def test_splitting_is_deterministic_and_stable_under_surrounding_whitespace(text: str) -> None:
    padded = "  \n" + text + "\n\t "
    inner = [(s.text, s.start + 3) for s in split_sentences(text)]
    assert [(s.text, s.start) for s in split_sentences(padded)] == inner


PATHOLOGICAL_INPUTS = {
    "heading with a long space run": lambda n: "# a" + " " * n + "b",
    "dot leaders": lambda n: "a" + "." * n + "b",
    "letterless sentences": lambda n: "1。" * (n // 2),
    "URL starts without an end": lambda n: "http://." * (n // 8),
    "whitespace after a candidate": lambda n: "a." + " " * n + "B",
    "long words": lambda n: ("x" * 1000 + ". ") * (n // 1000),
}


@pytest.mark.parametrize("name", sorted(PATHOLOGICAL_INPUTS))
def test_pathological_inputs_are_split_exactly(name: str) -> None:
    """The inputs that once made a regex backtrack keep the offset contract at size. Their
    speed (quadrupling the input may not take much more than four times as long) is measured
    in benchmarks/bench_sentence_split.py, never asserted here."""
    check_offsets(PATHOLOGICAL_INPUTS[name](20_000))
