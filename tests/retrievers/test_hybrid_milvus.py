"""Dense (Milvus) + BM25 fusion with the BM25 index persisted beside the vector store and
reloaded: same assertions on Milvus Lite and the Milvus server."""

from __future__ import annotations

from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.milvus import flush, is_server_uri, open_vector_store
from llama_index_ext_advrag.retrievers import HybridFusionRetriever, JiebaBM25Retriever
from llama_index_ext_advrag.retrievers.bm25 import bm25_persist_dir
from llama_index_ext_advrag.trace import TRACE_KEY

DIM = 64
TEXTS = {
    "musk": "埃隆·马斯克在2022年成为世界首富，他来自美国。",
    "arnault": "2023年世界首富是伯纳德·阿尔诺，他来自法国。",
    "covid": "新冠病毒的潜伏期一般为三到七天。",
    "masks": "Masks reduce the spread of respiratory viruses.",
    "incubation": "The incubation period of the virus is usually five days.",
    "cats": "Cats purr when they are content.",
}


def build(milvus_uri: str, collection_name: str, tmp_path: Path):
    nodes = [
        TextNode(
            text=t, id_=i, metadata={"lang": "zh" if i in {"musk", "arnault", "covid"} else "en"}
        )
        for i, t in TEXTS.items()
    ]
    store = open_vector_store(milvus_uri, collection_name, dim=DIM, overwrite=True)
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=HashEmbedding(dim=DIM),
    )
    flush(store)
    bm25 = JiebaBM25Retriever(nodes)
    persist_dir = tmp_path / "bm25" if is_server_uri(milvus_uri) else None
    folder = bm25.persist(bm25_persist_dir(milvus_uri, collection_name, persist_dir))
    return index, bm25, folder


def reload(milvus_uri: str, collection_name: str, folder: Path):
    store = open_vector_store(milvus_uri, collection_name, dim=DIM)
    index = VectorStoreIndex.from_vector_store(store, embed_model=HashEmbedding(dim=DIM))
    return index, JiebaBM25Retriever.from_persist_dir(folder)


@pytest.mark.usefixtures("drop_after")
async def test_fusion_over_milvus_and_persisted_bm25(milvus_uri, collection_name, tmp_path) -> None:
    index, bm25, folder = build(milvus_uri, collection_name, tmp_path)
    if not is_server_uri(milvus_uri):
        assert folder == Path(f"{milvus_uri}.bm25") / collection_name
    hybrid = HybridFusionRetriever(
        [index.as_retriever(), bm25],
        weights=[0.3, 0.7],
        similarity_top_k=3,
        leg_names=["dense", "bm25"],
    )
    query = "新冠病毒的潜伏期有多长？"
    first = hybrid.retrieve(query)
    assert first[0].node.node_id == "covid"
    legs = first[0].node.metadata[TRACE_KEY]["hybrid_fusion"]["legs"]
    assert [leg["leg"] for leg in legs] == ["dense", "bm25"]
    assert legs[1]["rank"] == 1 and legs[0]["rank"] is not None

    index2, bm25_2 = reload(milvus_uri, collection_name, folder)
    again = HybridFusionRetriever(
        [index2.as_retriever(), bm25_2],
        weights=[0.3, 0.7],
        similarity_top_k=3,
        leg_names=["dense", "bm25"],
    )
    reloaded = again.retrieve(query)
    assert [r.node.node_id for r in reloaded] == [r.node.node_id for r in first]
    assert [r.score for r in reloaded] == pytest.approx([r.score for r in first])
    assert reloaded[0].node.metadata["lang"] == "zh"
    asynchronous = await again.aretrieve(query)
    assert [r.node.node_id for r in asynchronous] == [r.node.node_id for r in reloaded]


@pytest.mark.usefixtures("drop_after")
def test_score_mode_on_english(milvus_uri, collection_name, tmp_path) -> None:
    index, bm25, _ = build(milvus_uri, collection_name, tmp_path)
    hybrid = HybridFusionRetriever(
        [index.as_retriever(), bm25], mode="score", normalization="zscore", similarity_top_k=2
    )
    results = hybrid.retrieve("How long is the incubation period of the virus?")
    assert results[0].node.node_id == "incubation"
