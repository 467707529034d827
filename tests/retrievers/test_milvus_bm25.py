"""The lexical leg inside Milvus (full-text search): English and Chinese queries find their
chunk, fusion over it has the shape of fusion over bm25s, sync and async, and the choice of
leg is in the trace and the event. Backends without full-text search (the 2.3 server) skip,
with the reason naming their detected version."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from advrag_testing import HashEmbedding, require_full_text
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.bridge.pydantic import Field
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.schema import QueryBundle, TextNode

from llama_index_ext_advrag.events import HybridFusionEvent
from llama_index_ext_advrag.milvus import flush, open_client, open_vector_store
from llama_index_ext_advrag.retrievers import (
    HybridFusionRetriever,
    JiebaBM25Retriever,
    MilvusBM25Retriever,
)
from llama_index_ext_advrag.trace import TRACE_KEY

DIM = 32
TEXTS = {
    "leave": "员工每年享有带薪年假十天，入职满一年后开始计算。",
    "musk": "埃隆·马斯克在2022年成为世界首富，他来自美国。",
    "covid": "新冠病毒的潜伏期一般为三到七天。",
    "masks": "Masks reduce the spread of respiratory viruses in crowded rooms.",
    "incubation": "The incubation period of the virus is usually five days.",
    "cats": "Cats purr when they are content and sleep most of the day.",
}
NODES = [TextNode(text=text, id_=node_id) for node_id, text in TEXTS.items()]
QUERIES = {
    "带薪年假有几天": "leave",
    "新冠病毒的潜伏期有多长？": "covid",
    "How long is the incubation period?": "incubation",
    "Do masks stop viruses spreading?": "masks",
}


def ids(results) -> list[str]:
    return [r.node.node_id for r in results]


def build(uri: str, name: str, full_text: str | None) -> VectorStoreIndex:
    store = open_vector_store(uri, name, dim=DIM, overwrite=True, full_text=full_text)
    index = VectorStoreIndex(
        NODES,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=HashEmbedding(dim=DIM),
    )
    flush(store)
    return index


@pytest.fixture(scope="module")
def indexes(module_milvus_uri: str) -> Iterator[dict[str, VectorStoreIndex]]:
    """One collection per analyzer (pack, Milvus' jieba) and one without full-text search."""
    require_full_text(module_milvus_uri)
    built = {
        "pack": build(module_milvus_uri, "fts_pack", "auto"),
        "jieba": build(module_milvus_uri, "fts_jieba", "jieba"),
        "plain": build(module_milvus_uri, "fts_plain", None),
    }
    yield built
    client = open_client(module_milvus_uri)
    for name in ("fts_pack", "fts_jieba", "fts_plain"):
        client.drop_collection(name)
    client.close()


class Collector(BaseEventHandler):
    events: list[Any] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "Collector"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, HybridFusionEvent):
            self.events.append(event)


@pytest.fixture
def events() -> Iterator[list[Any]]:
    root = get_dispatcher()
    handler = Collector()
    root.add_event_handler(handler)
    try:
        yield handler.events
    finally:
        root.event_handlers.remove(handler)


@pytest.mark.parametrize("analyzer", ["pack", "jieba"])
async def test_english_and_chinese_queries_find_their_chunk(indexes, analyzer: str) -> None:
    leg = MilvusBM25Retriever(indexes[analyzer].vector_store, similarity_top_k=3)
    for query, expected in QUERIES.items():
        if analyzer == "jieba" and query.isascii():
            continue  # Milvus' jieba analyzer is for Chinese; English goes through pack
        found = leg.retrieve(query)
        assert found[0].node.node_id == expected, (query, ids(found))
        assert all(r.score > 0 for r in found)
        assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)
        trace = found[0].node.metadata[TRACE_KEY]["bm25"]
        assert trace == {"rank": 1, "score": found[0].score, "backend": "milvus"}
        assert ids(await leg.aretrieve(query)) == ids(found)


async def test_pack_leg_ranks_like_bm25s(indexes) -> None:
    """Same terms and BM25 parameters: the same nodes in the same order, Milvus' scores a
    constant (k1 + 1) times bm25s' (Lucene's variant leaves that factor out)."""
    milvus = MilvusBM25Retriever(indexes["pack"].vector_store, similarity_top_k=6)
    local = JiebaBM25Retriever(NODES, similarity_top_k=6)
    for query in [*QUERIES, "virus 病毒 days"]:
        ours, theirs = milvus.retrieve(query), local.retrieve(query)
        assert ids(ours) == ids(theirs), query
        ratios = [a.score / b.score for a, b in zip(ours, theirs, strict=True)]
        assert ratios == pytest.approx([1.0 + local.k1] * len(ratios), rel=1e-4)
        assert ids(await milvus.aretrieve(query)) == ids(ours)


@pytest.mark.parametrize(
    "options", [{"mode": "rrf"}, {"mode": "score"}, {"mode": "score", "normalization": "zscore"}]
)
async def test_fusion_has_the_shape_of_fusion_over_bm25s(indexes, options) -> None:
    index = indexes["pack"]
    settings = {"similarity_top_k": 4, "leg_names": ["dense", "bm25"], **options}
    dense = index.as_retriever()
    over_milvus = HybridFusionRetriever(
        [dense, MilvusBM25Retriever(index.vector_store)], **settings
    )
    over_bm25s = HybridFusionRetriever([dense, JiebaBM25Retriever(NODES)], **settings)
    for query in QUERIES:
        ours, theirs = over_milvus.retrieve(query), over_bm25s.retrieve(query)
        assert ids(ours) == ids(theirs), query
        assert [r.score for r in ours] == pytest.approx([r.score for r in theirs], rel=1e-4)
        legs = [r.node.metadata[TRACE_KEY]["hybrid_fusion"]["legs"] for r in ours]
        expected = [r.node.metadata[TRACE_KEY]["hybrid_fusion"]["legs"] for r in theirs]
        assert [[leg["rank"] for leg in entry] for entry in legs] == [
            [leg["rank"] for leg in entry] for entry in expected
        ]
        assert ids(await over_milvus.aretrieve(query)) == ids(ours)


