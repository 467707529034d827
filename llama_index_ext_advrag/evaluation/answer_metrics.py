"""Answer-level metrics: fact recall, token F1 and the hallucination flag of one answer.

Normalisation follows the SQuAD evaluation script: case-folded, punctuation deleted ("3.5"
becomes "35"), the
English articles "a", "an", "the" dropped, whitespace collapsed; CJK text is compared
character by character (a Chinese answer has no spaces to split on).

- **fact recall**: every answer group has an alternative whose normalised tokens occur, in
  order and contiguous, in the normalised answer (the gold fact is stated in the answer).
- **token F1**: the best F1 over the gold alternatives of the bag of tokens (SQuAD's F1);
  with several groups, the mean over the groups.
- **hallucinated**: at least one sentence of the answer is judged not supported by the
  context; unknown (``None``) when no sentence is judged unsupported but one could not be
  judged.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from llama_index_ext_advrag.text import split_sentences
from llama_index_ext_advrag.text.charsets import CJK_TEXT

_ARTICLES = frozenset({"a", "an", "the"})
_CJK_CHAR = re.compile(rf"([{CJK_TEXT}])")


def answer_tokens(text: str) -> list[str]:
    """The normalised tokens of ``text``: SQuAD's normalisation, CJK characters one by one.

    >>> answer_tokens("The pump runs at 3.5 bar!"), answer_tokens("在七月初七。")
    (['pump', 'runs', 'at', '35', 'bar'], ['在', '七', '月', '初', '七'])
    """
    text = "".join(ch for ch in text.casefold() if not unicodedata.category(ch).startswith("P"))
    text = _CJK_CHAR.sub(r" \1 ", text)
    return [token for token in text.split() if token not in _ARTICLES]


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    if not needle:
        return False
    width = len(needle)
    return any(
        list(haystack[i : i + width]) == list(needle) for i in range(len(haystack) - width + 1)
    )


def fact_recall(answer: str, groups: Sequence[Sequence[str]]) -> bool | None:
    """Whether every group has an alternative stated in ``answer`` (``None``: no gold).

    >>> fact_recall("It runs at 3.5 bar.", [["3.5 bar", "3.5 bars"]])
    True
    >>> fact_recall("It runs at 35 bar.", [["3.5 bar"]]), fact_recall("bar 3", [["3 bars"]])
    (True, False)
    """
    groups = [[a for a in group if answer_tokens(a)] for group in groups]
    groups = [group for group in groups if group]
    if not groups:
        return None
    tokens = answer_tokens(answer)
    return all(any(_contains(tokens, answer_tokens(a)) for a in group) for group in groups)


def _f1(prediction: Sequence[str], gold: Sequence[str]) -> float:
    common = sum((Counter(prediction) & Counter(gold)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(prediction), common / len(gold)
    return 2 * precision * recall / (precision + recall)


def token_f1(answer: str, groups: Sequence[Sequence[str]]) -> float | None:
    """SQuAD's token F1: the best over each group's alternatives, the mean over the groups
    (``None``: no gold).

    >>> round(token_f1("at 3.5 bar in normal use", [["3.5 bar"]]), 3)  # P 2/6, R 2/2
    0.5
    """
    scores = []
    prediction = answer_tokens(answer)
    for group in groups:
        golds = [answer_tokens(a) for a in group]
        golds = [g for g in golds if g]
        if golds:
            scores.append(max(_f1(prediction, gold) for gold in golds))
    return sum(scores) / len(scores) if scores else None


def answer_sentences(answer: str) -> list[str]:
    """The sentences of ``answer`` that a support judge grades (the shared segmenter's)."""
    return [s.text.strip() for s in split_sentences(answer) if answer_tokens(s.text)]


def hallucinated(supported: Sequence[bool | None]) -> bool | None:
    """``True`` when a sentence is unsupported, ``None`` when none is but one is unjudged.

    >>> hallucinated([True, False]), hallucinated([True, None]), hallucinated([])
    (True, None, False)
    """
    if any(value is False for value in supported):
        return True
    if any(value is None for value in supported):
        return None
    return False


__all__ = [
    "answer_sentences",
    "answer_tokens",
    "fact_recall",
    "hallucinated",
    "token_f1",
]
