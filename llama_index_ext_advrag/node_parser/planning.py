"""Pure window planning: sentence counts, token counts and barriers in, sentence spans out.

Nothing here touches text, models or nodes, so the arithmetic of every window mode can be
tested by hand. A span is ``[first, last)`` in sentence indices.

Vocabulary:
    unit: One sentence, or several sentences glued together (the ``qa`` preset glues a question to
        the sentence that answers it). Adaptive windows begin and end on unit boundaries.
    segment: A run of units that no window crosses: a new segment begins at every section change and
        after every semantic breakpoint.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

import numpy as np

from llama_index_ext_advrag.similarity import paired_cosines

logger = logging.getLogger(__name__)


class WindowStop(str, Enum):
    """Why a planned window ends (recorded in the node's trace)."""

    SIZE = "window_size"
    BUDGET = "token_budget"
    MAX_SENTENCES = "max_sentences"
    SECTION = "section"
    BREAKPOINT = "breakpoint"
    PARAGRAPH = "paragraph"
    DOCUMENT_END = "document_end"


_QUESTION_END = re.compile(r"[?？][\"'”’)）」』]*$")
_QUESTION_LABEL = re.compile(r"^(?:Q|Question|问|问题)\s*\d*\s*[:：.]", re.IGNORECASE)


class WindowSpan(NamedTuple):
    """A planned window: sentences ``[first, last)``, the embedded sentence, why it ends."""

    first: int
    last: int
    centre: int | None = None  # set when one sentence is embedded and the window is context
    stop: WindowStop = WindowStop.SIZE  # what ended the window (for the trace)


class Unit(NamedTuple):
    """Sentences ``[first, last)`` that a window never separates, their tokens and segment."""

    first: int
    last: int
    tokens: int
    segment: int


# --- fixed mode ---------------------------------------------------------------------------------


def plan_fixed_windows(num_sentences: int, window_size: int, stride: int) -> list[WindowSpan]:
    """Slide ``window_size`` sentences by ``stride``; the last window may be partial.

    >>> [(w.first, w.last) for w in plan_fixed_windows(5, 3, 1)]
    [(0, 3), (1, 4), (2, 5)]
    >>> [(w.first, w.last) for w in plan_fixed_windows(6, 3, 2)]
    [(0, 3), (2, 5), (4, 6)]
    """
    spans: list[WindowSpan] = []
    first = 0
    while first < num_sentences:
        last = min(first + window_size, num_sentences)
        spans.append(
            WindowSpan(
                first,
                last,
                None,
                WindowStop.DOCUMENT_END if last == num_sentences else WindowStop.SIZE,
            )
        )
        if last == num_sentences:
            break
        first += stride
    return spans


def plan_fixed_centred(num_sentences: int, window_size: int, stride: int) -> list[WindowSpan]:
    """One window of ``window_size`` sentences around every ``stride``-th sentence, clipped at
    the document's edges (a window of 3 around sentence 0 holds sentences 0 and 1).

    >>> [(w.first, w.last, w.centre) for w in plan_fixed_centred(3, 3, 1)]
    [(0, 2, 0), (0, 3, 1), (1, 3, 2)]
    """
    before = (window_size - 1) // 2
    spans = []
    for centre in range(0, num_sentences, stride):
        first = max(0, centre - before)
        last = min(num_sentences, centre - before + window_size)
        spans.append(WindowSpan(first, last, centre, WindowStop.SIZE))
    return spans


# --- barriers and units -------------------------------------------------------------------------


def find_breakpoints(
    embeddings: np.ndarray,
    percentile: float | None = None,
    threshold: float | None = None,
    buffer: int = 1,
) -> list[bool]:
    """Flag the sentences after which the topic shifts.

    The similarity between sentence ``i`` and ``i + 1`` is the cosine of the mean embedding of
    the ``buffer`` sentences ending at ``i`` and of the ``buffer`` sentences starting at
    ``i + 1`` (``buffer=1`` compares the two sentences themselves). A break is placed where the
    similarity is below ``threshold`` or, without a threshold, where the distance
    ``1 - similarity`` is above the ``percentile``-th percentile of the document's distances.

    Returns:
        list[bool]: ``break_after`` with one flag per sentence (the last one is always ``False``).
    """
    count = len(embeddings)
    if count < 2 or (percentile is None and threshold is None):
        return [False] * count
    vectors = np.asarray(embeddings, dtype=np.float64)
    prefix = np.vstack([np.zeros((1, vectors.shape[1])), np.cumsum(vectors, axis=0)])
    cut = np.arange(1, count)  # a cut before sentence `cut`
    left = prefix[cut] - prefix[np.maximum(cut - buffer, 0)]
    right = prefix[np.minimum(cut + buffer, count)] - prefix[cut]
    return breaks_from_similarities(paired_cosines(left, right), percentile, threshold)


def breaks_from_similarities(
    similarity: np.ndarray, percentile: float | None, threshold: float | None
) -> list[bool]:
    """``break_after`` flags from the similarity across each of the ``n - 1`` cuts of ``n``
    sentences: below ``threshold``, or (without one) a distance ``1 - similarity`` above the
    ``percentile``-th percentile of the document's distances.

    >>> breaks_from_similarities(np.array([0.9, 0.1, 0.8]), None, 0.5)
    [False, True, False, False]
    """
    flags = [False] * (len(similarity) + 1)
    if len(similarity) == 0 or (percentile is None and threshold is None):
        return flags
    if threshold is not None:
        breaks = similarity < threshold
    else:
        distance = 1.0 - similarity
        breaks = distance > np.percentile(distance, float(percentile))  # type: ignore[arg-type]
    for index in np.flatnonzero(breaks):
        flags[int(index)] = True
    return flags


def lexical_similarities(terms: Sequence[Sequence[str]], buffer: int = 3) -> np.ndarray:
    """TextTiling-style similarity across each cut between sentences, from their terms.

    Each term is weighted by its count times its inverse document frequency among the
    document's sentences (``log((1 + n) / (1 + df)) + 1``); the similarity across the cut before
    sentence ``i`` is the cosine of the summed weights of the ``buffer`` sentences on each side
    (0.0 when a side has no term). No model is called: a cheap stand-in for embedding
    similarity, as in Hearst's TextTiling, which compares blocks of sentences for the same
    reason (two single sentences rarely share words).

    >>> lexical_similarities([["virus", "cell"], ["virus", "cell"], ["court", "law"]], 1).round(2).tolist()
    [1.0, 0.0]
    """
    count = len(terms)
    if count < 2:
        return np.zeros(0)
    frequency: dict[str, int] = {}
    for sentence in terms:
        for term in set(sentence):
            frequency[term] = frequency.get(term, 0) + 1
    idf = {t: float(np.log((1 + count) / (1 + df)) + 1.0) for t, df in frequency.items()}
    weights: list[dict[str, float]] = []
    for sentence in terms:
        bag: dict[str, float] = {}
        for term in sentence:
            bag[term] = bag.get(term, 0.0) + idf[term]
        weights.append(bag)
    similarity = np.zeros(count - 1)
    for cut in range(1, count):
        left = _summed(weights[max(cut - buffer, 0) : cut])
        right = _summed(weights[cut : min(cut + buffer, count)])
        dot = sum(w * right.get(t, 0.0) for t, w in left.items())
        norm = np.sqrt(sum(w * w for w in left.values()) * sum(w * w for w in right.values()))
        similarity[cut - 1] = dot / norm if norm > 0 else 0.0
    return similarity


def _summed(bags: Sequence[dict[str, float]]) -> dict[str, float]:
    total: dict[str, float] = {}
    for bag in bags:
        for term, weight in bag.items():
            total[term] = total.get(term, 0.0) + weight
    return total


def find_question_glue(texts: Sequence[str]) -> list[bool]:
    """Flag the sentences that must stay with the next one: questions and ``Q:`` labels.

    >>> find_question_glue(["What is it?", "A cat.", "Q: Why", "Because."])
    [True, False, True, False]
    """
    return [
        bool(_QUESTION_END.search(text) or _QUESTION_LABEL.match(text)) and index + 1 < len(texts)
        for index, text in enumerate(texts)
    ]


def merge_flags(*flags: Sequence[bool] | None) -> list[bool] | None:
    """Element-wise OR of flag lists, skipping ``None``; ``None`` when all are ``None``.

    >>> merge_flags([True, False], None, [False, False])
    [True, False]
    """
    present = [f for f in flags if f is not None]
    if not present:
        return None
    return [any(values) for values in zip(*present, strict=True)]


def build_units(
    tokens: Sequence[int],
    sections: Sequence[int],
    break_after: Sequence[bool] | None = None,
    glue_after: Sequence[bool] | None = None,
) -> list[Unit]:
    """Group sentences into units and number the segments.

    Glue binds a sentence to the next one even across a semantic breakpoint, but never across a
    section change. A segment ends at a section change or after a (non-glued) breakpoint.
    """
    count = len(tokens)
    units: list[Unit] = []
    segment = 0
    first = 0
    total = 0
    for index in range(count):
        total += tokens[index]
        at_end = index + 1 == count
        new_section = not at_end and sections[index + 1] != sections[index]
        glued = bool(glue_after and glue_after[index]) and not new_section
        if at_end or not glued:
            units.append(Unit(first, index + 1, total, segment))
            first, total = index + 1, 0
            if new_section or bool(break_after and break_after[index]):
                segment += 1
    return units


def _segment_stop(
    units: Sequence[Unit],
    sections: Sequence[int],
    index: int,
    paragraph_after: Sequence[bool] | None = None,
) -> WindowStop:
    """Why the segment ends after unit ``index``."""
    if index + 1 >= len(units):
        return WindowStop.DOCUMENT_END
    last_sentence = units[index].last - 1
    if sections[last_sentence] != sections[last_sentence + 1]:
        return WindowStop.SECTION
    if paragraph_after is not None and paragraph_after[last_sentence]:
        return WindowStop.PARAGRAPH
    return WindowStop.BREAKPOINT


def _segments(units: Sequence[Unit]) -> list[tuple[int, int]]:
    """``[start, stop)`` unit ranges of the segments."""
    ranges: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(units) + 1):
        if index == len(units) or units[index].segment != units[start].segment:
            ranges.append((start, index))
            start = index
    return ranges


