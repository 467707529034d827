"""Answer coverage: whether the gold answer strings occur in the context handed to the LLM.

Answer coverage@k: the gold answer string (whitespace-normalised, case-folded) occurs in the
context finally handed to the LLM. Always report it with the mean context size in tokens, since
a larger context trivially raises coverage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from llama_index_ext_advrag.text.charsets import CJK_TEXT

_SPACE = re.compile(r"\s+")
# Between two CJK characters whitespace carries no meaning (hard-wrapped Chinese text).
_CJK_GAP = re.compile(rf"(?<=[{CJK_TEXT}])\s+(?=[{CJK_TEXT}])")


def normalize_for_match(text: str) -> str:
    """Case-fold and collapse whitespace (removed entirely between CJK characters)."""
    text = _CJK_GAP.sub("", text.casefold())
    return _SPACE.sub(" ", text).strip()


def answer_covered(context: str, answers: Sequence[str], require_all: bool = True) -> bool:
    """Whether the gold answer strings occur in ``context``.

    Args:
        context: the text handed to the LLM.
        answers: gold answer strings. A question whose answer spans two sentences lists both parts,
            so by default every part must be present.
        require_all: ``False`` treats ``answers`` as alternatives (any one suffices).

    Returns:
        bool: ``False`` for an empty ``answers`` list (nothing to cover).
    """
    if not answers:
        return False
    haystack = normalize_for_match(context)
    hits = (normalize_for_match(answer) in haystack for answer in answers if answer.strip())
    return all(hits) if require_all else any(hits)
