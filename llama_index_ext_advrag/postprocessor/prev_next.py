"""Widen each hit by its neighbours: a fixed number each side, or where an LLM says to look.

Improves on core ``PrevNextNodePostprocessor`` / ``AutoPrevNextNodePostprocessor``:

- neighbours of all hits come from one batched store query per call (core: one docstore
  lookup per hop per hit), from a ``MilvusVectorStore`` or a docstore;
- expansions that overlap or touch are merged into one node, duplicates removed, and the output
  keeps document reading order (core ``Auto...`` sorts by node id, which scrambles it);
- ``mode="auto"`` asks the LLM once per query, and an answer it cannot parse falls back to
  ``fallback_direction`` instead of raising ``ValueError``;
- the caller's nodes are copied, never modified; decisions go to ``metadata["advrag_trace"]``.
"""

from __future__ import annotations

import logging
import re
from enum import Enum
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_ext_advrag._enums import parse_enum
from llama_index_ext_advrag.configuration import (
    TemplateSetting,
    check_prompts,
    update_prompt_fields,
)
from llama_index_ext_advrag.layout import NodeLayout, locate_all
from llama_index_ext_advrag.models import resolve_llm
from llama_index_ext_advrag.postprocessor._neighbours import (
    FetchResult,
    NeighbourRequest,
    NeighbourStore,
    StoreBackedPostprocessor,
)
from llama_index_ext_advrag.postprocessor.pieces import (
    Member,
    Piece,
    dedupe_hits,
    expansion_event,
    merge_pieces,
    ordered_members,
    piece_from_members,
    piece_to_node,
)
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "prev_next"
DEFAULT_NUM_NODES = 1
MAX_CONTEXT_CHARS = 1500
DEFAULT_DIRECTION_TEMPLATE = (
    "A passage was retrieved to answer a question. Decide where the rest of the answer most "
    "likely is: in the text BEFORE the passage, AFTER it, on BOTH sides, or NEITHER (the "
    "passage is enough).\n"
    "Examples:\n"
    "Question: What happened after the treaty was signed? Answer: AFTER\n"
    "Question: Why was the treaty signed? Answer: BEFORE\n"
    "Question: Describe the whole negotiation. Answer: BOTH\n"
    "Question: In which year was the treaty signed? Answer: NEITHER\n\n"
    "Passage: {context_str}\n"
    "Question: {query_str}\n"
    "Answer with one word: BEFORE, AFTER, BOTH or NEITHER.\n"
    "Answer: "
)
_PROMPTS = {"direction_template": ("context_str", "query_str")}


class PrevNextMode(str, Enum):
    """``fixed``: ``num_nodes`` in ``direction``; ``auto``: the LLM picks the direction."""

    FIXED = "fixed"
    AUTO = "auto"


class Direction(str, Enum):
    """Where to expand: before the hit, after it, both sides, or not at all."""

    PREVIOUS = "previous"
    NEXT = "next"
    BOTH = "both"
    NONE = "none"


_DIRECTION_SIDES = {
    Direction.PREVIOUS: (1, 0),
    Direction.NEXT: (0, 1),
    Direction.BOTH: (1, 1),
    Direction.NONE: (0, 0),
}
_DIRECTION_WORDS = {
    "before": Direction.PREVIOUS,
    "previous": Direction.PREVIOUS,
    "prior": Direction.PREVIOUS,
    "earlier": Direction.PREVIOUS,
    "preceding": Direction.PREVIOUS,
    "after": Direction.NEXT,
    "next": Direction.NEXT,
    "later": Direction.NEXT,
    "following": Direction.NEXT,
    "both": Direction.BOTH,
    "neither": Direction.NONE,
    "none": Direction.NONE,
}
_WORD = re.compile(r"[a-z]+")


def parse_direction(answer: str) -> Direction | None:
    """The direction an LLM answer names, or ``None`` when it names none or contradicts itself.

    "AFTER." -> next; "before and after" -> both; "BEFORE, AFTER, BOTH or NEITHER" (the options
    echoed back) -> ``None``.
    """
    named = {_DIRECTION_WORDS[w] for w in _WORD.findall(answer.lower()) if w in _DIRECTION_WORDS}
    if len(named) == 1:
        return named.pop()
    if named and named <= {Direction.PREVIOUS, Direction.NEXT, Direction.BOTH}:
        return Direction.BOTH
    return None


