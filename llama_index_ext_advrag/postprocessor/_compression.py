"""The decisions of context compression, as pure functions shared by sync and async.

Retrieved passages are cut into sentences (the pack's segmenter), each sentence gets one score
from up to three signals put on one scale (z-scores): a relevance judge's raw value, the
query-to-sentence cosine, and a prior for the rank of the passage it came from. The best
sentences (each with up to ``neighbours`` sentences either side, inside its passage) are kept
while the context fits the token budget; what is kept is handed back in reading order, each
passage's kept sentences as spans of its own text.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from llama_index_ext_advrag.text import Sentence, count_tokens, split_sentences

# How the returned passages are joined for the LLM (LlamaIndex's compact context, and what
# ``advrag compare`` counts): the budget covers the separators too.
PASSAGE_SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Candidate:
    """One sentence of one retrieved passage.

    Attributes:
        passage: index of the passage in the retrieved list (its retrieval rank).
        position: index of the sentence inside the passage.
        start, end: character offsets of the sentence in the passage text.
        text: the sentence.
    """

    passage: int
    position: int
    start: int
    end: int
    text: str


def cut_passages(texts: Sequence[str]) -> list[list[Sentence]]:
    """The sentences of each passage text (CJK and Latin, exact offsets)."""
    return [split_sentences(text) if text.strip() else [] for text in texts]


def candidates_of(sentences: Sequence[Sequence[Sentence]]) -> list[Candidate]:
    """Every sentence of every passage, passages in retrieval order."""
    return [
        Candidate(passage, position, s.start, s.end, s.text)
        for passage, cut in enumerate(sentences)
        for position, s in enumerate(cut)
    ]


def standardise(values: Sequence[float | None]) -> np.ndarray:
    """z-scores of ``values``; an unknown value (``None``, NaN) gets the lowest known z-score,
    and a constant (or wholly unknown) signal contributes 0 everywhere.

    >>> standardise([1.0, 3.0, None]).round(3).tolist()
    [-1.0, 1.0, -1.0]
    >>> standardise([2.0, 2.0]).tolist()
    [0.0, 0.0]
    """
    array = np.array(
        [np.nan if v is None or not math.isfinite(v) else float(v) for v in values], dtype=float
    )
    known = ~np.isnan(array)
    if known.sum() < 2 or float(np.std(array[known])) == 0.0:
        return np.zeros(len(array))
    z = (array - array[known].mean()) / array[known].std()
    z[~known] = z[known].min()
    return z


def standardise_within(values: Sequence[float | None], groups: Sequence[str]) -> np.ndarray:
    """z-scores of ``values`` taken inside each group of ``groups`` (e.g. the judge that gave
    each value: a language-routed judge mixes a cross-encoder's logits with e5's cosines, which
    share no scale); an unknown value gets the lowest known z-score. One group: ``standardise``.

    >>> standardise_within([-8.0, 4.0, 0.75, 0.85], ["ce", "ce", "e5", "e5"]).round(6).tolist()
    [-1.0, 1.0, -1.0, 1.0]
    >>> standardise_within([1.0, 3.0, 5.0, 9.0, None], ["a", "a", "b", "b", "b"]).tolist()
    [-1.0, 1.0, -1.0, 1.0, -1.0]
    """
    array = np.array(
        [np.nan if v is None or not math.isfinite(v) else float(v) for v in values], dtype=float
    )
    known = ~np.isnan(array)
    indices = [int(i) for i in np.flatnonzero(known)]
    labels = sorted({groups[i] for i in indices})
    if len(labels) <= 1:
        return standardise(values)
    z = np.zeros(len(array))
    for label in labels:
        members = [i for i in indices if groups[i] == label]
        z[members] = standardise([float(array[i]) for i in members])
    z[~known] = z[known].min()
    return z


def combine_scores(
    candidates: Sequence[Candidate],
    judge: Sequence[float | None] | None,
    cosine: Sequence[float | None] | None,
    judge_weight: float,
    cosine_weight: float,
    rank_weight: float,
    judge_groups: Sequence[str] | None = None,
    cosine_groups: Sequence[str] | None = None,
) -> list[float]:
    """One score per candidate: weighted z-scores of the judge's values, the cosines and the
    passage rank (earlier passages higher); a signal that is ``None`` is left out. With
    ``judge_groups`` (the judge behind each value) the judge's values are z-scored per group;
    likewise ``cosine_groups`` for a similarity signal whose Chinese pairs a judge scored.

    >>> cands = [Candidate(0, 0, 0, 1, "a"), Candidate(1, 0, 0, 1, "b")]
    >>> combine_scores(cands, [0.0, 1.0], None, 1.0, 1.0, 0.0)
    [-1.0, 1.0]
    """
    total = np.zeros(len(candidates))
    if judge is not None and judge_weight:
        total += judge_weight * (
            standardise(judge) if judge_groups is None else standardise_within(judge, judge_groups)
        )
    if cosine is not None and cosine_weight:
        total += cosine_weight * (
            standardise(cosine)
            if cosine_groups is None
            else standardise_within(cosine, cosine_groups)
        )
    if rank_weight:
        total += rank_weight * standardise([-float(c.passage) for c in candidates])
    return [float(v) for v in total]


def substitute(
    values: Sequence[float | None],
    indices: Sequence[int],
    replacements: Sequence[float | None],
    label: str,
    default_label: str = "cosine",
) -> tuple[list[float | None], list[str]]:
    """``values`` with those at ``indices`` replaced by ``replacements``, and the source of each
    value (``label`` for a replaced one, else ``default_label``) to z-score them per source.

    >>> substitute([0.1, None, 0.3], [1], [0.9], "e5")
    ([0.1, 0.9, 0.3], ['cosine', 'e5', 'cosine'])
    """
    merged, groups = list(values), [default_label] * len(values)
    for index, value in zip(indices, replacements, strict=True):
        merged[index], groups[index] = value, label
    return merged, groups


def assemble(
    text: str, sentences: Sequence[Sentence], kept: set[int], separator: str
) -> tuple[str, list[tuple[int, int]]]:
    """The kept sentences of one passage in reading order: runs of consecutive sentences are
    one span of the original text (its own spacing), spans are joined by ``separator``.

    Returns the compressed text and the spans' ``(start, end)`` offsets in ``text``.

    >>> from llama_index_ext_advrag.text import split_sentences
    >>> source = "One. Two. Three."
    >>> assemble(source, split_sentences(source), {0, 2}, " … ")
    ('One. … Three.', [(0, 4), (10, 16)])
    """
    spans: list[tuple[int, int]] = []
    previous = -2
    for position in sorted(kept):
        sentence = sentences[position]
        if position == previous + 1 and spans:
            spans[-1] = (spans[-1][0], sentence.end)
        else:
            spans.append((sentence.start, sentence.end))
        previous = position
    return separator.join(text[start:end] for start, end in spans), spans


@dataclass
class Selection:
    """What the budget kept: per passage the kept sentence positions, and the context tokens."""

    kept: list[set[int]]
    tokens: int
    texts: list[str]
    spans: list[list[tuple[int, int]]]


def _context_tokens(texts: Sequence[str], count: Callable[[str], int]) -> int:
    return count(PASSAGE_SEPARATOR.join(t for t in texts if t))


def estimate_tokens(sentence_tokens: Sequence[int], kept: set[int], separator_tokens: int) -> int:
    """Tokens of a passage's kept sentences: each sentence counted once, plus a separator
    between runs that are not adjacent (the exact count is taken on the assembled context).

    >>> estimate_tokens([3, 4, 5], {0, 2}, 2)
    10
    """
    runs = sum(1 for p in kept if p - 1 not in kept)
    return sum(sentence_tokens[p] for p in kept) + separator_tokens * max(0, runs - 1)


def select_within_budget(
    texts: Sequence[str],
    sentences: Sequence[Sequence[Sentence]],
    candidates: Sequence[Candidate],
    scores: Sequence[float],
    max_tokens: int,
    neighbours: int,
    separator: str,
    count: Callable[[str], int] = count_tokens,
) -> Selection:
    """Keep the best-scored sentences, each with up to ``neighbours`` sentences either side in
    its passage, while the whole context (kept passages joined by a blank line) stays within
    ``max_tokens``. A sentence whose group does not fit is tried alone, then skipped, so a
    smaller one further down can still use the room left.

    Ties in score go to the earlier passage and sentence. The result never exceeds the budget:
    sentences are counted once each while choosing, then the context is counted with ``count``
    as it will be handed on, and the lowest-scored kept sentences go until it fits.
    """
    kept: list[set[int]] = [set() for _ in texts]
    tokens = [[count(s.text) for s in cut] for cut in sentences]
    separator_tokens = count(separator) if separator else 0
    passage_separator_tokens = count(PASSAGE_SEPARATOR)
    passage_tokens = [0 for _ in texts]
    used = 0
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    for index in order:
        candidate = candidates[index]
        passage, position = candidate.passage, candidate.position
        if position in kept[passage]:
            continue
        last = len(sentences[passage]) - 1
        group = set(range(max(0, position - neighbours), min(last, position + neighbours) + 1))
        for attempt in (group, {position}):
            trial = kept[passage] | attempt
            trial_tokens = estimate_tokens(tokens[passage], trial, separator_tokens)
            opened = not kept[passage] and used > 0  # a new passage adds a blank line
            estimate = used - passage_tokens[passage] + trial_tokens
            estimate += passage_separator_tokens if opened else 0
            if estimate > max_tokens:
                continue
            kept[passage], used, passage_tokens[passage] = trial, estimate, trial_tokens
            break
    assembled = [
        assemble(t, s, k, separator) for t, s, k in zip(texts, sentences, kept, strict=True)
    ]
    compressed = [text for text, _ in assembled]
    spans = [span for _, span in assembled]
    score_of = {(c.passage, c.position): scores[i] for i, c in enumerate(candidates)}
    while _context_tokens(compressed, count) > max_tokens:
        passage, position = min(
            ((p, s) for p, positions in enumerate(kept) for s in positions),
            key=lambda key: (score_of.get(key, -math.inf), -key[0], -key[1]),
        )
        kept[passage].discard(position)
        compressed[passage], spans[passage] = assemble(
            texts[passage], sentences[passage], kept[passage], separator
        )
    return Selection(kept, _context_tokens(compressed, count), compressed, spans)


def passage_order(
    candidates: Sequence[Candidate], scores: Sequence[float], passages: int
) -> list[int]:
    """Passages by their best sentence's score (the combined rerank), ties in retrieval order;
    passages without sentences last.

    >>> cands = [Candidate(0, 0, 0, 1, "a"), Candidate(1, 0, 0, 1, "b")]
    >>> passage_order(cands, [0.1, 0.9], 3)
    [1, 0, 2]
    """
    best = [-math.inf] * passages
    for candidate, score in zip(candidates, scores, strict=True):
        best[candidate.passage] = max(best[candidate.passage], score)
    return sorted(range(passages), key=lambda p: (-best[p], p))


__all__ = [
    "PASSAGE_SEPARATOR",
    "Candidate",
    "Selection",
    "assemble",
    "candidates_of",
    "combine_scores",
    "cut_passages",
    "estimate_tokens",
    "passage_order",
    "select_within_budget",
    "standardise",
    "standardise_within",
    "substitute",
]
