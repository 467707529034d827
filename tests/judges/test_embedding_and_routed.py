"""The embedding judge (cosine, calibrated) and the language router."""

from __future__ import annotations

import math

import pytest
from advrag_testing import HashEmbedding

from llama_index_ext_advrag.judges import (
    BaseRelevanceJudge,
    EmbeddingRelevanceJudge,
    Grade,
    GradeLabel,
    LanguageRoutedJudge,
    ScoreCalibration,
)
from llama_index_ext_advrag.judges.routed import pair_language


def test_embedding_judge_cosine_and_calibration() -> None:
    raw = EmbeddingRelevanceJudge(embed_model=HashEmbedding())
    grades = raw.judge("red apple", ["red apple", "blue sky"])
    assert grades[0].raw == pytest.approx(1.0) and grades[0].score == pytest.approx(1.0)
    assert grades[1].raw < 0.5
    calibrated = EmbeddingRelevanceJudge(
        embed_model=HashEmbedding(), calibration=ScoreCalibration(slope=10.0, offset=-5.0)
    )
    again = calibrated.judge("red apple", ["red apple", "blue sky"])
    assert again[0].score == pytest.approx(1 / (1 + math.exp(-5)))  # sigmoid(10 * 1 - 5)
    assert again[1].raw == pytest.approx(grades[1].raw)
    assert calibrated.calibration == ScoreCalibration(10.0, -5.0)
    assert raw.calibration is None


async def test_embedding_judge_async_equals_sync() -> None:
    judge = EmbeddingRelevanceJudge(embed_model=HashEmbedding())
    texts = ["red apple pie", "sky"]
    assert await judge.ajudge("apple", texts) == judge.judge("apple", texts)


class _ConstantJudge(BaseRelevanceJudge):
    value: float = 0.5
    seen: list = []

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self.seen.append(list(texts))
        return [self.grade(self.value) for _ in texts]


def test_pair_language_threshold() -> None:
    assert pair_language("Who?", "Paris is nice.") == "en"
    assert pair_language("首都？", "Paris") == "zh"
    assert pair_language("Who?", "Paris 巴黎", cjk_threshold=0.5) == "en"  # 2 of 7 letters


def test_routed_judge_sends_each_pair_to_its_language() -> None:
    english = _ConstantJudge(name="en-judge", value=0.9, seen=[])
    chinese = _ConstantJudge(name="zh-judge", value=0.2, seen=[])
    judge = LanguageRoutedJudge({"en": english, "zh": chinese})
    texts = ["Paris is the capital.", "巴黎是首都。", "London."]
    grades = judge.judge("What is the capital?", texts)
    assert [g.judge for g in grades] == ["en-judge", "zh-judge", "en-judge"]
    assert english.seen == [["Paris is the capital.", "London."]]
    assert chinese.seen == [["巴黎是首都。"]]
    # a Chinese query sends even English passages to the Chinese judge
    assert {g.judge for g in judge.judge("首都是哪里？", ["Paris."])} == {"zh-judge"}


def test_routed_judge_without_a_language_gives_unknown() -> None:
    judge = LanguageRoutedJudge({"en": _ConstantJudge(seen=[])})
    grades = judge.judge("capital?", ["巴黎是首都。", "Paris"])
    assert grades[0].label is GradeLabel.UNKNOWN and "'zh'" in (grades[0].reason or "")
    assert grades[1].known


async def test_routed_async_equals_sync() -> None:
    judge = LanguageRoutedJudge(
        {"en": _ConstantJudge(value=0.9, seen=[]), "zh": _ConstantJudge(value=0.1, seen=[])}
    )
    texts = ["巴黎是首都。", "Paris", "伦敦"]
    assert await judge.ajudge("capital?", texts) == judge.judge("capital?", texts)


def test_routed_judge_validates() -> None:
    with pytest.raises(ValueError, match="unknown language keys \\['fr'\\]"):
        LanguageRoutedJudge({"fr": _ConstantJudge(seen=[])})
    with pytest.raises(ValueError, match="at least one"):
        LanguageRoutedJudge({})
