"""The documents of a comparison: text files and workbook sheets, stable ids, clear errors."""

from __future__ import annotations

import pandas as pd
import pytest

from llama_index_ext_advrag.evaluation import DocumentError, load_corpus


def test_text_files_and_every_sheet_of_a_workbook(tmp_path) -> None:
    (tmp_path / "a.md").write_text("# Title\nBody text.", encoding="utf-8")
    (tmp_path / "README.md").write_text("not a document", encoding="utf-8")
    with pd.ExcelWriter(tmp_path / "t.xlsx") as writer:
        pd.DataFrame({"Name": ["A\nB", "C"], "N": [1, 2]}).to_excel(
            writer, sheet_name="2023年", index=False
        )
        pd.DataFrame({"X": [3]}).to_excel(writer, sheet_name="Other", index=False)
    docs = {d.id_: d for d in load_corpus([tmp_path])}
    assert set(docs) == {"a.md", "t.xlsx#2023年", "t.xlsx#Other"}
    assert docs["t.xlsx#2023年"].text.splitlines() == [
        "Table: 2023年",
        "Name | N",
        "A B | 1",
        "C | 2",
    ]
    assert docs["t.xlsx#2023年"].metadata == {"file_name": "t.xlsx", "sheet_name": "2023年"}


def test_a_missing_path_and_an_empty_folder_are_named(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="missing"):
        load_corpus([tmp_path / "missing"])
    with pytest.raises(DocumentError, match="no .md/.txt/.xlsx documents found under"):
        load_corpus([tmp_path])
