"""Sentence-unit sliding windows, fixed or adapted to the text, for LlamaIndex.

A window of sentences slides over the document, so a fact that spans the boundary between two
sentences is whole in at least one window, and no sentence is ever cut. In ``fixed`` mode the
window holds exactly ``window_size`` sentences and moves by ``stride``; in ``adaptive`` mode it
holds as many whole sentences as fit a token budget, never crosses a heading, a semantic
breakpoint (a drop in shared words, or with ``breakpoint_signal="embedding"`` in embedding
similarity, between adjacent sentences) or, optionally, a blank line, and moves by a share of
its own tokens.

Each window becomes a node (``embed_unit="window"``), or each sentence becomes a node that keeps
its window in metadata (``embed_unit="sentence"``, for ``MetadataReplacementPostProcessor``);
a sentence too short to embed alone can take the sentences after it (``min_embed_tokens``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr, model_validator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.node_parser.node_utils import default_id_func
from llama_index.core.schema import BaseNode, Document
from llama_index.core.utils import get_tqdm_iterable

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.layout import (
    BOOKKEEPING_KEYS,
    CHAR_SPAN_KEY,
    DEFAULT_ID_UNIT,
    DOCUMENT_ID_KEY,
    ORIGINAL_TEXT_KEY,
    SECTION_TITLE_KEY,
    SENTENCE_SPAN_KEY,
    WINDOW_KEY,
    DocumentNodeIds,
)
from llama_index_ext_advrag.models import (
    DEFAULT_CJK_THRESHOLD,
    aembed_in_length_order,
    embed_in_length_order,
    resolve_embed_model,
)
from llama_index_ext_advrag.node_parser._documents import DocumentPlan, plan_documents
from llama_index_ext_advrag.node_parser._nodes import (
    NodeFactory,
    ParseStats,
    link_prev_next,
    parse_event,
    restore_id_func,
)
from llama_index_ext_advrag.node_parser.planning import (
    WindowSpan,
    breaks_from_similarities,
    build_units,
    extend_embedded_sentence,
    find_breakpoints,
    find_question_glue,
    lexical_similarities,
    merge_flags,
    plan_adaptive_centred,
    plan_adaptive_windows,
    plan_fixed_centred,
    plan_fixed_windows,
)
from llama_index_ext_advrag.node_parser.presets import DocumentPreset, preset_values
from llama_index_ext_advrag.text import DEFAULT_MAX_SENTENCE_CHARS
from llama_index_ext_advrag.text.words import cjk_share
from llama_index_ext_advrag.trace import get_trace

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_WINDOW_SIZE = 3
DEFAULT_STRIDE = 1
DEFAULT_MAX_WINDOW_TOKENS = 256
DEFAULT_WINDOW_METADATA_KEY = WINDOW_KEY
DEFAULT_ORIGINAL_TEXT_METADATA_KEY = ORIGINAL_TEXT_KEY
TRACE_COMPONENT = "sliding_window"


class WindowMode(str, Enum):
    """How windows are sized."""

    FIXED = "fixed"
    ADAPTIVE = "adaptive"


class EmbedUnit(str, Enum):
    """What a node's text (and so its embedding) is."""

    WINDOW = "window"
    SENTENCE = "sentence"


class BreakpointSignal(str, Enum):
    """What semantic breakpoints compare across a cut between sentences."""

    EMBEDDING = "embedding"  # cosine of sentence embeddings: one model call per sentence
    LEXICAL = "lexical"  # TF-IDF cosine of the sentences' words (TextTiling): no model call
    AUTO = "auto"  # per document: embedding for CJK text, lexical otherwise


# ``auto``: a document whose letters are at least this share CJK is compared by embeddings.
# Measured at equal context tokens (benchmarks/results/breakpoint_signal.txt): on COVID-QA
# (English) the lexical signal ties the embedding one and keeps ingest at the embedding-only
# floor (the embedding signal costs 2.5-3.7x); on CMRC 2018 (Chinese) embeddings cover about 2.6
# points more than words, and words about 3 more than no breakpoints. The default is
# ``lexical``: it meets the 1.15x ingest target in both languages and loses on one dataset
# only; ``auto`` buys the Chinese points for the embedding pass.
AUTO_EMBEDDING_MIN_CJK_SHARE = DEFAULT_CJK_THRESHOLD

