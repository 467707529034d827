"""CRAG knowledge refinement: cut kept passages into strips, keep the relevant ones in order.

A strip is a group of consecutive sentences from the shared segmenter
(:func:`~llama_index_ext_advrag.text.split_sentences`) of at most ``strip_tokens`` tokens (a
longer sentence is a strip of its own). After a judge grades the strips, :func:`select_strips`
keeps, per passage, the strips scoring at least the threshold, or its best strip when none
does (the passage as a whole was judged worth keeping); a token budget then keeps the
highest-scoring strips that fit, each passage's best first, and the kept strips are put back
in reading order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llama_index_ext_advrag.text import count_tokens, split_sentences

DEFAULT_STRIP_TOKENS = 64
STRIP_SEPARATOR = "\n"


@dataclass(frozen=True)
class Strip:
    """A run of sentences of one passage: ``text == source[start:end]``."""

    passage: int
    position: int
    start: int
    end: int
    text: str
    tokens: int


def split_strips(passage: int, text: str, strip_tokens: int = DEFAULT_STRIP_TOKENS) -> list[Strip]:
    """Group the sentences of ``text`` into strips of at most ``strip_tokens`` tokens.

    >>> [s.text for s in split_strips(0, "One two. Three four. Five.", strip_tokens=6)]
    ['One two. Three four.', 'Five.']
    """
    if strip_tokens < 1:
        raise ValueError(f"strip_tokens must be at least 1, got {strip_tokens!r}")
    groups: list[list[tuple[int, int, int]]] = []
    used = 0
    for sentence in split_sentences(text):
        tokens = count_tokens(sentence.text)
        if groups and used + tokens <= strip_tokens:
            groups[-1].append((sentence.start, sentence.end, tokens))
            used += tokens
        else:
            groups.append([(sentence.start, sentence.end, tokens)])
            used = tokens
    return [
        Strip(
            passage=passage,
            position=position,
            start=group[0][0],
            end=group[-1][1],
            text=text[group[0][0] : group[-1][1]],
            tokens=sum(t for _, _, t in group),
        )
        for position, group in enumerate(groups)
    ]


def select_strips(
    strips: Sequence[Strip],
    scores: Sequence[float | None],
    threshold: float,
    token_budget: int | None = None,
) -> list[int]:
    """Indices of the strips to keep, in reading order (passage, then position).

    A strip is a candidate when its score is at least ``threshold`` or unknown (``None``);
    a passage without a candidate offers its best-scoring strip. Under ``token_budget``,
    candidates are taken best first (each passage's best strip before the others) while they
    fit; a strip that does not fit is skipped, not cut.

    >>> s = [Strip(0, i, 0, 1, "x", 10) for i in range(3)]
    >>> select_strips(s, [0.9, 0.1, 0.6], 0.5), select_strips(s, [0.9, 0.1, 0.6], 0.5, 15)
    ([0, 2], [0])
    """
    if len(strips) != len(scores):
        raise ValueError(f"{len(strips)} strips but {len(scores)} scores")

    def rank(i: int) -> float:
        score = scores[i]
        return 1.0 if score is None else score

    by_passage: dict[int, list[int]] = {}
    for index, strip in enumerate(strips):
        by_passage.setdefault(strip.passage, []).append(index)
    firsts: list[int] = []
    others: list[int] = []
    for indices in by_passage.values():
        candidates = [i for i in indices if scores[i] is None or rank(i) >= threshold]
        if not candidates:
            candidates = [max(indices, key=rank)]
        ordered = sorted(candidates, key=lambda i: -rank(i))
        firsts.append(ordered[0])
        others.extend(ordered[1:])
    chosen: list[int] = []
    used = 0
    for index in sorted(firsts, key=lambda i: -rank(i)) + sorted(others, key=lambda i: -rank(i)):
        if token_budget is not None and used + strips[index].tokens > token_budget:
            continue
        chosen.append(index)
        used += strips[index].tokens
    return sorted(chosen, key=lambda i: (strips[i].passage, strips[i].position))


def join_strips(text: str, strips: Sequence[Strip]) -> str:
    """The passage text made of ``strips`` (in reading order): adjacent strips keep the source
    text between them, others are joined by a newline."""
    pieces: list[str] = []
    previous: Strip | None = None
    for strip in strips:
        if previous is not None and strip.position == previous.position + 1:
            pieces[-1] = text[_span_start(pieces, text, previous) : strip.end]
        else:
            pieces.append(strip.text)
        previous = strip
    return STRIP_SEPARATOR.join(pieces)


def _span_start(pieces: list[str], text: str, previous: Strip) -> int:
    # The last piece ends at previous.end; its start is that end minus its length.
    return previous.end - len(pieces[-1])


__all__ = ["DEFAULT_STRIP_TOKENS", "Strip", "join_strips", "select_strips", "split_strips"]
