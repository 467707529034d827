"""HybridFusionRetriever: fusion of legs, traces, degradation, concurrency, config round trip."""

from __future__ import annotations

import asyncio
import logging

import pytest
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.retrievers import HybridFusionRetriever, JiebaBM25Retriever
from llama_index_ext_advrag.retrievers.fusion import FusionMode, Normalization
from llama_index_ext_advrag.retrievers.hybrid import with_top_k
from llama_index_ext_advrag.trace import TRACE_KEY


class ListRetriever(BaseRetriever):
    """Returns fixed results (the same objects every time), honouring similarity_top_k."""

    def __init__(self, results: list[NodeWithScore], similarity_top_k: int = 100) -> None:
        self.results = results
        self.similarity_top_k = similarity_top_k
        self.calls = 0
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.calls += 1
        return self.results[: self.similarity_top_k]


class FailingRetriever(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise RuntimeError("leg down")


class HandshakeRetriever(BaseRetriever):
    """Finishes only when its partner has started: sequential legs would dead-lock."""

    def __init__(self, mine: asyncio.Event, partner: asyncio.Event, results) -> None:
        self.mine, self.partner, self.results = mine, partner, results
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self.results

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.mine.set()
        await asyncio.wait_for(self.partner.wait(), timeout=5)
        return self.results


def hits(pairs: list[tuple[str, float]]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=f"text {i}", id_=i), score=s) for i, s in pairs]


DENSE = hits([("a", 0.9), ("b", 0.5), ("c", 0.1)])
SPARSE = hits([("c", 12.0), ("a", 6.0), ("d", 3.0)])


def ids(results) -> list[str]:
    return [r.node.node_id for r in results]


def test_defaults() -> None:
    hybrid = HybridFusionRetriever([ListRetriever(DENSE), ListRetriever(SPARSE)])
    assert hybrid.mode is FusionMode.RRF and hybrid.k == 60
    assert hybrid.normalization is Normalization.MINMAX
    assert hybrid.similarity_top_k == 10 and hybrid.effective_leg_top_k == 30
    assert hybrid.weights == (1.0, 1.0)
    assert hybrid.leg_names == ["ListRetriever", "ListRetriever"]
    assert hybrid.english_only_legs == () and hybrid.cjk_weight_floor == 0.0
    assert hybrid.node_language is True
    assert hybrid.query_weights("潜伏期有多长") == ((1.0, 1.0), None)
    assert HybridFusionRetriever.class_name() == "HybridFusionRetriever"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"mode": "max"}, "'max'"),
        ({"normalization": "l2"}, "'l2'"),
        ({"weights": [1.0]}, r"\[1.0\]"),
        ({"weights": [1.0, -2.0]}, "-2.0"),
        ({"k": -5}, "-5"),
        ({"similarity_top_k": 0}, "0"),
        ({"leg_top_k": 0}, "0"),
        ({"leg_names": ["only"]}, "only"),
        ({"leg_names": ["dense", "bm25"], "english_only_legs": ["sparse"]}, "sparse"),
        ({"cjk_weight_floor": -0.1}, "cjk_weight_floor"),
        ({"cjk_weight_floor": 1.5}, "cjk_weight_floor"),
    ],
)
def test_invalid_arguments_name_the_value(kwargs, named) -> None:
    with pytest.raises(ValueError, match=named):
        HybridFusionRetriever([ListRetriever(DENSE), ListRetriever(SPARSE)], **kwargs)


def test_no_legs_rejected() -> None:
    with pytest.raises(ValueError, match="at least one"):
        HybridFusionRetriever([])


def test_weighted_rrf_order_scores_and_trace() -> None:
    hybrid = HybridFusionRetriever(
        [ListRetriever(DENSE), ListRetriever(SPARSE)],
        weights=[0.3, 0.7],
        leg_names=["dense", "bm25"],
    )
    results = hybrid.retrieve("q")
    assert ids(results) == ["c", "a", "d", "b"]
    assert results[0].score == pytest.approx(0.3 / 63 + 0.7 / 61)
    trace = results[1].node.metadata[TRACE_KEY]["hybrid_fusion"]
    assert trace["mode"] == "rrf"
    assert trace["legs"] == [
        {"leg": "dense", "rank": 1, "score": 0.9},
        {"leg": "bm25", "rank": 2, "score": 6.0},
    ]
    assert results[3].node.metadata[TRACE_KEY]["hybrid_fusion"]["legs"][1]["rank"] is None


