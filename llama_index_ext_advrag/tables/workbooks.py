"""Table loading of the pandas route: read workbooks, clean tables, describe them, build pointers.

Each table becomes an :class:`IndexNode` pointer (its text: a given summary, a summary written
by the LLM, or the name, columns and first rows) and a
:class:`~.pandas_engine.SafePandasQueryEngine` that answers questions over it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.schema import IndexNode

from llama_index_ext_advrag.tables.pandas_engine import (
    SafePandasQueryEngine,
    resolve_code_llm,
)
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits

logger = logging.getLogger(__name__)

DEFAULT_TABLE_SUMMARY_PROMPT = (
    "Here is a table.\n{description}\n\nIn one or two sentences, say what this table "
    "contains and which questions it can answer.\nSummary: "
)
TABLE_PREFIX = "table::"
_ASCII_WORD = re.compile(r"[A-Za-z0-9_]")


def clean_frame(frame: Any) -> Any:
    """A copy with whitespace runs (embedded newlines) collapsed in column names and text cells,
    so generated code can say ``df["United States"]`` for a cell typed as ``United\\nStates``."""
    cleaned = frame.copy()
    cleaned.columns = [" ".join(str(c).split()) for c in cleaned.columns]
    for column in cleaned.columns:
        if cleaned[column].dtype == object:
            cleaned[column] = cleaned[column].map(
                lambda v: " ".join(v.split()) if isinstance(v, str) else v
            )
    return cleaned


def describe_frame(name: str, frame: Any, rows: int = 3) -> str:
    """The table's name, size, columns with kinds, and its first ``rows`` rows."""
    kinds = {"i": "integer", "u": "integer", "f": "number", "b": "yes/no", "M": "date"}
    columns = ", ".join(f"{c} ({kinds.get(frame[c].dtype.kind, 'text')})" for c in frame.columns)
    lines = [f"Table {name!r} ({len(frame)} rows). Columns: {columns}.", "First rows:"]
    lines.append(" | ".join(str(c) for c in frame.columns))
    for row in frame.head(rows).itertuples(index=False):
        lines.append(" | ".join(str(v) for v in row))
    return "\n".join(lines)


def summarize_frame(
    llm: LLM, description: str, template: BasePromptTemplate | None = None
) -> str | None:
    """A short LLM-written summary of the table, ``None`` when the answer has no words or the
    LLM call fails (logged: the pointer then uses the description). ``template`` (variable
    ``description``) defaults to :data:`DEFAULT_TABLE_SUMMARY_PROMPT`."""
    prompt = (template or PromptTemplate(DEFAULT_TABLE_SUMMARY_PROMPT)).format(
        description=description
    )
    try:
        text = llm.complete(prompt).text
    except Exception as error:  # an LLM failing is normal: the description is a summary too
        logger.warning(
            "table summary LLM failed (%s: %s); using the description", type(error).__name__, error
        )
        return None
    text = " ".join(text.split())[:400]
    return text if any(ch.isalpha() for ch in text) else None


def table_pointers(
    frames: Mapping[str, Any],
    llm: LLM | None = None,
    summaries: Mapping[str, str] | None = None,
    summarize: bool = True,
    limits: SandboxLimits | None = None,
    summary_prompt: BasePromptTemplate | None = None,
) -> tuple[list[IndexNode], dict[str, SafePandasQueryEngine]]:
    """One pointer and one safe pandas engine per (cleaned) DataFrame, keyed ``table::<name>``.

    The pointer text is ``summaries[name]`` when given, else a summary written by the LLM (when
    an LLM resolves and ``summarize``), else derived from the name, columns and first rows; the
    table's name and columns line is always appended. ``summary_prompt`` (variable
    ``description``) replaces :data:`DEFAULT_TABLE_SUMMARY_PROMPT`.

    Raises:
        ValueError: ``frames`` is empty.
    """
    if not frames:
        raise ValueError("frames must hold at least one DataFrame, got none")
    writer = resolve_code_llm(llm) if summarize else None
    pointers, engines = [], {}
    for name, raw in frames.items():
        frame = clean_frame(raw)
        description = describe_frame(str(name), frame)
        summary = (summaries or {}).get(name)
        if summary is None and writer is not None:
            summary = summarize_frame(writer, description, summary_prompt)
        header = description.splitlines()[0]
        text = f"{summary}\n{header}" if summary else description
        target = f"{TABLE_PREFIX}{name}"
        pointers.append(
            IndexNode(text=text, index_id=target, id_=target, metadata={"table": str(name)})  # type: ignore[call-arg]
        )
        engines[target] = SafePandasQueryEngine(
            frame, llm=llm, name=str(name), description=description, limits=limits
        )
    return pointers, engines


def _spaced(text: str) -> str:
    return " ".join(text.split()).casefold()


def _is_whole(text: str, start: int, stop: int) -> bool:
    """Whether ``text[start:stop]`` does not cut a Latin word or number at either end (CJK
    text has no spaces, so a name followed by a CJK character still counts)."""
    inside = (text[start], text[stop - 1])
    outside = (text[start - 1] if start else "", text[stop] if stop < len(text) else "")
    return not any(
        _ASCII_WORD.match(i) and _ASCII_WORD.match(o) for i, o in zip(inside, outside, strict=True)
    )


def tables_named_in(query: str, names: Sequence[str]) -> list[str]:
    """The table ``names`` that ``query`` names, in ``names`` order.

    A name counts when it occurs in the query (case and runs of whitespace ignored) without
    cutting a Latin word or number (``"Staff"`` is not named by "Staffing", ``"2023"`` not by
    "20231"); a name found only inside a longer named one (``"Sales"`` in "Sales 2023") does
    not count.

    >>> tables_named_in("Total of 2023年销售 by region?", ["2023年销售", "Staff", "2023"])
    ['2023年销售']
    """
    text = _spaced(query)
    spans: dict[str, list[tuple[int, int]]] = {}
    for name in names:
        needle = _spaced(name)
        if not needle:
            continue
        found = []
        start = text.find(needle)
        while start >= 0:
            if _is_whole(text, start, start + len(needle)):
                found.append((start, start + len(needle)))
            start = text.find(needle, start + 1)
        if found:
            spans[name] = found
    longer = [(a, b, n) for n, found in spans.items() for a, b in found]
    return [
        name
        for name, found in spans.items()
        if any(
            not any(a <= start and stop <= b and b - a > stop - start for a, b, _ in longer)
            for start, stop in found
        )
    ]


def read_workbook(path: str | Path) -> dict[str, Any]:
    """Every sheet of the workbook at ``path`` as a DataFrame, by sheet name.

    Raises:
        FileNotFoundError: no file at ``path``.
    """
    if not Path(path).is_file():
        raise FileNotFoundError(f"workbook {str(path)!r} not found")
    import pandas as pd

    return dict(pd.read_excel(path, sheet_name=None))


__all__ = [
    "DEFAULT_TABLE_SUMMARY_PROMPT",
    "clean_frame",
    "describe_frame",
    "read_workbook",
    "summarize_frame",
    "table_pointers",
    "tables_named_in",
]
