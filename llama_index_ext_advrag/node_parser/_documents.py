"""A document as the sliding-window parser plans it: text, sentences, token counts, barriers."""

from __future__ import annotations

import logging

from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_ext_advrag.node_parser._nodes import source_info
from llama_index_ext_advrag.text import Sentence, count_tokens, paragraph_breaks, split_sentences

logger = logging.getLogger(__name__)


class DocumentPlan:
    """A document's sentences with what the planner needs; embeddings are filled in later."""

    __slots__ = ("_tokens", "break_after", "document", "sentences", "source", "text")

    def __init__(self, document: BaseNode) -> None:
        self.document = document
        self.text = document.get_content(metadata_mode=MetadataMode.NONE)
        self.sentences: list[Sentence] = split_sentences(self.text)
        self.break_after: list[bool] | None = None
        self.source = source_info(document) if self.sentences else None
        self._tokens: list[int] | None = None

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
