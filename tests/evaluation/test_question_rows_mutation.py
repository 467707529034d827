"""evaluation/question_rows.py beyond test_question_rows.py: the size limits inclusive, the
lone surrogate found at either end of the range and named with the field it is in, every row
id recorded, and the summary's "more" line only past the limit (kills the module's mutants
those tests leave)."""

from __future__ import annotations

from llama_index_ext_advrag.evaluation.question import Question
from llama_index_ext_advrag.evaluation.question_rows import (
    MAX_QUESTION_CHARS,
    MAX_ROW_CHARS,
    QuestionRows,
    SkippedQuestion,
    describe_skipped,
    row_problem,
)


def test_a_question_and_a_row_at_their_limits_are_asked() -> None:
    assert row_problem(Question(id="1", question="q" * MAX_QUESTION_CHARS)) is None
    assert row_problem(Question(id="1", question="q" * (MAX_QUESTION_CHARS + 1))) == (
        "question of 10,001 characters (at most 10,000)"
    )
    evidence = "e" * (MAX_ROW_CHARS - 2)  # with the id "1" and the question "q"
    assert row_problem(Question(id="1", question="q", evidence_texts=(evidence,))) is None
    assert row_problem(Question(id="1", question="q", evidence_texts=(evidence + "e",))) == (
        "row of 1,000,001 characters of question, answers and evidence (at most 1,000,000)"
    )


def test_the_lone_surrogate_is_named_with_its_field_and_place() -> None:
    def problem(**fields: object) -> str | None:
        return row_problem(Question(**{"id": "1", "question": "q", **fields}))  # type: ignore[arg-type]

    tail = "(half of a UTF-16 pair: it cannot be encoded); fix the text"
    assert (
        problem(question="a\udfff")
        == f"question holds a lone surrogate U+DFFF at character 1 {tail}"
    )
    assert problem(question="\ue000\ud800") == (
        f"question holds a lone surrogate U+D800 at character 1 {tail}"
    )
    assert problem(evidence_texts=("ok", "x\ud800")) == (
        f"an evidence text holds a lone surrogate U+D800 at character 1 {tail}"
    )
    assert problem(evidence_docs=("\udc00",)) == (
        f"an evidence document id holds a lone surrogate U+DC00 at character 0 {tail}"
    )


def test_every_row_id_is_recorded_kept_or_skipped() -> None:
    rows = QuestionRows()
    rows.keep(Question(id="a", question="Pressure?"), "qa.jsonl:1")
    rows.keep(Question(id="b", question=" "), "qa.jsonl:2")
    assert rows.ids == ["a", "b"] and [q.id for q in rows.questions] == ["a"]
    assert rows.skipped == [SkippedQuestion("qa.jsonl:2", "b", "empty question")]


def test_the_more_line_only_past_the_limit() -> None:
    skipped = [SkippedQuestion(f"qa.jsonl:{i}", None, "empty question") for i in range(3)]
    assert describe_skipped(skipped, limit=3).splitlines() == [
        "Skipped 3 question rows (not asked, not counted):",
        "  qa.jsonl:0: empty question",
        "  qa.jsonl:1: empty question",
        "  qa.jsonl:2: empty question",
    ]
    assert describe_skipped(skipped, limit=2).splitlines()[-1] == (
        "  ... and 1 more (listed in report.md)"
    )
