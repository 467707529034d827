"""A chunk hierarchy for auto-merging whose every boundary is a sentence boundary.

LlamaIndex's ``HierarchicalNodeParser`` re-splits every chunk with a ``SentenceSplitter`` and
overlap, so a child can hold text its parent does not and chunk edges fall inside sentences
(and, for Chinese, wherever the regex fallback cuts). Here the document is split into
sentences once, with the shared segmenter, and each level packs whole sentences of its parent:
a parent's text is exactly the concatenation of its children's texts, and every chunk's text is
``source[start_char_idx:end_char_idx]``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr, field_validator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.schema import (
    BaseNode,
    Document,
    NodeRelationship,
    RelatedNodeInfo,
)
from llama_index.core.utils import get_tqdm_iterable

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.layout import (
    BOOKKEEPING_KEYS,
    CHAR_SPAN_KEY,
    DOCUMENT_ID_KEY,
    SECTION_TITLE_KEY,
    SENTENCE_SPAN_KEY,
    DocumentNodeIds,
)
from llama_index_ext_advrag.node_parser._documents import DocumentPlan, plan_documents
from llama_index_ext_advrag.node_parser._nodes import (
    NodeFactory,
    ParseStats,
    link_prev_next,
    parse_event,
    restore_id_func,
)
from llama_index_ext_advrag.text import DEFAULT_MAX_SENTENCE_CHARS, Sentence

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_CHUNK_SIZES = (2048, 512, 128)
LEVEL_KEY = "hierarchy_level"
EVENT_COMPONENT = "hierarchical"  # the events' name; the hierarchy writes no trace


def pack_sentences(
    tokens: Sequence[int], start: int, stop: int, chunk_size: int, hard_breaks: Sequence[bool]
) -> list[tuple[int, int]]:
    """Pack sentences ``[start, stop)`` greedily into chunks of at most ``chunk_size`` tokens.

    A chunk closes before a sentence with ``hard_breaks[i]`` (a heading) and before a sentence
    that would overflow it; a sentence longer than ``chunk_size`` forms a chunk of its own.

    >>> pack_sentences([3, 3, 3, 3], 0, 4, 6, [False] * 4)
    [(0, 2), (2, 4)]
    >>> pack_sentences([3, 3, 9, 3], 0, 4, 6, [False, False, False, True])
    [(0, 2), (2, 3), (3, 4)]
    """
    chunks: list[tuple[int, int]] = []
    first, total = start, 0
    for index in range(start, stop):
        if index > first and (hard_breaks[index] or total + tokens[index] > chunk_size):
            chunks.append((first, index))
            first, total = index, 0
        total += tokens[index]
    if first < stop:
        chunks.append((first, stop))
    return chunks


def plan_hierarchy(
    tokens: Sequence[int], chunk_sizes: Sequence[int], hard_breaks: Sequence[bool]
) -> list[list[tuple[int, int, int | None]]]:
    """Sentence spans per level as ``(first, last, parent_index)``; level 0 has no parent.

    Children are packed inside their parent only, so parent boundaries are child boundaries.
    """
    levels: list[list[tuple[int, int, int | None]]] = [
        [
            (a, b, None)
            for a, b in pack_sentences(tokens, 0, len(tokens), chunk_sizes[0], hard_breaks)
        ]
    ]
    for size in chunk_sizes[1:]:
        children: list[tuple[int, int, int | None]] = []
        for parent_index, (first, last, _) in enumerate(levels[-1]):
            children += [
                (a, b, parent_index)
                for a, b in pack_sentences(tokens, first, last, size, hard_breaks)
            ]
        levels.append(children)
    return levels


def chunk_char_span(sentences: Sequence[Sentence], first: int, last: int) -> tuple[int, int]:
    """Characters of sentences ``[first, last)`` plus the whitespace up to the next sentence, so
    consecutive chunks tile the text from the first sentence to the last without gaps."""
    end = sentences[last].start if last < len(sentences) else sentences[-1].end
    return sentences[first].start, end


class HierarchicalSentenceNodeParser(NodeParser, RefusesUnknownSettings):
    """Split documents into levels of sentence-aligned chunks for auto-merging retrieval.

    Output follows LlamaIndex's ``HierarchicalNodeParser``: one flat list with, per document,
    the level-0 chunks, then level 1, and so on; PARENT/CHILD relationships link the levels, so
    ``get_leaf_nodes`` and ``AutoMergingRetriever`` work unchanged. Unlike core, every node's
    SOURCE is the document itself (so ``ref_doc_id`` and ``delete_ref_doc`` work at every
    level), PREVIOUS/NEXT link neighbours of the same level, and node ids are derived from the
    document id, level and sentence span.

    Args:
        chunk_sizes: token budget per level, largest first (e.g. ``[1024, 256, 64]``); a sentence
            longer than a level's budget is a chunk of its own at that level.
        split_at_headings: close chunks before every heading, at every level.
        max_sentence_chars: a longer sentence is cut into pieces of at most this many characters, at
            whitespace where there is some (logged as a warning naming the document).

    Two documents of one parse with the same id keep distinct nodes (the later one's ids
    derive from ``"<id>#1"``, warned); lone surrogates are replaced with U+FFFD (warned).

    Raises:
        ValueError: ``chunk_sizes`` empty, not strictly decreasing, or not positive.

    Example:
        >>> from llama_index.core import Document
        >>> parser = HierarchicalSentenceNodeParser(chunk_sizes=[8, 4])
        >>> nodes = parser.get_nodes_from_documents([Document(text="One two. Three four. Five.")])
        >>> [(n.metadata["hierarchy_level"], n.text) for n in nodes]
        [(0, 'One two. Three four. Five.'), (1, 'One two. '), (1, 'Three four. '), (1, 'Five.')]
    """

    chunk_sizes: list[int] = Field(
        default_factory=lambda: list(DEFAULT_CHUNK_SIZES),
        min_length=1,
        description="Token budget per level, largest first; boundaries fall between sentences.",
    )
    split_at_headings: bool = Field(
        default=True, description="Close the chunk of every level before a heading."
    )
    max_sentence_chars: int = Field(
        default=DEFAULT_MAX_SENTENCE_CHARS,
        ge=100,
        le=60_000,
        description="A longer sentence is cut into pieces of at most this many characters.",
    )

    _last_stats: ParseStats | None = PrivateAttr(default=None)

    def __init__(self, **data: Any) -> None:
        super().__init__(**restore_id_func(data))

    @field_validator("chunk_sizes")
    @classmethod
    def _check_sizes(cls, sizes: list[int]) -> list[int]:
        if any(size < 1 for size in sizes) or any(
            a <= b for a, b in zip(sizes, sizes[1:], strict=False)
        ):
            raise ValueError(f"chunk_sizes must be positive and strictly decreasing, got {sizes}")
        return sizes

    @classmethod
    def class_name(cls) -> str:
        return "HierarchicalSentenceNodeParser"

    @property
    def last_parse_stats(self) -> ParseStats | None:
        """Counts of the latest parse; ``storage_expansion`` is about the number of levels."""
        return self._last_stats

    def _document_nodes(self, plan: DocumentPlan) -> tuple[list[BaseNode], int, int]:
        """The hierarchy of one document, its sentence count and the characters stored."""
        text, sentences, document = plan.text, plan.sentences, plan.document
        if not sentences:
            return [], 0, 0
        tokens = plan.tokens
        breaks = [s.is_heading and self.split_at_headings for s in sentences]
        factory = NodeFactory(document, plan.source, self.include_metadata)
        node_id = DocumentNodeIds(plan.document_id)
        excluded = (*BOOKKEEPING_KEYS, LEVEL_KEY)
        levels: list[list[BaseNode]] = []
        parent_infos: list[RelatedNodeInfo] = []
        stored = 0
        for level, spans in enumerate(plan_hierarchy(tokens, self.chunk_sizes, breaks)):
            level_nodes: list[BaseNode] = []
            for first, last, _parent in spans:
                start, end = chunk_char_span(sentences, first, last)
                stored += end - start
                metadata: dict[str, object] = {
                    DOCUMENT_ID_KEY: plan.document_id,
                    SENTENCE_SPAN_KEY: [first, last],
                    CHAR_SPAN_KEY: [start, end],
                    SECTION_TITLE_KEY: sentences[first].section_title,
                    LEVEL_KEY: level,
                }
                node = factory.make(
                    node_id("level", level, first, last),
                    text[start:end],
                    start=start,
                    end=end,
                    metadata=metadata,
                    excluded_keys=excluded,
                )
                level_nodes.append(node)
            infos = [node.as_related_node_info() for node in level_nodes]
            siblings: dict[int | None, list[int]] = {}
            for position, (_, _, parent_index) in enumerate(spans):
                siblings.setdefault(parent_index, []).append(position)
            for parent_index, positions in siblings.items():
                if parent_index is not None:
                    parent = levels[-1][parent_index]
                    parent.relationships[NodeRelationship.CHILD] = [infos[i] for i in positions]
                    for i in positions:
                        level_nodes[i].relationships[NodeRelationship.PARENT] = parent_infos[
                            parent_index
                        ]
                # Like core, PREVIOUS/NEXT link siblings only: across parents, core's
                # AutoMergingRetriever would fill in a single-child node and merge it back up
                # to its parent again and again.
                if self.include_prev_next_rel:
                    link_prev_next(
                        [level_nodes[i] for i in positions], [infos[i] for i in positions]
                    )
            parent_infos = infos
            levels.append(level_nodes)
        return [node for level_nodes in levels for node in level_nodes], len(sentences), stored

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        all_nodes: list[BaseNode] = []
        sentences = stored = source_chars = 0
        plans = plan_documents(nodes, self.max_sentence_chars)
        for plan in get_tqdm_iterable(plans, show_progress, "Building hierarchy"):
            doc_nodes, doc_sentences, doc_stored = self._document_nodes(plan)
            all_nodes += doc_nodes
            sentences += doc_sentences
            stored += doc_stored
            source_chars += len(plan.text.strip())
        self._last_stats = ParseStats(len(nodes), sentences, len(all_nodes), source_chars, stored)
        per_level = Counter(node.metadata[LEVEL_KEY] for node in all_nodes)
        levels = [
            {"level": level, "chunk_size": size, "nodes": per_level[level]}
            for level, size in enumerate(self.chunk_sizes)
        ]
        dispatcher.event(
            parse_event(EVENT_COMPONENT, self.class_name(), self._last_stats, levels=levels)
        )
        return all_nodes

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        """Keep what ``_parse_nodes`` built: core's pass would link PREVIOUS/NEXT across levels
        (they are adjacent in the flat list) and re-find offsets with ``str.find``."""
        return nodes


__all__ = ["HierarchicalSentenceNodeParser", "chunk_char_span", "pack_sentences", "plan_hierarchy"]
