"""Units of the two-layer retriever: what is routed (a summary) and what answers (the details).

Pure functions: a workbook sheet or a document (or one of its sections) becomes a
:class:`Unit` with a routing text and one or more detail texts. No Milvus, no model here;
the optional LLM summary is applied by the builder.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_ext_advrag.layout import DOCUMENT_ID_KEY
from llama_index_ext_advrag.node_parser.hierarchical import pack_sentences
from llama_index_ext_advrag.node_parser.inputs import clean_document, unique_document_ids
from llama_index_ext_advrag.text import count_tokens, find_sections, split_sentences

logger = logging.getLogger(__name__)

# Milvus VARCHAR limits are in bytes (65,535); leave room for the row's other fields.
MAX_DETAIL_BYTES = 60_000
DEFAULT_SUMMARY_ROWS = 3
DEFAULT_LEADING_SENTENCES = 3
_YEAR = re.compile(r"(?<!\d)(1[89]\d\d|20\d\d)(?!\d)")
_TITLE_KEYS = ("title", "file_name", "filename", "name")


class UnitKind(str, Enum):
    TABLE = "table"
    DOCUMENT = "document"
    SECTION = "section"


class UnitGranularity(str, Enum):
    """What one routed unit is when building from documents."""

    DOCUMENT = "document"
    SECTION = "section"


@dataclass(frozen=True)
class Unit:
    """One routable unit: ``key`` links its summary row to its detail rows."""

    key: str
    name: str
    kind: UnitKind
    summary: str
    details: tuple[str, ...]
    metadata: dict[str, Any] = field(default_factory=dict)


def year_tokens(text: str) -> list[str]:
    """Four-digit years (1800-2099) mentioned in ``text``, in order, without repeats."""
    return list(dict.fromkeys(_YEAR.findall(text)))


def clean_cell(value: Any) -> str:
    """A table cell as one line of text (embedded newlines and pipes would break the table)."""
    if value is None or (isinstance(value, float) and value != value):  # NaN
        return ""
    return " ".join(str(value).split()).replace("|", "/")


def render_rows(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """Markdown table lines: header, separator, one line per row."""
    header = "| " + " | ".join(clean_cell(c) for c in columns) + " |"
    separator = "|" + "|".join("---" for _ in columns) + "|"
    return [header, separator, *("| " + " | ".join(clean_cell(v) for v in r) + " |" for r in rows)]


def cut_oversized(text: str, max_bytes: int) -> list[str]:
    """``text`` in pieces of at most ``max_bytes`` UTF-8 bytes (cut between characters)."""
    if len(text.encode("utf-8")) <= max_bytes:
        return [text]
    step = max(1, max_bytes // 4)  # a character takes at most 4 bytes
    return [text[i : i + step] for i in range(0, len(text), step)]


def split_by_bytes(head: str, lines: Sequence[str], max_bytes: int = MAX_DETAIL_BYTES) -> list[str]:
    """Group ``lines`` into texts of at most ``max_bytes`` UTF-8 bytes, each starting with
    ``head`` (a table's title and header), so every part reads on its own."""
    head_size = len(head.encode("utf-8")) + 1
    if head_size * 2 > max_bytes:
        raise ValueError(f"a part header of {head_size} bytes leaves no room in {max_bytes} bytes")
    parts: list[str] = []
    current: list[str] = []
    size = head_size
    for line in lines:
        pieces = cut_oversized(line, max_bytes - head_size)
        line_size = len(line.encode("utf-8")) + 1
        if len(pieces) > 1 or (current and size + line_size > max_bytes):
            if current:
                parts.append("\n".join([head, *current]))
            current, size = [], head_size
        if len(pieces) > 1:  # an oversized line gets parts of its own, cut between characters
            parts.extend("\n".join([head, piece]) for piece in pieces)
            continue
        current.append(line)
        size += line_size
    if current or not parts:
        parts.append("\n".join([head, *current]))
    return parts


def table_unit(
    name: str, columns: Sequence[Any], rows: Sequence[Sequence[Any]], summary_rows: int
) -> Unit:
    """A sheet as a unit: the summary is its name, year tokens, columns and first rows; the
    details are the whole table as Markdown (rows embedded separately lose the table's
    meaning), split into self-contained parts only when it exceeds Milvus' text limit."""
    column_names = [clean_cell(c) for c in columns]
    lines = render_rows(column_names, rows)
    head = "\n".join([f"Table: {name}", *lines[:2]])
    details = tuple(split_by_bytes(head, lines[2:]))
    years = year_tokens(name)
    summary_lines = [f"Table: {name}"]
    if years:
        summary_lines.append("Year: " + ", ".join(f"{y} ({y}年)" for y in years))
    summary_lines.append(f"Columns: {', '.join(column_names)}")
    summary_lines.append(f"{len(rows)} rows.")
    for row in rows[:summary_rows]:
        cells = (f"{c}: {clean_cell(v)}" for c, v in zip(column_names, row, strict=False))
        summary_lines.append("; ".join(cells))
    return Unit(
        key=name,
        name=name,
        kind=UnitKind.TABLE,
        summary="\n".join(summary_lines),
        details=details,
        metadata={"num_rows": len(rows), "columns": ", ".join(column_names)},
    )


def workbook_units(path: str | Path, summary_rows: int = DEFAULT_SUMMARY_ROWS) -> list[Unit]:
    """One unit per non-empty sheet of an Excel workbook, in sheet order."""
    import pandas as pd

    sheets = pd.read_excel(path, sheet_name=None)
    units = []
    for name, frame in sheets.items():
        frame = frame.dropna(how="all").dropna(axis=1, how="all")
        if frame.empty:
            logger.info("skipping empty sheet %r of %s", name, path)
            continue
        rows = frame.astype(object).values.tolist()
        units.append(table_unit(str(name), list(frame.columns), rows, summary_rows))
    return units


def document_title(document: BaseNode, text: str) -> str:
    """A document's title: a title-like metadata value, its first heading, or its first line."""
    for key in _TITLE_KEYS:
        value = document.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    for sentence in split_sentences(text)[:20]:
        if sentence.is_heading and sentence.section_title:
            return sentence.section_title
    first_line = text.strip().split("\n", 1)[0]
    return first_line[:120] or document.node_id


def leading_text(text: str, sentences: int = DEFAULT_LEADING_SENTENCES) -> str:
    """The first ``sentences`` non-heading sentences of ``text``."""
    body = [s.text for s in split_sentences(text) if not s.is_heading]
    return " ".join(body[:sentences])


def chunk_text(text: str, chunk_tokens: int) -> list[str]:
    """Sentence-aligned chunks of at most ``chunk_tokens`` tokens (a longer sentence stands
    alone), each within Milvus' text limit."""
    sentences = split_sentences(text)
    if not sentences:
        return []
    tokens = [count_tokens(s.text) for s in sentences]
    spans = pack_sentences(tokens, 0, len(sentences), chunk_tokens, [False] * len(sentences))
    chunks = []
    for first, stop in spans:
        chunk = text[sentences[first].start : sentences[stop - 1].end]
        chunks.extend(cut_oversized(chunk, MAX_DETAIL_BYTES))
    return [c.strip() for c in chunks if c.strip()]


def document_units(
    documents: Sequence[BaseNode],
    granularity: UnitGranularity,
    chunk_tokens: int,
    leading_sentences: int = DEFAULT_LEADING_SENTENCES,
) -> list[Unit]:
    """Units from documents: one per document, or one per section with body text. The
    heuristic summary is the (document and section) title plus the leading sentences.

    Each unit keeps its document's own metadata (``source_url``, ``author``, ...), under the
    keys the units write (``document_id``, ``title``, section keys). A document without text
    or without a sentence that is not a heading is skipped with a warning naming it; lone
    surrogates are replaced with U+FFFD (warned). A document whose id an earlier one has is
    kept under ``"<id>#1"`` (warned), as the parsers do (:func:`unique_document_ids`)."""
    units: list[Unit] = []
    for original, document_id in zip(documents, unique_document_ids(documents), strict=True):
        document = clean_document(original)
        text = document.get_content(metadata_mode=MetadataMode.NONE)
        if not text.strip():
            logger.warning("document %r has no text: it is not indexed", document_id)
            continue
        title = document_title(document, text)
        base = {**document.metadata, DOCUMENT_ID_KEY: document_id, "title": title}
        before = len(units)
        pieces: list[tuple[str, str, str, UnitKind, dict[str, Any]]]
        if granularity is UnitGranularity.DOCUMENT:
            pieces = [(document_id, title, text, UnitKind.DOCUMENT, {})]
        else:
            pieces = [
                (
                    f"{document_id}#{section.index}",
                    f"{title} / {section.title}"
                    if section.title and section.title != title
                    else title,
                    text[section.start : section.end],
                    UnitKind.SECTION,
                    {"section_title": section.title or "", "section_index": section.index},
                )
                for section in find_sections(text)
            ]
        for key, name, piece, kind, extra in pieces:
            lead = leading_text(piece, leading_sentences)
            details = chunk_text(piece, chunk_tokens)
            if not lead or not details:
                continue  # a heading without body text routes nowhere useful
            units.append(
                Unit(
                    key=key,
                    name=name,
                    kind=kind,
                    summary=f"{name}\n{lead}",
                    details=tuple(details),
                    metadata={**base, **extra},
                )
            )
        if len(units) == before:
            logger.warning(
                "document %r has no sentence outside headings: it is not indexed", document_id
            )
    return units
