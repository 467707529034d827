"""Table loading of the pandas route, rule by rule: cleaning, the description's exact text, the
LLM summary's fallbacks and bounds, each pointer's text and id, and how a question names a
table."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.prompts import PromptTemplate

from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits
from llama_index_ext_advrag.tables.workbooks import (
    DEFAULT_TABLE_SUMMARY_PROMPT,
    clean_frame,
    describe_frame,
    read_workbook,
    summarize_frame,
    table_pointers,
    tables_named_in,
)

LIMITS = SandboxLimits(timeout_seconds=60, cpu_seconds=5, memory_mb=256)


def people() -> pd.DataFrame:
    return pd.DataFrame({"name": ["Ann", "Bo"], "age": [70, 50]})


def test_clean_frame_collapses_whitespace_in_names_and_text_cells_only() -> None:
    raw = pd.DataFrame({"United\n  States": ["New\nYork", 7, None], "n": [1, 2, 3]})
    cleaned = clean_frame(raw)
    assert list(cleaned.columns) == ["United States", "n"]
    assert cleaned["United States"].tolist()[:2] == ["New York", 7]
    assert cleaned["United States"].tolist()[2] is None
    assert list(raw.columns) == ["United\n  States", "n"]  # the input is not changed


def test_describe_frame_names_every_kind_and_the_first_three_rows() -> None:
    frame = pd.DataFrame(
        {
            "i": [1, 2, 3, 4],
            "u": pd.Series([1, 2, 3, 4], dtype="uint8"),
            "f": [0.5, 1.5, 2.5, 3.5],
            "b": [True, False, True, False],
            "d": pd.to_datetime(["2024-01-01"] * 4),
            "t": ["a", "b", "c", "d"],
        }
    )
    assert describe_frame("mixed", frame).splitlines() == [
        "Table 'mixed' (4 rows). Columns: i (integer), u (integer), f (number), b (yes/no), "
        "d (date), t (text).",
        "First rows:",
        "i | u | f | b | d | t",
        "1 | 1 | 0.5 | True | 2024-01-01 00:00:00 | a",
        "2 | 2 | 1.5 | False | 2024-01-01 00:00:00 | b",
        "3 | 3 | 2.5 | True | 2024-01-01 00:00:00 | c",
    ]
    assert describe_frame("mixed", frame, rows=1).count("\n") == 3


def test_summarize_frame_uses_the_default_or_the_given_template() -> None:
    llm = ScriptedLLM(["A table of people."])
    assert summarize_frame(llm, "DESCRIPTION") == "A table of people."
    assert llm.prompts == [DEFAULT_TABLE_SUMMARY_PROMPT.format(description="DESCRIPTION")]
    custom = ScriptedLLM(["Ages of people."])
    template = PromptTemplate("Sum up: {description}")
    assert summarize_frame(custom, "DESCRIPTION", template) == "Ages of people."
    assert custom.prompts == ["Sum up: DESCRIPTION"]


def test_summarize_frame_collapses_cuts_and_refuses_wordless_replies() -> None:
    assert summarize_frame(ScriptedLLM(["  Two\n\nlines  "]), "d") == "Two lines"
    long = summarize_frame(ScriptedLLM(["word " * 200]), "d")
    assert long is not None and len(long) == 400
    assert summarize_frame(ScriptedLLM(["123 | 456"]), "d") is None
    assert summarize_frame(ScriptedLLM([""]), "d") is None


def test_a_failing_summary_llm_is_logged_with_its_error(caplog) -> None:
    def fail(prompt: str) -> str:
        raise RuntimeError("boom")

    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.tables.workbooks"):
        assert summarize_frame(ScriptedLLM(fail), "d") is None
    assert [r.getMessage() for r in caplog.records] == [
        "table summary LLM failed (RuntimeError: boom); using the description"
    ]


def test_pointers_without_a_summary_use_the_description() -> None:
    pointers, engines = table_pointers({"people": people()}, summarize=False, limits=LIMITS)
    [pointer] = pointers
    assert pointer.get_content() == describe_frame("people", people())
    assert pointer.id_ == pointer.index_id == "table::people"
    assert pointer.metadata == {"table": "people"}
    engine = engines["table::people"]
    assert engine.limits == LIMITS
    assert engine.name == "people"
    assert engine.description == describe_frame("people", people())
    assert engine._df.equals(clean_frame(people()))  # the cleaned frame is the one queried


def test_summarize_false_never_calls_the_llm_but_hands_it_to_the_engines() -> None:
    llm = ScriptedLLM(["A summary."])
    pointers, engines = table_pointers({"people": people()}, llm=llm, summarize=False)
    assert pointers[0].get_content() == describe_frame("people", people())
    assert llm.prompts == []
    assert engines["table::people"]._llm is llm


def test_pointers_summarise_by_default_with_the_given_prompt() -> None:
    llm = ScriptedLLM(["People and their ages."])
    pointers, _ = table_pointers(
        {"people": people()}, llm=llm, summary_prompt=PromptTemplate("S: {description}")
    )
    header = describe_frame("people", people()).splitlines()[0]
    assert pointers[0].get_content() == f"People and their ages.\n{header}"
    assert llm.prompts == [f"S: {describe_frame('people', people())}"]


def test_a_given_summary_wins_and_the_llm_is_not_called() -> None:
    llm = ScriptedLLM(["from the LLM"])
    pointers, _ = table_pointers({"people": people()}, llm=llm, summaries={"people": "Given."})
    header = describe_frame("people", people()).splitlines()[0]
    assert pointers[0].get_content() == f"Given.\n{header}"
    assert llm.prompts == []


def test_no_frames_are_refused() -> None:
    with pytest.raises(ValueError) as caught:
        table_pointers({})
    assert str(caught.value) == "frames must hold at least one DataFrame, got none"


def test_read_workbook(tmp_path) -> None:
    path = tmp_path / "t.xlsx"
    with pd.ExcelWriter(path) as writer:
        people().to_excel(writer, sheet_name="People", index=False)
    frames = read_workbook(path)
    assert list(frames) == ["People"]
    assert frames["People"].to_dict("list") == {"name": ["Ann", "Bo"], "age": [70, 50]}
    with pytest.raises(FileNotFoundError) as caught:
        read_workbook(tmp_path / "gone.xlsx")
    assert str(caught.value) == f"workbook {str(tmp_path / 'gone.xlsx')!r} not found"


@pytest.mark.parametrize(
    ("query", "names", "named"),
    [
        ("Show the Bigstaff list", ["Staff"], []),  # cut on the left
        ("Totals of Q1 (draft)s", ["Q1 (draft)"], ["Q1 (draft)"]),  # ends on a non-word
        ("", ["", "Staff"], []),
        ("Staff count", ["", "Staff"], ["Staff"]),  # a blank name is passed over
        ("Staff count vs Staffing", ["Staff"], ["Staff"]),  # first of two occurrences
        ("Staffing, Staff, Staffing", ["Staff"], ["Staff"]),  # the middle one of three
        ("X哈哈哈", ["哈哈", "X哈哈"], ["哈哈", "X哈哈"]),  # an overlapping occurrence
    ],
)
def test_tables_named_in_edges(query: str, names: list[str], named: list[str]) -> None:
    assert tables_named_in(query, names) == named
