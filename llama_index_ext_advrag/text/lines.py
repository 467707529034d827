"""Line scanning: the structural layer under sentence splitting and sections.

Every non-blank line of a text is visited once and classified as plain text, a list item, a
heading (Markdown ``#`` lines, conservative numbered headings such as ``2.3 Installation``,
Chinese ``第一章`` chapter lines) or part of a fenced code block. Sentence splitting and
:func:`~llama_index_ext_advrag.text.find_sections` both build on :func:`scan_lines`, so a
heading is recognised the same way everywhere.

Only ``"\\n"`` separates lines; ``"\\r"`` and other Unicode separators count as ordinary
whitespace inside a line.
"""

from __future__ import annotations

import logging
import re
from enum import IntEnum
from typing import NamedTuple

from llama_index_ext_advrag.text.charsets import CJK

logger = logging.getLogger(__name__)

MAX_NUMBERED_HEADING_CHARS = 80
MAX_NUMBERED_HEADING_WORDS = 10
MAX_SINGLE_LEVEL_HEADING_WORDS = 6

# From the first to the last non-whitespace character of one line.
_LINE = re.compile(r"\S(?:[^\n]*\S)?")
_ATX_HEADING = re.compile(r"(#{1,6})[ \t\u3000]")
_HEADING_SPACE = " \t\u3000"
_FENCE_OPEN = re.compile(r"(`{3,}|~{3,})")
_LIST_ITEM = re.compile(
    r"(?:[-*+][ \t]+(?=\S)"  # Markdown bullets need a space: "-5" and "**bold**" are not items
    r"|[•·▪●◦‣○■□➢✓►▸]"  # typographic bullets
    r"|\d{1,3}[.)](?:[ \t]|$)"  # 1.  1)
    rf"|\d{{1,3}}[.．、](?=[{CJK}])"  # 1.游戏  1、游戏
    r"|[(（](?:\d{1,3}|[a-z]|i{1,3}|iv|vi{0,3}|ix|[一二三四五六七八九十]{1,3})[)）]"  # (1) (a) (iv)
    r"|[a-z][.)][ \t]"  # a. b)
    r"|(?:i{1,3}|iv|vi{0,3}|ix|x)[.)][ \t]"  # roman numerals
    r"|[一二三四五六七八九十]{1,3}[、．.])"  # 一、
)
_LIST_FIRST_CHARS = frozenset(
    "-*+•·▪●◦‣○■□➢✓►▸(（0123456789abcdefghijklmnopqrstuvwxyz一二三四五六七八九十"
)
_NUMBERED_HEADING = re.compile(
    rf"(\d{{1,2}}(?:\.\d{{1,2}}){{0,3}})\.?[ \t]+([A-Z{CJK}][^\n]*)$",
)
_NUMBER_PREFIX = re.compile(r"(\d{1,3}(?:\.\d{1,2}){0,3})[.)]?(?:[ \t]|$)")
_CHAPTER_HEADING = re.compile(
    r"第[一二三四五六七八九十百千零〇\d]{1,4}([章节篇部卷回])(?:[ \t\u3000:：、]+[^\n]{1,30})?$"
)
_HEADING_BAD_ENDINGS = frozenset(".,;:!?。，；：！？、…")
_LETTERS = re.compile(f"[A-Za-z]{{2}}|[{CJK}]")
_SENTENCE_END_CHARS = frozenset(".!?。！？")


class LineKind(IntEnum):
    """What a line is, structurally."""

    PLAIN = 0
    LIST_ITEM = 1
    HEADING = 2
    CODE = 3  # a whole fenced code block, opening to closing fence


class Line(NamedTuple):
    """One non-blank line (or a whole fenced code block) of the source text.

    ``start``/``end`` enclose the line without its surrounding whitespace.
    """

    start: int
    end: int
    kind: LineKind
    blank_before: bool  # the text starts here or a blank line precedes it
    title: str | None = None  # heading title, for HEADING lines
    level: int = 0  # heading level, for HEADING lines
    body_start: int = -1  # where a LIST_ITEM's text starts, after its marker


def _atx_heading(text: str, start: int, end: int) -> tuple[str, int] | None:
    """Return ``(title, level)`` for a Markdown ``#`` heading line, else ``None``."""
    # CommonMark: at most three spaces of indentation, otherwise it is an indented code line.
    if start - text.rfind("\n", 0, start) - 1 > 3:
        return None
    match = _ATX_HEADING.match(text, start, end)
    if match is None:
        return None
    title = text[match.end() : end].strip(_HEADING_SPACE)
    unclosed = title.rstrip("#")  # an optional closing sequence: "## Title ##"
    if not unclosed or unclosed[-1] in _HEADING_SPACE:
        title = unclosed.rstrip(_HEADING_SPACE)
    if not title:
        return None
    return title, len(match.group(1))