# --- adaptive mode ------------------------------------------------------------------------------


def _grow_right(
    units: Sequence[Unit], start: int, stop: int, budget: int, max_sentences: int | None
) -> tuple[int, int, WindowStop | None]:
    """Extend a window from unit ``start`` to the right within ``[start, stop)``.

    Returns ``(end, tokens, reason)`` (``reason`` is ``None`` at the range's end); a window always holds at least one unit, even one larger
    than the budget (a sentence is never cut).
    """
    end, total = start + 1, units[start].tokens
    while end < stop:
        sentences = units[end].last - units[start].first
        if max_sentences is not None and sentences > max_sentences:
            return end, total, WindowStop.MAX_SENTENCES
        if total + units[end].tokens > budget:
            return end, total, WindowStop.BUDGET
        total += units[end].tokens
        end += 1
    return end, total, None


def plan_adaptive_windows(
    units: Sequence[Unit],
    sections: Sequence[int],
    max_tokens: int,
    stride_ratio: float,
    max_sentences: int | None = None,
    paragraph_after: Sequence[bool] | None = None,
) -> list[WindowSpan]:
    """Token-budgeted sliding windows that stay inside their segment.

    ``paragraph_after`` only names the stop reason (``paragraph`` rather than ``breakpoint``);
    the barriers themselves are in the units' segments.

    Each window takes as many whole units as fit in ``max_tokens``; the next one starts after
    at least ``stride_ratio`` of the previous window's tokens (and at least one unit), so a fact
    cut by one window's edge is whole in its neighbour. A window that would end where its
    predecessor ended is skipped, so no window is contained in the previous one.
    """
    spans: list[WindowSpan] = []
    for seg_start, seg_stop in _segments(units):
        start, previous_end = seg_start, seg_start
        while start < seg_stop:
            end, total, reason = _grow_right(units, start, seg_stop, max_tokens, max_sentences)
            if end <= previous_end:  # nothing new: restart at the unit that blocked the growth
                start = previous_end
                continue
            reason = reason or _segment_stop(units, sections, seg_stop - 1, paragraph_after)
            spans.append(WindowSpan(units[start].first, units[end - 1].last, None, reason))
            if end == seg_stop:
                break
            previous_end, advanced, nxt = end, 0, start
            while nxt < end and advanced < stride_ratio * total:
                advanced += units[nxt].tokens
                nxt += 1
            start = max(nxt, start + 1)
    return spans


