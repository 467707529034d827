"""Evaluation questions in the formats people already have, as one :class:`Question` type.

Formats (detected from the content, or named with ``fmt=``):

- ``qa``: this project's ``qa.jsonl`` (``id``, ``question``, ``answers`` = parts that must all
  appear, ``evidence`` sentences, ``type``, ``lang``).
- ``squad``: SQuAD-style JSON (COVID-QA, CMRC 2018): answers are alternatives, the gold
  evidence is the question's paragraph (its ``document_id``, else ``<article>-<paragraph>``).
- ``hotpot``: HotpotQA JSON: one answer string, the supporting facts' sentences as evidence.
- ``rgb``: RGB JSONL: ``answer`` a list of alternatives (or a list of lists: every part needed),
  the ``positive`` passages as evidence.
- ``beir``: BEIR ``queries.jsonl`` with qrels (``qrels/test.tsv`` beside it, or ``qrels=``): no
  answer strings, so only hit@k / MRR are scored.

A malformed row raises :class:`QuestionFormatError` naming the file and line (or record). An
answer given as a string where the format expects a list is an error: iterating it would score
single characters. A well-formed row that cannot be asked or scored (an empty question, a lone
surrogate, no answer without an unanswerable mark, an oversized row) is skipped and listed with
its reason: see :mod:`~llama_index_ext_advrag.evaluation.question_rows` for the rule.
"""

from __future__ import annotations

import csv
import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from llama_index_ext_advrag.evaluation.question import Question
from llama_index_ext_advrag.evaluation.question_rows import (
    QuestionRows,
    SkippedQuestion,
    describe_skipped,
)

logger = logging.getLogger(__name__)


class QuestionFormatError(ValueError):
    """A question file that cannot be read; the message names the file and the line."""


class QuestionFormat(str, Enum):
    QA = "qa"
    SQUAD = "squad"
    HOTPOT = "hotpot"
    RGB = "rgb"
    BEIR = "beir"


def _where(path: Path, line: int | str) -> str:
    return f"{path.name}:{line}"


def string_list(value: Any, name: str, where: str) -> tuple[str, ...]:
    """``value`` as a tuple of strings; a bare string is refused (it is not a list)."""
    if isinstance(value, str):
        raise QuestionFormatError(
            f"{where}: {name!r} must be a list of strings, got the string {value!r} "
            f'(write ["{value}"])'
        )
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        raise QuestionFormatError(
            f"{where}: {name!r} must be a list of strings, got {type(value).__name__} {value!r:.80}"
        )
    return tuple(str(v) for v in value)


def question_text(value: Any, name: str, where: str) -> str:
    """The question field as a string; any other JSON type (``null``, a number) is an error."""
    if not isinstance(value, str):
        raise QuestionFormatError(
            f"{where}: {name!r} must be a string, got {type(value).__name__} {value!r:.60}"
        )
    return value


