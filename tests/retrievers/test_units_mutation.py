"""The two-layer retriever's units pinned exactly (found by mutation testing, issue #39):
table cells and Markdown rows, byte-bounded parts, sheet and document units, titles, the
metadata and the warnings naming a skipped document."""

from __future__ import annotations

import logging
from pathlib import Path

import pandas as pd
import pytest
from llama_index.core import Document

from llama_index_ext_advrag.retrievers._units import (
    UnitGranularity,
    UnitKind,
    clean_cell,
    cut_oversized,
    document_title,
    document_units,
    leading_text,
    render_rows,
    split_by_bytes,
    table_unit,
    workbook_units,
)

LOGGER = "llama_index_ext_advrag.retrievers._units"


def test_clean_cell_empties_none_and_nan_only() -> None:
    assert clean_cell(None) == ""
    assert clean_cell(float("nan")) == ""
    assert clean_cell(1.5) == "1.5"
    assert clean_cell(" a\nb | c ") == "a b / c"


def test_render_rows_writes_a_markdown_table() -> None:
    assert render_rows(["a", None], [[1, "x|y"], [None, 2]]) == [
        "| a |  |",
        "|---|---|",
        "| 1 | x/y |",
        "|  | 2 |",
    ]


def test_cut_oversized_keeps_a_text_of_exactly_max_bytes_and_cuts_by_a_quarter() -> None:
    assert cut_oversized("abcd", 4) == ["abcd"]
    assert cut_oversized("abcde", 4) == ["a", "b", "c", "d", "e"]  # step max(1, 4 // 4)
    assert cut_oversized("x" * 10, 8) == ["xx"] * 5  # step 8 // 4


def test_split_by_bytes_fills_a_part_up_to_max_bytes_exactly() -> None:
    # The head counts its own size + 1, each line its size + 1.
    lines = ["abc", "abc", "abc"]
    assert split_by_bytes("H", lines, max_bytes=10) == ["H\nabc\nabc", "H\nabc"]
    assert split_by_bytes("H", lines, max_bytes=9) == ["H\nabc"] * 3


def test_split_by_bytes_allows_a_head_of_half_the_budget() -> None:
    assert split_by_bytes("HHHH", ["a"], max_bytes=10) == ["HHHH\na"]
    with pytest.raises(ValueError, match="a part header of 6 bytes leaves no room in 10 bytes"):
        split_by_bytes("HHHHH", ["a"], max_bytes=10)


def test_split_by_bytes_cuts_an_oversized_line_to_fit_beside_the_head() -> None:
    parts = split_by_bytes("H", ["x" * 9], max_bytes=10)  # 9 bytes > 10 - 2: cut, step 2
    assert parts == ["H\nxx", "H\nxx", "H\nxx", "H\nxx", "H\nx"]
    assert split_by_bytes("H", ["汉汉汉"], max_bytes=10) == ["H\n汉汉", "H\n汉"]  # two pieces


def test_split_by_bytes_goes_on_after_an_oversized_line() -> None:
    parts = split_by_bytes("H", ["ab", "x" * 9, "cd"], max_bytes=10)
    assert parts == ["H\nab", "H\nxx", "H\nxx", "H\nxx", "H\nxx", "H\nx", "H\ncd"]


def test_table_unit_details_summary_and_metadata_exactly() -> None:
    unit = table_unit("Sales 2022 and 2023", ["Item", "Count"], [["pens", 3], ["ink"]], 2)
    assert unit.name == unit.key == "Sales 2022 and 2023" and unit.kind is UnitKind.TABLE
    assert unit.details == (
        "Table: Sales 2022 and 2023\n| Item | Count |\n|---|---|\n| pens | 3 |\n| ink |",
    )
    assert unit.summary.splitlines() == [
        "Table: Sales 2022 and 2023",
        "Year: 2022 (2022年), 2023 (2023年)",
        "Columns: Item, Count",
        "2 rows.",
        "Item: pens; Count: 3",
        "Item: ink",  # a short row: the cells it has
    ]
    assert unit.metadata == {"num_rows": 2, "columns": "Item, Count"}


def make_workbook(path: Path) -> Path:
    frames = {
        "Empty": pd.DataFrame(),
        "Stock": pd.DataFrame(
            {"Item": ["pens", "ink", "paper"], "Note": ["blue", None, "A4"], "Blank": [None] * 3}
        ),
    }
    with pd.ExcelWriter(path) as writer:
        for name, frame in frames.items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return path


def test_workbook_units_skip_an_empty_sheet_and_empty_columns_only(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = make_workbook(tmp_path / "book.xlsx")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        (unit,) = workbook_units(path, summary_rows=1)
    assert caplog.messages == [f"skipping empty sheet 'Empty' of {path}"]
    assert unit.name == "Stock"
    assert unit.metadata == {"num_rows": 3, "columns": "Item, Note"}  # Blank dropped, Note kept
    assert unit.summary.splitlines()[-1] == "Item: pens; Note: blue"  # one summary row


def test_document_title_takes_the_first_line_cut_at_120() -> None:
    doc = Document(text="x", id_="d")
    assert document_title(doc, "First line here\nSecond line\nThird line") == "First line here"
    assert document_title(doc, "y" * 130) == "y" * 120


def test_document_title_looks_for_a_heading_in_the_first_20_sentences_only() -> None:
    doc = Document(text="x", id_="d")
    first = " ".join(f"Word{i} is here." for i in range(20))
    assert document_title(doc, f"{first}\n# Late heading\n\nBody text.") == first[:120]
    nineteen = " ".join(f"Word{i} is here." for i in range(19))
    assert document_title(doc, f"{nineteen}\n# Heading\n\nBody text.") == "Heading"


def test_leading_text_joins_the_first_sentences_with_a_space() -> None:
    assert leading_text("# Head\n\nOne here. Two here. Three here.", 2) == "One here. Two here."


def test_document_units_metadata_kind_and_summary_exactly() -> None:
    doc = Document(
        text="Preamble one. Preamble two.\n\n# Part\n\nBody one. Body two.",
        id_="d",
        metadata={"author": "Ann"},
    )
    whole = document_units([doc], UnitGranularity.DOCUMENT, 64, leading_sentences=1)
    assert whole[0].kind is UnitKind.DOCUMENT
    assert whole[0].summary == "Part\nPreamble one."  # the title: the first heading
    assert whole[0].metadata == {"author": "Ann", "document_id": "d", "title": "Part"}
    assert "Ann" not in "".join(whole[0].details)  # the text alone, no metadata
    sections = document_units([doc], UnitGranularity.SECTION, 64)
    assert [u.kind for u in sections] == [UnitKind.SECTION] * 2
    assert [(u.metadata["section_title"], u.metadata["section_index"]) for u in sections] == [
        ("", 0),
        ("Part", 1),
    ]
    assert sections[1].summary == "Part\nBody one. Body two."


def test_document_units_warn_naming_a_skipped_document_and_go_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    docs = [
        Document(text="  ", id_="blank"),
        Document(text="# Only a heading", id_="heading"),
        Document(text="Some body text.", id_="good"),
    ]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        units = document_units(docs, UnitGranularity.DOCUMENT, 64)
    assert [u.key for u in units] == ["good"]
    assert caplog.messages == [
        "document 'blank' has no text: it is not indexed",
        "document 'heading' has no sentence outside headings: it is not indexed",
    ]