@pytest.mark.parametrize(
    ("normalization", "expected"),
    [("minmax", ["a", "c", "b", "d"]), ("zscore", ["a", "c", "b", "d"])],
)
def test_score_mode(normalization, expected) -> None:
    hybrid = HybridFusionRetriever(
        [ListRetriever(DENSE), ListRetriever(SPARSE)], mode="score", normalization=normalization
    )
    results = hybrid.retrieve("q")
    assert ids(results) == expected
    if normalization == "minmax":
        assert results[0].score == pytest.approx(1 + 1 / 3)


def test_inputs_never_mutated() -> None:
    before = [(r.node.node_id, r.score, dict(r.node.metadata)) for r in DENSE + SPARSE]
    HybridFusionRetriever([ListRetriever(DENSE), ListRetriever(SPARSE)], mode="score").retrieve("q")
    assert [(r.node.node_id, r.score, dict(r.node.metadata)) for r in DENSE + SPARSE] == before


def test_similarity_top_k_and_leg_over_fetch() -> None:
    dense = ListRetriever(DENSE, similarity_top_k=1)
    hybrid = HybridFusionRetriever([dense, ListRetriever(SPARSE)], similarity_top_k=2, leg_top_k=2)
    results = hybrid.retrieve("q")
    assert len(results) == 2
    assert dense.similarity_top_k == 1  # the caller's leg is not modified
    # dense leg over-fetched 2 (a, b), sparse 2 (c, a): d was never fetched
    traces = [r.node.metadata[TRACE_KEY]["hybrid_fusion"] for r in results]
    assert ids(results) == ["a", "c"] and traces[0]["legs"][1]["rank"] == 2
    assert "d" not in ids(hybrid.retrieve("q"))


def test_with_top_k_copies() -> None:
    leg = ListRetriever(DENSE, similarity_top_k=1)
    clone = with_top_k(leg, 7)
    assert clone is not leg and clone.similarity_top_k == 7 and leg.similarity_top_k == 1  # type: ignore[attr-defined]
    failing = FailingRetriever()
    assert with_top_k(failing, 3) is failing


