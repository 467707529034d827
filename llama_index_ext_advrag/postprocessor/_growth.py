"""Window growth and pruning as pure functions over a sequence of units (sentences).

Used by :class:`~llama_index_ext_advrag.postprocessor.DriftAwareWindowPostprocessor`; kept apart
so the rules can be read and tested without a store or a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from llama_index.core.schema import BaseNode

from llama_index_ext_advrag.layout import stored_tokens
from llama_index_ext_advrag.text import count_tokens, cue_overlap


class StopReason(str, Enum):
    """Why a window stopped growing."""

    MAX_WINDOW_TOKENS = "max_window_tokens"
    MAX_EXPAND_STEPS = "max_expand_steps"
    BELOW_MIN_SIM = "below_min_sim"
    DECLINING_SIMILARITY = "declining_similarity"
    TOPIC_DRIFT = "topic_drift"
    SECTION_BOUNDARY = "section_boundary"
    DOCUMENT_EDGE = "document_edge"
    MAX_WINDOW_CHANGE = "max_window_change"


@dataclass(frozen=True)
class WindowUnit:
    """One sentence (node) around a hit: its similarity to the query, size and section."""

    similarity: float
    tokens: int
    section: str | None = None


@dataclass(frozen=True)
class GrowthLimits:
    """The stopping rules; ``min_units``/``max_units`` come from ``max_window_change``.

    A candidate at or above ``prune_sim`` pays for itself (it will be kept), so it never counts
    as declining or drifting: those two stops only end walks through text that does not pay.
    """

    min_sim: float
    max_window_tokens: int
    max_expand_steps: int
    drift_patience: int
    drift_overlap: float
    prune_sim: float = 1.0
    min_units: int = 1
    max_units: int | None = None


@dataclass
class Growth:
    """A grown window ``[left, right]`` (unit indices, inclusive) and how it got there."""

    left: int
    right: int
    stop: StopReason
    added: list[dict[str, Any]] = field(default_factory=list)
    sides: dict[str, StopReason] = field(default_factory=dict)  # why each side closed


def _open_sides(
    units: Sequence[WindowUnit], anchor: int, left: int, right: int, sides: dict[str, StopReason]
) -> list[tuple[str, int]]:
    """The sides still open and their next unit; closes sides at an edge or a section change."""
    section = units[anchor].section
    found = []
    for side, index in (("left", left - 1), ("right", right + 1)):
        if side in sides:
            continue
        if not 0 <= index < len(units):
            sides[side] = StopReason.DOCUMENT_EDGE
            continue
        other = units[index].section
        if section is not None and other is not None and other != section:
            sides[side] = StopReason.SECTION_BOUNDARY
            continue
        found.append((side, index))
    return found


def _drift_run(run: int, overlap: float | None, pays: bool, threshold: float) -> int:
    """Consecutive drifting candidates: a kept (paying) one resets the run, one without cues
    leaves it as it is."""
    if pays:
        return 0
    if overlap is None:
        return run
    return run + 1 if overlap < threshold else 0


def grow_window(
    units: Sequence[WindowUnit],
    anchor: int,
    limits: GrowthLimits,
    cues: Callable[[int], frozenset[str]],
) -> Growth:
    """Grow a window around ``units[anchor]`` one unit at a time (see the module docstring).

    Each step takes the more query-similar of the two neighbours (ties: the right one). A side
    closes at the document edge, at a section change, or when similarity along it has fallen
    two steps in a row; growth stops when both sides are closed or on a global stop (tokens,
    steps, ``min_sim``, topic drift, ``max_units``). Soft stops (``min_sim``, declining, drift)
    are ignored while the window is smaller than ``limits.min_units``.
    """
    left = right = anchor
    tokens = units[anchor].tokens
    window_cues = set(cues(anchor))
    trails: dict[str, list[float]] = {"left": [], "right": []}
    drift_run = 0
    growth = Growth(anchor, anchor, StopReason.DOCUMENT_EDGE)
    stop: StopReason | None = None
    while stop is None:
        size = right - left + 1
        candidates = _open_sides(units, anchor, left, right, growth.sides)
        if limits.max_units is not None and size >= limits.max_units:
            stop = StopReason.MAX_WINDOW_CHANGE
        elif len(growth.added) >= limits.max_expand_steps:
            stop = StopReason.MAX_EXPAND_STEPS
        elif not candidates:
            stop = list(growth.sides.values())[-1]
        if stop is not None:
            break
        side, index = max(candidates, key=lambda c: (units[c[1]].similarity, c[0] == "right"))
        unit, trail, soft = units[index], trails[side], size >= limits.min_units
        pays = unit.similarity >= limits.prune_sim
        candidate_cues = cues(index)
        overlap = (
            cue_overlap(candidate_cues, frozenset(window_cues))
            if candidate_cues and window_cues
            else None
        )
        run = _drift_run(drift_run, overlap, pays, limits.drift_overlap)
        if tokens + unit.tokens > limits.max_window_tokens:
            stop = StopReason.MAX_WINDOW_TOKENS
        elif soft and unit.similarity < limits.min_sim:
            stop = StopReason.BELOW_MIN_SIM
        elif soft and run >= limits.drift_patience:
            stop = StopReason.TOPIC_DRIFT
        elif soft and not pays and len(trail) >= 2 and trail[-2] > trail[-1] > unit.similarity:
            growth.sides[side] = StopReason.DECLINING_SIMILARITY
        else:
            left, right = (index, right) if side == "left" else (left, index)
            tokens, drift_run = tokens + unit.tokens, run
            window_cues |= candidate_cues
            trail.append(unit.similarity)
            step = {"index": index, "side": side, "similarity": round(unit.similarity, 4)}
            growth.added.append({**step, "cue_overlap": overlap})
    growth.left, growth.right, growth.stop = left, right, stop
    return growth


def prune_window(
    units: Sequence[WindowUnit],
    growth: Growth,
    anchor: int,
    prune_sim: float,
    min_units: int = 1,
    max_hole: int = 0,
) -> tuple[list[int], list[int]]:
    """``(kept, pruned)`` unit indices, both in reading order.

    Units below ``prune_sim`` are dropped, the anchor never. A run of at most ``max_hole``
    dropped units between two kept ones is kept after all (a passage is not read with a
    sentence cut out of its middle), and the best dropped units come back while fewer than
    ``min_units`` remain.
    """
    span = range(growth.left, growth.right + 1)
    kept = [i for i in span if i == anchor or units[i].similarity >= prune_sim]
    for before, after in zip(kept, kept[1:], strict=False):
        if 1 < after - before <= max_hole + 1:
            kept += range(before + 1, after)
    pruned = [i for i in span if i not in kept]
    restore = sorted(pruned, key=lambda i: -units[i].similarity)[: max(0, min_units - len(kept))]
    kept = sorted([*kept, *restore])
    return kept, [i for i in pruned if i not in restore]


class LazyUnits(Sequence[WindowUnit]):
    """Window units built on first access: growth looks at a few neighbours of the many
    fetched, so most are never tokenised. ``memo`` (node id -> unit) is shared by the windows of
    one call, so a node is measured once however many windows and regrowths look at it."""

    def __init__(
        self,
        nodes: Sequence[BaseNode],
        sims: dict[str, float],
        locations: dict[str, Any],
        memo: dict[str, WindowUnit],
    ) -> None:
        self._nodes, self._sims, self._locations, self._memo = nodes, sims, locations, memo

    def __len__(self) -> int:
        return len(self._nodes)

    def __getitem__(self, index: Any) -> Any:
        node = self._nodes[index]
        unit = self._memo.get(node.node_id)
        if unit is None:
            similarity = self._sims.get(node.node_id, math.nan)
            section = self._locations[node.node_id].section
            tokens = stored_tokens(node.metadata)
            if tokens is None:
                tokens = count_tokens(node.get_content())
            unit = WindowUnit(similarity, tokens, section)
            if not math.isnan(similarity):  # a hit's vector may still arrive as a neighbour
                self._memo[node.node_id] = unit
        return unit


def window_change_limits(
    previous_units: int | None, max_change: int | None
) -> tuple[int, int | None]:
    """``(min_units, max_units)`` allowed this turn, given the previous turn's window size."""
    if previous_units is None or max_change is None:
        return 1, None
    return max(1, previous_units - max_change), previous_units + max_change


__all__ = [
    "Growth",
    "GrowthLimits",
    "LazyUnits",
    "StopReason",
    "WindowUnit",
    "grow_window",
    "prune_window",
    "window_change_limits",
]
