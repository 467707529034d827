"""The relevance-judge interface shared by CRAG, Self-RAG and reranking.

A judge scores ``(query, text)`` pairs: for each text a :class:`Grade` whose ``score`` is a
calibrated probability of relevance in [0, 1], or ``None`` when the judge could not tell (an
LLM that timed out or answered nonsense, a text outside the judge's language). Judges work on
batches, sync and async, and a subclass writes ``_judge`` (and ``_ajudge`` when it does native
async I/O); the public methods validate the input and check the output at the judge boundary:
one :class:`Grade` per text, a label of :class:`GradeLabel` (a known string such as
``"relevant"`` is turned into it; anything else is a ``TypeError`` naming the judge class), and
a score that is NaN or outside [0, 1] counts as unknown, with a warning.

Scores from different judges mean the same thing only after calibration
(:class:`ScoreCalibration`, fitted with :func:`~llama_index_ext_advrag.judges.calibration.fit_calibration`):
the raw value a model gives (a cross-encoder logit, a cosine, a yes/no log-odds) is kept in
``Grade.raw`` for inspection.

Example:
    >>> from llama_index_ext_advrag.judges import CrossEncoderRelevanceJudge  # doctest: +SKIP
    >>> judge = CrossEncoderRelevanceJudge()  # doctest: +SKIP
    >>> [g.score for g in judge.judge("capital of France", ["Paris is the capital.", "Cats."])]  # doctest: +SKIP
    [0.99, 0.0]
"""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from llama_index.core.bridge.pydantic import Field, model_validator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import BaseComponent, MetadataMode, NodeWithScore

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.events import GradeRecord, JudgeGradesEvent
from llama_index_ext_advrag.plan import in_daemon_thread
from llama_index_ext_advrag.text import check_text, check_texts

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_DECISION_THRESHOLD = 0.5
# CRAG's thresholds for a judge that carries none of its own (a calibrated probability of
# relevance, not fitted to any data): a judge with a model fixes its own, measured ones.
GENERIC_CRAG_UPPER = 0.5
GENERIC_CRAG_LOWER = 0.1
# Bound on CRAG's log-odds margin (keep_within): beyond ~40 log-odds no score is distinguishable.
MAX_KEEP_WITHIN = 50.0


class GradeLabel(str, Enum):
    """A grade's verdict: the score against the judge's decision threshold, or unknown.

    >>> GradeLabel("relevant") is GradeLabel.RELEVANT
    True
    """

    RELEVANT = "relevant"
    IRRELEVANT = "irrelevant"
    UNKNOWN = "unknown"


_LABELS = {label.value: label for label in GradeLabel}


@dataclass(frozen=True)
class Grade:
    """One judged ``(query, text)`` pair.

    Attributes:
        score: calibrated probability that the text is relevant, in [0, 1]; ``None`` = unknown.
        label: ``relevant`` / ``irrelevant`` (score against the judge's decision threshold) or
            ``unknown`` when ``score`` is ``None``.
            A known label string (``"relevant"``) is turned into the enum member.
        judge: the name of the judge that gave the grade.
        raw: the model's own value before calibration (logit, cosine, yes/no log-odds), if any.
        reason: why a grade is unknown, or a note (e.g. which judge a router chose).

    Example:
        >>> Grade.from_score(0.8, "my-judge")
        Grade(score=0.8, label=<GradeLabel.RELEVANT: 'relevant'>, judge='my-judge', raw=None, reason=None)
        >>> Grade.unknown("my-judge", "timeout").label
        <GradeLabel.UNKNOWN: 'unknown'>
    """

    score: float | None
    label: GradeLabel
    judge: str
    raw: float | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        # A label given as its string ("relevant") is the enum member; anything else is left
        # for the judge boundary to refuse with the judge's name.
        if isinstance(self.label, str) and not isinstance(self.label, GradeLabel):
            label = _LABELS.get(self.label.strip().casefold())
            if label is not None:
                object.__setattr__(self, "label", label)

    @property
    def known(self) -> bool:
        return self.score is not None

    def to_dict(self) -> GradeRecord:
        """A JSON-ready dict (label as its string value)."""
        return {
            "score": self.score,
            "label": self.label.value,
            "judge": self.judge,
            "raw": self.raw,
            "reason": self.reason,
        }

    @classmethod
    def unknown(cls, judge: str, reason: str, raw: float | None = None) -> Grade:
        """An unknown grade recording ``reason`` (a failure, a timeout, an unparsable reply)."""
        return cls(score=None, label=GradeLabel.UNKNOWN, judge=judge, raw=raw, reason=reason)

    @classmethod
    def from_score(
        cls,
        score: float,
        judge: str,
        raw: float | None = None,
        threshold: float = DEFAULT_DECISION_THRESHOLD,
        reason: str | None = None,
    ) -> Grade:
        """A known grade; ``score`` is clipped to [0, 1] and a NaN becomes unknown."""
        if math.isnan(score):
            return cls.unknown(judge, "score is NaN", raw=raw)
        score = min(1.0, max(0.0, float(score)))
        label = GradeLabel.RELEVANT if score >= threshold else GradeLabel.IRRELEVANT
        return cls(score=score, label=label, judge=judge, raw=raw, reason=reason)


