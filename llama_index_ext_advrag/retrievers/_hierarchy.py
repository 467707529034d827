"""Pure logic of hierarchical auto-merging: positions at build time, merge rounds at query time.

Nothing here does I/O. The retriever fetches parents from Milvus and hands them to
:class:`MergeSession`, which decides what merges; the sync and async retrievers share it and
differ only in how they fetch.

Positions: at build time every node of the hierarchy gets a pre-order index (``advrag_pos``)
and the index of its last descendant (``advrag_pos_end``), so that for any set of
non-overlapping nodes sorting by ``advrag_pos`` is reading order, and "node B lies inside node
A" is ``A.pos <= B.pos <= A.pos_end``, with no ancestry walk and no extra Milvus round trip.
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, NodeRelationship

logger = logging.getLogger(__name__)

POSITION_KEY = "advrag_pos"
POSITION_END_KEY = "advrag_pos_end"
LEVEL_KEY = "advrag_level"
HIERARCHY_METADATA_KEYS = (POSITION_KEY, POSITION_END_KEY, LEVEL_KEY)


class ScoreAggregation(str, Enum):
    """How a merged parent's score is derived from the scores of the nodes it replaces."""

    MAX = "max"  # the parent is as relevant as its best retrieved part (default)
    MEAN = "mean"  # LlamaIndex core's AutoMergingRetriever behaviour


_AGGREGATORS: dict[ScoreAggregation, Callable[[Sequence[float]], float]] = {
    ScoreAggregation.MAX: max,
    ScoreAggregation.MEAN: statistics.fmean,
}


def aggregate_scores(scores: Sequence[float], aggregation: ScoreAggregation) -> float:
    """Aggregate child scores into a parent score (``0.0`` for no scores)."""
    return float(_AGGREGATORS[aggregation](scores)) if scores else 0.0


# --- build time -------------------------------------------------------------------------------


def _child_ids(node: BaseNode) -> list[str]:
    children = node.relationships.get(NodeRelationship.CHILD)
    return [info.node_id for info in children] if isinstance(children, list) else []


def _parent_id(node: BaseNode) -> str | None:
    parent = node.relationships.get(NodeRelationship.PARENT)
    return None if parent is None or isinstance(parent, list) else parent.node_id


def assign_positions(nodes: Sequence[BaseNode]) -> dict[str, tuple[int, int, int]]:
    """Return ``node_id -> (pos, pos_end, depth)`` from a pre-order walk of the hierarchy.

    Roots (nodes without a parent among ``nodes``) are walked in the order given, children in
    the order of their parent's CHILD relationship. Nodes unreachable from a root (a broken
    hierarchy) are appended as their own roots, so every node gets a position.
    """
    by_id = {node.node_id: node for node in nodes}
    positions: dict[str, tuple[int, int, int]] = {}
    counter = 0
    roots = [n.node_id for n in nodes if _parent_id(n) not in by_id]
    pending_roots = roots + [n.node_id for n in nodes]
    for root in pending_roots:
        if root in positions:
            continue
        # Iterative pre-order walk; the end position is set once a subtree is finished.
        stack: list[tuple[str, int, bool]] = [(root, 0, False)]
        while stack:
            node_id, depth, finished = stack.pop()
            if finished:
                start, _, d = positions[node_id]
                positions[node_id] = (start, counter - 1, d)
                continue
            if node_id in positions or node_id not in by_id:
                continue
            positions[node_id] = (counter, counter, depth)
            counter += 1
            stack.append((node_id, depth, True))
            for child in reversed(_child_ids(by_id[node_id])):
                stack.append((child, depth + 1, False))
    return positions


def with_hierarchy_metadata(node: BaseNode, position: tuple[int, int, int]) -> BaseNode:
    """A copy of ``node`` carrying its position keys, hidden from the LLM and the embedder."""
    copy = node.model_copy(deep=False)
    copy.metadata = dict(node.metadata)
    copy.relationships = dict(node.relationships)
    copy.metadata[POSITION_KEY], copy.metadata[POSITION_END_KEY], copy.metadata[LEVEL_KEY] = (
        position
    )
    copy.excluded_embed_metadata_keys = list(node.excluded_embed_metadata_keys)
    copy.excluded_llm_metadata_keys = list(node.excluded_llm_metadata_keys)
    for excluded in (copy.excluded_embed_metadata_keys, copy.excluded_llm_metadata_keys):
        excluded.extend(k for k in HIERARCHY_METADATA_KEYS if k not in excluded)
    return copy