def test_failed_leg_degrades_with_warning(caplog) -> None:
    hybrid = HybridFusionRetriever(
        [FailingRetriever(), ListRetriever(SPARSE)], leg_names=["d", "s"]
    )
    with caplog.at_level(logging.WARNING):
        results = hybrid.retrieve("q")
    assert ids(results) == ["c", "a", "d"]
    assert "leg d failed" in caplog.text
    assert results[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["degraded"][0]["leg"] == "d"


def test_empty_leg_degrades_with_warning(caplog) -> None:
    hybrid = HybridFusionRetriever([ListRetriever(DENSE), ListRetriever([])], mode="score")
    with caplog.at_level(logging.WARNING):
        results = hybrid.retrieve("q")
    assert ids(results) == ["a", "b", "c"]
    assert "returned nothing" in caplog.text


def test_all_legs_empty_or_failing() -> None:
    assert HybridFusionRetriever([ListRetriever([]), ListRetriever([])]).retrieve("q") == []
    with pytest.raises(RuntimeError, match="leg down"):
        HybridFusionRetriever([FailingRetriever(), FailingRetriever()]).retrieve("q")


async def test_async_runs_legs_concurrently_and_matches_sync() -> None:
    first, second = asyncio.Event(), asyncio.Event()
    legs = [HandshakeRetriever(first, second, DENSE), HandshakeRetriever(second, first, SPARSE)]
    hybrid = HybridFusionRetriever(legs, weights=[0.3, 0.7])
    asynchronous = await hybrid.aretrieve("q")
    sync = hybrid.retrieve("q")
    assert [(r.node.node_id, r.score) for r in asynchronous] == [
        (r.node.node_id, r.score) for r in sync
    ]


async def test_async_failed_leg_degrades() -> None:
    hybrid = HybridFusionRetriever([ListRetriever(DENSE), FailingRetriever()])
    assert ids(await hybrid.aretrieve("q")) == ["a", "b", "c"]


def test_config_round_trip() -> None:
    legs = [ListRetriever(DENSE), ListRetriever(SPARSE)]
    hybrid = HybridFusionRetriever(
        legs, weights=[0.2, 0.8], mode="score", normalization="zscore", k=10, similarity_top_k=3
    )
    data = hybrid.to_dict()
    assert data["mode"] == "score" and data["weights"] == [0.2, 0.8]
    again = HybridFusionRetriever.from_dict(data, retrievers=legs)
    assert again.to_dict() == hybrid.to_dict()
    assert ids(again.retrieve("q")) == ids(hybrid.retrieve("q"))
    assert data["class_name"] == "HybridFusionRetriever"


def test_english_only_leg_weight_follows_the_query_language() -> None:
    legs = [ListRetriever(DENSE), ListRetriever(SPARSE)]
    plain = HybridFusionRetriever(legs, leg_names=["dense", "bm25"])
    aware = HybridFusionRetriever(
        legs,
        leg_names=["dense", "bm25"],
        english_only_legs=["dense"],
        cjk_weight_floor=0.05,
        node_language=False,
    )
    # English query: weights untouched, same ranking as without the option ("a" first).
    assert aware.query_weights("how long is the incubation period") == (
        (1.0, 1.0),
        {"cjk_share": 0.0, "weights": [1.0, 1.0]},
    )
    assert ids(aware.retrieve("how long")) == ids(plain.retrieve("how long"))
    assert ids(plain.retrieve("潜伏期有多长"))[0] == "a"
    # Chinese query: dense weight 0.05, the BM25 leg's first result "c" leads.
    results = aware.retrieve("潜伏期有多长")
    assert ids(results)[0] == "c"
    language = results[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["language"]
    assert language["cjk_share"] == 1.0
    assert language["weights"] == pytest.approx([0.05, 1.0])
    # Mixed query: 3 CJK characters of 6 -> dense weight 0.5 + 0.5 * 0.05.
    weights, _ = aware.query_weights("NBA冠军是")
    assert weights == pytest.approx((0.525, 1.0))


async def test_english_only_legs_async_matches_sync() -> None:
    legs = [ListRetriever(DENSE), ListRetriever(SPARSE)]
    aware = HybridFusionRetriever(legs, leg_names=["dense", "bm25"], english_only_legs=["dense"])
    sync = aware.retrieve("潜伏期有多长")
    asynchronous = await aware.aretrieve("潜伏期有多长")
    assert ids(sync) == ids(asynchronous)
    assert [r.score for r in sync] == pytest.approx([r.score for r in asynchronous])


def test_config_round_trip_with_english_only_legs() -> None:
    legs = [ListRetriever(DENSE), ListRetriever(SPARSE)]
    names = ["dense", "bm25"]
    hybrid = HybridFusionRetriever(
        legs, leg_names=names, english_only_legs=["dense"], cjk_weight_floor=0.3
    )
    data = hybrid.to_dict()
    assert data["english_only_legs"] == ["dense"] and data["cjk_weight_floor"] == 0.3
    assert data["leg_names"] == names  # the leg names travel with the settings
    again = HybridFusionRetriever.from_dict(data, retrievers=legs)
    assert again.to_dict() == hybrid.to_dict()
    assert ids(again.retrieve("潜伏期")) == ids(hybrid.retrieve("潜伏期"))
    with pytest.raises(ValueError, match="dense"):
        HybridFusionRetriever.from_dict({**data, "leg_names": ["a", "b"]}, retrievers=legs)


def test_with_real_bm25_leg_on_chinese() -> None:
    nodes = [
        TextNode(text="埃隆·马斯克在2022年成为世界首富。", id_="musk"),
        TextNode(text="新冠病毒的潜伏期一般为三到七天。", id_="covid"),
        TextNode(text="Masks reduce the spread of viruses.", id_="masks"),
    ]
    dense = ListRetriever(hits([("masks", 0.8), ("covid", 0.7), ("musk", 0.1)]))
    hybrid = HybridFusionRetriever([dense, JiebaBM25Retriever(nodes)], weights=[0.2, 0.8], k=1)
    assert ids(hybrid.retrieve("潜伏期有多长"))[0] == "covid"


def test_from_defaults_builds_dense_and_bm25_legs() -> None:
    from advrag_testing import HashEmbedding
    from llama_index.core import VectorStoreIndex

    nodes = [
        TextNode(text="新冠病毒的潜伏期一般为三到七天。", id_="covid"),
        TextNode(text="Cats purr when they are content.", id_="cats"),
    ]
    index = VectorStoreIndex(nodes, embed_model=HashEmbedding(dim=32))
    hybrid = HybridFusionRetriever.from_defaults(index, nodes=nodes, similarity_top_k=1)
    assert hybrid.leg_names == ["dense", "bm25"]
    assert ids(hybrid.retrieve("潜伏期")) == ["covid"]
    with pytest.raises(ValueError, match="neither"):
        HybridFusionRetriever.from_defaults(index)


def cjk_hits(pairs: list[tuple[str, float, str]]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=t, id_=i), score=s) for i, s, t in pairs]


