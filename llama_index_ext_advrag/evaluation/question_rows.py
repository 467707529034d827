"""Which question rows are asked and which are skipped, and why: one rule for every format.

A file that cannot be read as its format is an **error** naming the file and the line (or
record), and nothing is measured: not UTF-8, not JSON, a row that is not an object, a required
field missing, a field of the wrong type (``"answers": "3.5 bar"``, ``"question": null``), the
same id twice, or no usable row at all.

A row that fits the format but cannot be asked or scored is **skipped**, never dropped
silently: it is listed with its place and reason (:class:`SkippedQuestion`) in the report, in
the terminal summary of ``advrag compare`` and in one logged warning. Reasons, checked in this
order:

- the question is empty or only white space;
- the question is longer than :data:`MAX_QUESTION_CHARS`, or the row's texts (question,
  answers, evidence) together longer than :data:`MAX_ROW_CHARS`;
- a text holds a lone surrogate (half of a UTF-16 pair such as ``"\\ud800"``, which JSON allows
  but which cannot be encoded, embedded or written to a report);
- the row has no answer but is not marked unanswerable (``"type": "unanswerable"`` in
  qa.jsonl, ``"is_impossible": true`` in SQuAD): it would silently leave the coverage counts.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from llama_index_ext_advrag.text import has_lone_surrogates

if TYPE_CHECKING:
    from llama_index_ext_advrag.evaluation.question import Question

logger = logging.getLogger(__name__)

# Embedding models read at most 512 tokens (about 2,000 characters of English); ten thousand
# characters is five times that, far above any real question, and keeps BM25 and the
# tokenizers' work per question small.
MAX_QUESTION_CHARS = 10_000
# A question with its answers and evidence passages; evidence is compared with every context
# node, so a row this large already costs seconds per pipeline.
MAX_ROW_CHARS = 1_000_000
SHOWN_SKIPS = 10  # rows listed in the terminal summary (the report lists them all)


@dataclass(frozen=True)
class SkippedQuestion:
    """A question row that was read but not asked.

    Attributes:
        where: the file and line (``qa.jsonl:3``) or record (``covid.json: data[0]...``).
        question_id: the row's id when it has one.
        reason: why it was skipped and how to fix it.
    """

    where: str
    question_id: str | None
    reason: str


def _surrogate_problem(name: str, text: str) -> str | None:
    if not has_lone_surrogates(text):
        return None
    position = next(i for i, ch in enumerate(text) if 0xD800 <= ord(ch) <= 0xDFFF)
    return (
        f"{name} holds a lone surrogate U+{ord(text[position]):04X} at character {position} "
        "(half of a UTF-16 pair: it cannot be encoded); fix the text"
    )


def row_problem(question: Question, missing_answer: str | None = None) -> str | None:
    """Why ``question`` cannot be asked or scored, or ``None`` when it can.

    Args:
        question: the row as read.
        missing_answer: set by the format's loader when the row has no answer and is not marked
            unanswerable: what to do about it (how to add the answer or the mark).

    Example:
        >>> from llama_index_ext_advrag.evaluation.question import Question
        >>> row_problem(Question(id="1", question="  "))
        'empty question'
        >>> row_problem(Question(id="2", question="Pressure?"), "add the answer")
        'no answer: add the answer'
    """
    text = question.question
    if not text.strip():
        return "empty question"
    if len(text) > MAX_QUESTION_CHARS:
        return f"question of {len(text):,} characters (at most {MAX_QUESTION_CHARS:,})"
    fields: list[tuple[str, Iterable[str]]] = [
        ("id", [question.id]),
        ("question", [text]),
        ("an answer", (a for group in question.answer_groups for a in group)),
        ("an evidence text", question.evidence_texts),
        ("an evidence document id", question.evidence_docs),
    ]
    texts = [(name, value) for name, values in fields for value in values]
    size = sum(len(value) for _, value in texts)
    if size > MAX_ROW_CHARS:
        return (
            f"row of {size:,} characters of question, answers and evidence "
            f"(at most {MAX_ROW_CHARS:,})"
        )
    for name, value in texts:
        problem = _surrogate_problem(name, value)
        if problem is not None:
            return problem
    if missing_answer is not None:
        return f"no answer: {missing_answer}"
    return None


@dataclass
class QuestionRows:
    """The rows of one file as they are read: kept questions and skipped rows."""

    questions: list[Question] = field(default_factory=list)
    skipped: list[SkippedQuestion] = field(default_factory=list)
    unjudged: int = 0  # BEIR queries of another split (no judged document): not bad rows
    ids: list[str] = field(default_factory=list)  # of every row read, kept or skipped

    def keep(self, question: Question, where: str, missing_answer: str | None = None) -> None:
        """Keep ``question``, or list it as skipped when :func:`row_problem` finds a reason."""
        self.ids.append(question.id)
        problem = row_problem(question, missing_answer)
        if problem is None:
            self.questions.append(question)
            return
        shown_id = None if has_lone_surrogates(question.id) else question.id
        self.skipped.append(SkippedQuestion(where, shown_id, problem))


def describe_skipped(skipped: list[SkippedQuestion], limit: int = SHOWN_SKIPS) -> str:
    """Lines for a terminal or a log: how many rows were skipped and the first ``limit``.

    >>> describe_skipped([SkippedQuestion("qa.jsonl:2", "q2", "empty question")])
    'Skipped 1 question row (not asked, not counted):\\n  qa.jsonl:2 (id q2): empty question'
    """
    if not skipped:
        return ""
    rows = "row" if len(skipped) == 1 else "rows"
    lines = [f"Skipped {len(skipped)} question {rows} (not asked, not counted):"]
    for row in skipped[:limit]:
        label = f" (id {row.question_id})" if row.question_id is not None else ""
        lines.append(f"  {row.where}{label}: {row.reason}")
    if len(skipped) > limit:
        lines.append(f"  ... and {len(skipped) - limit} more (listed in report.md)")
    return "\n".join(lines)


__all__ = [
    "MAX_QUESTION_CHARS",
    "MAX_ROW_CHARS",
    "QuestionRows",
    "SkippedQuestion",
    "describe_skipped",
    "row_problem",
]