async def test_from_defaults_chooses_the_milvus_leg_and_says_so(indexes, events) -> None:
    hybrid = HybridFusionRetriever.from_defaults(indexes["pack"], similarity_top_k=2)
    assert isinstance(hybrid.legs[1], MilvusBM25Retriever)
    assert hybrid.lexical_choice.backend == "milvus"
    assert "has a BM25 function" in hybrid.lexical_choice.reason
    for result in (hybrid.retrieve("带薪年假有几天"), await hybrid.aretrieve("带薪年假有几天")):
        assert result[0].node.node_id == "leave"
        lexical = result[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["lexical"]
        assert lexical == hybrid.lexical_choice.to_dict()
    assert [event.lexical for event in events] == [hybrid.lexical_choice.to_dict()] * 2


async def test_from_defaults_falls_back_to_bm25s_without_a_bm25_function(indexes, events) -> None:
    hybrid = HybridFusionRetriever.from_defaults(indexes["plain"], nodes=NODES, similarity_top_k=2)
    assert isinstance(hybrid.legs[1], JiebaBM25Retriever)
    assert hybrid.lexical_choice.backend == "bm25s"
    assert "has no BM25 function" in hybrid.lexical_choice.reason
    result = await hybrid.aretrieve("带薪年假有几天")
    assert result[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["lexical"]["backend"] == "bm25s"
    assert events[-1].lexical["backend"] == "bm25s"
    with pytest.raises(ValueError, match="got neither.*has no BM25 function"):
        HybridFusionRetriever.from_defaults(indexes["plain"])


async def test_a_bm25_leg_given_by_hand_is_recorded_as_given(indexes, events) -> None:
    index = indexes["pack"]
    by_hand = HybridFusionRetriever.from_defaults(
        index, bm25_retriever=MilvusBM25Retriever(index.vector_store), similarity_top_k=2
    )
    local = HybridFusionRetriever([index.as_retriever(), JiebaBM25Retriever(NODES)])
    assert by_hand.lexical_choice.backend == "milvus"
    assert by_hand.lexical_choice.reason.startswith("given: ")
    assert "has a BM25 function" in by_hand.lexical_choice.reason
    assert local.lexical_choice.to_dict() == {
        "backend": "bm25s",
        "reason": "given: JiebaBM25Retriever",
    }
    for hybrid in (by_hand, local):
        for result in (hybrid.retrieve("带薪年假有几天"), await hybrid.aretrieve("带薪年假有几天")):
            lexical = result[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["lexical"]
            assert lexical == hybrid.lexical_choice.to_dict()
    assert [event.lexical for event in events] == [by_hand.lexical_choice.to_dict()] * 2 + [
        local.lexical_choice.to_dict()
    ] * 2


def test_milvus_leg_refuses_a_collection_without_full_text(indexes) -> None:
    with pytest.raises(ValueError, match="'fts_plain' cannot serve full-text search"):
        MilvusBM25Retriever(indexes["plain"].vector_store)


async def test_query_without_terms_returns_nothing(indexes) -> None:
    leg = MilvusBM25Retriever(indexes["pack"].vector_store)
    assert leg.retrieve("的 了 吗 the of") == []
    assert await leg.aretrieve("？！") == []


def test_settings_round_trip(indexes) -> None:
    leg = MilvusBM25Retriever(indexes["pack"].vector_store, similarity_top_k=4)
    data = leg.to_dict()
    assert data["similarity_top_k"] == 4 and data["class_name"] == "MilvusBM25Retriever"
    again = MilvusBM25Retriever.from_dict(data, vector_store=indexes["pack"].vector_store)
    assert ids(again.retrieve("带薪年假")) == ids(leg.retrieve("带薪年假"))
    assert len(leg.with_settings(similarity_top_k=1).retrieve("virus days")) == 1
    with pytest.raises(ValueError, match="similarity_top_k"):
        MilvusBM25Retriever(indexes["pack"].vector_store, similarity_top_k=0)


@pytest.mark.parametrize("query", [b"kettle", bytearray(b"kettle"), 42, None])
async def test_a_query_that_is_not_text_is_refused_naming_its_type(indexes, query) -> None:
    index = indexes["pack"]
    leg = MilvusBM25Retriever(index.vector_store)
    hybrid = HybridFusionRetriever.from_defaults(index, similarity_top_k=2)
    kind = type(query).__name__
    for retriever, name in ((leg, "MilvusBM25Retriever"), (hybrid, "HybridFusionRetriever")):
        expected = f"{name} takes a query as str or QueryBundle, got {kind} "
        with pytest.raises(TypeError) as raised:
            retriever.retrieve(query)
        assert str(raised.value).startswith(expected)
        with pytest.raises(TypeError) as raised:
            await retriever.aretrieve(QueryBundle(query))
        assert str(raised.value).startswith(f"{name} takes a query as str or QueryBundle, got "
                                            f"QueryBundle with a query_str of type {kind} ")  # fmt: skip