# --- query time -------------------------------------------------------------------------------


def node_span(node: BaseNode) -> tuple[int, int] | None:
    """``(pos, pos_end)`` of a node built by this pack, ``None`` for a foreign node."""
    pos, end = node.metadata.get(POSITION_KEY), node.metadata.get(POSITION_END_KEY)
    if isinstance(pos, int) and isinstance(end, int):
        return pos, end
    return None


def reading_key(node: BaseNode) -> tuple[int, int]:
    """Sort key for reading order inside one document."""
    span = node_span(node)
    if span is not None:
        return span[0], 0
    return 0, getattr(node, "start_char_idx", None) or 0


def document_key(node: BaseNode) -> str:
    return node.ref_doc_id or ""


def content_tokens(node: BaseNode, counter: Callable[[str], int]) -> int:
    return counter(node.get_content(metadata_mode=MetadataMode.NONE))


@dataclass(frozen=True)
class Entry:
    """One node currently in the result: its score and the retrieved leaves it stands for."""

    node: BaseNode
    score: float
    leaf_ids: tuple[str, ...]
    tokens: int
    merges: tuple[dict[str, Any], ...] = ()  # one record per merge that produced this node
    skipped: tuple[dict[str, Any], ...] = ()  # merges refused by the token budget

    @property
    def node_id(self) -> str:
        return self.node.node_id


def _contains(outer: BaseNode, inner: BaseNode) -> bool:
    span, other = node_span(outer), node_span(inner)
    if span is None or other is None or document_key(outer) != document_key(inner):
        return False
    return span[0] <= other[0] and other[1] <= span[1]


@dataclass
class MergeSession:
    """State of one query's merge rounds.

    Usage (the sync and async retrievers differ only in ``fetch``)::

        session = MergeSession(entries, merge_ratio=0.5)
        while (ids := session.pending_parent_ids()) is not None:
            session.advance(fetch(ids))
        results = session.final_entries()

    ``pending_parent_ids`` returns the parents to fetch for the next round (possibly empty) or
    ``None`` when the last round changed nothing; each round is one batched fetch.
    """

    entries: list[Entry]
    merge_ratio: float = 0.5
    aggregation: ScoreAggregation = ScoreAggregation.MAX
    max_context_tokens: int | None = None
    token_counter: Callable[[str], int] = len
    parents: dict[str, BaseNode | None] = field(default_factory=dict)
    rounds: int = 0
    _changed: bool = True

    def pending_parent_ids(self) -> list[str] | None:
        if not self._changed:
            return None
        wanted = {_parent_id(e.node) for e in self.entries} - {None} - set(self.parents)
        return sorted(i for i in wanted if i is not None)

    def advance(self, fetched: Mapping[str, BaseNode]) -> None:
        """Record fetched parents (missing ones as ``None``) and run one merge round."""
        for parent_id in self.pending_parent_ids() or []:
            self.parents[parent_id] = fetched.get(parent_id)
            if parent_id not in fetched:
                logger.warning("parent node %s not found in the parent store", parent_id)
        self.rounds += 1
        self.entries, self._changed = merge_round(
            self.entries,
            self.parents,
            merge_ratio=self.merge_ratio,
            aggregation=self.aggregation,
            max_context_tokens=self.max_context_tokens,
            token_counter=self.token_counter,
            round_index=self.rounds,
        )

    def final_entries(self) -> list[Entry]:
        return order_for_reading(drop_contained(self.entries))


