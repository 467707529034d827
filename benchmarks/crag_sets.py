"""Noisy-context sets for choosing CRAG's defaults: hard English negatives from COVID-QA, and
RGB zh and CMRC 2018 for Chinese (see ``bench_crag_defaults.py``).

Every question gets positives (passages that contain a gold answer) and negatives (passages
without it), ordered so that the contexts built at the noise ratios 0.2 ... 0.8 are nested.

- COVID-QA and CMRC: each document is cut into sentence windows of at most ``window_tokens``
  tokens, one starting at every sentence (overlapping, as a chunker with overlap would cut
  it). Positives: up to 4 windows holding the answer, with different starts. Negatives,
  alternately: windows of the *same* document without the answer (BM25 order against the
  question, so the most similar first) and BM25's top windows of *other* documents.
- RGB zh: positives and negatives as the dataset gives them (its negatives are topically
  close and hold no answer).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_crag import normalise, rgb_rows
from common import load_squad

from llama_index_ext_advrag.retrievers import JiebaBM25Retriever
from llama_index_ext_advrag.text import count_tokens, split_sentences

MAX_POSITIVES = 4
MAX_NEGATIVES = 4


@dataclass
class Item:
    """One question: its positives and negatives (nested order) and the answer check."""

    qid: str
    query: str
    positives: list[str]
    negatives: list[str]
    answer: Callable[[str], bool]
    doc_id: str = ""
    negative_kinds: list[str] = field(default_factory=list)  # "same" / "other" per negative


def contains_any(answers: list[str]) -> Callable[[str], bool]:
    def check(context: str) -> bool:
        flat = normalise(context)
        return any(a and a in flat for a in answers)

    return check


def sentence_windows(text: str, window_tokens: int) -> list[str]:
    """One window per sentence start: that sentence and the following ones within the budget."""
    sentences = split_sentences(text)
    tokens = [count_tokens(s.text) for s in sentences]
    windows = []
    for first in range(len(sentences)):
        last, used = first, tokens[first]
        while last + 1 < len(sentences) and used + tokens[last + 1] <= window_tokens:
            last += 1
            used += tokens[last]
        windows.append(text[sentences[first].start : sentences[last].end])
    return list(dict.fromkeys(w for w in windows if w.strip()))


def disjoint_windows(text: str, window_tokens: int) -> list[str]:
    """Consecutive, non-overlapping sentence groups within the budget."""
    groups: list[list[Any]] = []
    used = 0
    for sentence in split_sentences(text):
        size = count_tokens(sentence.text)
        if groups and used + size <= window_tokens:
            groups[-1].append(sentence)
            used += size
        else:
            groups.append([sentence])
            used = size
    return [text[g[0].start : g[-1].end] for g in groups]


def spread(values: list[str], count: int) -> list[str]:
    """``count`` values spread evenly over ``values`` (all of them when there are fewer)."""
    if len(values) <= count:
        return list(values)
    return [values[round(i * (len(values) - 1) / (count - 1))] for i in range(count)]


def squad_items(
    path: Path, window_tokens: int, needed: int, seed: int, skip: set[str] | None = None
) -> list[Item]:
    """Hard-negative items from a SQuAD-style file (COVID-QA or CMRC), in a seeded order."""
    corpus = load_squad(path)
    passages: list[tuple[str, str]] = []
    for doc_id, text in corpus.documents.items():
        passages += [(doc_id, w) for w in disjoint_windows(text, window_tokens)]
    nodes_text = [t for _, t in passages]
    from llama_index.core.schema import TextNode

    nodes = [TextNode(text=t, id_=f"p{i}") for i, t in enumerate(nodes_text)]
    bm25 = JiebaBM25Retriever(nodes, similarity_top_k=300)
    questions = [q for q in corpus.questions if not skip or q.id not in skip]
    random.Random(seed).shuffle(questions)
    items: list[Item] = []
    windows_of: dict[str, list[str]] = {}
    for question in questions:
        if len(items) >= needed:
            break
        answers = [normalise(a) for a in question.answers]
        check = contains_any(answers)
        doc = corpus.documents[question.doc_id]
        if question.doc_id not in windows_of:
            windows_of[question.doc_id] = sentence_windows(doc, window_tokens)
        positives = spread([w for w in windows_of[question.doc_id] if check(w)], MAX_POSITIVES)
        if not positives:
            continue
        same, other = [], []
        for hit in bm25.retrieve(question.question):
            doc_id, text = passages[int(hit.node.node_id[1:])]
            if check(text):
                continue
            (same if doc_id == question.doc_id else other).append(text)
        if len(same) < MAX_NEGATIVES // 2:  # the rest of the document, in reading order
            rest = [
                t for d, t in passages if d == question.doc_id and not check(t) and t not in same
            ]
            same += rest[: MAX_NEGATIVES // 2 - len(same)]
        negatives, kinds = [], []
        for pair in zip(same, other, strict=False):
            for kind, text in zip(("same", "other"), pair, strict=True):
                if len(negatives) < MAX_NEGATIVES:
                    negatives.append(text)
                    kinds.append(kind)
        if len(negatives) < MAX_NEGATIVES:
            continue
        items.append(
            Item(
                question.id, question.question, positives, negatives, check, question.doc_id, kinds
            )
        )
    return items


def rgb_items(path: Path) -> list[Item]:
    return [
        Item(qid, query, positives[:MAX_POSITIVES], negatives[:MAX_NEGATIVES], answer)
        for qid, query, positives, negatives, answer in rgb_rows(path)
    ]
