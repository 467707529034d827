"""from_defaults marks the dense leg English-only exactly when its embedding model is."""

from __future__ import annotations

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.retrievers.hybrid import HybridFusionRetriever

NODES = [
    TextNode(text="新冠病毒的潜伏期一般为三到七天。", id_="covid"),
    TextNode(text="Cats purr when they are content.", id_="cats"),
]


@pytest.mark.parametrize(
    ("model_name", "expected"),
    [
        ("sentence-transformers/all-MiniLM-L6-v2", ("dense",)),
        ("multilingual-e5-small-q4", ()),
        ("BAAI/bge-m3", ()),
        ("unknown", ()),
    ],
)
def test_dense_leg_marked_by_its_model(model_name: str, expected: tuple[str, ...]) -> None:
    index = VectorStoreIndex(NODES, embed_model=HashEmbedding(dim=16, model_name=model_name))
    hybrid = HybridFusionRetriever.from_defaults(index, nodes=NODES, similarity_top_k=2)
    assert hybrid.english_only_legs == expected
    record = hybrid.retrieve("潜伏期")[0].node.metadata["advrag_trace"]["hybrid_fusion"]
    factors = [leg.get("language_factor") for leg in record["legs"]]
    assert factors[0] == (0.0 if expected else None)  # muted only when English-only


def test_explicit_english_only_legs_win() -> None:
    index = VectorStoreIndex(NODES, embed_model=HashEmbedding(dim=16, model_name="BAAI/bge-m3"))
    hybrid = HybridFusionRetriever.from_defaults(
        index, nodes=NODES, english_only_legs=["dense"], similarity_top_k=2
    )
    assert hybrid.english_only_legs == ("dense",)
