"""One configuration pattern for every retriever: settings are validated pydantic fields on
the retriever, ``to_dict``/``from_dict`` round-trip them, ``with_settings`` copies, and the old
``*Config`` / ``config=`` still work with a DeprecationWarning (the Milvus retrievers' round
trip through a real uri is in test_auto_merging.py and test_two_layer.py; every public class's
round trip in tests/unit/test_configuration.py)."""

from __future__ import annotations

import json

import pytest
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.retrievers import (
    AutoMergingConfig,
    BM25Config,
    BM25Retriever,
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


def test_bm25_round_trip_gives_equal_settings_and_results(nodes) -> None:
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
    assert data["class_name"] == "JiebaBM25Retriever"
    again = JiebaBM25Retriever.from_dict(data, nodes=nodes)
    assert again.to_dict() == data
    assert (again.k1, again.b, again.method, again.tokenizer.stem) == (1.2, 0.5, "bm25+", False)
    assert results(again, "FX-40 battery") == results(bm25, "FX-40 battery") != []


def test_bm25_from_dict_validates(nodes) -> None:
    data = {**JiebaBM25Retriever(nodes).to_dict(), "method": "tfidf"}
    with pytest.raises(ValueError, match="tfidf"):
        JiebaBM25Retriever.from_dict(data, nodes=nodes)
    with pytest.raises(ValueError, match="unknown_setting"):
        JiebaBM25Retriever.from_dict({"unknown_setting": 1}, nodes=nodes)
    with pytest.raises(ValueError, match="HybridFusionRetriever"):
        JiebaBM25Retriever.from_dict({"class_name": "HybridFusionRetriever"}, nodes=nodes)


def test_bm25_settings_stay_attributes_and_writes_are_validated(nodes) -> None:
    bm25 = JiebaBM25Retriever(nodes, similarity_top_k=4)
    clone = with_top_k(bm25, 1)
    assert (clone.similarity_top_k, bm25.similarity_top_k) == (1, 4)  # the caller's is kept
    assert len(clone.retrieve("FX-40")) == 1 and len(bm25.retrieve("FX-40")) == 2
    assert clone.nodes == bm25.nodes  # the copy shares the index
    with pytest.raises(ValueError, match="similarity_top_k"):
        bm25.similarity_top_k = 0
    assert bm25.similarity_top_k == 4
    with pytest.raises(ValueError, match="k1"):
        bm25.k1 = 2.0  # shapes the built index: fixed
    with pytest.raises(ValueError, match="no settings \\['top_k'\\]"):
        bm25.with_settings(top_k=2)


def test_bm25_persist_writes_the_settings(nodes, tmp_path) -> None:
    JiebaBM25Retriever(nodes, k1=1.1).persist(tmp_path / "bm25")
    saved = json.loads((tmp_path / "bm25" / "advrag_bm25.json").read_text(encoding="utf-8"))
    settings = JiebaBM25Retriever(nodes, k1=1.1).to_dict()
    assert set(saved) == {"format_version", "num_nodes", *settings}
    reloaded = JiebaBM25Retriever.from_persist_dir(tmp_path / "bm25")
    assert reloaded.to_dict() == settings


def test_deprecated_config_classes_still_work(nodes) -> None:
    with pytest.warns(DeprecationWarning, match="config="):
        bm25 = JiebaBM25Retriever(nodes, config=BM25Config(k1=1.0, similarity_top_k=2))
    assert (bm25.k1, bm25.similarity_top_k) == (1.0, 2)
    with pytest.warns(DeprecationWarning, match="config is deprecated"):
        config = bm25.config
    assert isinstance(config, BM25Config) and config.k1 == 1.0
    with pytest.warns(DeprecationWarning):
        explicit = JiebaBM25Retriever(nodes, config=BM25Config(k1=1.0), k1=0.8)
    assert explicit.k1 == 0.8  # an explicit setting wins over config=
    assert set(AutoMergingConfig.model_fields) >= {"similarity_top_k", "merge_ratio"}
    assert set(TwoLayerConfig.model_fields) >= {"route_top_k", "details_mode"}
    assert RecursiveConfig(root_id="r").max_depth == 3
    assert HybridFusionConfig(k=10).k == 10


def test_the_former_bm25_name_shares_the_settings_and_data(nodes) -> None:
    with pytest.warns(DeprecationWarning, match="renamed JiebaBM25Retriever"):
        old = BM25Retriever(nodes, similarity_top_k=2, k1=1.1)
    data = old.to_dict()
    assert data == JiebaBM25Retriever(nodes, similarity_top_k=2, k1=1.1).to_dict()
    assert data["class_name"] == "JiebaBM25Retriever"
    again = JiebaBM25Retriever.from_dict(data, nodes=nodes)  # the new name reads the old's data
    assert results(again, "FX-40 battery") == results(old, "FX-40 battery") != []
    with pytest.warns(DeprecationWarning, match="config is deprecated"):
        config = old.config
    assert isinstance(config, BM25Config) and config.k1 == 1.1


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
        "class_name": "RecursiveIndexNodeRetriever",
    }
    again = RecursiveIndexNodeRetriever.from_dict(data, retriever_dict=routers)
    assert again.to_dict() == data
    assert results(again, "q") == results(recursive, "q") == [("plain", 0.9), ("deep", 0.7)]


def test_recursive_setting_writes_are_validated() -> None:
    recursive = RecursiveIndexNodeRetriever(root_id="root", retriever_dict=routing_tree())
    recursive.max_depth = 1
    assert recursive.to_dict()["max_depth"] == 1
    with pytest.raises(ValueError, match="max_depth"):
        recursive.max_depth = 0
    with pytest.raises(ValueError, match="'nope'"):
        recursive.root_id = "nope"  # a write is checked against the live retriever_dict
    assert recursive.root_id == "root"
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
    assert again.to_dict() == hybrid.to_dict()
    assert results(again, "FX-40 syncs") == results(hybrid, "FX-40 syncs") != []
