"""The pack's instrumentation events: the decisions its components also write into the trace.

Every component opens a span through LlamaIndex's dispatcher
(``llama_index.core.instrumentation.get_dispatcher(__name__)``) and emits these typed events
inside it, so a handler attached to the root dispatcher (Arize Phoenix, Langfuse, or your own
``BaseEventHandler``) sees why the context looks the way it does without reading node metadata.
Each event carries the same facts as the component's record under ``advrag_trace``.

Example:
    >>> from llama_index.core.instrumentation import get_dispatcher
    >>> from llama_index.core.instrumentation.event_handlers import BaseEventHandler
    >>> class Collect(BaseEventHandler):
    ...     events: list = []
    ...     def handle(self, event, **kwargs):
    ...         if isinstance(event, AdvragEvent):
    ...             self.events.append(event)
    >>> handler = Collect()
    >>> get_dispatcher().add_event_handler(handler)  # the root dispatcher  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from llama_index.core.bridge.pydantic import ConfigDict, Field
from llama_index.core.instrumentation.events import BaseEvent
from pydantic import with_config
from typing_extensions import NotRequired, TypedDict  # pydantic reads these on Python 3.11

# ----- payload shapes ------------------------------------------------------------------------
# The records below are what a component builds for a payload of fixed shape. Numbers are
# ``int | float`` because pydantic would otherwise turn an int into a float, and ``extra="allow"``
# keeps a key a newer component adds, so an event carries exactly what the trace holds.
_PAYLOAD = ConfigDict(extra="allow")


@with_config(_PAYLOAD)
class GradeRecord(TypedDict):
    """``Grade.to_dict()``: a judge's verdict on one text."""

    score: int | float | None  # calibrated to [0, 1]; None = unknown
    label: str  # a GradeLabel value
    judge: str
    raw: int | float | None  # the model's own value
    reason: str | None


@with_config(_PAYLOAD)
class NodeGradeRecord(GradeRecord):
    """A retrieved node's grade (CRAG's action)."""

    node_id: str


@with_config(_PAYLOAD)
class KeptNodeRecord(TypedDict):
    """A node CRAG returned: where it came from (``retrieved``, ``web``...) and its score."""

    node_id: str
    source: str
    score: int | float | None


@with_config(_PAYLOAD)
class DroppedNodeRecord(TypedDict):
    """A node CRAG dropped, its grade and why (``grade``, ``margin``, ``refinement``...)."""

    node_id: str
    source: str
    grade: GradeRecord
    why: str


@with_config(_PAYLOAD)
class CjkScorerRecord(TypedDict):
    """Which scorer graded a compression call's Chinese/Japanese pairs without a judge, and why."""

    pairs: int  # the question-sentence pairs in Chinese or Japanese
    scorer: str  # "cosine" or the CJK judge's name
    reason: str


class RerankRecord(TypedDict):
    """A node judge rerank returned: its retrieval rank, new rank, and grade or the error."""

    node_id: str
    score: int | float | None
    retrieval_rank: int
    rank: int
    grade: NotRequired[GradeRecord]
    error: NotRequired[str]


@with_config(_PAYLOAD)
class FusionLegRecord(TypedDict):
    """One leg of a hybrid retrieval: its weight, its hits and why it degraded (or None)."""

    leg: str
    weight: int | float
    hits: int
    degraded: str | None


@with_config(_PAYLOAD)
class FusedNodeRecord(TypedDict):
    """One fused node: its score and its rank in each leg (None where the leg missed it)."""

    node_id: str
    score: int | float | None
    ranks: list[int | None]


@with_config(_PAYLOAD)
class LexicalChoiceRecord(TypedDict):
    """``LexicalChoice.to_dict()``: the lexical leg's backend and why."""

    backend: str  # "milvus" or "bm25s"
    reason: str


@with_config(_PAYLOAD)
class WindowRecord(TypedDict):
    """A window replacement kept: its rank and the hits it covered."""

    node_id: str
    rank: int
    skipped_as_covered: list[str]


