"""Sections of a text, delimited by the headings that sentence splitting recognises.

A section runs from one heading to the next heading of any level (the list is flat; nest by
``level`` if needed). Text before the first heading forms a preamble section with
``title=None`` and ``level=0``. Sections tile the text: the first starts at 0, each ends where
the next starts and the last ends at ``len(text)``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from llama_index_ext_advrag.text.lines import LineKind, scan_lines

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Section:
    """A heading and the text under it, as offsets into the source text.

    Attributes:
        title: The heading title (``"Installation"`` for ``"## Installation"``, the whole line for
            numbered headings such as ``"2.3 Installation"``); ``None`` for the preamble.
        level: Heading level: number of ``#``, or depth of the heading number; 0 for the preamble.
        start, end: Character offsets; ``source[start:end]`` includes the heading line itself.
        index: The ``section_index`` carried by this section's sentences: 0 for the preamble, ``k``
            for the ``k``-th heading.
    """

    title: str | None
    level: int
    start: int
    end: int
    index: int = 0


def find_sections(text: str) -> list[Section]:
    """Find the sections of ``text``.

    Args:
        text: Any text; Markdown ``#`` headings and conservative numbered headings are recognised,
            exactly as in :func:`~llama_index_ext_advrag.text.split_sentences`.

    Returns:
        list[Section]: Contiguous sections covering ``text``; ``[]`` for empty or whitespace-only
            text. A preamble section is included only when it holds non-whitespace text; otherwise
            the first heading's section starts at offset 0.

    Example:
        >>> [(s.title, s.level) for s in find_sections("Intro.\\n# A\\nx\\n## B\\ny")]
        [(None, 0), ('A', 1), ('B', 2)]
    """
    lines = scan_lines(text)
    if not lines:
        return []
    headings = [line for line in lines if line.kind is LineKind.HEADING]
    sections: list[Section] = []
    if not headings or lines[0].kind is not LineKind.HEADING:
        end = headings[0].start if headings else len(text)
        sections.append(Section(None, 0, 0, end, 0))
    for number, heading in enumerate(headings, start=1):
        start = heading.start if sections else 0
        end = headings[number].start if number < len(headings) else len(text)
        sections.append(Section(heading.title, heading.level, start, end, number))
    return sections
