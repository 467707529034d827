"""Question formats: this project's qa.jsonl, SQuAD, HotpotQA, RGB, BEIR; bad rows named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_ext_advrag.evaluation.questions import (
    QuestionFormat,
    QuestionFormatError,
    detect_format,
    load_questions,
    rgb_passage_id,
)


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records), encoding="utf-8")
    return path


def test_project_qa_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "q1", "question": "阿萝精通几种方言？", "answers": ["十一种方言"],
             "evidence": ["阿萝……精通十一种方言。"], "type": "single-hop", "lang": "zh"},
            {"id": "q2", "question": "Two parts?", "answers": ["3.5 bar", "40 degrees"]},
            {"id": "q3", "question": "Unknown?", "answers": [], "type": "unanswerable"},
        ],
    )  # fmt: skip
    questions = load_questions(path)
    assert detect_format(path) is QuestionFormat.QA
    assert questions[0].answer_groups == (("十一种方言",),)
    assert questions[0].evidence_texts == ("阿萝……精通十一种方言。",)
    assert questions[0].lang == "zh"
    # qa.jsonl answers are parts: every one must be present
    assert questions[1].answer_groups == (("3.5 bar",), ("40 degrees",))
    assert not questions[2].answerable


def test_the_real_sample_data_loads(data_dir: Path) -> None:
    questions = load_questions(data_dir / "qa.jsonl")
    assert len(questions) == 56
    assert sum(not q.answerable for q in questions) == 8


def test_answer_string_where_a_list_is_expected_is_an_error(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [{"id": "1", "question": "a?", "answers": ["x"]},
         {"id": "2", "question": "b?", "answers": "3.5 bar"}],
    )  # fmt: skip
    with pytest.raises(QuestionFormatError, match=r"qa\.jsonl:2: 'answers' must be a list"):
        load_questions(path)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"qa\.jsonl:2: not valid JSON"),
        ('{"id": "2", "question": "b?"}', r"qa\.jsonl:2: missing field\(s\) \['answers'\]"),
        ('{"id": "2", "question": "b?", "answers": [["x"]]}', r"qa\.jsonl:2: 'answers' must be"),
        ('["a list"]', r"qa\.jsonl:2: expected a JSON object"),
    ],
)
def test_bad_rows_name_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"id": "1", "question": "a?", "answers": ["x"]}\n' + line, encoding="utf-8")
    with pytest.raises(QuestionFormatError, match=message):
        load_questions(path, fmt="qa")


def squad(answers) -> dict:
    return {
        "data": [
            {"title": "t", "paragraphs": [
                {"context": "The pump runs at 3.5 bar.", "document_id": 77,
                 "qas": [{"id": "s1", "question": "Pressure?", "answers": answers}]},
            ]},
        ]
    }  # fmt: skip


def test_squad_answers_are_alternatives_and_the_paragraph_is_the_evidence(tmp_path: Path) -> None:
    path = tmp_path / "covid.json"
    path.write_text(
        json.dumps(
            squad(
                [
                    {"text": "3.5 bar", "answer_start": 17},
                    {"text": "3.5 bar"},
                    {"text": " 3.5  bar"},
                ]
            )
        ),  # fmt: skip
        encoding="utf-8",
    )
    [question] = load_questions(path)
    assert detect_format(path) is QuestionFormat.SQUAD
    assert question.answer_groups == (("3.5 bar", "3.5  bar"),)  # one group, alternatives
    assert question.evidence_docs == ("77",)


def test_squad_answer_as_a_string_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "cmrc.json"
    path.write_text(json.dumps(squad("3.5 bar")), encoding="utf-8")
    with pytest.raises(
        QuestionFormatError, match=r"cmrc\.json: data\[0\]\.paragraphs\[0\]\.qas\[0\]"
    ):
        load_questions(path)


def test_hotpot_supporting_facts_are_evidence(tmp_path: Path) -> None:
    record = {
        "_id": "h1",
        "question": "Which city hosts the pump maker?",
        "answer": "Ferrotown",
        "supporting_facts": [["Ferro", 1], ["Ferrotown", 0]],
        "context": [["Ferro", ["Ferro makes pumps. ", "It is based in Ferrotown."]],
                    ["Ferrotown", ["Ferrotown is a city."]], ["Other", ["Noise."]]],
        "type": "bridge",
    }  # fmt: skip
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([record]), encoding="utf-8")
    [question] = load_questions(path)
    assert question.answer_groups == (("Ferrotown",),)
    assert question.evidence_texts == ("It is based in Ferrotown.", "Ferrotown is a city.")
    assert question.evidence_docs == ("hotpot:Ferro", "hotpot:Ferrotown")
    assert question.type == "bridge"


def test_rgb_alternatives_multi_part_and_string_error(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "zh.json",
        [
            {"id": 0, "query": "谁？", "answer": ["甲", "甲某"], "positive": ["甲是答案。"],
             "negative": ["乙不是。"]},
            {"id": 1, "query": "哪两个？", "answer": [["甲"], ["乙", "乙某"]], "positive": []},
        ],
    )  # fmt: skip
    first, second = load_questions(path)
    assert first.answer_groups == (("甲", "甲某"),)
    assert first.evidence_docs == (rgb_passage_id("甲是答案。"),)
    assert second.answer_groups == (("甲",), ("乙", "乙某"))
    bad = write_jsonl(tmp_path / "bad.json", [{"id": 0, "query": "谁？", "answer": "甲"}])
    with pytest.raises(QuestionFormatError, match=r"bad\.json:1: 'answer' must be a list"):
        load_questions(bad, fmt="rgb")


def test_beir_queries_with_qrels(tmp_path: Path) -> None:
    queries = write_jsonl(
        tmp_path / "queries.jsonl",
        [{"_id": "1", "text": "pump pressure"}, {"_id": "2", "text": "not judged"}],
    )
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n1\td7\t1\n1\td8\t0\n", encoding="utf-8"
    )
    [question] = load_questions(queries)
    assert question.evidence_docs == ("beir:d7",)
    assert not question.answerable
    (tmp_path / "qrels" / "test.tsv").write_text("1\td7\tmany\n", encoding="utf-8")
    with pytest.raises(QuestionFormatError, match=r"test\.tsv:1: score 'many'"):
        load_questions(queries)


def test_beir_without_qrels_says_where_they_go(tmp_path: Path) -> None:
    queries = write_jsonl(tmp_path / "queries.jsonl", [{"_id": "1", "text": "q"}])
    with pytest.raises(QuestionFormatError, match="qrels/test.tsv"):
        load_questions(queries)


def test_duplicate_ids_unknown_format_and_missing_file(tmp_path: Path) -> None:
    path = write_jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "1", "question": "a?", "answers": ["x"]},
            {"id": "1", "question": "b?", "answers": ["y"]},
        ],
    )
    with pytest.raises(QuestionFormatError, match="question id '1' occurs more than once"):
        load_questions(path)
    with pytest.raises(QuestionFormatError, match="question format must be one of"):
        load_questions(path, fmt="csv")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_questions(tmp_path / "missing.jsonl")
    odd = tmp_path / "odd.txt"
    odd.write_text("hello", encoding="utf-8")
    with pytest.raises(QuestionFormatError, match="--questions-format"):
        load_questions(odd)


def test_non_utf8_file_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes('{"id": "1", "question": "阿萝", "answers": []}'.encode("gb18030"))
    with pytest.raises(QuestionFormatError, match=r"qa\.jsonl: not UTF-8 text \(byte 0x"):
        load_questions(path)