@with_config(_PAYLOAD)
class ReturnedNodeRecord(TypedDict):
    """A node auto-merging returned: merged or a leaf, the leaves it stands for, its level."""

    node_id: str
    merged: bool
    leaf_ids: list[str]
    level: int | None
    score: int | float | None


# ----- events --------------------------------------------------------------------------------


class AdvragEvent(BaseEvent):
    """Base class of the pack's events (``isinstance`` filters them in a handler)."""

    # Validators are built at an event class's first use, not at import (about 45 ms saved on
    # `import llama_index_ext_advrag`; a first build costs about 1 ms).
    model_config = ConfigDict(defer_build=True)

    component: str = Field(description="The trace sub-key of the component that emitted it.")

    @classmethod
    def class_name(cls) -> str:
        return "AdvragEvent"


class JudgeGradesEvent(AdvragEvent):
    """A relevance judge graded a batch of texts (CRAG, judge rerank and Self-RAG's ISREL)."""

    component: str = "judge"
    judge: str = Field(description="The judge's name.")
    query: str
    grades: list[GradeRecord] = Field(description="Grade.to_dict() per text, in input order.")

    @classmethod
    def class_name(cls) -> str:
        return "JudgeGradesEvent"


class CRAGActionEvent(AdvragEvent):
    """CRAG graded the retrieved nodes and chose an action (``keep_as_retrieved`` when it
    could not grade them)."""

    component: str = "crag"
    query: str
    action: str = Field(description="correct, incorrect, ambiguous or keep_as_retrieved.")
    grades: list[NodeGradeRecord] = Field(
        default_factory=list, description="node_id and grade of every retrieved node."
    )
    error: str | None = Field(default=None, description="Why the nodes are kept as retrieved.")

    @classmethod
    def class_name(cls) -> str:
        return "CRAGActionEvent"


class CRAGRoundEvent(AdvragEvent):
    """One corrective retrieval or web search round (the trace's ``rounds`` entry)."""

    component: str = "crag"
    round: dict[str, Any] = Field(description="query, rewrite, counts, error of the round.")

    @classmethod
    def class_name(cls) -> str:
        return "CRAGRoundEvent"


class CRAGResultEvent(AdvragEvent):
    """What CRAG returned: the kept nodes, the dropped ones and why, or the failure."""

    component: str = "crag"
    action: str
    kept: list[KeptNodeRecord] = Field(
        default_factory=list, description="node_id, source and score of every returned node."
    )
    dropped: list[DroppedNodeRecord] = Field(default_factory=list)
    error: str | None = None
    timed_out: str | None = Field(default=None, description="The step that timed out, if any.")

    @classmethod
    def class_name(cls) -> str:
        return "CRAGResultEvent"


class JudgeRerankEvent(AdvragEvent):
    """Judge rerank's order: per returned node its retrieval rank, rank and grade score."""

    component: str = "judge_rerank"
    order: list[RerankRecord]
    error: str | None = None

    @classmethod
    def class_name(cls) -> str:
        return "JudgeRerankEvent"


