"""One evaluation question and its gold, whatever file format it was read from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Question:
    """One question and its gold.

    Attributes:
        answer_groups: every group must be present in the context; within a group any one
            alternative suffices. Empty: the question has no answer string (unanswerable, BEIR).
        evidence_texts: gold evidence passages or sentences (a context node matches one when
            either contains the other, whitespace- and case-normalised).
        evidence_docs: ids of the gold documents (a node matches by its document id).
        probe: made from the documents, not labelled by a person (reported apart).
    """

    id: str
    question: str
    answer_groups: tuple[tuple[str, ...], ...] = ()
    evidence_texts: tuple[str, ...] = ()
    evidence_docs: tuple[str, ...] = ()
    type: str = "single-hop"
    lang: str | None = None
    source: str | None = None
    probe: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def answerable(self) -> bool:
        return bool(self.answer_groups)

    @property
    def has_evidence(self) -> bool:
        return bool(self.evidence_texts or self.evidence_docs)


__all__ = ["Question"]
