"""``fuse`` hands every setting to the fusion it dispatches to (weights, node factors, k,
normalisation), names a bad mode or normalisation, and score fusion carries on past an empty leg
(kills the mutants of retrievers/fusion.py that test_fusion.py leaves)."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.retrievers.fusion import LegHit, fuse, fuse_rrf, fuse_scores

LEGS = [
    [LegHit("a", 0.9), LegHit("b", 0.5), LegHit("c", 0.1)],
    [LegHit("c", 12.0), LegHit("d", 6.0), LegHit("a", 3.0)],
]
FACTORS = [{"a": 0.1, "b": 1.0, "c": 1.0, "d": 1.0}, None]


def scores(hits) -> list[tuple[str, float]]:
    return [(h.node_id, round(h.score, 9)) for h in hits]


@pytest.mark.parametrize("normalization", ["minmax", "zscore"])
def test_score_fusion_gets_every_setting(normalization: str) -> None:
    fused = fuse(LEGS, "score", (2.0, 1.0), normalization=normalization, node_factors=FACTORS)
    assert fused == fuse_scores(LEGS, (2.0, 1.0), normalization, FACTORS)
    assert scores(fused) != scores(fuse(LEGS, "score", normalization=normalization))
    assert scores(fused) != scores(fuse(LEGS, "score", (2.0, 1.0), normalization=normalization))
    unweighted = fuse(LEGS, "score", normalization=normalization, node_factors=FACTORS)
    assert scores(fused) != scores(unweighted)


def test_rrf_gets_every_setting() -> None:
    fused = fuse(LEGS, "rrf", (2.0, 1.0), k=1, node_factors=FACTORS)
    assert fused == fuse_rrf(LEGS, (2.0, 1.0), 1, FACTORS)
    assert scores(fused) != scores(fuse(LEGS, "rrf", k=1, node_factors=FACTORS))
    assert scores(fused) != scores(fuse(LEGS, "rrf", (2.0, 1.0), k=1))


def test_bad_names_are_named() -> None:
    with pytest.raises(ValueError) as error:
        fuse(LEGS, "best")
    assert str(error.value) == "mode='best' is not one of: rrf, score"
    with pytest.raises(ValueError) as error:
        fuse(LEGS, "score", normalization="l2")
    assert str(error.value) == "normalization='l2' is not one of: minmax, zscore"


@pytest.mark.parametrize("normalization", ["minmax", "zscore"])
def test_score_fusion_carries_on_past_an_empty_leg(normalization: str) -> None:
    fused = fuse([[], *LEGS], "score", normalization=normalization)
    assert scores(fused) == scores(fuse(LEGS, "score", normalization=normalization))
