"""Coverage metrics and corpus/QA loaders."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from llama_index_ext_advrag.evaluation import (
    answer_covered,
    load_documents,
    load_qa,
    normalize_for_match,
)
from llama_index_ext_advrag.evaluation.metrics import QuestionRun, format_table, summarize_runs


def test_normalize_folds_case_and_whitespace() -> None:
    assert normalize_for_match("  Hello\n\tWORLD ") == "hello world"
    assert normalize_for_match("黑神话\n悟空") == "黑神话悟空"


def test_answer_covered_requires_every_part() -> None:
    context = "The pump runs at 3.5 bar.\nIt stops at\n 40 °C."
    assert answer_covered(context, ["3.5 BAR", "40 °C"])
    assert not answer_covered(context, ["3.5 bar", "45 °C"])
    assert answer_covered(context, ["3.5 bar", "45 °C"], require_all=False)
    assert not answer_covered(context, [])


def test_summarize_runs_hand_computed() -> None:
    runs = [
        QuestionRun("p", "1", "single-hop", True, 100, 10.0),
        QuestionRun("p", "2", "single-hop", False, 300, 30.0),
        QuestionRun("p", "3", "distractor", True, 200, 20.0),
    ]
    rows = {(s.pipeline, s.group): s for s in summarize_runs(runs)}
    assert rows[("p", "all")].coverage == pytest.approx(2 / 3)
    assert rows[("p", "all")].mean_context_tokens == pytest.approx(200.0)
    assert rows[("p", "single-hop")].coverage == pytest.approx(0.5)
    assert rows[("p", "all")].p50_latency_ms == pytest.approx(20.0)
    assert "single-hop" in format_table(list(rows.values()))


def test_load_documents_text_and_workbook(tmp_path) -> None:
    (tmp_path / "a.md").write_text("# Title\nBody text.", encoding="utf-8")
    (tmp_path / "README.md").write_text("not a document", encoding="utf-8")
    with pd.ExcelWriter(tmp_path / "t.xlsx") as writer:
        pd.DataFrame({"Name": ["A\nB", "C"], "N": [1, 2]}).to_excel(
            writer, sheet_name="2023年", index=False
        )
        pd.DataFrame({"X": [3]}).to_excel(writer, sheet_name="Other", index=False)
    docs = {d.id_: d for d in load_documents(tmp_path)}
    assert set(docs) == {"a.md", "t.xlsx#2023年", "t.xlsx#Other"}
    assert "A B | 1" in docs["t.xlsx#2023年"].text  # embedded newlines folded
    assert docs["t.xlsx#2023年"].metadata["sheet_name"] == "2023年"


def test_load_documents_errors(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        load_documents(tmp_path / "missing")
    with pytest.raises(ValueError, match="no .md"):
        load_documents(tmp_path)


def test_load_qa_validates(tmp_path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(
        json.dumps({"id": 1, "question": "q?", "answers": ["a"], "type": "distractor", "x": 1})
        + "\n\n",
        encoding="utf-8",
    )
    (item,) = load_qa(path)
    assert item.id == "1" and item.answers == ("a",) and item.type == "distractor"
    assert item.extra == {"x": 1}
    path.write_text('{"id": 1, "question": "q?"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r":1: missing field\(s\) \['answers'\]"):
        load_qa(path)
    path.write_text("{nope\n", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_qa(path)
