"""One configuration pattern for every retriever: a validated pydantic ``config`` attribute
and ``to_dict``/``from_dict`` that round-trip it (the Milvus retrievers' round trip through a
real uri is in test_auto_merging.py and test_two_layer.py)."""

from __future__ import annotations

import json

import pytest
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.retrievers import (
    AutoMergingConfig,
    BM25Config,
    HybridFusionConfig,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    RecursiveConfig,
    RecursiveIndexNodeRetriever,
    TwoLayerConfig,
)
from llama_index_ext_advrag.retrievers.hybrid import with_top_k
from llama_index_ext_advrag.text.words import WordTokenizer

TEXTS = [
    "潜伏期一般为三到七天。",
    "The FX-40 syncs every 15 minutes.",
    "Receipts are needed from 25 euros.",
    "The FX-40 battery lasts two days.",
]


class ListRetriever(BaseRetriever):
    def __init__(self, results: list[NodeWithScore]) -> None:
        self.results = results
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return list(self.results)


@pytest.fixture
def nodes() -> list[TextNode]:
    return [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(TEXTS)]


def results(retriever: BaseRetriever, query: str) -> list[tuple[str, float | None]]:
    return [(r.node.node_id, r.score) for r in retriever.retrieve(query)]


def test_bm25_round_trip_gives_equal_config_and_results(nodes) -> None:
    bm25 = JiebaBM25Retriever(
        nodes,
        similarity_top_k=3,
        k1=1.2,
        b=0.5,
        method="bm25+",
        tokenizer=WordTokenizer(stem=False),
    )
    data = bm25.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON
    again = JiebaBM25Retriever.from_dict(data, nodes)
    assert again.config == bm25.config and isinstance(bm25.config, BM25Config)
    assert (again.k1, again.b, again.method, again.tokenizer.stem) == (1.2, 0.5, "bm25+", False)
    assert results(again, "FX-40 battery") == results(bm25, "FX-40 battery") != []


def test_bm25_from_dict_validates(nodes) -> None:
    data = {**JiebaBM25Retriever(nodes).to_dict(), "method": "tfidf"}
    with pytest.raises(ValueError, match="tfidf"):
        JiebaBM25Retriever.from_dict(data, nodes)
    with pytest.raises(ValueError, match="unknown_setting"):
        JiebaBM25Retriever.from_dict({"unknown_setting": 1}, nodes)


def test_bm25_settings_stay_attributes_and_writes_are_validated(nodes) -> None:
    bm25 = JiebaBM25Retriever(nodes, similarity_top_k=4)
    clone = with_top_k(bm25, 1)
    assert (clone.similarity_top_k, bm25.similarity_top_k) == (1, 4)  # the caller's is kept
    assert len(clone.retrieve("FX-40")) == 1 and len(bm25.retrieve("FX-40")) == 2
    with pytest.raises(ValueError, match="similarity_top_k"):
        bm25.similarity_top_k = 0
    assert bm25.config.similarity_top_k == 4


def test_bm25_persist_writes_the_config_keys(nodes, tmp_path) -> None:
    JiebaBM25Retriever(nodes, k1=1.1).persist(tmp_path / "bm25")
    saved = json.loads((tmp_path / "bm25" / "advrag_bm25.json").read_text(encoding="utf-8"))
    assert set(saved) == {"format_version", "num_nodes", *BM25Config.model_fields}
    reloaded = JiebaBM25Retriever.from_persist_dir(tmp_path / "bm25")
    assert reloaded.config == JiebaBM25Retriever(nodes, k1=1.1).config


def routing_tree() -> dict:
    root = ListRetriever(
        [
            NodeWithScore(node=TextNode(text="plain", id_="plain"), score=0.9),
            NodeWithScore(node=IndexNode(text="to sub", index_id="sub", id_="p-sub"), score=0.8),
        ]
    )
    sub = ListRetriever([NodeWithScore(node=TextNode(text="deep", id_="deep"), score=0.7)])
    return {"root": root, "sub": sub}


def test_recursive_round_trip_gives_equal_config_and_results() -> None:
    routers = routing_tree()
    recursive = RecursiveIndexNodeRetriever(
        root_id="root", retriever_dict=routers, max_depth=2, max_concurrency=3
    )
    data = recursive.to_dict()
    assert data == {
        "root_id": "root",
        "max_depth": 2,
        "max_concurrency": 3,
        "include_sub_sources": True,
    }
    again = RecursiveIndexNodeRetriever.from_dict(data, retriever_dict=routers)
    assert again.config == recursive.config and isinstance(again.config, RecursiveConfig)
    assert results(again, "q") == results(recursive, "q") == [("plain", 0.9), ("deep", 0.7)]


def test_recursive_setting_writes_are_validated() -> None:
    recursive = RecursiveIndexNodeRetriever(root_id="root", retriever_dict=routing_tree())
    recursive.max_depth = 1
    assert recursive.config.max_depth == 1
    with pytest.raises(ValueError, match="max_depth"):
        recursive.max_depth = 0
    with pytest.raises(ValueError, match="'nope'"):
        RecursiveIndexNodeRetriever.from_dict(
            {**recursive.to_dict(), "root_id": "nope"}, retriever_dict=routing_tree()
        )


def test_hybrid_round_trip_gives_equal_config_and_results(nodes) -> None:
    legs = [
        JiebaBM25Retriever(nodes),
        JiebaBM25Retriever(nodes, tokenizer=WordTokenizer(stem=False)),
    ]
    hybrid = HybridFusionRetriever(legs, weights=[1.0, 0.5], mode="score", similarity_top_k=2)
    again = HybridFusionRetriever.from_dict(hybrid.to_dict(), retrievers=legs)
    assert again.config == hybrid.config and isinstance(again.config, HybridFusionConfig)
    assert results(again, "FX-40 syncs") == results(hybrid, "FX-40 syncs") != []


@pytest.mark.parametrize(
    ("config_class", "settings"),
    [
        (
            AutoMergingConfig,
            {"similarity_top_k": 3, "merge_ratio": 0.25, "score_aggregation": "mean"},
        ),
        (TwoLayerConfig, {"route_top_k": 3, "details_mode": "search", "cue_weight": 0.0}),
        (BM25Config, {"similarity_top_k": 2, "method": "atire"}),
        (RecursiveConfig, {"root_id": "r", "max_depth": 5}),
        (HybridFusionConfig, {"weights": [2.0, 1.0], "mode": "score", "k": 10}),
    ],
)
def test_every_config_round_trips_through_json(config_class: type[BaseModel], settings) -> None:
    config = config_class.model_validate(settings)
    dumped = json.loads(json.dumps(config.model_dump(mode="json")))
    assert config_class.model_validate(dumped) == config
    assert config != config_class.model_validate({**settings, **_one_change(config_class)})


def _one_change(config_class: type[BaseModel]) -> dict:
    """A different value for one field, so equality above is not vacuous."""
    return {
        AutoMergingConfig: {"merge_ratio": 0.75},
        TwoLayerConfig: {"route_top_k": 1},
        BM25Config: {"k1": 0.5},
        RecursiveConfig: {"max_depth": 1},
        HybridFusionConfig: {"k": 11},
    }[config_class]