def sigmoid(value: float) -> float:
    """The logistic function, stable for large ``|value|``."""
    if value >= 0:
        return 1.0 / (1.0 + math.exp(-value))
    exp = math.exp(value)
    return exp / (1.0 + exp)


@dataclass(frozen=True)
class ScoreCalibration:
    """Map a raw model value to a probability: ``sigmoid(slope * raw + offset)``.

    ``ScoreCalibration()`` (slope 1, offset 0) is the plain sigmoid a cross-encoder with one
    logit is usually read through. ``fit_calibration`` fits slope and offset on labelled pairs
    (Platt scaling), which makes 0.5 the point where a relevant and an irrelevant text are
    equally likely on that sample.
    """

    slope: float = 1.0
    offset: float = 0.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.slope) and self.slope > 0):
            raise ValueError(f"slope must be a positive finite number, got {self.slope!r}")
        if not math.isfinite(self.offset):
            raise ValueError(f"offset must be finite, got {self.offset!r}")

    def __call__(self, raw: float) -> float:
        return sigmoid(self.slope * raw + self.offset)

    def inverse(self, probability: float) -> float:
        """The raw value whose calibrated score is ``probability`` (in (0, 1))."""
        if not 0.0 < probability < 1.0:
            raise ValueError(f"probability must lie in (0, 1), got {probability!r}")
        return (math.log(probability / (1.0 - probability)) - self.offset) / self.slope

    def to_dict(self) -> dict[str, float]:
        return {"slope": self.slope, "offset": self.offset}


def add_calibration_fields(data: dict[str, Any], calibration: ScoreCalibration | None) -> None:
    """Put ``calibration`` into a judge's ``calibration_slope`` / ``calibration_offset``
    settings (explicit settings in ``data`` win), so it round-trips through ``to_dict``."""
    if calibration is not None:
        data.setdefault("calibration_slope", calibration.slope)
        data.setdefault("calibration_offset", calibration.offset)