def _grow_centred(
    units: Sequence[Unit],
    index: int,
    seg_start: int,
    seg_stop: int,
    max_tokens: int,
    max_sentences: int | None,
    forward_ratio: float,
) -> tuple[int, int, WindowStop | None]:
    """Grow the window of unit ``index`` inside ``[seg_start, seg_stop)``; returns the unit
    range and the limit that stopped it (``None`` when only the segment's edges did). The side
    whose share of the added tokens is below its target grows next; a blocked side stays so."""
    left, right = index, index + 1
    total = units[index].tokens
    added_right = added_left = 0
    right_blocked, left_blocked = right >= seg_stop, left <= seg_start
    backward_ratio = 1 - forward_ratio
    reason: WindowStop | None = None
    while not (right_blocked and left_blocked):
        wants_right = (
            forward_ratio > 0 and added_right * backward_ratio <= added_left * forward_ratio
        )
        if left_blocked or (wants_right and not right_blocked):
            unit = units[right]
            if max_sentences is not None and unit.last - units[left].first > max_sentences:
                right_blocked, reason = True, WindowStop.MAX_SENTENCES
            elif total + unit.tokens > max_tokens:
                right_blocked, reason = True, WindowStop.BUDGET
            else:
                total += unit.tokens
                added_right += unit.tokens
                right += 1
                right_blocked = right >= seg_stop
        else:
            unit = units[left - 1]
            if max_sentences is not None and units[right - 1].last - unit.first > max_sentences:
                left_blocked, reason = True, WindowStop.MAX_SENTENCES
            elif total + unit.tokens > max_tokens:
                left_blocked, reason = True, WindowStop.BUDGET
            else:
                total += unit.tokens
                added_left += unit.tokens
                left -= 1
                left_blocked = left <= seg_start
    return left, right, reason