class HybridFusionEvent(AdvragEvent):
    """Hybrid fusion: what each leg returned and the fused ranking."""

    component: str = "hybrid_fusion"
    mode: str
    legs: list[FusionLegRecord] = Field(description="name, weight, hits and error of each leg.")
    fused: list[FusedNodeRecord] = Field(description="node_id, score and per-leg ranks.")
    lexical: LexicalChoiceRecord | None = Field(
        default=None,
        description="The lexical leg's backend ('milvus' or 'bm25s') and why it was chosen.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "HybridFusionEvent"


class DriftWindowEvent(AdvragEvent):
    """The drift-aware window: why each window stopped growing and what it holds."""

    component: str = "drift_window"
    windows: list[dict[str, Any]] = Field(description="The per-window growth records.")
    thresholds: str = Field(description="Where min_sim/prune_sim came from.")
    round_trips: int = 0

    @classmethod
    def class_name(cls) -> str:
        return "DriftWindowEvent"


class SelfRAGRouteEvent(AdvragEvent):
    """Self-RAG's retrieve decision (the route: retrieve or answer directly)."""

    component: str = "self_rag"
    query: str
    decision: dict[str, Any] = Field(description="value, method, label (and threshold).")

    @classmethod
    def class_name(cls) -> str:
        return "SelfRAGRouteEvent"


class SelfRAGReflectionEvent(AdvragEvent):
    """One Self-RAG reflection: ISREL of a passage, ISSUP or ISUSE of a candidate answer."""

    component: str = "self_rag"
    iteration: int
    reflection: str = Field(description="isrel, issup or isuse.")
    subject: str = Field(description="The node id (isrel) or candidate answer (issup/isuse).")
    value: float | None
    detail: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "SelfRAGReflectionEvent"


class SelfRAGAnswerEvent(AdvragEvent):
    """How Self-RAG answered: the answer kind, why it stopped, LLM calls."""

    component: str = "self_rag"
    answer_kind: str
    stop_reason: str | None
    llm_calls: int
    iterations: int

    @classmethod
    def class_name(cls) -> str:
        return "SelfRAGAnswerEvent"


class NodeParseEvent(AdvragEvent):
    """A parser built nodes: how many, from how much text, and the sizes it chose.

    ``window_sizes`` maps sentences per node to how many nodes have that size (the adaptive
    sliding-window parser: ``stops`` says why windows stopped growing); ``levels`` holds the
    hierarchy parser's chunk size and node count per level."""

    component: str = Field(description="sliding_window or hierarchical.")
    parser: str = Field(description="The parser's class name.")
    documents: int
    sentences: int
    nodes: int
    storage_expansion: float = Field(description="Stored characters over source characters.")
    window_sizes: dict[int, int] = Field(default_factory=dict)
    stops: dict[str, int] = Field(default_factory=dict)
    levels: list[dict[str, int]] = Field(default_factory=list)
    breakpoint_signals: dict[str, int] = Field(default_factory=dict)

    @classmethod
    def class_name(cls) -> str:
        return "NodeParseEvent"


class AutoMergingEvent(AdvragEvent):
    """Auto-merging: which parents replaced which retrieved children, and what was returned."""

    component: str = "auto_merging"
    query: str
    merges: list[dict[str, Any]] = Field(
        description="parent_id, round, children_retrieved, children_total, ratio, absorbed, "
        "leaf_ids of every merge."
    )
    skipped: list[dict[str, Any]] = Field(
        default_factory=list, description="Merges not made (max_context_tokens) and why."
    )
    returned: list[ReturnedNodeRecord] = Field(
        description="node_id, merged, leaf_ids, level, score."
    )
    rounds: int

    @classmethod
    def class_name(cls) -> str:
        return "AutoMergingEvent"


class TwoLayerRouteEvent(AdvragEvent):
    """The two-layer retriever's route: the summary units chosen and how details were read."""

    component: str = "two_layer"
    query: str
    route: list[dict[str, Any]] = Field(description="The trace's route: one record per unit.")
    details_mode: str = Field(description="search or fetch.")

    @classmethod
    def class_name(cls) -> str:
        return "TwoLayerRouteEvent"


class RecursiveHopEvent(AdvragEvent):
    """The recursive retriever followed an IndexNode into a sub-retriever, query engine or node."""

    component: str = "recursive"
    pointer_id: str = Field(description="The IndexNode followed.")
    target_id: str = Field(description="Its index_id: the sub-retriever, engine or node.")
    kind: str = Field(description="retriever, query_engine or node.")
    path: list[str] = Field(description="The route from the root to the target.")

    @classmethod
    def class_name(cls) -> str:
        return "RecursiveHopEvent"


class RecursiveResultEvent(AdvragEvent):
    """What the recursive retriever returned: per node its route, depth and why it stopped."""

    component: str = "recursive"
    results: list[dict[str, Any]] = Field(description="node_id and the node's trace record.")

    @classmethod
    def class_name(cls) -> str:
        return "RecursiveResultEvent"


class TableRouteEvent(AdvragEvent):
    """The named table route: a question naming tables goes to them, otherwise a search."""

    component: str = "named_route"
    query: str
    decision: str = Field(description="named or search.")
    names: list[str] = Field(default_factory=list, description="The tables the question names.")
    node_ids: list[str] = Field(description="The pointers returned.")

    @classmethod
    def class_name(cls) -> str:
        return "TableRouteEvent"


class PandasQueryEvent(AdvragEvent):
    """The safe pandas engine's outcome: the code attempts, refusals and the answer."""

    component: str = "pandas"
    record: dict[str, Any] = Field(
        description="table, outcome (answered, refused, failed, no_llm), attempts, value/reason."
    )

    @classmethod
    def class_name(cls) -> str:
        return "PandasQueryEvent"


class NeighbourExpansionEvent(AdvragEvent):
    """Prev-next expansion or consecutive merge: what each returned node is made of.

    ``decision`` holds the prev-next direction and where it came from, or the consecutive
    merge's gap counts; ``nodes`` holds per returned node its id, its members (id and role:
    hit, before, after, gap) and the hits merged into it."""

    component: str = Field(description="prev_next or consecutive_merge.")
    decision: dict[str, Any]
    nodes: list[dict[str, Any]]

    @classmethod
    def class_name(cls) -> str:
        return "NeighbourExpansionEvent"


class WindowReplacementEvent(AdvragEvent):
    """Window replacement: the hits whose windows were kept and the ones skipped as covered."""

    component: str = "window_replacement"
    kept: list[WindowRecord] = Field(description="node_id, rank and skipped_as_covered.")

    @classmethod
    def class_name(cls) -> str:
        return "WindowReplacementEvent"


class SecondHopEvent(AdvragEvent):
    """The second hop: each leg (hop 1, each hop-2 query, each sub-question) and what it
    returned or why it failed, and the merged ranking."""

    component: str = "second_hop"
    query: str
    legs: list[dict[str, Any]] = Field(
        description="leg, query, seed (hop 2), hits and error of every search made."
    )
    skipped: list[dict[str, Any]] = Field(
        default_factory=list, description="Seeds or sub-questions not searched, and why."
    )
    returned: list[dict[str, Any]] = Field(
        description="node_id, hop, hop1_rank, pinned and fused score of every returned node."
    )
    searches: int = Field(description="Searches made through the wrapped retriever.")

    @classmethod
    def class_name(cls) -> str:
        return "SecondHopEvent"


class ContextCompressionEvent(AdvragEvent):
    """Context compression: the spans kept of each passage, the budget and the tokens, or why
    the passages were handed on as retrieved (``error``)."""

    component: str = "compression"
    query: str
    max_context_tokens: int
    tokens_before: int
    tokens_after: int
    scorer: str = Field(description="The signals combined, e.g. judge+cosine+rank.")
    nodes: list[dict[str, Any]] = Field(
        description="node_id, retrieval_rank, spans [[start, end], ...] of its text, "
        "kept_sentences and sentences, per returned passage in order."
    )
    dropped: list[str] = Field(default_factory=list, description="Passages with nothing kept.")
    error: str | None = Field(default=None, description="Why the passages are as retrieved.")
    cjk: CjkScorerRecord | None = Field(
        default=None,
        description="Without a judge: which scorer graded the Chinese/Japanese pairs "
        "(scorer, pairs) and why (reason); None when there were none.",
    )

    @classmethod
    def class_name(cls) -> str:
        return "ContextCompressionEvent"


__all__ = [
    "AdvragEvent",
    "AutoMergingEvent",
    "CRAGActionEvent",
    "CRAGResultEvent",
    "CRAGRoundEvent",
    "ContextCompressionEvent",
    "DriftWindowEvent",
    "HybridFusionEvent",
    "JudgeGradesEvent",
    "JudgeRerankEvent",
    "NeighbourExpansionEvent",
    "NodeParseEvent",
    "PandasQueryEvent",
    "RecursiveHopEvent",
    "RecursiveResultEvent",
    "SecondHopEvent",
    "SelfRAGAnswerEvent",
    "SelfRAGReflectionEvent",
    "SelfRAGRouteEvent",
    "TableRouteEvent",
    "TwoLayerRouteEvent",
    "WindowReplacementEvent",
]
