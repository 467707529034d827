"""Route each pair to the judge for its language, by the CJK share of the query and the text.

A pair is Chinese (``"zh"``) when the query or the text has a CJK share of at least
``cjk_threshold`` (the shared :func:`~llama_index_ext_advrag.text.words.cjk_share`), else English
(``"en"``). So an English-only cross-encoder never sees Chinese text, in either slot. A pair
whose language has no judge gets an unknown grade.

Each judge carries its own CRAG thresholds (``default_upper`` / ``default_lower``), so the
router puts every judge's scores on one scale: a score is mapped piecewise linearly so that
its judge's ``lower`` and ``upper`` land on the router's (:func:`align_score`; the order of
a judge's scores is kept and ``Grade.raw`` still holds the model's value). The router's own
thresholds are its English judge's unless given (the Chinese judge's when there is no English
one), so CRAG with the router applies each language's calibrated thresholds. Its log-odds
margin (``default_keep_within``) is likewise its English judge's unless given, applied on the
router's scale.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.prompts.mixin import PromptMixinType

from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.text.words import cjk_share

logger = logging.getLogger(__name__)

DEFAULT_CJK_THRESHOLD = 0.3
LANGUAGES = ("en", "zh")


def pair_language(query: str, text: str, cjk_threshold: float = DEFAULT_CJK_THRESHOLD) -> str:
    """``"zh"`` when the query or the text is at least ``cjk_threshold`` CJK, else ``"en"``.

    >>> pair_language("What is the capital?", "北京是首都。"), pair_language("Who?", "Paris.")
    ('zh', 'en')
    """
    return "zh" if max(cjk_share(query), cjk_share(text)) >= cjk_threshold else "en"


def align_score(score: float, source: tuple[float, float], target: tuple[float, float]) -> float:
    """Map ``score`` piecewise linearly so that ``source``'s ``(lower, upper)`` lands on
    ``target``'s: [0, lower], [lower, upper] and [upper, 1] each map onto their counterpart.

    >>> align_score(0.2, (0.2, 0.7), (0.1, 0.6)), align_score(0.7, (0.2, 0.7), (0.1, 0.6))
    (0.1, 0.6)
    >>> round(align_score(0.45, (0.2, 0.7), (0.1, 0.6)), 3), align_score(1.0, (0.2, 0.7), (0.1, 0.6))
    (0.35, 1.0)
    """
    (lower, upper), (to_lower, to_upper) = source, target
    if score >= upper:
        if upper >= 1.0:
            return to_upper
        return to_upper + (score - upper) * (1.0 - to_upper) / (1.0 - upper)
    if score >= lower:  # here lower < upper
        return to_lower + (score - lower) * (to_upper - to_lower) / (upper - lower)
    return score * to_lower / lower  # lower > 0 here


class LanguageRoutedJudge(BaseRelevanceJudge):
    """Grade each pair with the judge of its language.

    Args:
        judges: ``{"en": judge, "zh": judge}`` (either may be missing).
        cjk_threshold: CJK share of the query or text from which a pair is Chinese.

    Thresholds: ``default_upper`` / ``default_lower`` (and ``default_keep_within``) are the
    English judge's unless given; each judge's scores are aligned to them (see the module
    docstring).

    Raises:
        ValueError: an unknown language key or no judge at all.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> from llama_index.core.llms import MockLLM
        >>> from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge, LLMRelevanceJudge
        >>> judge = LanguageRoutedJudge(  # e.g. {"en": CrossEncoderRelevanceJudge(), "zh": e5 judge}
        ...     {"en": EmbeddingRelevanceJudge(embed_model=MockEmbedding(embed_dim=8)),
        ...      "zh": LLMRelevanceJudge(llm=MockLLM())})
        >>> [g.label.value for g in judge.judge("首都是哪里", ["北京是中国的首都。"])]  # routed to "zh"
        ['unknown']
    """

    name: str = Field(default="language-routed", min_length=1)
    cjk_threshold: float = Field(default=DEFAULT_CJK_THRESHOLD, gt=0.0, le=1.0)

    _judges: dict[str, BaseRelevanceJudge] = PrivateAttr(default_factory=dict)

    def __init__(self, judges: dict[str, BaseRelevanceJudge], **data: Any) -> None:
        unknown = sorted(set(judges) - set(LANGUAGES))
        if unknown:
            raise ValueError(f"unknown language keys {unknown}; allowed: {list(LANGUAGES)}")
        if not judges:
            raise ValueError("judges must map at least one of 'en', 'zh' to a judge")
        reference = judges.get("en") or judges["zh"]
        data.setdefault("default_upper", reference.default_upper)
        data.setdefault("default_lower", reference.default_lower)
        data.setdefault("default_keep_within", reference.default_keep_within)
        super().__init__(**data)
        self._judges = dict(judges)

    @classmethod
    def class_name(cls) -> str:
        return "LanguageRoutedJudge"

    @property
    def judges(self) -> dict[str, BaseRelevanceJudge]:
        return dict(self._judges)

    def _get_prompt_modules(self) -> PromptMixinType:
        """The prompts of the judges it routes to, under their language (``"zh:prompt"``)."""
        return dict(self._judges)

    def _route(self, query: str, texts: list[str]) -> dict[str, list[int]]:
        groups: dict[str, list[int]] = {}
        for index, text in enumerate(texts):
            groups.setdefault(pair_language(query, text, self.cjk_threshold), []).append(index)
        return groups

    def _assemble(
        self, texts: list[str], groups: dict[str, list[int]], results: dict[str, list[Grade]]
    ) -> list[Grade]:
        grades: list[Grade | None] = [None] * len(texts)
        for language, indices in groups.items():
            found = results.get(language)
            for position, index in enumerate(indices):
                grades[index] = (
                    self._aligned(language, found[position])
                    if found is not None
                    else Grade.unknown(self.name, f"no judge for language {language!r}")
                )
        return [g for g in grades if g is not None]

    def _aligned(self, language: str, grade: Grade) -> Grade:
        """``grade`` with its score on the router's threshold scale (unknown: unchanged)."""
        judge = self._judges[language]
        source = (judge.default_lower, judge.default_upper)
        target = (self.default_lower, self.default_upper)
        if grade.score is None or source == target:
            return grade
        score = align_score(grade.score, source, target)
        note = f"{judge.name} score {grade.score:.4g} aligned to the router's thresholds"
        label = self.grade(score).label
        return replace(grade, score=score, label=label, reason=grade.reason or note)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        groups = self._route(query, texts)
        results = {
            language: self._judges[language].judge(query, [texts[i] for i in indices])
            for language, indices in groups.items()
            if language in self._judges
        }
        return self._assemble(texts, groups, results)

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        groups = self._route(query, texts)
        languages = [language for language in groups if language in self._judges]
        outputs = await asyncio.gather(
            *(
                self._judges[lang].ajudge(query, [texts[i] for i in groups[lang]])
                for lang in languages
            )
        )
        return self._assemble(texts, groups, dict(zip(languages, outputs, strict=True)))


__all__ = ["DEFAULT_CJK_THRESHOLD", "LanguageRoutedJudge", "align_score", "pair_language"]