def _require(record: Any, keys: tuple[str, ...], where: str) -> None:
    if not isinstance(record, dict):
        raise QuestionFormatError(f"{where}: expected a JSON object, got {type(record).__name__}")
    missing = [k for k in keys if k not in record]
    if missing:
        raise QuestionFormatError(f"{where}: missing field(s) {missing}; required {list(keys)}")


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for every non-blank line."""
    for number, line in enumerate(read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield number, json.loads(line)
        except json.JSONDecodeError as exc:
            raise QuestionFormatError(
                f"{_where(path, number)}: not valid JSON ({exc.msg})"
            ) from None


def read_text(path: Path) -> str:
    """UTF-8 text (a BOM is allowed); a decoding problem names the file and the byte."""
    if not path.is_file():
        raise FileNotFoundError(f"file {str(path)!r} does not exist")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise QuestionFormatError(
            f"{path}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}: "
            f"{exc.reason}); convert it with e.g. `iconv -f GB18030 -t UTF-8`"
        ) from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise QuestionFormatError(
            f"{_where(path, exc.lineno)}: not valid JSON ({exc.msg})"
        ) from None


# --- one loader per format ----------------------------------------------------------------


UNANSWERABLE = "unanswerable"


def unmarked_hint(mark: str) -> str:
    """What a row with no answer and no unanswerable mark is told to do."""
    return f"the row is not marked unanswerable (add answers, or {mark} to score it as one)"


def load_qa_jsonl(path: Path) -> QuestionRows:
    rows = QuestionRows()
    for number, record in iter_jsonl(path):
        where = _where(path, number)
        _require(record, ("id", "question", "answers"), where)
        answers = string_list(record["answers"], "answers", where)
        evidence = string_list(record.get("evidence", []), "evidence", where)
        groups = tuple((a,) for a in answers if a.strip())
        kind = str(record.get("type", "single-hop"))
        question = Question(
            id=str(record["id"]),
            question=question_text(record["question"], "question", where),
            answer_groups=groups,
            evidence_texts=evidence,
            type=kind,
            lang=record.get("lang"),
            source=record.get("source"),
        )
        unmarked = not groups and kind != UNANSWERABLE
        rows.keep(question, where, unmarked_hint(f'"type": "{UNANSWERABLE}"') if unmarked else None)
    return rows


def squad_document_id(paragraph: dict[str, Any], article_index: int, paragraph_index: int) -> str:
    """The id a SQuAD paragraph gets as a document (shared with the corpus loader)."""
    return str(paragraph.get("document_id") or f"{article_index}-{paragraph_index}")


def load_squad(path: Path) -> QuestionRows:
    raw = read_json(path)
    if not isinstance(raw, dict) or not isinstance(raw.get("data"), list):
        raise QuestionFormatError(f"{path.name}: SQuAD JSON needs a top-level 'data' list")
    rows = QuestionRows()
    for a, article in enumerate(raw["data"]):
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            doc_id = squad_document_id(paragraph, a, p)
            for q, qa in enumerate(paragraph.get("qas", [])):
                where = f"{path.name}: data[{a}].paragraphs[{p}].qas[{q}]"
                _require(qa, ("question", "answers"), where)
                if not isinstance(qa["answers"], list):
                    raise QuestionFormatError(
                        f"{where}: 'answers' must be a list of {{'text': ...}} objects, "
                        f"got {type(qa['answers']).__name__} {qa['answers']!r:.60}"
                    )
                texts = []
                for answer in qa["answers"]:
                    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
                        raise QuestionFormatError(
                            f"{where}: each answer must be an object with a 'text' string, "
                            f"got {answer!r:.60}"
                        )
                    if answer["text"].strip():
                        texts.append(answer["text"].strip())
                alternatives = tuple(dict.fromkeys(texts))
                question = Question(
                    id=str(qa.get("id", f"{doc_id}-{q}")),
                    question=question_text(qa["question"], "question", where),
                    answer_groups=(alternatives,) if alternatives else (),
                    evidence_docs=(doc_id,),
                    type=UNANSWERABLE if not alternatives else "single-hop",
                )
                unmarked = not alternatives and qa.get("is_impossible") is not True
                hint = unmarked_hint('"is_impossible": true') if unmarked else None
                rows.keep(question, where, hint)
    return rows


def hotpot_document_id(title: str) -> str:
    return f"hotpot:{title}"


def load_hotpot(path: Path) -> QuestionRows:
    raw = read_json(path)
    if not isinstance(raw, list):
        raise QuestionFormatError(f"{path.name}: HotpotQA JSON is a list of questions")
    rows = QuestionRows()
    for index, record in enumerate(raw):
        where = f"{path.name}: record {index}"
        _require(record, ("question", "answer", "context"), where)
        if not isinstance(record["answer"], str):
            raise QuestionFormatError(f"{where}: 'answer' must be a string in HotpotQA")
        sentences: dict[tuple[str, int], str] = {}
        for item in record["context"]:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[1], list)):
                raise QuestionFormatError(f"{where}: 'context' items are [title, [sentences]]")
            for s, sentence in enumerate(item[1]):
                sentences[(str(item[0]), s)] = str(sentence)
        facts = record.get("supporting_facts", [])
        evidence = tuple(
            sentences[(str(t), int(i))] for t, i in facts if (str(t), int(i)) in sentences
        )
        answer = record["answer"].strip()
        groups = () if answer.lower() in ("", "yes", "no") else ((answer,),)
        question = Question(
            id=str(record.get("_id", index)),
            question=question_text(record["question"], "question", where),
            answer_groups=groups,
            evidence_texts=evidence,
            evidence_docs=tuple(dict.fromkeys(hotpot_document_id(str(t)) for t, _ in facts)),
            type=str(record.get("type", "multi-hop")),
        )
        # yes/no answers are not scored for coverage (documented); an empty one is a gap
        rows.keep(question, where, None if answer else "HotpotQA has no unanswerable mark; add it")
    return rows


def rgb_passage_id(text: str) -> str:
    """Passages carry no id in RGB; the id is a hash of the text (shared with the corpus)."""
    import hashlib

    return "rgb:" + hashlib.sha1(text.strip().encode("utf-8")).hexdigest()[:16]


def _rgb_groups(answer: Any, where: str) -> tuple[tuple[str, ...], ...]:
    if isinstance(answer, str):
        raise QuestionFormatError(
            f"{where}: 'answer' must be a list of alternatives (or of lists, one per part), "
            f'got the string {answer!r} (write ["{answer}"])'
        )
    if not isinstance(answer, list):
        raise QuestionFormatError(f"{where}: 'answer' must be a list, got {type(answer).__name__}")
    if answer and all(isinstance(part, list) for part in answer):
        return tuple(string_list(part, "answer part", where) for part in answer)
    alternatives = string_list(answer, "answer", where)
    return (alternatives,) if alternatives else ()


def load_rgb(path: Path) -> QuestionRows:
    rows = QuestionRows()
    for number, record in iter_jsonl(path):
        where = _where(path, number)
        _require(record, ("query", "answer"), where)
        positives = string_list(record.get("positive", []), "positive", where)
        groups = _rgb_groups(record["answer"], where)
        question = Question(
            id=str(record.get("id", number)),
            question=question_text(record["query"], "query", where),
            answer_groups=groups,
            evidence_texts=positives,
            evidence_docs=tuple(rgb_passage_id(p) for p in positives),
        )
        rows.keep(question, where, None if groups else "RGB has no unanswerable mark; add it")
    return rows


def find_qrels(queries: Path) -> Path | None:
    """BEIR's layout: ``qrels/test.tsv`` (else dev, train) beside ``queries.jsonl``."""
    for split in ("test", "dev", "train"):
        candidate = queries.parent / "qrels" / f"{split}.tsv"
        if candidate.is_file():
            return candidate
    return None