class BaseRelevanceJudge(PromptMixin, BaseComponent, RefusesUnknownSettings):
    """Score ``(query, text)`` pairs in [0, 1]; one :class:`Grade` per text, in input order.

    Subclasses implement ``_judge`` and, when they do native async I/O, ``_ajudge`` (by default
    ``_ajudge`` runs ``_judge`` in a worker thread so a CPU-bound model does not block the event
    loop). A judge may raise when its model fails; callers such as ``CRAGPostprocessor`` catch
    that and keep the nodes as retrieved. Judges that talk to an LLM turn failures into unknown
    grades instead, and list their prompts through ``get_prompts()`` (a judge is a
    ``PromptMixin``; one without prompts lists none). Each call opens an instrumentation span
    and emits a :class:`~llama_index_ext_advrag.events.JudgeGradesEvent`.

    Example:
        >>> class KeywordJudge(BaseRelevanceJudge):
        ...     def _judge(self, query, texts):
        ...         words = set(query.lower().split())
        ...         return [self.grade(float(bool(words & set(t.lower().split())))) for t in texts]
        >>> grades = KeywordJudge(name="keywords").judge("paris weather", ["Paris is sunny.", "Cats."])
        >>> [(g.label.value, g.judge) for g in grades]
        [('relevant', 'keywords'), ('irrelevant', 'keywords')]
    """

    name: str = Field(default="judge", min_length=1, description="Recorded in every grade.")
    decision_threshold: float = Field(
        default=DEFAULT_DECISION_THRESHOLD,
        ge=0.0,
        le=1.0,
        description="Score at or above which a grade is labelled relevant.",
    )
    default_upper: float = Field(
        default=GENERIC_CRAG_UPPER,
        ge=0.0,
        le=1.0,
        description="CRAG's upper threshold for this judge's scores (a node at or above it "
        "is confident); CRAGPostprocessor uses it unless given its own.",
    )
    default_lower: float = Field(
        default=GENERIC_CRAG_LOWER,
        ge=0.0,
        le=1.0,
        description="CRAG's lower threshold for this judge's scores (a node below it is "
        "irrelevant); at most default_upper.",
    )
    default_keep_within: float | None = Field(
        default=None,
        gt=0.0,
        le=MAX_KEEP_WITHIN,
        description="CRAG's margin for this judge's scores: a retrieved node graded below "
        "upper and more than this many log-odds below the best-graded one is dropped; None: "
        "no margin (only the thresholds).",
    )

    @model_validator(mode="after")
    def _check_default_thresholds(self) -> BaseRelevanceJudge:
        if self.default_lower > self.default_upper:
            raise ValueError(
                f"default_lower ({self.default_lower}) must not exceed default_upper "
                f"({self.default_upper})"
            )
        return self

    @classmethod
    def class_name(cls) -> str:
        return "BaseRelevanceJudge"

    @dispatcher.span
    def judge(self, query: str, texts: Sequence[str]) -> list[Grade]:
        """Grade every text of ``texts`` against ``query`` (``[]`` for no texts).

        Lone surrogates (which no model can encode) become U+FFFD, with a warning; a blank
        query or text gets an unknown grade without asking the model (nothing to judge).
        """
        query, texts = _check_input(query, texts, self.name)
        readable = self._readable(query, texts)
        grades = self._judge(query, [texts[i] for i in readable]) if readable else []
        return self._finish(query, texts, readable, grades)

    @dispatcher.span
    async def ajudge(self, query: str, texts: Sequence[str]) -> list[Grade]:
        """Async :meth:`judge`."""
        query, texts = _check_input(query, texts, self.name)
        readable = self._readable(query, texts)
        grades = await self._ajudge(query, [texts[i] for i in readable]) if readable else []
        return self._finish(query, texts, readable, grades)

    def _finish(
        self, query: str, texts: list[str], readable: list[int], grades: list[Grade]
    ) -> list[Grade]:
        merged = self._merge(query, texts, readable, self._check_output(grades, readable))
        dispatcher.event(
            JudgeGradesEvent(judge=self.name, query=query, grades=[g.to_dict() for g in merged])
        )
        return merged

    # A judge without prompts; an LLM judge lists its own, a router its judges'.
    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        return None

    def _get_prompt_modules(self) -> PromptMixinType:
        return {}

    @staticmethod
    def _readable(query: str, texts: list[str]) -> list[int]:
        """Indices of the texts worth a model call: non-blank, against a non-blank query."""
        if not query.strip():
            return []
        return [i for i, text in enumerate(texts) if text.strip()]

    def _merge(
        self, query: str, texts: list[str], readable: list[int], grades: list[Grade]
    ) -> list[Grade]:
        """One grade per text: the model's for the readable ones, unknown for blank ones."""
        reason = "empty query" if not query.strip() else "empty text"
        merged = [Grade.unknown(self.name, reason) for _ in texts]
        for index, grade in zip(readable, grades, strict=True):
            merged[index] = grade
        return merged

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise NotImplementedError

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        return await in_daemon_thread(lambda: self._judge(query, texts))

    def grade(self, score: float, raw: float | None = None, reason: str | None = None) -> Grade:
        """A known grade from this judge (label against ``decision_threshold``)."""
        return Grade.from_score(score, self.name, raw, self.decision_threshold, reason)

    def _check_output(self, grades: list[Grade], readable: list[int]) -> list[Grade]:
        """The judge boundary: one :class:`Grade` per judged text (``readable``: their indices
        in the caller's texts), each labelled with a :class:`GradeLabel`; a score that is not a
        number in [0, 1] becomes unknown (kept)."""
        if len(grades) != len(readable):
            raise RuntimeError(
                f"judge {self.name!r} returned {len(grades)} grades for {len(readable)} texts"
            )
        return [self._check_grade(i, grade) for i, grade in zip(readable, grades, strict=True)]

    def _check_grade(self, index: int, grade: Any) -> Grade:
        where = f"{type(self).__name__} (judge {self.name!r}) returned"
        if not isinstance(grade, Grade):
            raise TypeError(
                f"{where} {grade!r} ({type(grade).__name__}) for text {index}; allowed: a "
                "Grade (build it with judge.grade(score) or Grade.unknown(name, reason))"
            )
        if not isinstance(grade.label, GradeLabel):
            raise TypeError(
                f"{where} the label {grade.label!r} for text {index}; allowed: a GradeLabel "
                f"or one of {sorted(_LABELS)}"
            )
        score = grade.score
        if score is None:
            return grade
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            raise TypeError(
                f"{where} the score {score!r} ({type(score).__name__}) for text {index}; "
                "allowed: a number in [0, 1] or None (unknown)"
            )
        if not (math.isfinite(score) and 0.0 <= score <= 1.0):
            logger.warning(
                "%s the score %r for text %d, outside [0, 1]: counted as unknown",
                where,
                score,
                index,
            )
            reason = f"score {score!r} is not in [0, 1]"
            return Grade.unknown(grade.judge, reason, raw=grade.raw)
        return grade


def node_texts(nodes: Sequence[NodeWithScore]) -> list[str]:
    """What a judge reads for each node: its content without metadata."""
    return [hit.node.get_content(MetadataMode.NONE) for hit in nodes]


def _check_input(query: str, texts: Sequence[str], judge: str) -> tuple[str, list[str]]:
    """The query and texts checked, with lone surrogates replaced (see :meth:`judge`)."""
    query, count = check_text(query, "query")
    checked, more = check_texts(texts)
    count += more
    if count:
        logger.warning(
            "judge %r: the query or texts hold %d lone surrogate code points, which no model "
            "can encode; replaced with U+FFFD",
            judge,
            count,
        )
    return query, checked


__all__ = [
    "DEFAULT_DECISION_THRESHOLD",
    "GENERIC_CRAG_LOWER",
    "GENERIC_CRAG_UPPER",
    "BaseRelevanceJudge",
    "Grade",
    "GradeLabel",
    "ScoreCalibration",
    "add_calibration_fields",
    "node_texts",
    "sigmoid",
]
