"""The documents of a comparison: folders and files of text and workbooks, or the corpus inside
a question dataset (SQuAD/CMRC paragraphs, HotpotQA contexts, RGB passages, a BEIR corpus).

Document ids are stable (relative path, ``path#sheet``, the dataset's own ids), so the
content hash of a corpus does not change between runs and gold evidence ids line up.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from llama_index.core.schema import Document

from llama_index_ext_advrag.evaluation.questions import (
    QuestionFormat,
    QuestionFormatError,
    detect_format,
    hotpot_document_id,
    iter_jsonl,
    read_json,
    read_text,
    rgb_passage_id,
    squad_document_id,
)

logger = logging.getLogger(__name__)

TEXT_SUFFIXES = (".md", ".txt", ".markdown")
TABLE_SUFFIXES = (".xlsx", ".xls")
DATASET_SUFFIXES = (".json", ".jsonl")
SKIPPED_NAMES = ("readme.md",)


class DocumentError(ValueError):
    """A document that cannot be read; the message names it and the problem."""


def sheet_to_text(sheet_name: str, frame) -> str:  # frame: pandas.DataFrame
    """Render a whole sheet as one text: embedding rows separately loses the table's meaning."""
    frame = frame.fillna("")
    lines = [f"Table: {sheet_name}", " | ".join(str(c) for c in frame.columns)]
    for row in frame.itertuples(index=False):
        lines.append(" | ".join(" ".join(str(v).split()) for v in row))
    return "\n".join(lines)


def _text_document(path: Path, doc_id: str) -> Document:
    try:
        text = read_text(path)
    except QuestionFormatError as exc:  # read_text's decoding message names the file and byte
        raise DocumentError(str(exc)) from None
    return Document(text=text, id_=doc_id, metadata={"file_name": doc_id})


def _workbook_documents(path: Path, doc_id: str) -> list[Document]:
    import pandas as pd

    try:
        sheets = pd.read_excel(path, sheet_name=None)
    except Exception as exc:  # openpyxl raises many types for a broken file
        raise DocumentError(
            f"{path}: not a readable workbook ({type(exc).__name__}: {exc})"
        ) from None
    return [
        Document(
            text=sheet_to_text(str(sheet), frame),
            id_=f"{doc_id}#{sheet}",
            metadata={"file_name": doc_id, "sheet_name": str(sheet)},
        )
        for sheet, frame in sheets.items()
    ]


def _squad_documents(path: Path) -> list[Document]:
    raw = read_json(path)
    documents = []
    for a, article in enumerate(raw.get("data", [])):
        title = article.get("title")
        for p, paragraph in enumerate(article.get("paragraphs", [])):
            doc_id = squad_document_id(paragraph, a, p)
            metadata = {"file_name": path.name, **({"title": str(title)} if title else {})}
            documents.append(Document(text=paragraph["context"], id_=doc_id, metadata=metadata))
    return documents


def _hotpot_documents(path: Path) -> list[Document]:
    seen: dict[str, Document] = {}
    for record in read_json(path):
        for title, sentences in record.get("context", []):
            doc_id = hotpot_document_id(str(title))
            if doc_id not in seen:
                text = "".join(str(s) for s in sentences)
                seen[doc_id] = Document(text=text, id_=doc_id, metadata={"title": str(title)})
    return list(seen.values())


def _rgb_documents(path: Path) -> list[Document]:
    seen: dict[str, Document] = {}
    for _, record in iter_jsonl(path):
        for passage in [*record.get("positive", []), *record.get("negative", [])]:
            if isinstance(passage, str) and passage.strip():
                doc_id = rgb_passage_id(passage)
                seen.setdefault(doc_id, Document(text=passage, id_=doc_id))
    return list(seen.values())


def _beir_documents(path: Path) -> list[Document]:
    documents = []
    for number, record in iter_jsonl(path):
        if "_id" not in record or "text" not in record:
            raise DocumentError(f"{path.name}:{number}: a BEIR corpus row needs '_id' and 'text'")
        title = str(record.get("title") or "")
        text = f"{title}\n{record['text']}" if title else str(record["text"])
        documents.append(
            Document(text=text, id_=f"beir:{record['_id']}", metadata={"title": title})
        )
    return documents


DATASET_CORPORA = {
    QuestionFormat.SQUAD: _squad_documents,
    QuestionFormat.HOTPOT: _hotpot_documents,
    QuestionFormat.RGB: _rgb_documents,
    QuestionFormat.BEIR: _beir_documents,
}


def _dataset_documents(path: Path) -> list[Document]:
    kind = detect_format(path)
    if kind not in DATASET_CORPORA:
        raise DocumentError(
            f"{path}: a {kind.value} question file holds no documents; pass the documents "
            "with --docs and this file with --questions"
        )
    return DATASET_CORPORA[kind](path)


def _file_documents(path: Path, doc_id: str) -> list[Document]:
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        return [_text_document(path, doc_id)]
    if suffix in TABLE_SUFFIXES:
        return _workbook_documents(path, doc_id)
    if suffix in DATASET_SUFFIXES:
        return _dataset_documents(path)
    allowed = ", ".join((*TEXT_SUFFIXES, *TABLE_SUFFIXES, *DATASET_SUFFIXES))
    raise DocumentError(
        f"{path}: unsupported document type {suffix or '(none)'!r}; allowed {allowed}"
    )


def _folder_files(folder: Path) -> Iterable[Path]:
    for path in sorted(folder.rglob("*")):
        if (
            path.is_file()
            and path.suffix.lower() in (*TEXT_SUFFIXES, *TABLE_SUFFIXES)
            and path.name.lower() not in SKIPPED_NAMES
        ):
            yield path


def load_corpus(paths: Sequence[str | Path]) -> list[Document]:
    """Load every document under ``paths`` (folders: their .md/.txt/.xlsx files, README.md
    skipped; files: text, workbooks or a dataset's corpus).

    Raises:
        FileNotFoundError: a path does not exist.
        DocumentError: a document cannot be read (named, with the problem), or none was found.
    """
    documents: list[Document] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            for file in _folder_files(path):
                documents.extend(_file_documents(file, file.relative_to(path).as_posix()))
        elif path.is_file():
            documents.extend(_file_documents(path, path.name))
        else:
            raise FileNotFoundError(f"document path {str(path)!r} does not exist")
    documents = [d for d in documents if d.text.strip()]
    if not documents:
        shown = ", ".join(str(p) for p in paths)
        raise DocumentError(f"no .md/.txt/.xlsx documents found under {shown}")
    counts = Counter(d.id_ for d in documents)
    duplicate = next((i for i, n in counts.items() if n > 1), None)
    if duplicate is not None:
        raise DocumentError(f"two documents share the id {duplicate!r}; pass distinct paths")
    logger.info("Loaded %d documents", len(documents))
    return documents


__all__ = ["DocumentError", "load_corpus"]
