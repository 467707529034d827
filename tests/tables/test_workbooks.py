"""Table loading helpers of the pandas route: which tables a question names."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.tables.workbooks import tables_named_in

NAMES = ["Staff", "Warehouses", "2023年销售", "2023", "Sales", "Sales 2023", "Q&A (draft)"]


@pytest.mark.parametrize(
    ("question", "named"),
    [
        ("How many people in Staff work in Lisbon?", ["Staff"]),
        ("how many people in STAFF work in lisbon?", ["Staff"]),  # case ignored
        ("2023年销售的华东销量是多少？", ["2023年销售"]),  # CJK: no word boundary needed
        ("What were sales in 2023?", ["2023", "Sales"]),
        ("Total of Sales   2023 by region", ["Sales 2023"]),  # whitespace runs, longest name
        ("Sales 2023 vs Sales", ["Sales", "Sales 2023"]),  # "Sales" also stands alone
        ("Staffing costs in 20231", []),  # no Latin word or number is cut
        ("What is in Q&A (draft)?", ["Q&A (draft)"]),
        ("Which city has the most capacity?", []),
        ("", []),
    ],
)
def test_tables_named_in(question: str, named: list[str]) -> None:
    assert tables_named_in(question, NAMES) == named


def test_blank_names_never_match() -> None:
    assert tables_named_in("anything at all", ["", "  "]) == []
