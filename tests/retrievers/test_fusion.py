"""Fusion maths against hand-computed values: weighted RRF, min-max and z-score fusion."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_ext_advrag.retrievers.fusion import (
    FusedHit,
    FusionMode,
    LegHit,
    Normalization,
    dedupe_leg,
    fuse,
    fuse_rrf,
    fuse_scores,
    language_factor,
    language_scaled_weights,
    minmax_normalize,
    validate_weights,
    zscore_normalize,
)

DENSE = [LegHit("a", 0.9), LegHit("b", 0.5), LegHit("c", 0.1)]
SPARSE = [LegHit("c", 12.0), LegHit("a", 6.0), LegHit("d", 3.0)]


def scores_of(hits: list[FusedHit]) -> dict[str, float]:
    return {hit.node_id: hit.score for hit in hits}


def test_weighted_rrf_matches_hand_computed_values() -> None:
    hits = fuse_rrf([DENSE, SPARSE], weights=[0.3, 0.7], k=60)
    expected = {
        "a": 0.3 / 61 + 0.7 / 62,  # 0.016208
        "b": 0.3 / 62,  # 0.004839
        "c": 0.3 / 63 + 0.7 / 61,  # 0.016237
        "d": 0.7 / 63,  # 0.011111
    }
    assert scores_of(hits) == pytest.approx(expected, abs=1e-12)
    assert [h.node_id for h in hits] == ["c", "a", "d", "b"]
    # Unweighted RRF ranks "a" first: the weights really change the order.
    assert fuse_rrf([DENSE, SPARSE], k=60)[0].node_id == "a"


def test_rrf_k_is_honoured() -> None:
    hits = fuse_rrf([DENSE, SPARSE], weights=[0.3, 0.7], k=1)
    assert scores_of(hits)["a"] == pytest.approx(0.3 / 2 + 0.7 / 3)
    assert scores_of(hits)["c"] == pytest.approx(0.3 / 4 + 0.7 / 2)


def test_rrf_records_ranks_and_scores_per_leg() -> None:
    by_id = {h.node_id: h for h in fuse_rrf([DENSE, SPARSE])}
    assert by_id["a"].ranks == (1, 2) and by_id["a"].scores == (0.9, 6.0)
    assert by_id["b"].ranks == (2, None) and by_id["b"].scores == (0.5, None)
    assert by_id["d"].ranks == (None, 3)


def test_minmax_fusion_matches_hand_computed_values() -> None:
    hits = fuse_scores([DENSE, SPARSE], normalization="minmax")
    # dense -> a 1, b .5, c 0 ; sparse -> c 1, a 1/3, d 0 ; absent = 0
    expected = {"a": 1 + 1 / 3, "b": 0.5, "c": 1.0, "d": 0.0}
    assert scores_of(hits) == pytest.approx(expected)
    assert [h.node_id for h in hits] == ["a", "c", "b", "d"]


def test_weighted_minmax_fusion() -> None:
    hits = fuse_scores([DENSE, SPARSE], weights=[0.2, 0.8], normalization="minmax")
    expected = {"a": 0.2 + 0.8 / 3, "b": 0.1, "c": 0.8, "d": 0.0}
    assert scores_of(hits) == pytest.approx(expected)
    assert [h.node_id for h in hits] == ["c", "a", "b", "d"]


def test_zscore_fusion_matches_hand_computed_values() -> None:
    hits = fuse_scores([DENSE, SPARSE], normalization="zscore")
    z_dense = 0.4 / math.sqrt(0.32 / 3)  # 1.224745
    std_sparse = math.sqrt(14)  # deviations 5, -1, -4
    expected = {
        "a": z_dense - 1 / std_sparse,
        "b": 0.0 + (-4 / std_sparse - 1),  # absent from sparse: its lowest z (d) - 1
        "c": -z_dense + 5 / std_sparse,
        "d": (-z_dense - 1) - 4 / std_sparse,  # absent from dense: its lowest z (c) - 1
    }
    assert scores_of(hits) == pytest.approx(expected)
    assert [h.node_id for h in hits] == ["a", "c", "b", "d"]


def test_normalizers() -> None:
    assert minmax_normalize([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert minmax_normalize([5.0, 5.0]) == [1.0, 1.0]
    assert minmax_normalize([]) == []
    assert zscore_normalize([1.0, 3.0]) == [-1.0, 1.0]
    assert zscore_normalize([7.0]) == [0.0]
    assert zscore_normalize([]) == []


def test_ties_are_broken_deterministically() -> None:
    hits = fuse_rrf([[LegHit("y", 1.0)], [LegHit("x", 1.0)]])
    assert hits[0].score == hits[1].score
    assert [h.node_id for h in hits] == ["y", "x"]  # same best rank: first leg wins
    flat = fuse_scores([[LegHit("q", 0.5), LegHit("p", 0.5)]])
    assert [h.node_id for h in flat] == ["q", "p"]  # equal normalised scores: better rank
    assert fuse_rrf([DENSE, SPARSE]) == fuse_rrf([DENSE, SPARSE])


def test_a_single_result_still_beats_absent_nodes() -> None:
    lonely = [LegHit("x", 3.0)]
    dense = [LegHit("y", 0.9), LegHit("x", 0.8), LegHit("z", 0.1)]
    for normalization in ("minmax", "zscore"):
        hits = fuse_scores([dense, lonely], normalization=normalization)
        assert hits[0].node_id == "x", normalization
    minmax = scores_of(fuse_scores([dense, lonely]))
    assert minmax["x"] == pytest.approx(0.875 + 1.0) and minmax["y"] == pytest.approx(1.0)


def test_missing_scores_use_reciprocal_rank() -> None:
    hits = fuse_scores([[LegHit("a", None), LegHit("b", None), LegHit("c", None)]])
    assert scores_of(hits) == pytest.approx({"a": 1.0, "b": 0.25, "c": 0.0})


def test_duplicates_within_a_leg_keep_the_first() -> None:
    leg = [LegHit("a", 0.9), LegHit("a", 0.1), LegHit("b", 0.5)]
    assert dedupe_leg(leg) == [LegHit("a", 0.9), LegHit("b", 0.5)]
    by_id = {h.node_id: h for h in fuse_rrf([leg])}
    assert by_id["b"].ranks == (2,)


def test_empty_input() -> None:
    assert fuse_rrf([[], []]) == []
    assert fuse_scores([[], []]) == []
    assert fuse([]) == []
    one_empty = fuse_scores([DENSE, []], normalization="zscore")
    assert [h.node_id for h in one_empty] == ["a", "b", "c"]


def test_dispatch_matches_direct_calls() -> None:
    assert fuse([DENSE, SPARSE], mode="rrf", k=10) == fuse_rrf([DENSE, SPARSE], k=10)
    assert fuse([DENSE, SPARSE], mode=FusionMode.SCORE, normalization=Normalization.ZSCORE) == (
        fuse_scores([DENSE, SPARSE], normalization="zscore")
    )


def test_invalid_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="'median'"):
        fuse([DENSE], mode="median")
    with pytest.raises(ValueError, match="'l2'"):
        fuse_scores([DENSE], normalization="l2")
    with pytest.raises(ValueError, match="-1"):
        fuse_rrf([DENSE], k=-1)
    with pytest.raises(ValueError, match=r"\[1.0\]"):
        validate_weights([1.0], 2)
    with pytest.raises(ValueError, match="-0.5"):
        validate_weights([1.0, -0.5], 2)
    with pytest.raises(ValueError, match="> 0"):
        validate_weights([0.0, 0.0], 2)
    with pytest.raises(ValueError, match="nan"):
        validate_weights([math.nan], 1)
    assert validate_weights(None, 3) == (1.0, 1.0, 1.0)


def test_inputs_are_not_mutated() -> None:
    dense, sparse = list(DENSE), list(SPARSE)
    fuse_scores([dense, sparse], normalization="zscore")
    fuse_rrf([dense, sparse])
    assert dense == DENSE and sparse == SPARSE


legs_strategy = st.lists(
    st.lists(st.tuples(st.sampled_from("abcdefgh"), st.floats(-5, 5, allow_nan=False)), max_size=6),
    min_size=1,
    max_size=3,
)


@settings(max_examples=80, deadline=None)
@given(legs_strategy, st.sampled_from(["rrf", "score"]), st.sampled_from(["minmax", "zscore"]))
def test_every_node_once_sorted_and_order_independent_of_input_copy(
    raw: list[list[tuple[str, float]]], mode: str, normalization: str
) -> None:
    legs = [[LegHit(i, s) for i, s in leg] for leg in raw]
    hits = fuse(legs, mode=mode, normalization=normalization)
    ids = [h.node_id for h in hits]
    assert sorted(ids) == sorted({hit.node_id for leg in legs for hit in leg})
    assert all(a.score >= b.score - 1e-9 for a, b in zip(hits, hits[1:], strict=False))
    assert hits == fuse([list(leg) for leg in legs], mode=mode, normalization=normalization)


def test_language_scaled_weights_by_hand() -> None:
    english_only = (True, False)
    # English query: unchanged; wholly CJK: floor x weight; half CJK: 0.5 + 0.5 * 0.2 = 0.6.
    assert language_scaled_weights((1.0, 1.0), english_only, 0.0, floor=0.2) == (1.0, 1.0)
    assert language_scaled_weights((0.5, 2.0), english_only, 1.0, floor=0.2) == (0.1, 2.0)
    assert language_scaled_weights((1.0, 1.0), english_only, 0.5, floor=0.2) == pytest.approx(
        (0.6, 1.0)
    )
    assert language_scaled_weights((1.0, 1.0), (False, False), 1.0) == (1.0, 1.0)


def test_language_scaled_weights_never_zero_and_reorder_fusion() -> None:
    weights = language_scaled_weights((1.0, 1.0), (True, False), 1.0, floor=0.05)
    assert weights[0] == pytest.approx(0.05) and weights[0] > 0
    # Equal weights: dense's "a" (ranks 1 and 2) beats sparse's "c" (ranks 3 and 1);
    # with the dense leg scaled down, the sparse leg's first result wins.
    assert fuse_rrf([DENSE, SPARSE], (1.0, 1.0), k=60)[0].node_id == "a"
    assert fuse_rrf([DENSE, SPARSE], weights, k=60)[0].node_id == "c"


def test_language_scaled_weights_invalid_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"\[True\]"):
        language_scaled_weights((1.0, 1.0), (True,), 1.0)
    with pytest.raises(ValueError, match="1.5"):
        language_scaled_weights((1.0,), (True,), 1.5)
    with pytest.raises(ValueError, match="-0.5"):
        language_scaled_weights((1.0,), (True,), 1.0, floor=-0.5)


def test_language_factor_by_hand() -> None:
    # r = 1 - max(query share, text share); factor = r + (1 - r) * floor.
    assert language_factor(0.0, 0.0, floor=0.1) == 1.0
    assert language_factor(1.0, 0.0, floor=0.1) == pytest.approx(0.1)
    assert language_factor(0.0, 1.0, floor=0.1) == pytest.approx(0.1)
    assert language_factor(0.5, 0.2, floor=0.1) == pytest.approx(0.55)
    assert language_factor(0.2, 0.8, floor=0.0) == pytest.approx(0.2)
    for bad in ((1.5, 0.0, 0.1), (0.0, -0.1, 0.1), (0.0, 0.0, 2.0)):
        with pytest.raises(ValueError, match=str(max(bad, key=lambda v: abs(v - 0.5)))):
            language_factor(*bad)


def test_node_factors_in_rrf_and_score_fusion_by_hand() -> None:
    dense = [LegHit("a", 0.9), LegHit("b", 0.5), LegHit("c", 0.1)]
    sparse = [LegHit("c", 12.0), LegHit("a", 6.0)]
    factors = [{"a": 0.5}, None]
    # RRF k=0: a = 0.5 / 1 + 1 / 2 = 1.0; b = 1 / 2; c = 1 / 3 + 1 / 1.
    rrf = {h.node_id: h.score for h in fuse_rrf([dense, sparse], k=0, node_factors=factors)}
    assert rrf == pytest.approx({"a": 1.0, "b": 0.5, "c": 4 / 3})
    # min-max: dense a=1, b=0.5, c=0; sparse c=1, a=0. a = 0.5 * 1 + 0 = 0.5.
    score = {h.node_id: h.score for h in fuse_scores([dense, sparse], node_factors=factors)}
    assert score == pytest.approx({"a": 0.5, "b": 0.5, "c": 1.0})
    assert fuse_rrf([dense, sparse], k=0, node_factors=[None, None]) == fuse_rrf(
        [dense, sparse], k=0
    )
    with pytest.raises(ValueError, match="3 entries"):
        fuse_rrf([dense, sparse], node_factors=[None, None, None])
    with pytest.raises(ValueError, match="-1"):
        fuse_scores([dense, sparse], node_factors=[{"a": -1.0}, None])


def test_language_factor_defaults_bounds_and_messages() -> None:
    assert language_factor(0.0) == 1.0  # the passage counts as English unless told otherwise
    assert language_factor(0.5, floor=0.0) == pytest.approx(0.5)
    assert language_factor(1.0, 0.0, floor=1.0) == 1.0  # both bounds of floor are allowed
    with pytest.raises(ValueError, match=r"query_cjk_share must be in \[0, 1\], got 1.5"):
        language_factor(1.5)
    with pytest.raises(ValueError, match=r"text_cjk_share must be in \[0, 1\], got -0.1"):
        language_factor(0.0, -0.1)
    with pytest.raises(ValueError, match=r"floor must be in \[0, 1\], got 1.1"):
        language_factor(0.0, 0.0, floor=1.1)
