"""Bad question rows: an error naming the file and line, or skipped with the reason, never lost.

The rule (evaluation/question_rows.py): a row that breaks the format's schema is an error; a
well-formed row that cannot be asked or scored is skipped and listed.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from llama_index_ext_advrag.evaluation.question_rows import (
    MAX_QUESTION_CHARS,
    MAX_ROW_CHARS,
    SkippedQuestion,
    describe_skipped,
)
from llama_index_ext_advrag.evaluation.questions import (
    QuestionFormatError,
    load_questions,
    read_questions,
)

GOOD = {"id": "ok", "question": "At what pressure does the pump run?", "answers": ["3.5 bar"]}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def row(**fields) -> str:
    return json.dumps({**GOOD, **fields})  # ensure_ascii: "\ud800" stays an escape, as in files


def test_recoverable_rows_are_skipped_with_their_line_and_reason(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "qa.jsonl",
        [
            row(),
            row(id="no-answer", answers=[]),
            row(id="blank-answers", answers=["", "  "]),
            row(id="empty", question=""),
            row(id="spaces", question=" \t "),
            row(id="surrogate", question="Why \ud800 here?"),
            row(id="surrogate-answer", answers=["3.5 \udc00bar"]),
            row(id="huge", question="x" * 10_000_000),  # a 10 MB line
            row(id="unanswerable", answers=[], type="unanswerable"),
        ],
    )
    read = read_questions(path)
    assert [q.id for q in read.questions] == ["ok", "unanswerable"]
    assert not read.questions[1].answerable  # marked: kept, scored as unanswerable
    assert [(s.where, s.question_id) for s in read.skipped] == [
        ("qa.jsonl:2", "no-answer"),
        ("qa.jsonl:3", "blank-answers"),
        ("qa.jsonl:4", "empty"),
        ("qa.jsonl:5", "spaces"),
        ("qa.jsonl:6", "surrogate"),
        ("qa.jsonl:7", "surrogate-answer"),
        ("qa.jsonl:8", "huge"),
    ]
    reasons = [s.reason for s in read.skipped]
    unmarked = (
        'no answer: the row is not marked unanswerable (add answers, or "type": "unanswerable" '
        "to score it as one)"
    )
    assert reasons[0] == reasons[1] == unmarked
    assert reasons[2] == reasons[3] == "empty question"
    assert reasons[4].startswith("question holds a lone surrogate U+D800 at character 4")
    assert reasons[5].startswith("an answer holds a lone surrogate U+DC00 at character 4")
    assert reasons[6] == f"question of 10,000,000 characters (at most {MAX_QUESTION_CHARS:,})"


def test_a_row_too_large_in_its_evidence_is_skipped(tmp_path: Path) -> None:
    evidence = ["The pump runs at 3.5 bar. " * 1000] * (MAX_ROW_CHARS // 26_000 + 1)
    path = write_lines(tmp_path / "qa.jsonl", [row(), row(id="big", evidence=evidence)])
    [skipped] = read_questions(path).skipped
    assert skipped.question_id == "big"
    assert skipped.reason.endswith(f"characters of question, answers and evidence (at most {MAX_ROW_CHARS:,})")  # fmt: skip


def test_an_id_with_a_surrogate_is_not_echoed(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "qa.jsonl", [row(), row(id="q\ud800")])
    [skipped] = read_questions(path).skipped
    assert skipped == SkippedQuestion(
        "qa.jsonl:2",
        None,
        "id holds a lone surrogate U+D800 at character 1 (half of a UTF-16 pair: it cannot be "
        "encoded); fix the text",
    )
    json.dumps(skipped.__dict__, ensure_ascii=False).encode("utf-8")  # writable as it is


@pytest.mark.parametrize(
    ("value", "shown"),
    [(None, "NoneType None"), (5, "int 5"), (["q"], "list ['q']")],
)
def test_a_question_that_is_not_a_string_is_an_error_naming_the_line(
    tmp_path: Path, value: object, shown: str
) -> None:
    path = write_lines(tmp_path / "qa.jsonl", [row(), row(id="2", question=value)])
    with pytest.raises(QuestionFormatError) as raised:
        read_questions(path)
    assert str(raised.value) == f"qa.jsonl:2: 'question' must be a string, got {shown}"


def test_a_file_with_no_usable_row_is_an_error_listing_why(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "qa.jsonl", [row(id="a", question=""), row(id="b", answers=[])])
    with pytest.raises(QuestionFormatError) as raised:
        read_questions(path)
    message = str(raised.value)
    assert "\n" not in message  # one line for the terminal
    assert message.startswith("qa.jsonl: no questions found (read as qa); Skipped 2 question rows")
    assert (
        "qa.jsonl:1 (id a): empty question" in message and "qa.jsonl:2 (id b): no answer" in message
    )


def test_load_questions_logs_the_skipped_rows_once(tmp_path: Path, caplog) -> None:
    path = write_lines(tmp_path / "qa.jsonl", [row(), row(id="e", question="")])
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.evaluation.questions"):
        questions = load_questions(path)
    assert [q.id for q in questions] == ["ok"]
    [record] = caplog.records
    assert record.getMessage() == (
        "qa.jsonl: Skipped 1 question row (not asked, not counted):\n"
        "  qa.jsonl:2 (id e): empty question"
    )


def squad(qas: list[dict]) -> dict:
    paragraph = {"context": "The pump runs at 3.5 bar.", "document_id": "p", "qas": qas}
    return {"data": [{"title": "t", "paragraphs": [paragraph]}]}


def test_squad_rows_follow_the_same_rule(tmp_path: Path) -> None:
    path = tmp_path / "covid.json"
    answer = [{"text": "3.5 bar", "answer_start": 17}]
    path.write_text(
        json.dumps(
            squad(
                [
                    {"id": "s1", "question": "Pressure?", "answers": answer},
                    {"id": "s2", "question": "Colour?", "answers": []},
                    {"id": "s3", "question": "Colour?", "answers": [], "is_impossible": True},
                    {"id": "s4", "question": "", "answers": answer},
                ]
            )
        ),
        encoding="utf-8",
    )
    read = read_questions(path)
    assert [q.id for q in read.questions] == ["s1", "s3"]
    assert read.questions[1].type == "unanswerable"
    where = "covid.json: data[0].paragraphs[0].qas"
    assert [(s.where, s.reason[:34]) for s in read.skipped] == [
        (f"{where}[1]", "no answer: the row is not marked u"),
        (f"{where}[3]", "empty question"),
    ]
    assert '"is_impossible": true' in read.skipped[0].reason


def test_rgb_and_hotpot_rows_without_an_answer_are_skipped(tmp_path: Path) -> None:
    rgb = write_lines(
        tmp_path / "zh.json",
        [json.dumps({"id": 0, "query": "谁？", "answer": ["甲"]}, ensure_ascii=False),
         json.dumps({"id": 1, "query": "哪个？", "answer": []}, ensure_ascii=False)],
    )  # fmt: skip
    read = read_questions(rgb, fmt="rgb")
    assert [q.id for q in read.questions] == ["0"]
    assert read.skipped[0].where == "zh.json:2"
    assert read.skipped[0].reason == "no answer: RGB has no unanswerable mark; add it"
    record = {"question": "Is it?", "context": [["T", ["It is."]]], "supporting_facts": [["T", 0]]}
    hotpot = tmp_path / "hotpot.json"
    hotpot.write_text(
        json.dumps([{**record, "_id": "yes", "answer": "yes"}, {**record, "_id": "gap", "answer": " "}]),
        encoding="utf-8",
    )  # fmt: skip
    read = read_questions(hotpot)
    assert [q.id for q in read.questions] == ["yes"]  # yes/no: kept, scored by evidence only
    assert [(s.question_id, s.reason) for s in read.skipped] == [
        ("gap", "no answer: HotpotQA has no unanswerable mark; add it")
    ]


def test_beir_queries_of_another_split_are_counted_not_skipped(tmp_path: Path) -> None:
    queries = write_lines(
        tmp_path / "queries.jsonl",
        [json.dumps({"_id": "1", "text": "pump"}), json.dumps({"_id": "2", "text": "other"}),
         json.dumps({"_id": "3", "text": ""})],
    )  # fmt: skip
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("1\td1\t1\n3\td3\t1\n", encoding="utf-8")
    read = read_questions(queries)
    assert [q.id for q in read.questions] == ["1"]
    assert read.unjudged == 1
    assert [(s.where, s.reason) for s in read.skipped] == [("queries.jsonl:3", "empty question")]


def test_the_summary_lists_the_first_rows_and_counts_the_rest() -> None:
    rows = [SkippedQuestion(f"qa.jsonl:{i}", None, "empty question") for i in range(1, 14)]
    lines = describe_skipped(rows, limit=2).splitlines()
    assert lines == [
        "Skipped 13 question rows (not asked, not counted):",
        "  qa.jsonl:1: empty question",
        "  qa.jsonl:2: empty question",
        "  ... and 11 more (listed in report.md)",
    ]
    assert describe_skipped([]) == ""
