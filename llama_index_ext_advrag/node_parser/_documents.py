"""A document as the sliding-window parser plans it: text, sentences, token counts, barriers."""

from __future__ import annotations

import logging

from llama_index.core.schema import BaseNode, MetadataMode, RelatedNodeInfo

from llama_index_ext_advrag.node_parser._nodes import source_info
from llama_index_ext_advrag.text import Sentence, count_tokens, paragraph_breaks, split_sentences

logger = logging.getLogger(__name__)


class DocumentPlan:
    """A document's sentences with what the planner needs; embeddings are filled in later."""

    __slots__ = ("_source", "_tokens", "break_after", "document", "sentences", "text")

    def __init__(self, document: BaseNode) -> None:
        self.document = document
        self.text = document.get_content(metadata_mode=MetadataMode.NONE)
        self.sentences: list[Sentence] = split_sentences(self.text)
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


__all__ = ["DocumentPlan"]
