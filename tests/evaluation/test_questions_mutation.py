"""Question file formats read back exactly: defaults, error messages (file, line, fix), skip
reasons, format detection and the loaders' corner cases (mutation tests for questions.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from llama_index_ext_advrag.evaluation.question import Question
from llama_index_ext_advrag.evaluation.questions import (
    QuestionFormat,
    QuestionFormatError,
    QuestionSet,
    detect_format,
    hotpot_document_id,
    load_questions,
    read_questions,
    read_text,
    rgb_passage_id,
    squad_document_id,
)


def jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in records), encoding="utf-8")
    return path


def whole(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def error_of(path: Path, fmt: str | None = None, qrels: Path | None = None) -> str:
    with pytest.raises(QuestionFormatError) as info:
        read_questions(path, fmt, qrels)
    return str(info.value)


# ----- qa.jsonl -----


def test_qa_row_defaults_and_fields_read_back(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(
        "\n\n"
        + json.dumps({"id": 7, "question": "Q?", "answers": ["a", " ", 3, 1.5]})
        + "\n   \n"
        + json.dumps(
            {"id": "b", "question": "R?", "answers": ["x"], "evidence": ["e1"],
             "type": "multi-hop", "lang": "en", "source": "manual"}
        ),
        encoding="utf-8",
    )  # fmt: skip
    result = read_questions(path)
    assert result == QuestionSet(result.questions, [], QuestionFormat.QA, 0)
    first, second = result.questions
    assert first == Question(
        id="7", question="Q?", answer_groups=(("a",), ("3",), ("1.5",)), type="single-hop"
    )
    assert first.lang is None and first.source is None and first.evidence_texts == ()
    assert second == Question(
        id="b",
        question="R?",
        answer_groups=(("x",),),
        evidence_texts=("e1",),
        type="multi-hop",
        lang="en",
        source="manual",
    )


def test_qa_row_without_answer_is_skipped_unless_marked(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "1", "question": "a?", "answers": ["x"]},
            {"id": "2", "question": "b?", "answers": []},
            {"id": "3", "question": "c?", "answers": [""], "type": "unanswerable"},
        ],
    )
    result = read_questions(path, "qa")
    assert [q.id for q in result.questions] == ["1", "3"]
    [skipped] = result.skipped
    assert (skipped.where, skipped.question_id) == ("qa.jsonl:2", "2")
    assert skipped.reason == (
        'no answer: the row is not marked unanswerable (add answers, or "type": "unanswerable"'
        " to score it as one)"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('"answers"', "qa.jsonl:2: expected a JSON object, got str"),
        (
            '{"id": "2", "answers": []}',
            "qa.jsonl:2: missing field(s) ['question']; required ['id', 'question', 'answers']",
        ),
        (
            '{"id": "2", "question": "b?", "answers": "3.5 bar"}',
            "qa.jsonl:2: 'answers' must be a list of strings, got the string '3.5 bar' "
            '(write ["3.5 bar"])',
        ),
        (
            '{"id": "2", "question": "b?", "answers": {"a": 1}}',
            "qa.jsonl:2: 'answers' must be a list of strings, got dict {'a': 1}",
        ),
        (
            '{"id": "2", "question": "b?", "answers": ["x", null]}',
            "qa.jsonl:2: 'answers' must be a list of strings, got list ['x', None]",
        ),
        (
            '{"id": "2", "question": "b?", "answers": ["x"], "evidence": "e"}',
            "qa.jsonl:2: 'evidence' must be a list of strings, got the string 'e'",
        ),
        (
            '{"id": "2", "question": null, "answers": ["x"]}',
            "qa.jsonl:2: 'question' must be a string, got NoneType None",
        ),
        (
            '{"id": "2", "question": 12, "answers": ["x"]}',
            "qa.jsonl:2: 'question' must be a string, got int 12",
        ),
        ("{oops", "qa.jsonl:2: not valid JSON (Expecting property name enclosed in double"),
    ],
)
def test_qa_errors_read_back(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text('{"id": "1", "question": "a?", "answers": ["x"]}\n' + line, encoding="utf-8")
    assert error_of(path, "qa").startswith(message)


def test_long_values_are_cut_in_messages(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "qa.jsonl", [{"id": "1", "question": "a?", "answers": {"k": "v" * 200}}]
    )
    message = error_of(path, "qa")
    assert (
        message
        == "qa.jsonl:1: 'answers' must be a list of strings, got dict "
        + repr({"k": "v" * 200})[:80]
    )
    path = jsonl(tmp_path / "qa.jsonl", [{"id": "1", "question": ["q" * 100], "answers": ["x"]}])
    assert (
        error_of(path, "qa")
        == "qa.jsonl:1: 'question' must be a string, got list " + repr(["q" * 100])[:60]
    )


# ----- reading text -----


def test_read_text_allows_a_bom_and_names_a_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"id": "1", "question": "a?", "answers": ["x"]}')
    assert [q.id for q in load_questions(path)] == ["1"]
    assert read_text(path).startswith("{")
    path.write_bytes(b'{"id": "1"}\xff')
    with pytest.raises(QuestionFormatError) as info:
        read_text(path)
    assert str(info.value) == (
        f"{path}: not UTF-8 text (byte 0xff at offset 11: invalid start byte); "
        "convert it with e.g. `iconv -f GB18030 -t UTF-8`"
    )
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(FileNotFoundError) as not_found:
        read_questions(missing)
    assert str(not_found.value) == f"file {str(missing)!r} does not exist"


def test_a_bad_json_document_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "covid.json"
    path.write_text('{"data": [\n1,\n}', encoding="utf-8")
    assert error_of(path, "squad").startswith("covid.json:3: not valid JSON (")


# ----- SQuAD -----


def squad(qas: list[Any], paragraph: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"data": [{"paragraphs": [{"context": "c", **(paragraph or {}), "qas": qas}]}]}


def test_squad_ids_types_and_unanswerables(tmp_path: Path) -> None:
    qas = [
        {"question": "A?", "answers": [{"text": "x"}, {"text": "  "}]},
        {"id": "given", "question": "B?", "answers": [], "is_impossible": True},
        {"question": "C?", "answers": [{"text": ""}]},
        {"question": "D?", "answers": [], "is_impossible": "yes"},
    ]
    path = whole(tmp_path / "covid.json", squad(qas))
    result = read_questions(path)
    assert result.format is QuestionFormat.SQUAD
    first, second = result.questions
    assert first == Question(
        id="0-0-0", question="A?", answer_groups=(("x",),), evidence_docs=("0-0",)
    )
    assert first.type == "single-hop"
    assert second == Question(
        id="given", question="B?", evidence_docs=("0-0",), type="unanswerable"
    )
    assert [(s.where, s.question_id) for s in result.skipped] == [
        ("covid.json: data[0].paragraphs[0].qas[2]", "0-0-2"),
        ("covid.json: data[0].paragraphs[0].qas[3]", "0-0-3"),
    ]
    assert result.skipped[0].reason == (
        'no answer: the row is not marked unanswerable (add answers, or "is_impossible": true'
        " to score it as one)"
    )


def test_squad_document_ids() -> None:
    assert squad_document_id({}, 2, 5) == "2-5"
    assert squad_document_id({"document_id": ""}, 1, 0) == "1-0"
    assert squad_document_id({"document_id": 9}, 1, 0) == "9"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "covid.json: SQuAD JSON needs a top-level 'data' list"),
        ({"data": {}}, "covid.json: SQuAD JSON needs a top-level 'data' list"),
        (
            squad([{"question": "A?", "answers": "x"}]),
            "covid.json: data[0].paragraphs[0].qas[0]: 'answers' must be a list of {'text': ...}"
            " objects, got str 'x'",
        ),
        (
            squad([{"question": "A?", "answers": ["x"]}]),
            "covid.json: data[0].paragraphs[0].qas[0]: each answer must be an object with a"
            " 'text' string, got 'x'",
        ),
        (
            squad([{"question": "A?", "answers": [{"text": 3}]}]),
            "covid.json: data[0].paragraphs[0].qas[0]: each answer must be an object with a"
            " 'text' string, got {'text': 3}",
        ),
        (
            squad([{"question": "A?"}]),
            "covid.json: data[0].paragraphs[0].qas[0]: missing field(s) ['answers']",
        ),
    ],
)
def test_squad_errors_read_back(tmp_path: Path, data: Any, message: str) -> None:
    path = whole(tmp_path / "covid.json", data)
    assert error_of(path, "squad").startswith(message)


def test_squad_without_paragraphs_or_qas_has_no_questions(tmp_path: Path) -> None:
    path = whole(tmp_path / "covid.json", {"data": [{}, {"paragraphs": [{}]}]})
    assert error_of(path) == "covid.json: no questions found (read as squad)"


# ----- HotpotQA -----


def hotpot(**record: Any) -> dict[str, Any]:
    base = {"question": "Where?", "answer": "Ferrotown", "context": [["T", ["s0", "s1"]]]}
    return base | record


def test_hotpot_defaults_yes_no_and_missing_facts(tmp_path: Path) -> None:
    records = [
        hotpot(supporting_facts=[["T", 1], ["T", 5], ["U", 0]]),
        hotpot(_id="h2", answer=" Yes ", type="comparison"),
        hotpot(_id="h3", answer="NO"),
        hotpot(_id="h4", answer="  "),
        hotpot(_id="h5", answer="x", context=[[7, [8]]], supporting_facts=[[7, "0"]]),
    ]
    result = read_questions(whole(tmp_path / "hotpot.json", records))
    assert result.format is QuestionFormat.HOTPOT
    first, second, third, fifth = result.questions
    assert first == Question(
        id="0",
        question="Where?",
        answer_groups=(("Ferrotown",),),
        evidence_texts=("s1",),
        evidence_docs=("hotpot:T", "hotpot:U"),
        type="multi-hop",
    )
    assert second.answer_groups == () and second.type == "comparison"
    assert third.answer_groups == ()
    assert fifth.evidence_texts == ("8",) and fifth.evidence_docs == ("hotpot:7",)
    [skipped] = result.skipped
    assert skipped.where == "hotpot.json: record 3"
    assert skipped.reason == "no answer: HotpotQA has no unanswerable mark; add it"
    assert hotpot_document_id("X") == "hotpot:X"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"a": 1}, "hotpot.json: HotpotQA JSON is a list of questions"),
        ([hotpot(answer=["x"])], "hotpot.json: record 0: 'answer' must be a string in HotpotQA"),
        (
            [hotpot(context=[["T"]])],
            "hotpot.json: record 0: 'context' items are [title, [sentences]]",
        ),
        ([hotpot(context=[["T", "s"]])], "hotpot.json: record 0: 'context' items are"),
        ([hotpot(context=["Ts"])], "hotpot.json: record 0: 'context' items are"),
        ([{"question": "q", "answer": "a"}], "hotpot.json: record 0: missing field(s) ['context']"),
    ],
)
def test_hotpot_errors_read_back(tmp_path: Path, data: Any, message: str) -> None:
    assert error_of(whole(tmp_path / "hotpot.json", data), "hotpot").startswith(message)


# ----- RGB -----


def test_rgb_ids_groups_and_passage_ids(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "rgb.json",
        [
            {"query": "Q1", "answer": ["a"], "positive": [" p "]},
            {"id": "r2", "query": "Q2", "answer": []},
        ],
    )
    result = read_questions(path)
    assert result.format is QuestionFormat.RGB
    [first] = result.questions
    assert first == Question(
        id="1",
        question="Q1",
        answer_groups=(("a",),),
        evidence_texts=(" p ",),
        evidence_docs=(rgb_passage_id("p"),),
    )
    assert rgb_passage_id(" p ") == rgb_passage_id("p")
    assert rgb_passage_id("p") == "rgb:516b9783fca517ee"
    assert [(s.where, s.reason) for s in result.skipped][0] == (
        "rgb.json:2",
        "no answer: RGB has no unanswerable mark; add it",
    )


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        ("甲", "rgb.json:1: 'answer' must be a list of alternatives (or of lists, one per part), "
               "got the string '甲' (write [\"甲\"])"),
        (3, "rgb.json:1: 'answer' must be a list, got int"),
        ([["a"], "b"], "rgb.json:1: 'answer' must be a list of strings, got list"),
        ([["a"], ["b", None]], "rgb.json:1: 'answer part' must be a list of strings, got list"),
    ],
)  # fmt: skip
def test_rgb_answer_errors_read_back(tmp_path: Path, answer: Any, message: str) -> None:
    path = jsonl(tmp_path / "rgb.json", [{"query": "Q", "answer": answer}])
    assert error_of(path, "rgb").startswith(message)


def test_rgb_missing_query_and_bad_positive(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "rgb.json", [{"query": "Q", "answer": ["a"], "positive": "p"}])
    assert error_of(path, "rgb").startswith("rgb.json:1: 'positive' must be a list of strings")
    path = jsonl(tmp_path / "rgb.json", [{"answer": ["a"]}])
    assert error_of(path, "rgb").startswith(
        "rgb.json:1: missing field(s) ['query']; required ['query', 'answer']"
    )
    path = jsonl(tmp_path / "rgb.json", [{"query": 5, "answer": ["a"]}])
    assert error_of(path, "rgb") == "rgb.json:1: 'query' must be a string, got int 5"


# ----- BEIR -----


def beir(tmp_path: Path, qrels: str | None, split: str = "test") -> Path:
    queries = jsonl(
        tmp_path / "queries.jsonl",
        [{"_id": "1", "text": "first"}, {"_id": 2, "text": "second"}, {"_id": "3", "text": "x"}],
    )
    if qrels is not None:
        (tmp_path / "qrels").mkdir(exist_ok=True)
        (tmp_path / "qrels" / f"{split}.tsv").write_text(qrels, encoding="utf-8")
    return queries


def test_beir_reads_qrels_scores_and_counts_unjudged(tmp_path: Path) -> None:
    path = beir(tmp_path, "query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t0\n2\td3\n1\td4\t0.5\n")
    result = read_questions(path)
    assert result.format is QuestionFormat.BEIR
    assert result.unjudged == 1
    first, second = result.questions
    assert first == Question(id="1", question="first", evidence_docs=("beir:d1", "beir:d4"))
    assert second == Question(id="2", question="second", evidence_docs=("beir:d3",))


@pytest.mark.parametrize("header", ["query_id\tcorpus_id\tscore", "qid\tdid\tscore"])
def test_beir_header_names(tmp_path: Path, header: str) -> None:
    path = beir(tmp_path, f"{header}\n1\td1\t1\n")
    assert [q.id for q in load_questions(path)] == ["1"]


def test_beir_header_only_on_the_first_line(tmp_path: Path) -> None:
    path = beir(tmp_path, "1\td1\t1\nqid\td9\t1\n")
    [question] = load_questions(path)
    assert question.evidence_docs == ("beir:d1",)
    path = beir(tmp_path, "1\td1\t1\nquery-id\tcorpus-id\tscore\n")
    assert error_of(path) == "test.tsv:2: score 'score' is not a number"  # a row past line 1


@pytest.mark.parametrize("split", ["dev", "train"])
def test_beir_qrels_splits_in_order(tmp_path: Path, split: str) -> None:
    path = beir(tmp_path, "1\tother\t1\n", split=split)
    (tmp_path / "qrels" / "train.tsv").write_text("1\ttrain\t1\n", encoding="utf-8")
    [question] = load_questions(path)
    assert question.evidence_docs == (("beir:other",) if split == "dev" else ("beir:train",))
    (tmp_path / "qrels" / "test.tsv").write_text("1\ttest\t1\n", encoding="utf-8")
    [question] = load_questions(path)
    assert question.evidence_docs == ("beir:test",)


def test_beir_given_qrels_and_errors(tmp_path: Path) -> None:
    path = beir(tmp_path, None)
    assert error_of(path, "beir") == (
        "queries.jsonl: BEIR queries need qrels (qrels/test.tsv beside it, or --qrels FILE)"
    )
    given = tmp_path / "judged.tsv"
    given.write_text("3\td7\t2\n", encoding="utf-8")
    [question] = read_questions(path, "beir", str(given)).questions
    assert question.evidence_docs == ("beir:d7",)
    given.write_text("1\td1\t1\n3\n", encoding="utf-8")
    assert error_of(path, "beir", given) == "judged.tsv:2: expected query-id, corpus-id, score"
    given.write_text("1\td1\thigh\n", encoding="utf-8")
    assert error_of(path, "beir", given) == "judged.tsv:1: score 'high' is not a number"
    given.write_text("1\td1\n", encoding="utf-8")
    path.write_text('{"_id": "1"}', encoding="utf-8")
    assert error_of(path, "beir", given).startswith("queries.jsonl:1: missing field(s) ['text']")
    given.write_text("1\td1\n", encoding="utf-8")
    path.write_text('{"_id": "1", "text": 4}', encoding="utf-8")
    assert error_of(path, "beir", given) == "queries.jsonl:1: 'text' must be a string, got int 4"


# ----- detection and the whole file -----


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ('{"data": []}', QuestionFormat.SQUAD),
        ("[]", QuestionFormat.HOTPOT),
        ('{"query": "q", "answer": ["a"], "question": "x"}', QuestionFormat.RGB),
        ('{"question": "q", "_id": "1", "text": "t"}', QuestionFormat.QA),
        ('{"_id": "1", "text": "t"}\n{"x": 1}', QuestionFormat.BEIR),
        ('{"question": "q"}\n{not json', QuestionFormat.QA),
    ],
)
def test_detect_format(tmp_path: Path, content: str, kind: QuestionFormat) -> None:
    path = tmp_path / "file.jsonl"
    path.write_text(content, encoding="utf-8")
    assert detect_format(path) is kind


@pytest.mark.parametrize(
    "content",
    ["", "   ", '{"query": "q"}', '{"_id": "1"}', '{"text": "t"}', "[1]\n{", "{bad\n", '"s"', "{}"],
)
def test_undetectable_formats_are_named(tmp_path: Path, content: str) -> None:
    path = tmp_path / "file.jsonl"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(QuestionFormatError) as info:
        detect_format(path)
    assert str(info.value) == (
        "file.jsonl: cannot tell the question format from its first record; "
        "name it with --questions-format (qa, squad, hotpot, rgb, beir)"
    )


def test_a_named_format_is_checked(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "qa.jsonl", [{"id": "1", "question": "a?", "answers": ["x"]}])
    assert error_of(path, "csv") == (
        "question format must be one of qa, squad, hotpot, rgb, beir, got 'csv'"
    )
    assert read_questions(path, QuestionFormat.QA).format is QuestionFormat.QA
    assert read_questions(path, "qa").format is QuestionFormat.QA


def test_a_duplicate_id_is_an_error_even_on_a_skipped_row(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "1", "question": "a?", "answers": ["x"]},
            {"id": "1", "question": " ", "answers": []},
        ],
    )
    assert error_of(path) == "qa.jsonl: question id '1' occurs more than once"


def test_no_questions_message_lists_at_most_three_skips(tmp_path: Path) -> None:
    path = jsonl(
        tmp_path / "qa.jsonl",
        [{"id": str(i), "question": " ", "answers": ["x"]} for i in range(5)],
    )
    message = error_of(path)
    assert message.startswith("qa.jsonl: no questions found (read as qa); Skipped 5 question rows")
    assert "\n" not in message
    assert "qa.jsonl:3 (id 2)" in message and "qa.jsonl:4 (id 3)" not in message


def test_the_load_is_logged_with_its_skips(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = jsonl(
        tmp_path / "qa.jsonl",
        [
            {"id": "1", "question": "a?", "answers": ["x"]},
            {"id": "2", "question": "", "answers": []},
        ],
    )
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.evaluation.questions"):
        questions = load_questions(path)
    assert [q.id for q in questions] == ["1"]
    messages = [(r.levelno, r.getMessage()) for r in caplog.records]
    assert (logging.INFO, "Loaded 1 questions (qa) from qa.jsonl") in messages
    warning = [m for level, m in messages if level == logging.WARNING]
    assert warning == [
        "qa.jsonl: Skipped 1 question row (not asked, not counted):\n"
        "  qa.jsonl:2 (id 2): empty question"
    ]
    caplog.clear()
    path = jsonl(tmp_path / "clean.jsonl", [{"id": "1", "question": "a?", "answers": ["x"]}])
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.evaluation.questions"):
        load_questions(path, "qa")
    assert [r.levelno for r in caplog.records] == [logging.INFO]


# ----- after the first mutation run -----


def test_squad_and_hotpot_name_a_question_that_is_not_a_string(tmp_path: Path) -> None:
    path = whole(tmp_path / "covid.json", squad([{"question": 3, "answers": []}]))
    assert error_of(path) == (
        "covid.json: data[0].paragraphs[0].qas[0]: 'question' must be a string, got int 3"
    )
    path = whole(tmp_path / "hotpot.json", [hotpot(question=None)])
    assert error_of(path) == "hotpot.json: record 0: 'question' must be a string, got NoneType None"


def test_given_ids_are_read_in_hotpot_and_rgb(tmp_path: Path) -> None:
    [question] = load_questions(whole(tmp_path / "hotpot.json", [hotpot(_id="h9")]))
    assert question.id == "h9"
    path = jsonl(tmp_path / "rgb.json", [{"id": "r7", "query": "Q", "answer": ["a"]}])
    [question] = load_questions(path)
    assert question.id == "r7"


def test_beir_counts_every_unjudged_query_and_places_skips(tmp_path: Path) -> None:
    queries = jsonl(
        tmp_path / "queries.jsonl",
        [{"_id": "1", "text": "a"}, {"_id": "2", "text": "b"}, {"_id": "3", "text": " "},
         {"_id": "4", "text": "c"}, {"_id": "5", "text": "d"}],
    )  # fmt: skip
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("1\td1\n3\td3\n", encoding="utf-8")
    result = read_questions(queries)
    assert result.unjudged == 3
    [skipped] = result.skipped
    assert (skipped.where, skipped.question_id, skipped.reason) == (
        "queries.jsonl:3",
        "3",
        "empty question",
    )


def test_an_rgb_record_with_only_query_and_answer_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "rgb.json"
    path.write_text('{"query": "q", "answer": ["a"]}', encoding="utf-8")
    assert detect_format(path) is QuestionFormat.RGB


def test_the_no_questions_message_joins_its_lines_with_spaces(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "qa.jsonl", [{"id": "1", "question": " ", "answers": ["x"]}])
    assert error_of(path) == (
        "qa.jsonl: no questions found (read as qa); Skipped 1 question row (not asked, not "
        "counted):   qa.jsonl:1 (id 1): empty question"
    )


def test_load_questions_passes_the_format_and_the_qrels(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "queries.jsonl", [{"_id": "1", "text": "t", "question": "x"}])
    given = tmp_path / "judged.tsv"
    given.write_text("1\td1\n", encoding="utf-8")
    [question] = load_questions(path, "beir", given)
    assert question == Question(id="1", question="t", evidence_docs=("beir:d1",))
