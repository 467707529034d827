"""The documents of a comparison, rule by rule: every dataset corpus (SQuAD, HotpotQA, RGB,
BEIR) with its ids and metadata, which files a folder gives, and each error's message."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest

from llama_index_ext_advrag.evaluation.questions import rgb_passage_id
from llama_index_ext_advrag.evaluation.sources import DocumentError, load_corpus, sheet_to_text


def write_json(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows), encoding="utf-8")
    return path


def shape(documents) -> list[tuple[str, str, dict]]:
    return [(d.id_, d.text, d.metadata) for d in documents]


def test_a_squad_file_gives_its_paragraphs_with_titles_and_stable_ids(tmp_path: Path) -> None:
    squad = {
        "data": [
            {
                "title": "Pumps",
                "paragraphs": [
                    {"context": "First paragraph.", "qas": []},
                    {"context": "Second paragraph.", "document_id": "own-id", "qas": []},
                ],
            },
            {"paragraphs": [{"context": "Untitled paragraph.", "qas": []}]},
            {"title": "Empty article"},
        ]
    }
    documents = load_corpus([write_json(tmp_path / "sq.json", squad)])
    assert shape(documents) == [
        ("0-0", "First paragraph.", {"file_name": "sq.json", "title": "Pumps"}),
        ("own-id", "Second paragraph.", {"file_name": "sq.json", "title": "Pumps"}),
        ("1-0", "Untitled paragraph.", {"file_name": "sq.json"}),
    ]


def test_a_squad_file_without_data_has_no_documents(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="no .md/.txt/.xlsx documents found under"):
        load_corpus([write_json(tmp_path / "sq.json", {"data": []})])


def test_hotpot_contexts_become_one_document_per_title_first_seen_kept(tmp_path: Path) -> None:
    hotpot = [
        {"question": "q1", "answer": "a", "context": [["Alpha", ["A one. ", "A two."]], ["Beta", ["B."]]]},
        {"question": "q2", "answer": "b", "context": [["Alpha", ["Other text."]], [7, ["Seven."]]]},
        {"question": "q3", "answer": "c"},
    ]  # fmt: skip
    documents = load_corpus([write_json(tmp_path / "hp.json", hotpot)])
    assert shape(documents) == [
        ("hotpot:Alpha", "A one. A two.", {"title": "Alpha"}),
        ("hotpot:Beta", "B.", {"title": "Beta"}),
        ("hotpot:7", "Seven.", {"title": "7"}),
    ]


def test_rgb_passages_positive_and_negative_deduplicated_blank_and_non_text_skipped(
    tmp_path: Path,
) -> None:
    rows = [
        {"query": "q1", "answer": ["a"], "positive": ["Good one.", "  "], "negative": ["Bad one."]},
        {"query": "q2", "answer": ["b"], "positive": [3, "Good one."], "negative": ["Third."]},
        {"query": "q3", "answer": ["c"]},
        {"query": "q4", "answer": ["d"], "negative": ["Only negative."]},
    ]
    documents = load_corpus([write_jsonl(tmp_path / "rgb.jsonl", rows)])
    texts = ["Good one.", "Bad one.", "Third.", "Only negative."]
    assert shape(documents) == [(rgb_passage_id(t), t, {}) for t in texts]


def test_a_beir_corpus_with_and_without_titles(tmp_path: Path) -> None:
    rows = [
        {"_id": "d1", "title": "Pump", "text": "Check the seal."},
        {"_id": 2, "text": "No title here."},
        {"_id": "d3", "title": None, "text": "Null title."},
    ]
    documents = load_corpus([write_jsonl(tmp_path / "corpus.jsonl", rows)])
    assert shape(documents) == [
        ("beir:d1", "Pump\nCheck the seal.", {"title": "Pump"}),
        ("beir:2", "No title here.", {"title": ""}),
        ("beir:d3", "Null title.", {"title": ""}),
    ]


@pytest.mark.parametrize("missing", ["_id", "text"])
def test_a_beir_row_without_id_or_text_is_named_by_line(tmp_path: Path, missing: str) -> None:
    second = {"_id": "d2", "text": "Two."}
    del second[missing]
    rows = [{"_id": "d1", "text": "One."}, {"_id": "d1b", "text": "One b."}, second]
    path = write_jsonl(tmp_path / "corpus.jsonl", rows)  # the first row decides the format
    with pytest.raises(DocumentError) as caught:
        load_corpus([path])
    assert str(caught.value) == "corpus.jsonl:3: a BEIR corpus row needs '_id' and 'text'"


def test_a_question_file_without_documents_says_what_to_pass(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answers": ["a"]}])
    with pytest.raises(DocumentError) as caught:
        load_corpus([path])
    assert str(caught.value) == (
        f"{path}: a qa question file holds no documents; pass the documents "
        "with --docs and this file with --questions"
    )


@pytest.mark.parametrize(("name", "shown"), [("notes.pdf", "'.pdf'"), ("notes", "'(none)'")])
def test_an_unsupported_file_is_named_with_the_allowed_types(
    tmp_path: Path, name: str, shown: str
) -> None:
    path = tmp_path / name
    path.write_text("text", encoding="utf-8")
    with pytest.raises(DocumentError) as caught:
        load_corpus([path])
    assert str(caught.value) == (
        f"{path}: unsupported document type {shown}; "
        "allowed .md, .txt, .markdown, .xlsx, .xls, .json, .jsonl"
    )


def test_a_folder_gives_text_and_workbooks_by_relative_path(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / "a.md").write_text("Alpha.", encoding="utf-8")
    (tmp_path / "B.TXT").write_text("Bravo.", encoding="utf-8")
    (tmp_path / "sub" / "c.markdown").write_text("Charlie.", encoding="utf-8")
    (tmp_path / "sub" / "deeper" / "d.txt").write_text("Delta.", encoding="utf-8")
    (tmp_path / "sub" / "ReadMe.MD").write_text("skipped in any case", encoding="utf-8")
    (tmp_path / "qa.jsonl").write_text('{"question": "q", "answers": ["a"]}', encoding="utf-8")
    (tmp_path / "notes.pdf").write_text("not a document type", encoding="utf-8")
    (tmp_path / "folder.md").mkdir()  # a folder named like a file
    (tmp_path / "blank.txt").write_text(" \n\t", encoding="utf-8")
    documents = load_corpus([tmp_path])
    assert shape(documents) == [
        ("B.TXT", "Bravo.", {"file_name": "B.TXT"}),
        ("a.md", "Alpha.", {"file_name": "a.md"}),
        ("sub/c.markdown", "Charlie.", {"file_name": "sub/c.markdown"}),
        ("sub/deeper/d.txt", "Delta.", {"file_name": "sub/deeper/d.txt"}),
    ]


def test_a_file_given_directly_is_named_by_its_file_name(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "note.md"
    path.write_text("Note.", encoding="utf-8")
    other = tmp_path / "other.txt"
    other.write_text("Other.", encoding="utf-8")
    assert shape(load_corpus([path, str(other)])) == [
        ("note.md", "Note.", {"file_name": "note.md"}),
        ("other.txt", "Other.", {"file_name": "other.txt"}),
    ]


def test_two_documents_with_one_id_are_refused_and_named(tmp_path: Path) -> None:
    for folder in ("x", "y"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "same.md").write_text(f"From {folder}.", encoding="utf-8")
    single = load_corpus([tmp_path / "x"])
    assert [d.id_ for d in single] == ["same.md"]
    with pytest.raises(DocumentError) as caught:
        load_corpus([tmp_path / "x", tmp_path / "y"])
    assert str(caught.value) == "two documents share the id 'same.md'; pass distinct paths"


def test_no_documents_names_every_path_given(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with pytest.raises(DocumentError) as caught:
        load_corpus([tmp_path / "a", tmp_path / "b"])
    assert str(caught.value) == (
        f"no .md/.txt/.xlsx documents found under {tmp_path / 'a'}, {tmp_path / 'b'}"
    )


def test_a_missing_path_is_named(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("A.", encoding="utf-8")
    with pytest.raises(FileNotFoundError) as caught:
        load_corpus([tmp_path / "a.md", tmp_path / "gone"])
    assert str(caught.value) == f"document path {str(tmp_path / 'gone')!r} does not exist"


def test_a_text_file_that_is_not_utf8_is_named_with_its_byte(tmp_path: Path) -> None:
    path = tmp_path / "gbk.txt"
    path.write_bytes("泵".encode("gb18030"))
    with pytest.raises(DocumentError) as caught:
        load_corpus([path])
    assert str(caught.value).startswith(f"{path}: not UTF-8 text (byte 0xb1 at offset 0")


def test_a_broken_workbook_is_named(tmp_path: Path) -> None:
    path = tmp_path / "broken.xlsx"
    path.write_bytes(b"not a zip file")
    with pytest.raises(DocumentError) as caught:
        load_corpus([path])
    assert str(caught.value).startswith(f"{path}: not a readable workbook (")


def test_a_workbook_error_is_named_with_its_type(tmp_path: Path, monkeypatch) -> None:
    class SheetError(Exception):
        pass

    def refuse(*args, **kwargs):
        raise SheetError("sheet 3 is damaged")

    monkeypatch.setattr(pd, "read_excel", refuse)
    path = tmp_path / "t.xlsx"
    path.write_bytes(b"")
    with pytest.raises(DocumentError) as caught:
        load_corpus([path])
    assert str(caught.value) == f"{path}: not a readable workbook (SheetError: sheet 3 is damaged)"


def test_a_workbook_given_directly_gives_its_sheets(tmp_path: Path) -> None:
    path = tmp_path / "t.xlsx"
    with pd.ExcelWriter(path) as writer:
        pd.DataFrame({"A": [1]}).to_excel(writer, sheet_name="One", index=False)
    documents = load_corpus([path])
    assert shape(documents) == [
        ("t.xlsx#One", "Table: One\nA\n1", {"file_name": "t.xlsx", "sheet_name": "One"})
    ]


def test_sheet_to_text_blanks_missing_cells_and_collapses_whitespace() -> None:
    frame = pd.DataFrame({"Name": ["Ann\n Lee", None], "Age": [70.0, float("nan")]})
    assert sheet_to_text("People", frame) == "Table: People\nName | Age\nAnn Lee | 70.0\n | "


def test_loading_logs_how_many_documents(tmp_path: Path, caplog) -> None:
    (tmp_path / "a.md").write_text("A.", encoding="utf-8")
    (tmp_path / "b.md").write_text("B.", encoding="utf-8")
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.evaluation.sources"):
        load_corpus([tmp_path])
    assert [r.getMessage() for r in caplog.records] == ["Loaded 2 documents"]