def load_qrels(path: Path) -> dict[str, list[str]]:
    relevant: dict[str, list[str]] = {}
    for number, row in enumerate(csv.reader(read_text(path).splitlines(), delimiter="\t"), 1):
        if not row or (number == 1 and row[0] in ("query-id", "query_id", "qid")):
            continue
        if len(row) < 2:
            raise QuestionFormatError(
                f"{_where(path, number)}: expected query-id, corpus-id, score"
            )
        score = row[2] if len(row) > 2 else "1"
        try:
            positive = float(score) > 0
        except ValueError:
            raise QuestionFormatError(
                f"{_where(path, number)}: score {score!r} is not a number"
            ) from None
        if positive:
            relevant.setdefault(row[0], []).append(row[1])
    return relevant


def load_beir(path: Path, qrels: Path | None = None) -> QuestionRows:
    qrels = qrels or find_qrels(path)
    if qrels is None:
        raise QuestionFormatError(
            f"{path.name}: BEIR queries need qrels (qrels/test.tsv beside it, or --qrels FILE)"
        )
    relevant = load_qrels(qrels)
    rows = QuestionRows()
    for number, record in iter_jsonl(path):
        where = _where(path, number)
        _require(record, ("_id", "text"), where)
        docs = relevant.get(str(record["_id"]))
        if not docs:  # a query of another split: counted, not a bad row
            rows.unjudged += 1
            continue
        question = Question(
            id=str(record["_id"]),
            question=question_text(record["text"], "text", where),
            evidence_docs=tuple(f"beir:{d}" for d in docs),
        )
        rows.keep(question, where)
    return rows