def test_node_language_scales_the_dense_term_per_candidate_by_hand() -> None:
    # Dense ranks the English passage "en" first, then the Chinese "zh1"; BM25 ranks "zh2",
    # then "zh1". English query over these nodes: "en" keeps its full dense term.
    dense = ListRetriever(
        cjk_hits([("en", 0.9, "Masks reduce spread."), ("zh1", 0.8, "潜伏期三到七天")])
    )
    bm25 = ListRetriever(
        cjk_hits([("zh2", 5.0, "潜伏期一般为五天"), ("zh1", 4.0, "潜伏期三到七天")])
    )
    aware = HybridFusionRetriever(
        [dense, bm25], leg_names=["dense", "bm25"], english_only_legs=["dense"],
        cjk_weight_floor=0.1, k=0,
    )  # fmt: skip
    results = aware.retrieve("How long is the incubation period?")
    scores = {r.node.node_id: r.score for r in results}
    # k=0: dense term w * f / rank. "en": 1.0 / 1; "zh1": 0.1 / 2 + 1 / 2; "zh2": 1 / 1.
    assert scores == pytest.approx({"en": 1.0, "zh1": 0.55, "zh2": 1.0})
    legs = {r.node.node_id: r.node.metadata[TRACE_KEY]["hybrid_fusion"]["legs"] for r in results}
    assert legs["zh1"][0]["language_factor"] == pytest.approx(0.1)
    assert legs["en"][0]["language_factor"] == pytest.approx(1.0)
    assert "language_factor" not in legs["zh1"][1]
    # The same query with node_language=False: nothing is scaled (the query is English).
    query_only = HybridFusionRetriever(
        [dense, bm25], leg_names=["dense", "bm25"], english_only_legs=["dense"],
        cjk_weight_floor=0.1, k=0, node_language=False,
    )  # fmt: skip
    plain = {r.node.node_id: r.score for r in query_only.retrieve("How long?")}
    assert plain == pytest.approx({"en": 1.0, "zh1": 1.0, "zh2": 1.0})


def test_floor_zero_mutes_an_english_only_leg_on_chinese_text() -> None:
    dense = ListRetriever(cjk_hits([("zh1", 0.9, "潜伏期三到七天"), ("zh2", 0.2, "潜伏期五天")]))
    bm25 = ListRetriever(cjk_hits([("zh2", 5.0, "潜伏期五天"), ("zh1", 4.0, "潜伏期三到七天")]))
    for mode in ("rrf", "score"):
        muted = HybridFusionRetriever(
            [dense, bm25], leg_names=["dense", "bm25"], english_only_legs=["dense"],
            cjk_weight_floor=0.0, mode=mode,
        )  # fmt: skip
        bm25_only = HybridFusionRetriever([bm25], mode=mode)
        assert ids(muted.retrieve("潜伏期多长")) == ids(bm25_only.retrieve("潜伏期多长"))
        # Without the language option the dense leg's first result wins the tie-break.
        plain = HybridFusionRetriever([dense, bm25], mode=mode)
        assert ids(plain.retrieve("潜伏期多长"))[0] == "zh1"


