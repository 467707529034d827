"""Hybrid fusion's defaults and bookkeeping (unit tier): which lexical leg from_defaults picks and
says it picked, where the dense leg's embedding model is read from, the tuned fusion settings
applied whole or not at all, closing the legs, the exact trace and event of a fused call
(kills the mutants of retrievers/hybrid.py the behaviour tests in test_hybrid.py leave)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from advrag_testing import HashEmbedding, instrumented
from llama_index.core import VectorStoreIndex
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.events import HybridFusionEvent
from llama_index_ext_advrag.retrievers import HybridFusionRetriever, JiebaBM25Retriever
from llama_index_ext_advrag.retrievers.fusion import FusionMode, Normalization
from llama_index_ext_advrag.retrievers.hybrid import (
    ENGLISH_FUSION_DEFAULTS,
    MULTILINGUAL_FUSION_DEFAULTS,
    build_fused_nodes,
    leg_hits,
    with_top_k,
)
from llama_index_ext_advrag.retrievers.milvus_bm25 import LexicalChoice

NODES = [
    TextNode(text="The FX-40 pump syncs every 15 minutes.", id_="pump"),
    TextNode(text="新冠病毒的潜伏期一般为三到七天。", id_="covid"),
]
ENGLISH = "BAAI/bge-small-en-v1.5"
MULTI = "intfloat/multilingual-e5-small"


class Fixed(BaseRetriever):
    def __init__(self, results: list[NodeWithScore], embed_model: Any = None) -> None:
        self.results = results
        if embed_model is not None:
            self._embed_model = embed_model
        self.closed: list[str] = []
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.results)

    def close(self) -> None:
        self.closed.append("close")

    async def aclose(self) -> None:
        self.closed.append("aclose")


class Index:
    """An index whose retriever, not the index, carries the embedding model (or the reverse)."""

    def __init__(self, retriever_model: Any = None, index_model: Any = None) -> None:
        self.retriever_model = retriever_model
        if index_model is not None:
            self._embed_model = index_model

    def as_retriever(self) -> Fixed:
        return Fixed([NodeWithScore(node=NODES[0], score=1.0)], self.retriever_model)


def english_only_legs(index: Any, **kwargs: Any) -> tuple[str, ...]:
    return HybridFusionRetriever.from_defaults(index, nodes=NODES, **kwargs).english_only_legs


def test_the_dense_model_is_read_from_the_retriever_then_from_the_index() -> None:
    english, multi = HashEmbedding(model_name=ENGLISH), HashEmbedding(model_name=MULTI)
    assert english_only_legs(Index(retriever_model=english)) == ("dense",)
    assert english_only_legs(Index(retriever_model=english, index_model=multi)) == ("dense",)
    assert english_only_legs(Index(index_model=english)) == ("dense",)
    assert english_only_legs(Index(retriever_model=multi, index_model=english)) == ()
    assert english_only_legs(Index()) == ()  # no model known: not scaled down
    assert english_only_legs(Index(english), english_only_legs=[]) == ()


def test_a_dense_leg_that_reads_every_language_gets_the_tuned_fusion_whole() -> None:
    multi = Index(retriever_model=HashEmbedding(model_name=MULTI))
    hybrid = HybridFusionRetriever.from_defaults(multi, nodes=NODES)
    assert (hybrid.mode, hybrid.normalization, hybrid.weights) == (
        FusionMode.SCORE,
        Normalization.ZSCORE,
        (1.0, 0.5),
    )
    assert MULTILINGUAL_FUSION_DEFAULTS == {
        "mode": FusionMode.SCORE,
        "normalization": Normalization.ZSCORE,
        "weights": (1.0, 0.5),
    }
    for given in ({"mode": "rrf"}, {"normalization": "minmax"}, {"weights": [1, 1]}, {"k": 5}):
        hybrid = HybridFusionRetriever.from_defaults(multi, nodes=NODES, **given)
        assert hybrid.mode is FusionMode(given.get("mode", "rrf")), given
        assert hybrid.normalization is Normalization(given.get("normalization", "minmax"))
    english = Index(retriever_model=HashEmbedding(model_name=ENGLISH))
    hybrid = HybridFusionRetriever.from_defaults(english, nodes=NODES)
    # the English-only default re-fitted to bge-small (docs/retrievers_fusion.md)
    assert (hybrid.mode, hybrid.normalization, hybrid.weights) == (
        FusionMode.SCORE,
        Normalization.ZSCORE,
        (1.0, 1.0),
    )


def test_from_defaults_records_and_logs_its_lexical_choice(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = VectorStoreIndex(NODES, embed_model=HashEmbedding(dim=16, model_name=ENGLISH))
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.retrievers.hybrid"):
        hybrid = HybridFusionRetriever.from_defaults(index, nodes=NODES)
    reason = "the vector store is SimpleVectorStore, not Milvus"
    assert hybrid.lexical_choice == LexicalChoice("bm25s", reason)
    assert f"hybrid lexical leg: bm25s ({reason})" in caplog.messages
    assert isinstance(hybrid.legs[1], JiebaBM25Retriever) and hybrid.leg_names == ["dense", "bm25"]
    given = Fixed([])
    hybrid = HybridFusionRetriever.from_defaults(index, bm25_retriever=given)
    assert hybrid.legs[1] is given and hybrid.lexical_choice is None


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_closing_closes_every_leg(mode: str) -> None:
    legs = [Fixed([]), Fixed([])]
    hybrid = HybridFusionRetriever(legs)
    if mode == "async":
        asyncio.run(hybrid.aclose())
    else:
        hybrid.close()
    expected = "aclose" if mode == "async" else "close"
    assert [leg.closed for leg in legs] == [[expected], [expected]]


def hits(*pairs: tuple[str, float]) -> list[NodeWithScore]:
    return [NodeWithScore(node=TextNode(text=f"text {i}", id_=i), score=s) for i, s in pairs]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_trace_and_the_event_of_a_fused_call(mode: str) -> None:
    dense = Fixed(hits(("a", 0.9), ("b", 0.5)))
    sparse = Fixed(hits(("b", 4.0), ("c", 2.0)))
    hybrid = HybridFusionRetriever(
        [dense, sparse], leg_names=["dense", "bm25"], weights=[2.0, 1.0], k=1, similarity_top_k=2
    )
    with instrumented() as (events, _):
        if mode == "async":
            results = asyncio.run(hybrid.aretrieve("pump"))
        else:
            results = hybrid.retrieve("pump")
    # RRF k=1: a = 2/2; b = 2/3 + 1/2; c = 1/3
    assert [(r.node.node_id, round(r.score, 6)) for r in results] == [
        ("b", round(2 / 3 + 1 / 2, 6)),
        ("a", 1.0),
    ]
    trace = results[0].node.metadata[TRACE_KEY]["hybrid_fusion"]
    assert trace == {
        "mode": "rrf",
        "fused_score": results[0].score,
        "legs": [
            {"leg": "dense", "rank": 2, "score": 0.5},
            {"leg": "bm25", "rank": 1, "score": 4.0},
        ],
    }
    [event] = [e for e in events if isinstance(e, HybridFusionEvent)]
    assert event.legs == [
        {"leg": "dense", "weight": 2.0, "hits": 2, "degraded": None},
        {"leg": "bm25", "weight": 1.0, "hits": 2, "degraded": None},
    ]
    assert event.fused == [
        {"node_id": "b", "score": results[0].score, "ranks": [2, 1]},
        {"node_id": "a", "score": 1.0, "ranks": [1, None]},
    ]
    assert event.lexical is None and event.mode == "rrf"


def test_build_fused_nodes_records_language_factors_degraded_legs_and_lexical() -> None:
    from llama_index_ext_advrag.retrievers.fusion import fuse

    legs = [hits(("a", 0.9)), hits(("a", 3.0), ("b", 1.0))]
    hybrid = HybridFusionRetriever([Fixed([]), Fixed([])], leg_names=["dense", "bm25"])
    factors = [{"a": 0.25}, None]
    fused = fuse([leg_hits(leg) for leg in legs], node_factors=factors)
    nodes = build_fused_nodes(
        fused,
        legs,
        ["dense", "bm25"],
        hybrid,
        [{"leg": "x", "reason": "empty"}],
        {"cjk_share": 1.0},
        factors,
        {"backend": "bm25s", "reason": "r"},
    )
    record = nodes[0].node.metadata[TRACE_KEY]["hybrid_fusion"]
    assert record["legs"][0]["language_factor"] == 0.25
    assert "language_factor" not in record["legs"][1]
    assert record["degraded"] == [{"leg": "x", "reason": "empty"}]
    assert record["language"] == {"cjk_share": 1.0}
    assert record["lexical"] == {"backend": "bm25s", "reason": "r"}
    b = next(n for n in nodes if n.node.node_id == "b").node.metadata[TRACE_KEY]["hybrid_fusion"]
    assert b["legs"][0]["language_factor"] == 1.0  # a node the factors do not name
    assert nodes[0].node is not legs[0][0].node  # copies: the legs' nodes keep no trace
    assert TRACE_KEY not in legs[0][0].node.metadata


def test_with_top_k_leaves_retrievers_without_a_top_k_alone(caplog) -> None:
    leg = Fixed([])
    with caplog.at_level(logging.DEBUG, logger="llama_index_ext_advrag.retrievers.hybrid"):
        assert with_top_k(leg, 5) is leg
    assert "Fixed has no similarity_top_k; used as configured" in caplog.messages


def test_from_defaults_logs_how_it_read_the_dense_leg(caplog: pytest.LogCaptureFixture) -> None:
    logger = "llama_index_ext_advrag.retrievers.hybrid"
    english = HashEmbedding(model_name=ENGLISH)
    with caplog.at_level(logging.DEBUG, logger=logger):
        HybridFusionRetriever.from_defaults(Index(english), nodes=NODES)
    assert f"dense leg english_only=True (model {english!r})" in caplog.messages
    assert f"dense leg English-only=True: fusion {ENGLISH_FUSION_DEFAULTS}" in caplog.messages
    caplog.clear()
    with caplog.at_level(logging.INFO, logger=logger):
        HybridFusionRetriever.from_defaults(Index(HashEmbedding(model_name=MULTI)), nodes=NODES)
    assert f"dense leg English-only=False: fusion {MULTILINGUAL_FUSION_DEFAULTS}" in caplog.messages


@pytest.mark.parametrize("node_language", [True, False])
def test_the_query_language_in_the_trace_is_rounded_to_four_places(node_language: bool) -> None:
    from llama_index_ext_advrag.text.words import cjk_share

    query = "pumps 汉"
    share = cjk_share(query)
    assert share != round(share, 4)  # the rounding shows
    hybrid = HybridFusionRetriever(
        [Fixed(hits(("a", 0.9))), Fixed(hits(("a", 2.0)))],
        leg_names=["dense", "bm25"],
        english_only_legs=["dense"],
        node_language=node_language,
    )
    [result] = hybrid.retrieve(query)
    language = result.node.metadata[TRACE_KEY]["hybrid_fusion"]["language"]
    if node_language:
        assert language == {"cjk_share": round(share, 4)}
    else:
        weights, record = hybrid.query_weights(query)
        assert language == record == {"cjk_share": round(share, 4), "weights": list(weights)}
        assert weights[1] == 1.0 and weights[0] < 1.0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_lexical_choice_is_in_the_trace_and_the_event(mode: str) -> None:
    index = VectorStoreIndex(NODES, embed_model=HashEmbedding(dim=16, model_name=ENGLISH))
    hybrid = HybridFusionRetriever.from_defaults(index, nodes=NODES, similarity_top_k=1)
    expected = {"backend": "bm25s", "reason": "the vector store is SimpleVectorStore, not Milvus"}
    with instrumented() as (events, _):
        if mode == "async":
            [result] = asyncio.run(hybrid.aretrieve("pump"))
        else:
            [result] = hybrid.retrieve("pump")
    assert result.node.metadata[TRACE_KEY]["hybrid_fusion"]["lexical"] == expected
    [event] = [e for e in events if isinstance(e, HybridFusionEvent)]
    assert event.lexical == expected


class Failing(BaseRetriever):
    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        raise RuntimeError(self.message)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_when_every_leg_fails_the_first_error_is_raised(mode: str) -> None:
    hybrid = HybridFusionRetriever([Failing("first"), Failing("second")])
    with pytest.raises(RuntimeError, match="^first$"):
        if mode == "async":
            asyncio.run(hybrid.aretrieve("q"))
        else:
            hybrid.retrieve("q")


def test_no_legs_is_refused_in_words() -> None:
    with pytest.raises(ValueError) as error:
        HybridFusionRetriever([])
    assert str(error.value) == "retrievers must hold at least one retriever, got none"


def test_a_leg_is_cut_to_leg_top_k_even_when_it_returns_more() -> None:
    many = Fixed(hits(*[(f"n{i}", 10.0 - i) for i in range(6)]))  # no similarity_top_k
    hybrid = HybridFusionRetriever([many, Fixed(hits(("n5", 1.0)))], leg_top_k=2)
    with instrumented() as (events, _):
        results = hybrid.retrieve("q")
    [event] = [e for e in events if isinstance(e, HybridFusionEvent)]
    assert [leg["hits"] for leg in event.legs] == [2, 1]
    assert {r.node.node_id for r in results} == {"n0", "n1", "n5"}


def test_degraded_legs_are_logged_and_traced_in_words(caplog: pytest.LogCaptureFixture) -> None:
    hybrid = HybridFusionRetriever(
        [Fixed(hits(("a", 1.0))), Failing("down"), Fixed([])], leg_names=["dense", "bm25", "web"]
    )
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.retrievers.hybrid"):
        [result] = hybrid.retrieve("q")
    assert caplog.messages == [
        "hybrid leg bm25 failed (RuntimeError('down')); fusing the other legs",
        "hybrid leg web returned nothing; fusing the other legs",
    ]
    assert result.node.metadata[TRACE_KEY]["hybrid_fusion"]["degraded"] == [
        {"leg": "bm25", "reason": "error: RuntimeError('down')"},
        {"leg": "web", "reason": "empty"},
    ]


def test_with_top_k_uses_with_settings_only_for_the_packs_retrievers() -> None:
    class Plain(BaseRetriever):
        top_k_setting = "similarity_top_k"  # looks like the pack's, is not a ConfiguredRetriever

        def __init__(self) -> None:
            self.similarity_top_k = 3
            super().__init__()

        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            return []

    plain = Plain()
    copy = with_top_k(plain, 5)
    assert copy is not plain and (copy.similarity_top_k, plain.similarity_top_k) == (5, 3)
