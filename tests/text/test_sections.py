"""Headings and sections: Markdown, conservative numbered headings, section metadata."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.text import Section, find_sections, split_sentences

DOC = """Preamble sentence. Another one.

# Black Myth
The game has six chapters. Each ends with a cutscene.

## 2.3 Installation ##
Run the installer.

### Credits
Thanks.
"""


def headings(text: str) -> list[tuple[str | None, int]]:
    return [(s.title, s.level) for s in find_sections(text) if s.title is not None]


def test_headings_are_units_and_mark_sections() -> None:
    sentences = split_sentences(DOC)
    assert [(s.text, s.is_heading, s.section_title, s.section_index) for s in sentences] == [
        ("Preamble sentence.", False, None, 0),
        ("Another one.", False, None, 0),
        ("# Black Myth", True, "Black Myth", 1),
        ("The game has six chapters.", False, "Black Myth", 1),
        ("Each ends with a cutscene.", False, "Black Myth", 1),
        ("## 2.3 Installation ##", True, "2.3 Installation", 2),
        ("Run the installer.", False, "2.3 Installation", 2),
        ("### Credits", True, "Credits", 3),
        ("Thanks.", False, "Credits", 3),
    ]


def test_find_sections_tiles_the_text() -> None:
    sections = find_sections(DOC)
    assert [(s.title, s.level, s.index) for s in sections] == [
        (None, 0, 0),
        ("Black Myth", 1, 1),
        ("2.3 Installation", 2, 2),
        ("Credits", 3, 3),
    ]
    assert sections[0].start == 0 and sections[-1].end == len(DOC)
    for left, right in zip(sections, sections[1:], strict=False):
        assert left.end == right.start
    assert DOC[sections[1].start :].startswith("# Black Myth")


def test_sentences_fall_inside_the_section_with_their_index() -> None:
    sections = {s.index: s for s in find_sections(DOC)}
    for sentence in split_sentences(DOC):
        section = sections[sentence.section_index]
        assert section.start <= sentence.start and sentence.end <= section.end
        assert section.title == sentence.section_title


def test_no_preamble_section_when_text_starts_with_a_heading() -> None:
    text = "\n\n# Title\nBody.\n## Sub\nMore."
    assert find_sections(text) == [
        Section("Title", 1, 0, text.index("## Sub"), 1),
        Section("Sub", 2, text.index("## Sub"), len(text), 2),
    ]


def test_text_without_headings_is_one_section() -> None:
    assert find_sections("Just text. More text.") == [Section(None, 0, 0, 21, 0)]


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_empty_text_has_no_sections(text: str) -> None:
    assert find_sections(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "#hashtag is not a heading",
        "#",
        "    # indented code, not a heading",
        "####### seven hashes",
    ],
)
def test_not_markdown_headings(text: str) -> None:
    assert headings(text) == []
    assert not any(s.is_heading for s in split_sentences(text))


def test_numbered_headings_on_their_own_line() -> None:
    text = "1. Introduction\n\nBody text here.\n\n2.3 Installation\nRun it.\n\n第一章 概述\n内容。"
    assert headings(text) == [("1. Introduction", 1), ("2.3 Installation", 2), ("第一章 概述", 1)]


@pytest.mark.parametrize(
    "text",
    [
        "Intro:\n\n1. Apples\n2. Oranges\n3. Pears",  # a tight list
        "1. Apples\n\n2. Oranges\n\n3. Pears",  # a loose list
        "Text.\n\n1. Introduction\n2. Methods",  # a table of contents
        "Text.\n\n1.1 Background\n1.2 Scope",  # a table of contents with sub-numbers
        "We measured\n2.3 Million cases in total",  # a hard-wrapped line
        "Result.\n\n3. The patients were enrolled in a larger trial.",  # ends with a period
        "Result.\n\n3 patients were enrolled",  # lower-case: a sentence
        "Result.\n\n12. Reid AH, Fanning TG, Slemons RD, Janczewski TA",  # a reference, too long
        "第一章讲述了他的故事。",  # a sentence about a chapter
    ],
)
def test_numbered_lines_that_are_not_headings(text: str) -> None:
    assert headings(text) == []


def test_numbered_heading_followed_by_a_numbered_list() -> None:
    text = "Done.\n\n2.3 Installation\n1. Download it\n2. Run it"
    assert headings(text) == [("2.3 Installation", 2)]
    assert [s.text for s in split_sentences(text)][1:] == [
        "2.3 Installation",
        "1. Download it",
        "2. Run it",
    ]
