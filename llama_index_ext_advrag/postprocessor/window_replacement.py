"""Sentence-window replacement that spends no context slot on a window already given.

With sentence-unit windows (core's ``SentenceWindowNodeParser`` or this pack's
``AdaptiveSlidingWindowNodeParser(embed_unit="sentence")``) neighbouring sentences often rank
together, and core's ``MetadataReplacementPostProcessor`` then hands the LLM the same passage
several times. Here the hits are taken in rank order and a hit whose own sentence already lies
inside a window kept for an earlier hit of the same document is skipped (it would repeat that
window); the next hit takes its slot. Retrieve more than ``top_n`` (e.g. 4x) so skipped slots
can be refilled.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.events import WindowRecord, WindowReplacementEvent
from llama_index_ext_advrag.layout import DOCUMENT_ID_KEY, ORIGINAL_TEXT_KEY, WINDOW_KEY
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "window_replacement"
DEFAULT_WINDOW_KEY = WINDOW_KEY
DEFAULT_ORIGINAL_TEXT_KEY = ORIGINAL_TEXT_KEY


def select_windows(
    hits: Sequence[tuple[str | None, str, str]], top_n: int | None, skip_covered: bool
) -> tuple[list[int], dict[int, int]]:
    """Pick hits in rank order from ``(document id, own sentence, window)`` triples.

    Returns the kept indices and, for each skipped index, the kept index whose window already
    holds its sentence. A hit without a document id is never treated as covered.

    >>> select_windows([("d", "B.", "A. B. C."), ("d", "C.", "B. C. D."), ("d", "X.", "X.")], 2, True)
    ([0, 2], {1: 0})
    """
    kept: list[int] = []
    skipped: dict[int, int] = {}
    for index, (doc_id, sentence, _) in enumerate(hits):
        if top_n is not None and len(kept) >= top_n:
            break
        cover = None
        if skip_covered and doc_id is not None and sentence:
            cover = next((k for k in kept if hits[k][0] == doc_id and sentence in hits[k][2]), None)
        if cover is None:
            kept.append(index)
        else:
            skipped[index] = cover
    return kept, skipped


class WindowReplacementPostprocessor(BaseNodePostprocessor, RefusesUnknownSettings):
    """Replace each hit's text by its window, skipping hits whose window would repeat one.

    Args:
        target_metadata_key: metadata key holding the window (``"window"`` for both core's and this
            pack's sentence-window parsers).
        original_text_key: metadata key holding the hit's own sentence (``"original_text"``);
            without it the node's text is used.
        top_n: at most this many windows are returned (``None``: no limit).
        skip_covered: skip a hit whose sentence lies inside an earlier kept window of the same
            document (``False`` behaves like core's ``MetadataReplacementPostProcessor``).

    Example:
        >>> retriever = index.as_retriever(similarity_top_k=20)  # doctest: +SKIP
        >>> post = WindowReplacementPostprocessor(top_n=5)  # doctest: +SKIP
        >>> nodes = post.postprocess_nodes(retriever.retrieve(question))  # doctest: +SKIP
    """

    target_metadata_key: str = Field(default=DEFAULT_WINDOW_KEY, min_length=1)
    original_text_key: str = Field(default=DEFAULT_ORIGINAL_TEXT_KEY, min_length=1)
    top_n: int | None = Field(default=None, ge=1, description="Windows returned at most.")
    skip_covered: bool = Field(default=True, description="Skip hits inside a kept window.")

    @classmethod
    def class_name(cls) -> str:
        return "WindowReplacementPostprocessor"

    def _triple(self, hit: NodeWithScore) -> tuple[str | None, str, str]:
        node, metadata = hit.node, hit.node.metadata
        own = metadata.get(self.original_text_key)
        sentence = own if isinstance(own, str) else node.get_content(MetadataMode.NONE)
        window = metadata.get(self.target_metadata_key)
        doc_id = node.ref_doc_id or metadata.get(DOCUMENT_ID_KEY)
        return (
            str(doc_id) if doc_id is not None else None,
            sentence.strip(),
            window if isinstance(window, str) else sentence,
        )

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        triples = [self._triple(hit) for hit in nodes]
        kept, skipped = select_windows(triples, self.top_n, self.skip_covered)
        results = []
        kept_records: list[WindowRecord] = []
        for index in kept:
            result = copy_node_with_score(nodes[index])
            result.node.set_content(triples[index][2])
            covered = [nodes[i].node.node_id for i, k in skipped.items() if k == index]
            record: dict[str, Any] = {"rank": index, "skipped_as_covered": covered}
            add_trace(result.node, TRACE_COMPONENT, record)
            results.append(result)
            kept_records.append(
                {"node_id": result.node.node_id, "rank": index, "skipped_as_covered": covered}
            )
        if skipped:
            logger.debug("skipped %d hits already inside a kept window", len(skipped))
        dispatcher.event(WindowReplacementEvent(kept=kept_records))
        return results


__all__ = ["WindowReplacementPostprocessor", "select_windows"]
