"""The centred adaptive planner against a plain reference implementation (the one it replaced
for speed), on random token counts, segments, glue and limits."""

from __future__ import annotations

import random

import pytest

from llama_index_ext_advrag.node_parser.planning import (
    WindowSpan,
    WindowStop,
    _segment_stop,
    _segments,
    build_units,
    plan_adaptive_centred,
)


def reference_centred(units, sections, max_tokens, max_sentences, forward_ratio, paragraphs):
    spans = []
    for seg_start, seg_stop in _segments(units):
        for index in range(seg_start, seg_stop):
            left, right, total = index, index + 1, units[index].tokens
            added = {"right": 0, "left": 0}
            blocked = {"right": right >= seg_stop, "left": left <= seg_start}
            reason = ""
            while not (blocked["right"] and blocked["left"]):
                wants_right = forward_ratio > 0 and (
                    added["right"] * (1 - forward_ratio) <= added["left"] * forward_ratio
                )
                side = (
                    "right" if (wants_right and not blocked["right"]) or blocked["left"] else "left"
                )
                candidate = right if side == "right" else left - 1
                first = units[min(left, candidate)].first
                last = units[max(right - 1, candidate)].last
                if max_sentences is not None and last - first > max_sentences:
                    blocked[side], reason = True, WindowStop.MAX_SENTENCES
                elif total + units[candidate].tokens > max_tokens:
                    blocked[side], reason = True, WindowStop.BUDGET
                else:
                    total += units[candidate].tokens
                    added[side] += units[candidate].tokens
                    if side == "right":
                        right += 1
                        blocked[side] = right >= seg_stop
                    else:
                        left -= 1
                        blocked[side] = left <= seg_start
            reason = reason or _segment_stop(units, sections, seg_stop - 1, paragraphs)
            for centre in range(units[index].first, units[index].last):
                spans.append(WindowSpan(units[left].first, units[right - 1].last, centre, reason))
    return spans


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
                args = (units, sections, max_tokens, max_sentences, forward_ratio, paragraphs)
                assert plan_adaptive_centred(*args) == reference_centred(*args), args[2:5]