LOADERS: dict[QuestionFormat, Callable[..., QuestionRows]] = {
    QuestionFormat.QA: load_qa_jsonl,
    QuestionFormat.SQUAD: load_squad,
    QuestionFormat.HOTPOT: load_hotpot,
    QuestionFormat.RGB: load_rgb,
    QuestionFormat.BEIR: load_beir,
}


def _record_format(record: Any) -> QuestionFormat | None:
    if not isinstance(record, dict):
        return None
    if {"query", "answer"} <= record.keys():
        return QuestionFormat.RGB
    if "question" in record:
        return QuestionFormat.QA
    if {"_id", "text"} <= record.keys():
        return QuestionFormat.BEIR
    return None


def detect_format(path: Path) -> QuestionFormat:
    """Tell the format from the structure: a JSON document (SQuAD's ``data``, HotpotQA's list)
    or JSON lines (the first record's keys)."""
    text = read_text(path).strip()
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict) and "data" in whole:
        return QuestionFormat.SQUAD
    if isinstance(whole, list):
        return QuestionFormat.HOTPOT
    try:
        first = json.loads(text.split("\n", 1)[0]) if text else None
    except json.JSONDecodeError:
        first = None
    kind = _record_format(first)
    if kind is not None:
        return kind
    allowed = ", ".join(f.value for f in QuestionFormat)
    raise QuestionFormatError(
        f"{path.name}: cannot tell the question format from its first record; "
        f"name it with --questions-format ({allowed})"
    )


@dataclass(frozen=True)
class QuestionSet:
    """The questions of one file, the rows skipped (with their reasons) and the format read."""

    questions: list[Question]
    skipped: list[SkippedQuestion]
    format: QuestionFormat
    unjudged: int = 0  # BEIR queries without a judged document in the qrels (another split)


def read_questions(
    path: str | Path, fmt: QuestionFormat | str | None = None, qrels: str | Path | None = None
) -> QuestionSet:
    """Read questions from ``path`` in ``fmt`` (detected when ``None``), with the rows that
    were skipped and why (see :mod:`~llama_index_ext_advrag.evaluation.question_rows`).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        QuestionFormatError: a malformed file or row (file and line named), an unknown format,
            a duplicate id, or no row that can be asked.
    """
    path = Path(path)
    if fmt is None:
        kind = detect_format(path)
    else:
        try:
            kind = QuestionFormat(fmt)
        except ValueError:
            allowed = ", ".join(f.value for f in QuestionFormat)
            raise QuestionFormatError(
                f"question format must be one of {allowed}, got {fmt!r}"
            ) from None
    if kind is QuestionFormat.BEIR:
        rows = load_beir(path, Path(qrels) if qrels else None)
    else:
        rows = LOADERS[kind](path)
    questions, skipped = rows.questions, rows.skipped
    counts = Counter(rows.ids)  # skipped rows too: an id given twice is a broken file
    duplicate = next((i for i, n in counts.items() if n > 1), None)
    if duplicate is not None:
        raise QuestionFormatError(f"{path.name}: question id {duplicate!r} occurs more than once")
    if not questions:
        found = f"; {describe_skipped(skipped, limit=3)}" if skipped else ""
        raise QuestionFormatError(
            f"{path.name}: no questions found (read as {kind.value}){found}".replace("\n", " ")
        )
    logger.info("Loaded %d questions (%s) from %s", len(questions), kind.value, path.name)
    if skipped:
        logger.warning("%s: %s", path.name, describe_skipped(skipped))
    return QuestionSet(questions, skipped, kind, rows.unjudged)


def load_questions(
    path: str | Path, fmt: QuestionFormat | str | None = None, qrels: str | Path | None = None
) -> list[Question]:
    """The questions of :func:`read_questions`; skipped rows are logged as one warning.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        QuestionFormatError: a malformed file or row (file and line named), an unknown format.
    """
    return read_questions(path, fmt, qrels).questions


__all__ = [
    "Question",
    "QuestionFormat",
    "QuestionFormatError",
    "QuestionSet",
    "SkippedQuestion",
    "detect_format",
    "load_questions",
    "read_questions",
    "read_text",
    "rgb_passage_id",
    "squad_document_id",
    "hotpot_document_id",
]
