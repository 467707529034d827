"""Load a folder of documents (Markdown, text, Excel workbooks) and a QA file in JSONL."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from llama_index.core.schema import Document

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = (".md", ".txt", ".markdown")
TABLE_SUFFIXES = (".xlsx", ".xls")
QA_FIELDS = ("id", "question", "answers")


@dataclass(frozen=True)
class QAItem:
    """One evaluation question. ``answers`` are parts that must all appear in the context."""

    id: str
    question: str
    answers: tuple[str, ...]
    type: str = "single-hop"
    evidence: tuple[str, ...] = ()
    source: str | None = None
    lang: str | None = None
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def answerable(self) -> bool:
        return bool(self.answers)


def sheet_to_text(sheet_name: str, frame) -> str:  # frame: pandas.DataFrame
    """Render a whole sheet as one text: embedding rows separately loses the table's meaning."""
    frame = frame.fillna("")
    lines = [f"Table: {sheet_name}", " | ".join(str(c) for c in frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append(" | ".join(" ".join(str(v).split()) for v in row))
    return "\n".join(lines)


def read_text_file(path: Path, name: str) -> str:
    """The UTF-8 text of ``path``; bytes that are not UTF-8 are replaced with U+FFFD and
    logged as a warning naming the file (``name``) and the first bad byte's offset."""
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        logger.warning(
            "%s is not valid UTF-8 (byte %d: %r): undecodable bytes replaced with U+FFFD",
            name,
            error.start,
            raw[error.start : error.start + 1],
        )
        return raw.decode("utf-8", errors="replace")


def load_documents(folder: str | Path) -> list[Document]:
    """Load every Markdown/text file and every sheet of every workbook under ``folder``.

    Document ids are stable (the relative path, ``#sheet`` for a sheet), so re-ingesting the same
    folder updates rather than duplicates. Text files are read as UTF-8 (see
    :func:`read_text_file` for files that are not).

    Raises:
        FileNotFoundError: ``folder`` does not exist.
        ValueError: ``folder`` holds no loadable document.
    """
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"data folder {str(root)!r} does not exist")
    documents: list[Document] = []
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root).as_posix()
        if path.suffix.lower() in TEXT_SUFFIXES and path.name.lower() != "readme.md":
            text = read_text_file(path, relative)
            documents.append(Document(text=text, id_=relative, metadata={"file_name": relative}))
        elif path.suffix.lower() in TABLE_SUFFIXES:
            import pandas as pd

            for sheet, frame in pd.read_excel(path, sheet_name=None).items():
                documents.append(
                    Document(
                        text=sheet_to_text(str(sheet), frame),
                        id_=f"{relative}#{sheet}",
                        metadata={"file_name": relative, "sheet_name": str(sheet)},
                    )
                )
    if not documents:
        raise ValueError(f"no .md/.txt/.xlsx documents found under {str(root)!r}")
    logger.info("Loaded %d documents from %s", len(documents), root)
    return documents


def load_qa(path: str | Path) -> list[QAItem]:
    """Read a JSONL file of questions: ``id``, ``question``, ``answers`` (+ type, evidence...).

    Raises:
        ValueError: a line is not JSON or lacks a required field (the line number is named).
    """
    items = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc.msg})") from exc
        missing = [name for name in QA_FIELDS if name not in record]
        if missing:
            raise ValueError(
                f"{path}:{number}: missing field(s) {missing}; required {list(QA_FIELDS)}"
            )
        for name in ("answers", "evidence"):
            if not isinstance(record.get(name, []), list):
                raise ValueError(
                    f"{path}:{number}: {name!r} must be a list of strings, got "
                    f"{type(record[name]).__name__} {record[name]!r:.60}"
                )
        known = {"id", "question", "answers", "type", "evidence", "source", "lang"}
        items.append(
            QAItem(
                id=str(record["id"]),
                question=str(record["question"]),
                answers=tuple(str(a) for a in record["answers"]),
                type=str(record.get("type", "single-hop")),
                evidence=tuple(str(e) for e in record.get("evidence", [])),
                source=record.get("source"),
                lang=record.get("lang"),
                extra={k: v for k, v in record.items() if k not in known},
            )
        )
    return items
