"""Sentence segmentation for Chinese, Japanese, English and mixed text, with exact offsets.

The text is cut in two layers. :func:`~llama_index_ext_advrag.text.lines.scan_lines` groups
lines into blocks: a blank line always ends a block, a heading, list item or fenced code block
is a block of its own, and a single newline ends a block only where it is structural (CJK lines,
the line after a list item) rather than a hard wrap inside a paragraph. Inside a plain block one
compiled regex finds the candidate ends (CJK terminators, ``!``/``?``, periods followed by
space or CJK) and a short rule per candidate rejects abbreviations, initials, decimals,
ellipses inside a sentence and URLs.

Every :class:`Sentence` satisfies ``source[s.start:s.end] == s.text``; sentences are in
ascending order, never overlap, carry no surrounding whitespace and together cover every
non-whitespace character of the source.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from llama_index_ext_advrag.text.charsets import CJK, FULLWIDTH_FORMS, is_cjk_text, words
from llama_index_ext_advrag.text.lines import Line, LineKind, scan_lines

logger = logging.getLogger(__name__)


MAX_URL_CHARS = 2000

# Characters that stay with the sentence they close: quotes and brackets.
_CLOSERS = "\"'”’»›)）\\]】」』》〉〕"
_OPENERS = "\"'“‘«‹(（\\[【「『《〈〔"
# Citation markers glued to the end of a sentence: "…之一。[9][10]", "...shown.[3,4]".
_CITATIONS = r"(?:\[\d{1,3}(?:\s?[,，\-–]\s?\d{1,3})*\])*"
_CJK_STOPS = "。！？｡；"
# A URL ends at whitespace or CJK text ("见https://x.org/a该校…") and not on trailing punctuation.
_URL_CHARS = rf"[^\s<>\"{CJK}{FULLWIDTH_FORMS}]"
_URL_END = rf"[^\s<>\"'.,;:!?)\]}}{CJK}{FULLWIDTH_FORMS}]"
_BOUNDARY = re.compile(
    rf"(?P<url>(?:(?:https?|ftp)://|www\.){_URL_CHARS}{{0,{MAX_URL_CHARS}}}{_URL_END})"
    rf"|(?P<mark>[{_CJK_STOPS}!?…⋯]+)[{_CLOSERS}]*{_CITATIONS}"
    # Only at the first period of a run, so that "....." cannot make the scan quadratic.
    rf"|(?<!\.)(?P<dot>\.+)[{_CLOSERS}]*{_CITATIONS}(?=\s|$|[{CJK}])"
)
# Where a _BOUNDARY match can begin (one entry per opening of its branches: keep them in step),
# as literal alternatives so that the regex engine skips everything else in C; _BOUNDARY itself,
# opening with groups and a lookbehind, is tried at every offset.
_CANDIDATE = re.compile(
    "|".join(["https?://", "ftp://", r"www\.", r"\."] + [re.escape(c) for c in f"{_CJK_STOPS}!?…⋯"])
)
_LETTER = re.compile(r"[^\W\d_]")
_HAS_CJK_STOP = re.compile(f"[{_CJK_STOPS}]")
# The first word after a candidate end, past whitespace and opening quotes/brackets.
_FOLLOWING_WORD = re.compile(rf"\s*[{_OPENERS}]*(\w{{1,40}}|\S)?")
_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
_TRAILING_WORD = re.compile(r"[A-Za-z](?:[A-Za-z.]*[A-Za-z])?$")
_DOTTED_INITIALS = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")
_ABBREVIATION_WINDOW = 20

# Abbreviations after which a period never ends a sentence.
_ALWAYS_ABBREVIATIONS = words(
    "mr mrs ms mme mlle messrs dr prof rev hon gen col lt sgt capt st mt "
    "e.g i.e cf vs viz approx ca fig figs eq eqs vol vols pp dept univ assoc incl "
    "esp ibid op resp"
)
# Abbreviations that are not a sentence end before a word with a digit ("No. 5", "Jan. 3").
_NUMBER_ABBREVIATIONS = words(
    "no nos nr p ref refs sec ch chap art tab para est "
    "jan feb mar apr jun jul aug sep sept oct nov dec"
)
# Abbreviations that end a sentence only before a typical sentence opener ("… et al. The").
_SOFT_ABBREVIATIONS = words("al inc ltd co corp jr sr bros llc plc ave blvd rd")
_SENTENCE_OPENERS = words(
    "the this that these those there then thus however in it its we our they their he she "
    "his her a an as at but by for from if on one to when while with after although both each "
    "all most some many such furthermore moreover therefore here since despite during finally "
    "first further given i not other several similar though using what which who why how "
    "because overall notably importantly additionally also among another between you"
)
# A single newline after one of these continues the sentence, even before CJK text.
_CONTINUATION_ENDINGS = frozenset("，、,-–—(（[【「『《“‘")
# A hard-wrapped line ending in one of these continues on the next line: "of the\nUnited".
_FUNCTION_WORDS = words(
    "a an the of in on at to for from by with without into onto over under between among and "
    "or nor but than as is are was were be been being has have had that which who whose whom "
    "this these those its their our his her such both either neither per via vs"
)


@dataclass(frozen=True, slots=True)
class Sentence:
    """One sentence (or heading, list item, code block) of a source text.

    Attributes:
        text: The sentence, equal to ``source[start:end]``.
        start, end: Character offsets into the source text.
        is_heading: Whether the unit is a heading line (Markdown or numbered).
        section_title: Title of the enclosing section; a heading carries its own title. ``None``
            before the first heading.
        section_index: 0 before the first heading, incremented at every heading.
        cut: Whether this is a piece of a longer sentence cut by length
            (:func:`~llama_index_ext_advrag.text.cleaning.cut_long_sentences`).
    """

    text: str
    start: int
    end: int
    is_heading: bool = False
    section_title: str | None = None
    section_index: int = 0
    cut: bool = False


def _newline_ends_sentence(text: str, previous: Line, next_start: int) -> bool:
    """Whether a single newline between two plain lines ends the sentence.

    A newline is structural (metadata lines, titles, table rows, CJK lines) unless the next
    line visibly continues a hard-wrapped sentence: it starts lower-case or with an opening
    bracket, or the previous line ends with a comma, hyphen or dash, or with a function word
    such as "of the". Lines ending in terminal punctuation are cut by the punctuation rules
    inside the block anyway.
    """
    last, first = text[previous.end - 1], text[next_start]
    if first.islower() or first in "([" or last in _CONTINUATION_ENDINGS:
        return False
    if not last.isalpha() or is_cjk_text(last):
        return True
    space = text.rfind(" ", previous.start, previous.end)
    word_start = previous.start if space < 0 else space + 1  # a one-word line is its own word
    return text[word_start : previous.end].lower() not in _FUNCTION_WORDS


def _continues_list_item(text: str, previous: Line, next_start: int) -> bool:
    """Whether the next line continues a list item.

    It does when the item so far is a bare marker (``"1."`` alone on its line) or the next
    line is indented and starts lower-case.
    """
    if previous.kind is LineKind.LIST_ITEM and previous.body_start >= previous.end:
        return True
    return text[next_start - 1] in " \t\u3000" and text[next_start].islower()


def _abbreviation_blocks_end(text: str, dot: int, following: str) -> bool:
    """Whether the word before the period at ``dot`` makes it an abbreviation, not an end."""
    if dot == 0 or not text[dot - 1].isalpha():
        return False
    match = _TRAILING_WORD.search(text, max(0, dot - _ABBREVIATION_WINDOW), dot)
    if match is None:
        return False
    word = match.group()
    lowered = word.lower()
    if lowered in _ALWAYS_ABBREVIATIONS:
        return True
    if lowered in _NUMBER_ABBREVIATIONS:  # "No. 5", "accession no. EU714029"
        return any(char.isdigit() for char in following)
    # Initials ("J. Smith"), dotted acronyms ("U.S.", "p.m.") and "et al.", "Inc.".
    if (
        lowered in _SOFT_ABBREVIATIONS
        or (len(word) == 1 and word.isupper())
        or _DOTTED_INITIALS.fullmatch(word)
    ):
        return following.lower() not in _SENTENCE_OPENERS
    return False


def _following_word(text: str, position: int, block_end: int) -> str:
    """The word (or single symbol) after ``position``, past whitespace and opening quotes."""
    match = _FOLLOWING_WORD.match(text, position, block_end)
    return (match.group(1) or "") if match else ""


def _ends_sentence(text: str, match: re.Match[str], block_end: int) -> bool:
    """Decide whether a candidate found by ``_BOUNDARY`` ends a sentence."""
    end = match.end()
    if end >= block_end:
        return True
    following_char = text[end]
    if match.lastgroup == "mark":
        mark = match.group("mark")
        if _HAS_CJK_STOP.search(mark):
            # Japanese quotation followed by a quotative particle: 「…。」と言った
            return not (match.end("mark") < end and following_char in "とっ")
        if not following_char.isspace():
            return is_cjk_text(following_char)  # "好!我们" ends; "?q=1" does not
        word = _following_word(text, end, block_end)
        if not word:
            return True
        if word[0].islower():
            return False
        if mark[0] in "…⋯" and "!" not in mark and "?" not in mark:  # an ellipsis character
            after_cjk = match.start() > 0 and is_cjk_text(text[match.start() - 1])
            return after_cjk or word[0].isupper() or is_cjk_text(word[0])
        return True
    # A run of periods; the regex guarantees whitespace, the block end or CJK follows.
    dot_start = match.start()
    if not following_char.isspace():  # CJK right after the period: "构建.游戏上线"
        return dot_start == 0 or not text[dot_start - 1].isdigit()
    word = _following_word(text, end, block_end)
    if not word:
        return True
    first = word[0]
    if first.islower():
        return False
    if match.end("dot") - dot_start > 1:  # ellipsis: ends only before a capital or CJK
        return first.isupper() or is_cjk_text(first)
    if match.end("dot") == end:
        return not _abbreviation_blocks_end(text, dot_start, word)
    return True


def _boundaries(text: str, start: int, end: int) -> Iterator[re.Match[str]]:
    """``_BOUNDARY.finditer(text, start, end)``, trying the pattern only where one may begin."""
    position = start
    while (candidate := _CANDIDATE.search(text, position, end)) is not None:
        match = _BOUNDARY.match(text, candidate.start(), end)
        if match is None:
            position = candidate.start() + 1
        else:
            yield match
            position = match.end()


def _emit(
    text: str,
    start: int,
    end: int,
    out: list[Sentence],
    section: tuple[str | None, int],
    is_heading: bool = False,
) -> None:
    """Append ``text[start:end]`` without surrounding whitespace, unless it is blank."""
    piece = text[start:end]
    stripped = piece.strip()
    if stripped:
        offset = start + len(piece) - len(piece.lstrip())
        out.append(
            Sentence(stripped, offset, offset + len(stripped), is_heading, section[0], section[1])
        )


def _first_letter(text: str, start: int, end: int) -> int:
    """Offset of the first letter (any script) in ``text[start:end]``, or ``end``."""
    match = _LETTER.search(text, start, end)
    return match.start() if match else end


def _split_block(
    text: str,
    start: int,
    end: int,
    out: list[Sentence],
    section: tuple[str | None, int],
    scan_from: int | None = None,
) -> None:
    """Cut one block ``text[start:end]`` at its sentence ends.

    Candidates before ``scan_from`` (a list marker such as ``"19."``) are ignored. A piece
    without any letter (``"2.5."``, ``"[35] ."``, ``"1997;275:1793-6."``) is not a sentence
    of its own: it is glued to the next sentence, or to the previous one at the block's end.
    """
    current = start
    emitted = len(out)
    # First letter at or after ``current``; searched once per sentence to stay linear.
    letter = _first_letter(text, current, end)
    for match in _boundaries(text, start if scan_from is None else scan_from, end):
        cut = match.end()
        if letter < cut and match.lastgroup != "url" and _ends_sentence(text, match, end):
            _emit(text, current, cut, out, section)
            current = cut
            letter = _first_letter(text, current, end)
    if current >= end:
        return
    if len(out) > emitted and letter >= end:
        current = out.pop().start
    _emit(text, current, end, out, section)


def _block_end(text: str, lines: list[Line], first: int) -> int:
    """Index one past the last line of the block that begins at ``lines[first]``."""
    line = lines[first]
    if line.kind is LineKind.HEADING or line.kind is LineKind.CODE:
        return first + 1
    joins = _continues_list_item if line.kind is LineKind.LIST_ITEM else None
    index = first + 1
    while index < len(lines):
        nxt = lines[index]
        if nxt.kind is not LineKind.PLAIN or nxt.blank_before:
            break
        previous = lines[index - 1]
        if joins is not None:
            if not joins(text, previous, nxt.start):
                break
        elif _newline_ends_sentence(text, previous, nxt.start):
            break
        index += 1
    return index


def split_sentences(text: str) -> list[Sentence]:
    """Split ``text`` into sentences with character offsets.

    Headings (``#`` lines and conservative numbered headings), list items and fenced code
    blocks are units of their own; headings also open a new section, recorded on every
    following sentence.

    Args:
        text: Any text: Chinese, Japanese, English or a mixture, Markdown or plain.

    Returns:
        list[Sentence]: Sentences in reading order; ``[]`` for empty or whitespace-only text.

    Example:
        >>> [s.text for s in split_sentences("Dr. Smith arrived. 他来了！好。")]
        ['Dr. Smith arrived.', '他来了！', '好。']
    """
    lines = scan_lines(text)
    out: list[Sentence] = []
    section: tuple[str | None, int] = (None, 0)
    index = 0
    while index < len(lines):
        line = lines[index]
        stop = _block_end(text, lines, index)
        block_end = lines[stop - 1].end
        if line.kind is LineKind.HEADING:
            section = (line.title, section[1] + 1)
            _emit(text, line.start, block_end, out, section, is_heading=True)
        elif line.kind is LineKind.CODE:
            _emit(text, line.start, block_end, out, section)
        else:  # plain text, or a list item: its marker opens its first sentence
            scan_from = line.body_start if line.kind is LineKind.LIST_ITEM else None
            _split_block(text, line.start, block_end, out, section, scan_from)
        index = stop
    return out


def paragraph_breaks(text: str, sentences: Sequence[Sentence]) -> list[bool]:
    """Per sentence of ``text`` (as :func:`split_sentences` returns them), whether a blank line
    (a line of whitespace only) separates it from the next one; the last sentence gets ``False``.

    >>> text = "One. Two.\\n\\nThree.\\nFour."
    >>> paragraph_breaks(text, split_sentences(text))
    [False, True, False, False]
    """
    gaps = (text[a.end : b.start] for a, b in zip(sentences, sentences[1:], strict=False))
    return [bool(_BLANK_LINE.search(gap)) for gap in gaps] + [False] * bool(sentences)