def merge_round(
    entries: Sequence[Entry],
    parents: Mapping[str, BaseNode | None],
    *,
    merge_ratio: float,
    aggregation: ScoreAggregation,
    max_context_tokens: int | None,
    token_counter: Callable[[str], int],
    round_index: int = 1,
) -> tuple[list[Entry], bool]:
    """One level of merging: a parent replaces its present children when their share of its
    children exceeds ``merge_ratio``, unless the token budget would be exceeded.

    Present nodes lying inside a merged parent (grandchildren whose own parent did not merge)
    are absorbed too, so the parent's text never appears twice. Candidates are tried best
    aggregate score first, so the budget goes to the most relevant parents.
    """
    present_children: dict[str, list[Entry]] = defaultdict(list)
    for entry in entries:
        parent_id = _parent_id(entry.node)
        if parent_id is not None and parents.get(parent_id) is not None:
            present_children[parent_id].append(entry)

    candidates: list[tuple[BaseNode, list[str], float, int, float]] = []
    for parent_id, children in present_children.items():
        parent = parents.get(parent_id)
        if parent is None:
            continue
        total = len(_child_ids(parent)) or 1
        ratio = len(children) / total
        if ratio > merge_ratio:
            score = aggregate_scores([c.score for c in children], aggregation)
            candidates.append((parent, [c.node_id for c in children], ratio, total, score))
    if not candidates:
        return list(entries), False

    candidates.sort(key=lambda item: (-item[4], item[0].node_id))
    current = {e.node_id: e for e in entries}
    total_tokens = sum(e.tokens for e in entries)
    changed = False
    for parent, child_ids, ratio, child_total, _ in candidates:
        if any(child_id not in current for child_id in child_ids):
            continue  # already absorbed by an earlier merge of this round
        children = [current[child_id] for child_id in child_ids]
        absorbed = [
            e
            for e in current.values()
            if e.node_id not in child_ids
            and e.node_id != parent.node_id
            and _contains(parent, e.node)
        ]
        replaced = children + absorbed
        parent_tokens = content_tokens(parent, token_counter)
        new_total = total_tokens - sum(e.tokens for e in replaced) + parent_tokens
        if max_context_tokens is not None and new_total > max_context_tokens:
            skip = {
                "parent_id": parent.node_id,
                "reason": "max_context_tokens",
                "tokens_after_merge": new_total,
                "max_context_tokens": max_context_tokens,
            }
            for child in children:
                current[child.node_id] = replace(child, skipped=(*child.skipped, skip))
            continue
        record = {
            "parent_id": parent.node_id,
            "round": round_index,
            "children_retrieved": list(child_ids),
            "children_total": child_total,
            "ratio": round(ratio, 4),
            "absorbed": [e.node_id for e in absorbed],
            "leaf_ids": sorted({leaf for e in replaced for leaf in e.leaf_ids}),
        }
        for entry in replaced:
            del current[entry.node_id]
        current[parent.node_id] = Entry(
            node=parent,
            score=aggregate_scores([e.score for e in replaced], aggregation),
            leaf_ids=tuple(sorted({leaf for e in replaced for leaf in e.leaf_ids})),
            tokens=parent_tokens,
            merges=(*(m for e in replaced for m in e.merges), record),
            skipped=tuple(s for e in replaced for s in e.skipped),
        )
        total_tokens = new_total
        changed = True
    return list(current.values()), changed


def drop_contained(entries: Sequence[Entry]) -> list[Entry]:
    """Remove duplicates and any entry lying inside another entry (safety net)."""
    unique: dict[str, Entry] = {}
    for entry in entries:
        if entry.node_id not in unique:
            unique[entry.node_id] = entry
    kept = list(unique.values())
    return [e for e in kept if not any(o is not e and _contains(o.node, e.node) for o in kept)]


def order_for_reading(entries: Sequence[Entry]) -> list[Entry]:
    """Documents by their best score (descending), reading order inside each document."""
    best: dict[str, float] = defaultdict(lambda: float("-inf"))
    for entry in entries:
        doc = document_key(entry.node)
        best[doc] = max(best[doc], entry.score)
    return sorted(
        entries,
        key=lambda e: (-best[document_key(e.node)], document_key(e.node), reading_key(e.node)),
    )