# The buffer (sentences averaged on each side) each signal was measured best with when the
# field is left unset: sentence embeddings already carry context; word counts of one sentence
# are too sparse, so the lexical signal compares three-sentence blocks (TextTiling's habit).
DEFAULT_BREAKPOINT_BUFFER: dict[BreakpointSignal, int] = {
    BreakpointSignal.EMBEDDING: 1,
    BreakpointSignal.LEXICAL: 3,
}


class AdaptiveSlidingWindowNodeParser(NodeParser, RefusesUnknownSettings):
    """Split documents into overlapping windows of whole sentences.

    Args:
        window_size: sentences per window in ``fixed`` mode.
        stride: sentences between consecutive windows (``fixed``), or between consecutive embedded
            sentences with ``embed_unit="sentence"`` in ``fixed`` mode.
        mode: ``"fixed"`` or ``"adaptive"`` (token budget, headings, semantic breakpoints).
        embed_unit: ``"window"`` embeds each window; ``"sentence"`` makes each sentence a node and
            keeps its window under ``window_metadata_key``.
        preset: ``"general"``, ``"technical"``, ``"legal"``, ``"qa"`` or ``"article"``: adaptive
            settings for that document type; explicitly passed fields override the preset.
        max_window_tokens: adaptive token budget per window (one longer sentence stays whole).
        split_at_paragraphs: adaptive: no window crosses a blank line between two sentences (a
            paragraph break), as none crosses a heading; off by default.
        min_embed_tokens: sentence unit: a sentence shorter than this is embedded together with the
            sentences after it, inside its window, until the text reaches this many tokens (a bare
            "What was the main finding?" or "Table 3." matches too many queries); 0 embeds every
            sentence alone, as core's ``SentenceWindowNodeParser``.
        max_sentence_chars: a longer sentence (5 MB without punctuation, a 200 KB token) is cut into
            pieces of at most this many characters, at whitespace where there is some; logged as a
            warning and recorded in the trace as ``cut_sentences``.
        embed_model: model for embedding breakpoints, resolved with ``resolve_embed_model`` only
            when a document's breakpoint signal is ``embedding``; not serialised.

    Raises:
        ValueError: ``window_size < 1``, ``stride`` outside ``[1, window_size]``, an unknown
            ``mode``, ``embed_unit`` or ``preset``, ``min_embed_tokens > 0`` with the window unit,
            or a bound violated by another field.

    Example:
        >>> from llama_index.core import Document
        >>> parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=1)
        >>> nodes = parser.get_nodes_from_documents([Document(text="A a. B b. C c. D d. E e.")])
        >>> [n.text for n in nodes]
        ['A a. B b. C c.', 'B b. C c. D d.', 'C c. D d. E e.']

        Node ids are derived from the document id and the sentence span, so re-ingesting a document
        whose id is stable (e.g. ``filename_as_id=True``) upserts instead of duplicating. Two
        documents of one parse with the same id keep distinct nodes: the later one's ids derive
        from ``"<id>#1"`` (warned, and in the trace as ``duplicate_document_id``). Lone surrogates
        in a document are replaced with U+FFFD (warned, naming the document).
    """

    window_size: int = Field(
        default=DEFAULT_WINDOW_SIZE, ge=1, description="Sentences per window (fixed mode)."
    )
    stride: int = Field(
        default=DEFAULT_STRIDE, ge=1, description="Sentences the window moves by (fixed mode)."
    )
    mode: WindowMode = Field(default=WindowMode.FIXED, description="'fixed' or 'adaptive'.")
    embed_unit: EmbedUnit = Field(
        default=EmbedUnit.WINDOW,
        description="'window': embed the window; 'sentence': embed one sentence, window in metadata.",
    )
    preset: DocumentPreset | None = Field(
        default=None,
        description="Adaptive settings by document type: general, technical, legal, qa.",
    )
    max_window_tokens: int = Field(
        default=DEFAULT_MAX_WINDOW_TOKENS, ge=1, description="Adaptive: token budget per window."
    )
    max_window_sentences: int | None = Field(
        default=None, ge=1, description="Adaptive: optional cap on sentences per window."
    )
    stride_ratio: float = Field(
        default=0.5,
        gt=0.0,
        le=1.0,
        description="Adaptive, window unit: the next window starts after this share of the window's tokens.",
    )
    breakpoint_percentile: float | None = Field(
        default=95.0,
        gt=0.0,
        lt=100.0,
        description="Adaptive: a break where the adjacent-sentence distance exceeds this percentile of the document's; None disables.",
    )
    breakpoint_threshold: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="Adaptive: a break where adjacent-sentence cosine similarity falls below this; overrides the percentile.",
    )
    breakpoint_buffer: int | None = Field(
        default=None,
        ge=1,
        le=10,
        description="Sentences averaged on each side when comparing adjacent sentences; None: 1 for the embedding signal, 3 for the lexical one.",
    )
    breakpoint_signal: BreakpointSignal = Field(
        default=BreakpointSignal.LEXICAL,
        description="Adaptive: 'embedding' compares sentence embeddings (one model call per sentence); 'lexical' compares TF-IDF word weights (no model call, the default); 'auto' picks per document: embedding when at least half its letters are CJK, lexical otherwise.",
    )
    min_embed_tokens: int = Field(
        default=0,
        ge=0,
        le=512,
        description="Sentence unit: a shorter sentence is embedded with the sentences after it (within its window) up to this many tokens; 0 embeds it alone.",
    )
    forward_ratio: float = Field(
        default=0.5,
        ge=0.0,
        le=1.0,
        description="Adaptive, sentence unit: share of a window's added tokens placed after its sentence (0.5 centred).",
    )
    split_at_paragraphs: bool = Field(
        default=False,
        description="Adaptive: a blank line between two sentences is a barrier no window crosses.",
    )
    keep_questions_with_answers: bool = Field(
        default=False,
        description="Adaptive: a question always shares its window with the next sentence.",
    )
    window_metadata_key: str = Field(
        default=DEFAULT_WINDOW_METADATA_KEY,
        min_length=1,
        description="Metadata key of the window text (sentence unit).",
    )
    original_text_metadata_key: str = Field(
        default=DEFAULT_ORIGINAL_TEXT_METADATA_KEY,
        min_length=1,
        description="Metadata key of the sentence text (sentence unit).",
    )
    max_sentence_chars: int = Field(
        default=DEFAULT_MAX_SENTENCE_CHARS,
        ge=100,
        le=60_000,
        description="A longer sentence is cut into pieces of at most this many characters.",
    )
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    _last_stats: ParseStats | None = PrivateAttr(default=None)
    _signal_counts: dict[str, int] = PrivateAttr(default_factory=dict)

    def __init__(self, embed_model: BaseEmbedding | None = None, **data: Any) -> None:
        data = restore_id_func(data)
        if data.get("preset") is not None:
            data = {**preset_values(data["preset"]), **data}
        super().__init__(**data)
        self._embed_model = embed_model

    @model_validator(mode="after")
    def _check_stride(self) -> AdaptiveSlidingWindowNodeParser:
        if self.stride > self.window_size:
            raise ValueError(
                f"stride must be between 1 and window_size={self.window_size}, got {self.stride}"
            )
        if self.min_embed_tokens and self.embed_unit is not EmbedUnit.SENTENCE:
            raise ValueError(
                f"min_embed_tokens={self.min_embed_tokens} applies to embed_unit='sentence' only, "
                f"got embed_unit={self.embed_unit.value!r}"
            )
        return self

    @classmethod
    def class_name(cls) -> str:
        return "AdaptiveSlidingWindowNodeParser"

    @property
    def embed_model(self) -> BaseEmbedding | None:
        """The breakpoint embedding model as given (resolved at first use)."""
        return self._embed_model

    @property
    def last_parse_stats(self) -> ParseStats | None:
        """Counts of the latest parse, including ``storage_expansion``."""
        return self._last_stats

    @property
    def uses_breakpoints(self) -> bool:
        """Whether adaptive mode places semantic breakpoints (from sentence embeddings, or from
        words with ``breakpoint_signal="lexical"``)."""
        return self.mode is WindowMode.ADAPTIVE and (
            self.breakpoint_percentile is not None or self.breakpoint_threshold is not None
        )

    # --- planning (pure given the sentences and break flags) -----------------------------------

    def _plan(self, plan: DocumentPlan) -> list[WindowSpan]:
        planners: dict[WindowMode, Callable[[DocumentPlan], list[WindowSpan]]] = {
            WindowMode.FIXED: self._plan_fixed,
            WindowMode.ADAPTIVE: self._plan_adaptive,
        }
        return planners[self.mode](plan)

    def _plan_fixed(self, plan: DocumentPlan) -> list[WindowSpan]:
        count = len(plan.sentences)
        if self.embed_unit is EmbedUnit.SENTENCE:
            return plan_fixed_centred(count, self.window_size, self.stride)
        return plan_fixed_windows(count, self.window_size, self.stride)

    def _plan_adaptive(self, plan: DocumentPlan) -> list[WindowSpan]:
        sentences = plan.sentences
        sections = [s.section_index for s in sentences]
        glue = (
            find_question_glue([s.text for s in sentences])
            if self.keep_questions_with_answers
            else None
        )
        paragraphs = plan.paragraph_breaks() if self.split_at_paragraphs else None
        units = build_units(plan.tokens, sections, merge_flags(plan.break_after, paragraphs), glue)
        if self.embed_unit is EmbedUnit.SENTENCE:
            return plan_adaptive_centred(
                units,
                sections,
                self.max_window_tokens,
                max_sentences=self.max_window_sentences,
                forward_ratio=self.forward_ratio,
                paragraph_after=paragraphs,
            )
        return plan_adaptive_windows(
            units,
            sections,
            self.max_window_tokens,
            self.stride_ratio,
            max_sentences=self.max_window_sentences,
            paragraph_after=paragraphs,
        )

    def signal_for(self, text: str) -> BreakpointSignal:
        """The breakpoint signal used for a document of ``text``: the field's, or with
        ``"auto"`` embeddings when at least half of its letters are CJK, lexical otherwise."""
        if self.breakpoint_signal is not BreakpointSignal.AUTO:
            return self.breakpoint_signal
        if cjk_share(text) >= AUTO_EMBEDDING_MIN_CJK_SHARE:
            return BreakpointSignal.EMBEDDING
        return BreakpointSignal.LEXICAL

    def buffer_for(self, signal: BreakpointSignal) -> int:
        """Sentences averaged on each side of a cut under ``signal``."""
        if self.breakpoint_buffer is not None:
            return self.breakpoint_buffer
        return DEFAULT_BREAKPOINT_BUFFER[signal]

    def _signals(self, plans: Sequence[DocumentPlan]) -> list[BreakpointSignal | None]:
        """Each plan's breakpoint signal (None: no breakpoints to place), counted in the stats."""
        signals: list[BreakpointSignal | None] = [
            self.signal_for(plan.text)
            if self.uses_breakpoints and len(plan.sentences) >= 2
            else None
            for plan in plans
        ]
        self._signal_counts = {
            signal.value: sum(1 for s in signals if s is signal)
            for signal in (BreakpointSignal.EMBEDDING, BreakpointSignal.LEXICAL)
            if any(s is signal for s in signals)
        }
        if self._signal_counts:
            logger.debug("%s: breakpoint signals %s", self.class_name(), self._signal_counts)
        return signals

    @staticmethod
    def _needs_embeddings(
        plans: Sequence[DocumentPlan], signals: Sequence[BreakpointSignal | None]
    ) -> list[DocumentPlan]:
        return [
            plan
            for plan, signal in zip(plans, signals, strict=True)
            if signal is BreakpointSignal.EMBEDDING
        ]

    def _set_lexical_breakpoints(
        self, plans: Sequence[DocumentPlan], signals: Sequence[BreakpointSignal | None]
    ) -> None:
        lexical = [
            plan
            for plan, signal in zip(plans, signals, strict=True)
            if signal is BreakpointSignal.LEXICAL
        ]
        if not lexical:
            return
        from llama_index_ext_advrag.text.words import WordTokenizer

        tokenizer = WordTokenizer()
        buffer = self.buffer_for(BreakpointSignal.LEXICAL)
        for plan in lexical:
            terms = tokenizer.tokenize_many([s.text for s in plan.sentences])
            plan.break_after = breaks_from_similarities(
                lexical_similarities(terms, buffer),
                self.breakpoint_percentile,
                self.breakpoint_threshold,
            )

    def _set_breakpoints(
        self, plans: Sequence[DocumentPlan], vectors: Sequence[Sequence[float]]
    ) -> None:
        offset = 0
        for plan in plans:
            count = len(plan.sentences)
            block = np.asarray(vectors[offset : offset + count], dtype=np.float64)
            offset += count
            plan.break_after = find_breakpoints(
                block,
                self.breakpoint_percentile,
                self.breakpoint_threshold,
                self.buffer_for(BreakpointSignal.EMBEDDING),
            )

    # --- node building ------------------------------------------------------------------------

    def _node_ids(self, plan: DocumentPlan) -> Callable[[int, WindowSpan], str]:
        """The id of each node of ``plan`` from its index and span."""
        if self.id_func is not default_id_func:  # the user asked for their own ids
            id_func, document = self.id_func, plan.document
            return lambda index, span: str(id_func(index, document))
        ids = DocumentNodeIds(plan.document_id)
        return lambda index, span: ids(
            DEFAULT_ID_UNIT if span.centre is None else f"sentence{span.centre}",
            span.first,
            span.last,
        )

    def _embedded_end(self, plan: DocumentPlan, span: WindowSpan) -> int:
        """End (exclusive) of the sentences a sentence-unit node embeds."""
        centre = span.centre if span.centre is not None else span.first
        if not self.min_embed_tokens:
            return centre + 1
        return extend_embedded_sentence(plan.tokens, centre, span.last, self.min_embed_tokens)

    def _build_nodes(self, plan: DocumentPlan) -> tuple[list[BaseNode], int]:
        """The document's nodes and the characters of their windows."""
        sentences, text, document_id = plan.sentences, plan.text, plan.document_id
        duplicate_of = plan.document.node_id if document_id != plan.document.node_id else None
        factory = NodeFactory(plan.document, plan.source, self.include_metadata, TRACE_COMPONENT)
        node_id = self._node_ids(plan)
        window_key, original_key = self.window_metadata_key, self.original_text_metadata_key
        sentence_excluded = (*BOOKKEEPING_KEYS, window_key, original_key)
        mode = self.mode.value
        nodes: list[BaseNode] = []
        window_chars = 0
        for index, span in enumerate(self._plan(plan)):
            start, end = sentences[span.first].start, sentences[span.last - 1].end
            window = text[start:end]
            window_chars += len(window)
            middle = span.centre if span.centre is not None else (span.first + span.last - 1) // 2
            metadata: dict[str, object] = {
                DOCUMENT_ID_KEY: document_id,
                SENTENCE_SPAN_KEY: [span.first, span.last],
                CHAR_SPAN_KEY: [start, end],
                SECTION_TITLE_KEY: sentences[middle].section_title,
            }
            excluded: tuple[str, ...] = BOOKKEEPING_KEYS
            node_text, node_start, node_end = window, start, end
            trace: dict[str, object] = {"mode": mode, "stop": span.stop.value}
            if duplicate_of is not None:
                trace["duplicate_document_id"] = duplicate_of
            if plan.cut_sentences:
                cut = sum(sentences[i].cut for i in range(span.first, span.last))
                if cut:
                    trace["cut_sentences"] = cut
            if span.centre is not None:
                centre = sentences[span.centre]
                embedded_end = self._embedded_end(plan, span)
                node_start, node_end = centre.start, sentences[embedded_end - 1].end
                node_text = text[node_start:node_end]
                metadata[window_key] = window
                metadata[original_key] = centre.text
                excluded = sentence_excluded
                if embedded_end > span.centre + 1:
                    trace["embedded_sentences"] = [span.centre, embedded_end]
            nodes.append(
                factory.make(
                    node_id(index, span),
                    node_text,
                    start=node_start,
                    end=node_end,
                    metadata=metadata,
                    excluded_keys=excluded,
                    trace=trace,
                )
            )
        if self.include_prev_next_rel:
            link_prev_next(nodes)
        return nodes, window_chars

    def _finish(self, plans: Sequence[DocumentPlan], show_progress: bool) -> list[BaseNode]:
        all_nodes: list[BaseNode] = []
        window_chars = 0
        for plan in get_tqdm_iterable(plans, show_progress, "Building windows"):
            if not plan.sentences:
                continue
            nodes, chars = self._build_nodes(plan)
            window_chars += chars
            all_nodes.extend(nodes)
        self._last_stats = ParseStats(
            documents=len(plans),
            sentences=sum(len(plan.sentences) for plan in plans),
            nodes=len(all_nodes),
            source_chars=sum(len(plan.text.strip()) for plan in plans),
            window_chars=window_chars,
            breakpoint_signals=dict(self._signal_counts),
        )
        logger.info(
            "%s: %d nodes from %d documents, storage expansion %.2fx",
            self.class_name(),
            len(all_nodes),
            len(plans),
            self._last_stats.storage_expansion,
        )
        spans = [node.metadata[SENTENCE_SPAN_KEY] for node in all_nodes]
        dispatcher.event(
            parse_event(
                TRACE_COMPONENT,
                self.class_name(),
                self._last_stats,
                window_sizes=dict(sorted(Counter(last - first for first, last in spans).items())),
                stops=dict(Counter(get_trace(node, TRACE_COMPONENT)["stop"] for node in all_nodes)),
            )
        )
        return all_nodes

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        plans = plan_documents(nodes, self.max_sentence_chars)
        signals = self._signals(plans)
        self._set_lexical_breakpoints(plans, signals)
        pending = self._needs_embeddings(plans, signals)
        if pending:
            embed_model = resolve_embed_model(self.embed_model)
            texts = [s.text for plan in pending for s in plan.sentences]
            self._set_breakpoints(
                pending, embed_in_length_order(embed_model, texts, show_progress=show_progress)
            )
        return self._finish(plans, show_progress)

    @dispatcher.span
    async def _aparse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        plans = plan_documents(nodes, self.max_sentence_chars)
        signals = self._signals(plans)
        self._set_lexical_breakpoints(plans, signals)
        pending = self._needs_embeddings(plans, signals)
        if pending:
            embed_model = resolve_embed_model(self.embed_model)
            texts = [s.text for plan in pending for s in plan.sentences]
            vectors = await aembed_in_length_order(embed_model, texts, show_progress=show_progress)
            self._set_breakpoints(pending, vectors)
        return self._finish(plans, show_progress)

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        """Keep what ``_parse_nodes`` built: offsets are exact and prev/next already link the
        windows of each document (core's pass would re-find offsets with ``str.find``)."""
        return nodes


__all__ = [
    "AUTO_EMBEDDING_MIN_CJK_SHARE",
    "DEFAULT_BREAKPOINT_BUFFER",
    "AdaptiveSlidingWindowNodeParser",
    "BreakpointSignal",
    "EmbedUnit",
    "WindowMode",
]