def expansion_pieces(
    hits: list[NodeWithScore], fetched: FetchResult, layout: NodeLayout
) -> list[Piece]:
    """One piece per hit: the hit and the neighbours fetched around it."""
    neighbourhoods = fetched.neighbourhoods
    all_nodes = [n for hood in neighbourhoods for n in hood.nodes]
    locations = locate_all([*all_nodes, *(h.node for h in hits)], layout)
    pieces = []
    for rank, (hit, hood) in enumerate(zip(hits, neighbourhoods, strict=True)):
        members = [Member(hit.node, locations[hit.node.node_id], "hit", hit.score)]
        for node in [*hood.before, *hood.after]:
            members.append(Member(node, locations[node.node_id], "neighbour", hit.score))
        pieces.append(piece_from_members(members, hit, rank))
    return pieces


def unmerged_nodes(pieces: list[Piece], component: str, record: dict) -> list[NodeWithScore]:
    """Each member as its own node (copies), in the order of ``pieces``; neighbours take the
    score of the best hit they were fetched for."""
    output = []
    for piece in pieces:
        best = max((h.score for h in piece.hits if h.score is not None), default=None)
        for member in ordered_members(piece):
            result = copy_node_with_score(NodeWithScore(node=member.node, score=member.score))
            if member.role != "hit":
                result.score = best
            add_trace(result.node, component, {**record, "role": member.role})
            output.append(result)
    return output


