"""A document as the parsers plan it: text, sentences, token counts, barriers.

The document is cleaned and its id made unique first (:mod:`.inputs`); a sentence longer than
the parser's ``max_sentence_chars`` is cut into pieces (one 5 MB "sentence" would become one
node Milvus refuses after it was embedded), with a warning naming the document.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from llama_index.core.schema import BaseNode, MetadataMode, RelatedNodeInfo

from llama_index_ext_advrag.node_parser._nodes import source_info
from llama_index_ext_advrag.node_parser.inputs import clean_document, unique_document_ids
from llama_index_ext_advrag.text import (
    DEFAULT_MAX_SENTENCE_CHARS,
    Sentence,
    count_tokens,
    cut_long_sentences,
    paragraph_breaks,
    split_sentences,
)

logger = logging.getLogger(__name__)


class DocumentPlan:
    """A document's sentences with what the planner needs; embeddings are filled in later.

    ``document`` is the (cleaned) document, ``document_id`` the id its nodes derive from
    (see :func:`unique_document_ids`) and ``cut_sentences`` how many of its sentences were
    longer than ``max_sentence_chars`` and cut into pieces (each piece has ``cut=True``).
    """

    __slots__ = (
        "_source",
        "_tokens",
        "break_after",
        "cut_sentences",
        "document",
        "document_id",
        "sentences",
        "text",
    )

    def __init__(
        self,
        document: BaseNode,
        document_id: str | None = None,
        max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS,
    ) -> None:
        self.document = clean_document(document)
        self.document_id = document.node_id if document_id is None else document_id
        self.text = self.document.get_content(metadata_mode=MetadataMode.NONE)
        sentences = split_sentences(self.text)
        self.sentences: list[Sentence]
        self.sentences, self.cut_sentences = cut_long_sentences(
            self.text, sentences, max_sentence_chars
        )
        if self.cut_sentences:
            logger.warning(
                "document %r: %d sentences longer than %d characters were cut into pieces "
                "(%d sentences now)",
                self.document_id,
                self.cut_sentences,
                max_sentence_chars,
                len(self.sentences),
            )
        self.break_after: list[bool] | None = None
        self._source: RelatedNodeInfo | None = None
        self._tokens: list[int] | None = None

    @property
    def source(self) -> RelatedNodeInfo:
        """The SOURCE relationship of the document's nodes, made on first use (it hashes the
        whole text, which a document without sentences never needs)."""
        if self._source is None:
            self._source = source_info(self.document)
        return self._source

    @property
    def tokens(self) -> list[int]:
        """Tokens per sentence, counted on first use (fixed mode usually needs none)."""
        if self._tokens is None:
            self._tokens = [count_tokens(s.text) for s in self.sentences]
        return self._tokens

    def paragraph_breaks(self) -> list[bool]:
        """Per sentence, whether a blank line follows it."""
        return paragraph_breaks(self.text, self.sentences)


def plan_documents(
    documents: Sequence[BaseNode], max_sentence_chars: int = DEFAULT_MAX_SENTENCE_CHARS
) -> list[DocumentPlan]:
    """Plans of ``documents`` with unique document ids (see the module docstring)."""
    ids = unique_document_ids(documents)
    return [
        DocumentPlan(document, document_id, max_sentence_chars)
        for document, document_id in zip(documents, ids, strict=True)
    ]


__all__ = ["DocumentPlan", "plan_documents"]
