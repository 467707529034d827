"""The centred adaptive planner against a plain reference implementation, on random token
counts, sections, breakpoints, glue, paragraphs and limits.

The reference starts from the sentence-level inputs and works out units, segments and the
reason a segment ends on its own, so a fault in the planner's unit, segment or stop-reason
helpers shows as a difference (it shares nothing with the code under test but ``WindowSpan``
and the stop-reason names).
"""

from __future__ import annotations

import random

import pytest

from llama_index_ext_advrag.node_parser.planning import (
    WindowSpan,
    WindowStop,
    build_units,
    plan_adaptive_centred,
)


def reference_units(tokens, sections, breaks, glue):
    """``[(first, last, tokens)]`` units grouped into segments, from the sentence flags.

    A sentence glued to the next one shares its unit (never across a section change); a segment
    ends after a unit whose last sentence is followed by a section change or a breakpoint.
    """
    count = len(tokens)
    segments, current, unit_first = [], [], 0
    for index in range(count):
        last = index + 1 == count
        section_change = not last and sections[index] != sections[index + 1]
        if not last and glue and glue[index] and not section_change:
            continue
        current.append((unit_first, index + 1, sum(tokens[unit_first : index + 1])))
        unit_first = index + 1
        if last or section_change or (breaks and breaks[index]):
            segments.append(current)
            current = []
    return segments


def reference_segment_end(sections, paragraphs, last_sentence):
    """Why a segment whose last sentence is ``last_sentence`` ends there."""
    if last_sentence + 1 == len(sections):
        return WindowStop.DOCUMENT_END
    if sections[last_sentence] != sections[last_sentence + 1]:
        return WindowStop.SECTION
    if paragraphs and paragraphs[last_sentence]:
        return WindowStop.PARAGRAPH
    return WindowStop.BREAKPOINT


def reference_centred(tokens, sections, breaks, glue, paragraphs, limits):
    max_tokens, max_sentences, forward_ratio = limits
    spans = []
    for segment in reference_units(tokens, sections, breaks, glue):
        segment_end = reference_segment_end(sections, paragraphs, segment[-1][1] - 1)
        for index, (unit_first, unit_last, unit_tokens) in enumerate(segment):
            left, right, total = index, index, unit_tokens  # inclusive unit range
            added = {"right": 0, "left": 0}
            open_ = {"right": right + 1 < len(segment), "left": left > 0}
            reason = ""
            while open_["right"] or open_["left"]:
                wants_right = forward_ratio > 0 and (
                    added["right"] * (1 - forward_ratio) <= added["left"] * forward_ratio
                )
                side = "right" if not open_["left"] or (wants_right and open_["right"]) else "left"
                candidate = right + 1 if side == "right" else left - 1
                first = segment[min(left, candidate)][0]
                last = segment[max(right, candidate)][1]
                if max_sentences is not None and last - first > max_sentences:
                    open_[side], reason = False, WindowStop.MAX_SENTENCES
                elif total + segment[candidate][2] > max_tokens:
                    open_[side], reason = False, WindowStop.BUDGET
                else:
                    total += segment[candidate][2]
                    added[side] += segment[candidate][2]
                    if side == "right":
                        right = candidate
                        open_[side] = right + 1 < len(segment)
                    else:
                        left = candidate
                        open_[side] = left > 0
            for centre in range(unit_first, unit_last):
                spans.append(
                    WindowSpan(segment[left][0], segment[right][1], centre, reason or segment_end)
                )
    return spans


def test_reference_by_hand() -> None:
    # sentences 0-1 glued, a breakpoint after 2, a section change after 4
    tokens, sections = [5, 5, 5, 5, 5, 5], [0, 0, 0, 0, 0, 1]
    breaks = [False, False, True, False, False, False]
    glue = [True, False, False, False, False, False]
    assert reference_units(tokens, sections, breaks, glue) == [
        [(0, 2, 10), (2, 3, 5)], [(3, 4, 5), (4, 5, 5)], [(5, 6, 5)]
    ]  # fmt: skip
    spans = reference_centred(tokens, sections, breaks, glue, None, (100, None, 0.5))
    assert [(s.first, s.last, s.centre, s.stop) for s in spans] == [
        (0, 3, 0, WindowStop.BREAKPOINT), (0, 3, 1, WindowStop.BREAKPOINT), (0, 3, 2, WindowStop.BREAKPOINT),
        (3, 5, 3, WindowStop.SECTION), (3, 5, 4, WindowStop.SECTION), (5, 6, 5, WindowStop.DOCUMENT_END),
    ]  # fmt: skip


@pytest.mark.parametrize("seed", range(40))
def test_centred_planner_matches_reference(seed: int) -> None:
    rng = random.Random(seed)
    count = rng.randint(1, 80)
    tokens = [rng.choice([1, 3, 8, 20, 40, 90, 300]) for _ in range(count)]
    sections = sorted(rng.randint(0, 3) for _ in range(count))
    breaks = [rng.random() < 0.1 for _ in range(count)]
    glue = [rng.random() < 0.15 for _ in range(count)] if seed % 2 else None
    paragraphs = [rng.random() < 0.1 for _ in range(count)] if seed % 3 else None
    units = build_units(tokens, sections, breaks, glue)
    for max_tokens in (10, 64, 256):
        for max_sentences in (None, 1, 3, 7):
            for forward_ratio in (0.0, 0.25, 0.5, 0.75, 1.0, 1 / 3):
                limits = (max_tokens, max_sentences, forward_ratio)
                expected = reference_centred(tokens, sections, breaks, glue, paragraphs, limits)
                actual = plan_adaptive_centred(units, sections, *limits, paragraphs)
                assert actual == expected, limits