def _chapter_heading(text: str, start: int, end: int) -> tuple[str, int] | None:
    """Return ``(title, level)`` for a Chinese ``第一章 …`` line, else ``None``."""
    match = _CHAPTER_HEADING.match(text, start, end)
    if match is None or text[end - 1] in _HEADING_BAD_ENDINGS:
        return None
    return text[start:end], 2 if match.group(1) == "节" else 1


def _numbered_candidate(text: str, start: int, end: int) -> tuple[str, int] | None:
    """Return ``(title, level)`` if the line *looks* like ``1. Introduction`` or ``2.3 Setup``.

    Whether it really is a heading depends on the neighbouring lines (see
    :func:`_confirm_numbered_headings`).
    """
    if end - start > MAX_NUMBERED_HEADING_CHARS:
        return None
    match = _NUMBERED_HEADING.match(text, start, end)
    if match is None or text[end - 1] in _HEADING_BAD_ENDINGS:
        return None
    title = match.group(2)
    max_words = (
        MAX_SINGLE_LEVEL_HEADING_WORDS if "." not in match.group(1) else MAX_NUMBERED_HEADING_WORDS
    )
    if len(title.split()) > max_words or not _LETTERS.search(title) or "=" in title:
        return None
    return text[start:end], match.group(1).count(".") + 1


def _close_fence(text: str, matches: list[re.Match[str]], index: int, marker: str) -> int:
    """Return the index of the line closing the fence opened at ``matches[index]``."""
    for j in range(index + 1, len(matches)):
        line = matches[j].group()
        if line.startswith(marker) and not line.strip(marker[0]):
            return j
    return len(matches) - 1  # an unclosed fence runs to the end of the text


def _numbering_depth(text: str, line: Line) -> int:
    """How many components the line's leading number has (``2.3 Foo`` -> 2), 0 if none."""
    if not text[line.start].isdigit():
        return 0
    match = _NUMBER_PREFIX.match(text, line.start, line.end)
    return match.group(1).count(".") + 1 if match else 0


def _confirm_numbered_headings(
    text: str, lines: list[Line], candidates: dict[int, tuple[str, int]]
) -> None:
    """Turn numbered-heading candidates into headings where the context agrees, in place.

    A candidate is a heading when it starts a block (blank line before, the text's start, a
    heading or a finished sentence before it) and is not part of a numbered list: the next
    line does not carry a number of the same depth directly below it and, for single-level
    numbers such as ``1.``, no single-level numbered line is its neighbour even across blank
    lines.
    """
    for i, (title, level) in candidates.items():
        line = lines[i]
        prev = lines[i - 1] if i > 0 else None
        nxt = lines[i + 1] if i + 1 < len(lines) else None
        if not (
            prev is None
            or line.blank_before
            or prev.kind is LineKind.HEADING
            or text[prev.end - 1] in _SENTENCE_END_CHARS
        ):
            continue
        next_depth = _numbering_depth(text, nxt) if nxt is not None else 0
        prev_depth = (
            _numbering_depth(text, prev)
            if prev is not None and prev.kind is not LineKind.HEADING
            else 0
        )
        if nxt is not None and next_depth == level and not nxt.blank_before:
            continue
        if level == 1 and 1 in (next_depth, prev_depth):
            continue
        lines[i] = line._replace(kind=LineKind.HEADING, title=title, level=level)


def scan_lines(text: str) -> list[Line]:
    """Classify every non-blank line of ``text``.

    Args:
        text: The source text.

    Returns:
        list[Line]: Lines in reading order. A fenced code block is returned as one ``CODE`` line
            spanning from its opening to its closing fence; Markdown inside it is not interpreted.
    """
    matches = list(_LINE.finditer(text))
    lines: list[Line] = []
    candidates: dict[int, tuple[str, int]] = {}
    previous_end = 0
    index = 0
    while index < len(matches):
        match = matches[index]
        start, end = match.span()
        blank_before = not lines or text.count("\n", previous_end, start) >= 2
        first = text[start]
        kind = LineKind.PLAIN
        heading: tuple[str, int] | None = None
        body_start = -1
        if first in "`~" and (fence := _FENCE_OPEN.match(text, start, end)):
            marker = fence.group(1)
            if marker[0] != "`" or "`" not in text[fence.end() : end]:
                index = _close_fence(text, matches, index, marker)
                end = matches[index].end()
                kind = LineKind.CODE
        elif first == "#":
            heading = _atx_heading(text, start, end)
        elif first == "第":
            heading = _chapter_heading(text, start, end)
        if heading is not None:
            kind = LineKind.HEADING
        elif kind is LineKind.PLAIN and first in _LIST_FIRST_CHARS:
            if item := _LIST_ITEM.match(text, start, end):
                kind = LineKind.LIST_ITEM
                body_start = item.end()
            if first.isdigit() and (candidate := _numbered_candidate(text, start, end)):
                candidates[len(lines)] = candidate
        title, level = heading if heading is not None else (None, 0)
        lines.append(Line(start, end, kind, blank_before, title, level, body_start))
        previous_end = end
        index += 1
    if candidates:
        _confirm_numbered_headings(text, lines, candidates)
    return lines
