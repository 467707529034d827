"""The second hop's pure logic: hop-2 queries from hop-1 passages, and merging the hops.

No I/O here: :class:`~.second_hop.SecondHopRetriever` fetches, these functions decide. A hop-2
query is the question plus a cue taken from one hop-1 passage (its title, leading sentence or
entity cues, cut by :mod:`llama_index_ext_advrag.text`). The hops are fused with
:func:`~.fusion.fuse_rrf` and merged so that hop 1's order is kept and its top ``keep_top``
stay first: hop-2 nodes are only inserted between hop-1 nodes, never above the pinned ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import Enum
from typing import NamedTuple

from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_ext_advrag.layout import SECTION_TITLE_KEY, UNIT_CUES_KEY
from llama_index_ext_advrag.retrievers.fusion import FusedHit, LegHit, tie_break_key
from llama_index_ext_advrag.text import (
    count_tokens,
    extract_cues,
    longest_prefix_within,
    split_sentences,
)

TITLE_KEYS = ("title", SECTION_TITLE_KEY)


class HopCue(str, Enum):
    """What a hop-1 passage adds to the question in its hop-2 query."""

    LEADING_SENTENCE = "leading_sentence"  # the passage's first sentence
    TITLE = "title"  # metadata title (or section title); the leading sentence when absent
    ENTITIES = "entities"  # the passage's entity cues the question lacks, in reading order
    TITLE_AND_ENTITIES = "title_and_entities"  # both, title first


class HopQuery(NamedTuple):
    """One hop-2 query: the leg's name, the seed passage it came from, the text searched."""

    leg: str
    seed_id: str
    cue: str
    query: str


def passage_title(node: BaseNode) -> str:
    """The node's ``title`` (or ``section_title``) metadata, ``""`` when it has none."""
    for key in TITLE_KEYS:
        value = node.metadata.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def leading_sentence(text: str, max_tokens: int) -> str:
    """The first sentence of ``text`` (the pack's segmenter), cut to ``max_tokens``."""
    sentences = split_sentences(text)
    if not sentences:
        return ""
    first = sentences[0].text.strip()
    return longest_prefix_within(first, count_tokens, max_tokens).strip()


def new_entity_cues(node: BaseNode, question: str, max_cues: int) -> list[str]:
    """The passage's entity cues (stored ``unit_cues`` when the node has them, else
    :func:`~llama_index_ext_advrag.text.extract_cues`) that the question lacks, in the
    order they first appear in the passage, at most ``max_cues``."""
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    stored = node.metadata.get(UNIT_CUES_KEY)
    cues = (
        frozenset(str(c).lower() for c in stored)
        if isinstance(stored, (list, tuple, set, frozenset))
        else extract_cues(text)
    )
    asked = extract_cues(question) | frozenset(question.lower().split())
    lowered = text.lower()
    fresh = [c for c in cues if c not in asked and c not in question.lower()]
    fresh.sort(key=lambda c: (lowered.find(c) if c in lowered else len(lowered), c))
    return fresh[:max_cues]


def hop_cue(node: BaseNode, question: str, mode: HopCue, max_tokens: int, max_cues: int) -> str:
    """The text ``node`` adds to ``question`` in its hop-2 query under ``mode`` (``""``: none)."""
    text = node.get_content(metadata_mode=MetadataMode.NONE)
    title = passage_title(node)
    if mode is HopCue.LEADING_SENTENCE:
        return leading_sentence(text, max_tokens)
    if mode is HopCue.TITLE:
        return title or leading_sentence(text, max_tokens)
    entities = " ".join(new_entity_cues(node, question, max_cues))
    if mode is HopCue.ENTITIES:
        return entities
    return " ".join(part for part in (title, entities) if part)


def hop_queries(
    question: str,
    seeds: Sequence[BaseNode],
    mode: HopCue,
    max_tokens: int,
    max_cues: int,
) -> tuple[list[HopQuery], list[dict[str, str]]]:
    """One hop-2 query per seed passage, and the seeds skipped (no cue, or a query already
    asked) with the reason."""
    queries: list[HopQuery] = []
    skipped: list[dict[str, str]] = []
    asked = {question.strip()}
    for number, seed in enumerate(seeds, start=1):
        cue = hop_cue(seed, question, mode, max_tokens, max_cues)
        text = f"{question.strip()} {cue}".strip()
        if not cue:
            skipped.append({"seed": seed.node_id, "reason": "no cue"})
        elif text in asked:
            skipped.append({"seed": seed.node_id, "reason": "same query as another hop"})
        else:
            asked.add(text)
            queries.append(HopQuery(f"hop2:{number}", seed.node_id, cue, text))
    return queries, skipped


def merge_hops(
    hop1_ids: Sequence[str], fused: Sequence[FusedHit], keep_top: int, limit: int
) -> list[FusedHit]:
    """The returned order: hop 1's first ``keep_top`` (pinned, in hop-1 order), then hop 1's
    other nodes in their hop-1 order merged with the nodes only later legs found, each
    newcomer placed before the first remaining hop-1 node it outscores (fused score, ties by
    :func:`~.fusion.tie_break_key`); cut to ``limit``.

    So hop-1 order is always kept and a pinned node is never pushed out; a hop-1 node below
    ``keep_top`` can be pushed below ``limit`` by newcomers that outscore it.

    >>> hits = {i: FusedHit(i, s, (), ()) for i, s in [("a", .3), ("b", .1), ("x", .2)]}
    >>> [h.node_id for h in merge_hops(["a", "b"], list(hits.values()), 1, 3)]
    ['a', 'x', 'b']
    >>> [h.node_id for h in merge_hops(["a", "b"], list(hits.values()), 2, 2)]
    ['a', 'b']
    """
    by_id: Mapping[str, FusedHit] = {hit.node_id: hit for hit in fused}
    first = list(dict.fromkeys(hop1_ids))
    ordered = [by_id[i] for i in first[:keep_top] if i in by_id]
    rest = [by_id[i] for i in first[keep_top:] if i in by_id]
    known = set(first)
    newcomers = sorted((h for h in fused if h.node_id not in known), key=tie_break_key)
    while (rest or newcomers) and len(ordered) < limit:
        if newcomers and (not rest or tie_break_key(newcomers[0]) < tie_break_key(rest[0])):
            ordered.append(newcomers.pop(0))
        else:
            ordered.append(rest.pop(0))
    return ordered[:limit]


def without(leg: Sequence[LegHit], node_ids: Sequence[str]) -> list[LegHit]:
    """``leg`` without the hits whose node is in ``node_ids`` (the rest keep their order, so
    their ranks close up)."""
    dropped = set(node_ids)
    return [hit for hit in leg if hit.node_id not in dropped]


def non_increasing(scores: Sequence[float]) -> list[float]:
    """Scores raised where needed so that they never increase down the list (a pinned hop-1
    node keeps its place under a postprocessor that sorts by score).

    >>> non_increasing([0.1, 0.3, 0.2])
    [0.3, 0.3, 0.2]
    """
    out = list(scores)
    for index in range(len(out) - 2, -1, -1):
        out[index] = max(out[index], out[index + 1])
    return out


__all__ = [
    "HopCue",
    "HopQuery",
    "hop_cue",
    "hop_queries",
    "leading_sentence",
    "merge_hops",
    "new_entity_cues",
    "non_increasing",
    "passage_title",
    "without",
]