def test_node_factor_also_scales_the_absent_floor_in_zscore_fusion() -> None:
    # "zh2" is missing from the dense leg; with floor 0 the dense leg's absent floor (a negative
    # z-score) must not count against it on Chinese text, so the BM25 order stands.
    dense = ListRetriever(
        cjk_hits([("zh1", 0.9, "潜伏期三到七天"), ("zh3", 0.5, "病毒"), ("zh4", 0.1, "口罩")])
    )
    bm25 = ListRetriever(cjk_hits([("zh2", 5.0, "潜伏期五天"), ("zh1", 4.9, "潜伏期三到七天")]))
    muted = HybridFusionRetriever(
        [dense, bm25], leg_names=["dense", "bm25"], english_only_legs=["dense"],
        cjk_weight_floor=0.0, mode="score", normalization="zscore",
    )  # fmt: skip
    assert ids(muted.retrieve("潜伏期多长"))[:2] == ["zh2", "zh1"]
    legs = muted.retrieve("潜伏期多长")[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["legs"]
    assert legs[0]["rank"] is None and legs[0]["language_factor"] == 0.0


def test_with_top_k_sets_the_result_count_of_the_pack_milvus_legs() -> None:
    from llama_index_ext_advrag.retrievers import (
        HierarchicalAutoMergingRetriever,
        TwoLayerMilvusRetriever,
    )

    leaves, parents = object(), object()  # stand-ins for the open stores, shared by the copies
    merging = HierarchicalAutoMergingRetriever(leaves, parents, similarity_top_k=4)
    two_layer = TwoLayerMilvusRetriever(object(), object(), details_top_k=4)
    inner = HybridFusionRetriever([ListRetriever(DENSE)], similarity_top_k=4)
    assert with_top_k(merging, 9).similarity_top_k == 9
    assert with_top_k(merging, 9).vector_store is leaves and merging.similarity_top_k == 4
    assert with_top_k(two_layer, 9).details_top_k == 9 and two_layer.details_top_k == 4
    assert with_top_k(inner, 9).similarity_top_k == 9 and inner.similarity_top_k == 4
    outer = HybridFusionRetriever([merging, ListRetriever(SPARSE)], similarity_top_k=2)
    assert outer.effective_leg_top_k == 6
    assert [r.node.node_id for r in outer.legs[1].retrieve("q")] == ["c", "a", "d"]


class CancelledLeg(BaseRetriever):
    """A leg whose own work was cancelled (its awaited task cancelled by someone else)."""

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return []

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise asyncio.CancelledError


class SleepingLeg(BaseRetriever):
    """Sleeps until cancelled; records that it was."""

    def __init__(self) -> None:
        self.started, self.cancelled = asyncio.Event(), False
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return []

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        return []


async def test_a_cancelled_leg_cancels_the_async_retrieval_not_degrades_it() -> None:
    """Cancellation is not a leg failure: it is re-raised, never fused around."""
    hybrid = HybridFusionRetriever([ListRetriever(DENSE), CancelledLeg()])
    with pytest.raises(asyncio.CancelledError):
        await hybrid.aretrieve("q")


async def test_cancelling_the_async_retrieval_cancels_its_legs() -> None:
    sleeping = SleepingLeg()
    hybrid = HybridFusionRetriever([ListRetriever(DENSE), sleeping])
    task = asyncio.create_task(hybrid.aretrieve("q"))
    await asyncio.wait_for(sleeping.started.wait(), timeout=5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, timeout=5)
    assert sleeping.cancelled


async def test_a_bytes_query_is_refused_naming_its_type() -> None:
    bm25 = JiebaBM25Retriever([TextNode(text="kettle boils water", id_="k")])
    hybrid = HybridFusionRetriever([ListRetriever(DENSE), bm25])
    for retriever in (bm25, hybrid):
        name = retriever.class_name()
        with pytest.raises(TypeError, match=rf"^{name} takes a query .* got bytes \(b'kettle'\)"):
            retriever.retrieve(b"kettle")
        with pytest.raises(TypeError, match=r"decode it first$"):
            await retriever.aretrieve(b"kettle")