class PrevNextPostprocessor(StoreBackedPostprocessor):
    """Add the nodes before and/or after each hit, from a Milvus vector store or a docstore.

    Args:
        vector_store: the LlamaIndex ``MilvusVectorStore`` holding the nodes.
        docstore: a LlamaIndex docstore holding the nodes (instead of ``vector_store``).
        mode: ``"fixed"`` expands ``num_nodes`` in ``direction``; ``"auto"`` asks ``llm`` per query
            whether the answer lies before, after, both or neither.
        num_nodes: neighbours added on each expanded side.
        direction: the sides expanded in ``fixed`` mode (default both).
        llm: for ``auto``; resolved with ``resolve_llm`` at query time. Without any LLM, or without
            a query, ``auto`` uses ``fallback_direction``.
        fallback_direction: used when the LLM answer cannot be parsed (default both: extra context
            is cheaper than a missing answer).
        merge: join each run of consecutive nodes into one node (default); ``False`` returns the
            individual nodes, still deduplicated and in reading order.

    Raises:
        ValueError: an unknown mode/direction, a negative ``num_nodes``, both or no store.

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index.core.schema import NodeWithScore
        >>> from llama_index.core.storage.docstore import SimpleDocumentStore
        >>> from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
        >>> nodes = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        ...     [Document(text="A a. B b. C c. D d.", id_="doc")])
        >>> docstore = SimpleDocumentStore()
        >>> docstore.add_documents(nodes)
        >>> expand = PrevNextPostprocessor(docstore=docstore, num_nodes=1)  # or vector_store=milvus_store
        >>> [n.node.text for n in expand.postprocess_nodes([NodeWithScore(node=nodes[2], score=0.8)])]
        ['B b. C c. D d.']
    """

    layout: NodeLayout = Field(default_factory=NodeLayout, description="Position metadata keys.")
    mode: PrevNextMode = Field(default=PrevNextMode.FIXED, description="'fixed' or 'auto'.")
    num_nodes: int = Field(default=DEFAULT_NUM_NODES, ge=0, le=50, description="Nodes per side.")
    direction: Direction = Field(default=Direction.BOTH, description="Sides in fixed mode.")
    fallback_direction: Direction = Field(
        default=Direction.BOTH, description="Auto mode: used when the LLM answer is unusable."
    )
    merge: bool = Field(default=True, description="Join consecutive nodes into one node.")
    separator: str = Field(default=" ", description="Joins the texts of adjacent nodes.")
    direction_template: TemplateSetting = Field(
        default_factory=lambda: PromptTemplate(DEFAULT_DIRECTION_TEMPLATE),
        description="Auto mode prompt with {context_str} and {query_str}.",
    )

    _store: NeighbourStore = PrivateAttr()
    _llm: LLM | None = PrivateAttr(default=None)

    def __init__(
        self,
        vector_store: Any = None,
        docstore: Any = None,
        llm: LLM | None = None,
        **data: Any,
    ) -> None:
        for name, enum in (("mode", PrevNextMode), ("direction", Direction)):
            if isinstance(data.get(name), str):
                data[name] = parse_enum(enum, data[name], name)
        super().__init__(vector_store, docstore, **data)
        check_prompts(self, _PROMPTS)
        self._llm = llm
        self._store = self._open_store(self.layout)

    @property
    def llm(self) -> LLM | None:
        """The LLM of auto mode as given (resolved at query time)."""
        return self._llm

    @classmethod
    def class_name(cls) -> str:
        return "PrevNextPostprocessor"

    @property
    def direction_prompt(self) -> PromptTemplate:
        return self.direction_template

    def _get_prompts(self) -> PromptDictType:
        return {"direction_prompt": self.direction_template}

    def _update_prompts(self, prompts: PromptDictType) -> None:
        # the prompt's PromptMixin name is ``direction_prompt``; its setting ``direction_template``
        if "direction_prompt" in prompts:
            renamed = {"direction_template": prompts["direction_prompt"]}
            update_prompt_fields(self, renamed, _PROMPTS)

    # --- decision (pure apart from the LLM call) ---------------------------------------------

    def _direction_inputs(
        self, hits: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[LLM | None, dict[str, Any], dict[str, Any] | None]:
        """The LLM and prompt arguments to ask, or a final decision when there is nothing to ask."""
        if self.mode is PrevNextMode.FIXED:
            return None, {}, {"direction": self.direction.value, "source": "fixed"}
        if query_bundle is None:
            return None, {}, {"direction": self.fallback_direction.value, "source": "no_query"}
        llm = resolve_llm(self._llm)
        if llm is None:
            return None, {}, {"direction": self.fallback_direction.value, "source": "no_llm"}
        context = hits[0].node.get_content(metadata_mode=MetadataMode.LLM)[:MAX_CONTEXT_CHARS]
        return llm, {"context_str": context, "query_str": query_bundle.query_str}, None

    def _llm_failed(self, error: Exception) -> dict[str, Any]:
        """The decision when the LLM call raised (a timeout, a connection error): the fallback
        direction, with the error in the trace. A failing LLM must not lose the retrieval."""
        logger.warning(
            "direction LLM failed (%s: %s); using %s",
            type(error).__name__,
            error,
            self.fallback_direction.value,
        )
        return {
            "direction": self.fallback_direction.value,
            "source": "llm_error",
            "error": f"{type(error).__name__}: {error}"[:200],
        }

    def _decide(self, answer: str) -> dict[str, Any]:
        parsed = parse_direction(answer)
        if parsed is None:
            logger.info(
                "unparsable direction answer %r; using %s", answer[:80], self.fallback_direction
            )
            return {
                "direction": self.fallback_direction.value,
                "source": "fallback",
                "raw": answer[:200],
            }
        return {"direction": parsed.value, "source": "llm", "raw": answer[:200]}

    def _requests(
        self, hits: list[NodeWithScore], decision: dict[str, Any]
    ) -> list[NeighbourRequest]:
        before, after = _DIRECTION_SIDES[Direction(decision["direction"])]
        return [
            NeighbourRequest(h.node, before * self.num_nodes, after * self.num_nodes) for h in hits
        ]

    def _assemble(
        self, hits: list[NodeWithScore], fetched: FetchResult, decision: dict[str, Any]
    ) -> list[NodeWithScore]:
        pieces = merge_pieces(expansion_pieces(hits, fetched, self.layout))
        record = {**decision, "num_nodes": self.num_nodes, "round_trips": fetched.round_trips}
        if not self.merge:
            results = unmerged_nodes(pieces, TRACE_COMPONENT, record)
        else:
            results = [
                piece_to_node(p, TRACE_COMPONENT, record, self.layout, self.separator)
                for p in pieces
            ]
        dispatcher.event(expansion_event(TRACE_COMPONENT, record, results))
        return results

    # --- sync / async: only the I/O differs ----------------------------------------------------

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        hits = dedupe_hits(nodes)
        if not hits:
            return []
        llm, prompt_args, decision = self._direction_inputs(hits, query_bundle)
        if decision is None:
            try:
                answer = llm.predict(self.direction_prompt, **prompt_args)  # type: ignore[union-attr]
            except Exception as error:  # an LLM failing is normal: fall back, record it
                decision = self._llm_failed(error)
            else:
                decision = self._decide(answer)
        fetched = self._store.fetch(self._requests(hits, decision))
        return self._assemble(hits, fetched, decision)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        hits = dedupe_hits(nodes)
        if not hits:
            return []
        llm, prompt_args, decision = self._direction_inputs(hits, query_bundle)
        if decision is None:
            try:
                answer = await llm.apredict(self.direction_prompt, **prompt_args)  # type: ignore[union-attr]
            except Exception as error:  # an LLM failing is normal: fall back, record it
                decision = self._llm_failed(error)
            else:
                decision = self._decide(answer)
        fetched = await self._store.afetch(self._requests(hits, decision))
        return self._assemble(hits, fetched, decision)


__all__ = ["Direction", "PrevNextMode", "PrevNextPostprocessor", "parse_direction"]