def plan_adaptive_centred(
    units: Sequence[Unit],
    sections: Sequence[int],
    max_tokens: int,
    max_sentences: int | None = None,
    forward_ratio: float = 0.5,
    paragraph_after: Sequence[bool] | None = None,
) -> list[WindowSpan]:
    """One window per sentence: its unit, grown a unit at a time while ``max_tokens`` and
    ``max_sentences`` allow and the segment goes on.

    ``forward_ratio`` is the share of the added tokens meant to follow the sentence: 0.5 grows
    both sides evenly (right first), 0.75 adds about three tokens after it for one before it,
    1.0 grows to the right until blocked and only then to the left. When one side is blocked
    the other keeps growing, so the budget is used either way.
    """
    spans: list[WindowSpan] = []
    for seg_start, seg_stop in _segments(units):
        segment_reason = _segment_stop(units, sections, seg_stop - 1, paragraph_after)
        for index in range(seg_start, seg_stop):
            left, right, reason = _grow_centred(
                units, index, seg_start, seg_stop, max_tokens, max_sentences, forward_ratio
            )
            first, last, stop = units[left].first, units[right - 1].last, reason or segment_reason
            unit = units[index]
            spans.extend(
                WindowSpan(first, last, centre, stop) for centre in range(unit.first, unit.last)
            )
    return spans


# --- embedded text of the sentence unit ---------------------------------------------------------


def extend_embedded_sentence(tokens: Sequence[int], centre: int, last: int, min_tokens: int) -> int:
    """End (exclusive) of the sentences embedded for sentence ``centre``: the sentence alone, or,
    when it has fewer than ``min_tokens`` tokens, it and the sentences after it until the count
    reaches ``min_tokens``, never past ``last`` (the end of its window).

    A heading, a figure caption or a question such as "What was the main finding?" says little
    on its own and, embedded alone, matches many queries; with its continuation it is specific.

    >>> extend_embedded_sentence([3, 4, 20, 5], centre=0, last=4, min_tokens=10)
    3
    >>> extend_embedded_sentence([3, 4, 20, 5], centre=2, last=4, min_tokens=10)
    3
    >>> extend_embedded_sentence([3, 4, 20, 5], centre=0, last=2, min_tokens=10)
    2
    """
    end, total = centre + 1, tokens[centre]
    while total < min_tokens and end < last:
        total += tokens[end]
        end += 1
    return end


__all__ = [
    "breaks_from_similarities",
    "lexical_similarities",
    "Unit",
    "WindowSpan",
    "WindowStop",
    "build_units",
    "extend_embedded_sentence",
    "find_breakpoints",
    "merge_flags",
    "find_question_glue",
    "plan_adaptive_centred",
    "plan_adaptive_windows",
    "plan_fixed_centred",
    "plan_fixed_windows",
]
