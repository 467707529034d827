"""from_defaults marks the dense leg English-only exactly when its embedding model is."""

from __future__ import annotations

import math
import statistics

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.retrievers.fusion import FusionMode, Normalization
from llama_index_ext_advrag.retrievers.hybrid import (
    ENGLISH_FUSION_DEFAULTS,
    MULTILINGUAL_FUSION_DEFAULTS,
    HybridFusionRetriever,
)

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


# --- fusion defaults when the dense leg reads the language ---------------------------------

QUERY = "猫粮价格"
# text -> unit vector; the query is (1, 0, 0), so a text's cosine is its first component.
# The dense leg ranks "answer" first (no word in common with the query: BM25 never returns
# it); BM25 ranks "distractor" first (it repeats the query's words), dense second.
COSINES = (0.9, 0.3, 0.2, 0.1)
VECTORS = {
    QUERY: (1.0, 0.0, 0.0),
    "宠物食品每袋十欧元。": (0.9, math.sqrt(1 - 0.9**2), 0.0),
    "猫粮价格表：猫粮价格。": (0.3, math.sqrt(1 - 0.3**2), 0.0),
    "狗粮的价格。": (0.2, 0.0, math.sqrt(1 - 0.2**2)),
    "今天天气很好。": (0.1, math.sqrt(1 - 0.1**2), 0.0),
}
IDS = ["answer", "distractor", "partial", "unrelated"]
CORPUS = [TextNode(text=text, id_=i) for i, text in zip(IDS, list(VECTORS)[1:], strict=True)]


class LookupEmbedding(HashEmbedding):
    """Fixed vectors per text (a KeyError for any other text): rankings set by hand."""

    def _vector(self, text: str) -> list[float]:
        return list(VECTORS[text])


def hybrid_over(model_name: str, **settings: object) -> HybridFusionRetriever:
    index = VectorStoreIndex(CORPUS, embed_model=LookupEmbedding(model_name=model_name))
    return HybridFusionRetriever.from_defaults(index, nodes=CORPUS, similarity_top_k=4, **settings)


def test_multilingual_dense_leg_leads_the_fusion() -> None:
    hybrid = hybrid_over("multilingual-e5-small-q4")
    assert (hybrid.mode, hybrid.normalization) == (FusionMode.SCORE, Normalization.ZSCORE)
    assert hybrid.weights == (1.0, 0.5) == MULTILINGUAL_FUSION_DEFAULTS["weights"]
    # RRF with equal weights (the class defaults) puts the BM25 favourite first: 1/62 + 1/61
    # against the answer's 1/61. Z-score, dense 1.0 and BM25 0.5: BM25 returns the distractor
    # and "partial" (z +1 and -1; the answer gets the floor, -1 - 1 = -2), so the answer scores
    # z_dense(answer) - 1 and the distractor z_dense(distractor) + 0.5.
    z = [(c - statistics.fmean(COSINES)) / statistics.pstdev(COSINES) for c in COSINES]
    results = hybrid.retrieve(QUERY)
    assert [r.node.node_id for r in results][:2] == ["answer", "distractor"]
    assert [r.score for r in results][:2] == pytest.approx([z[0] - 1.0, z[1] + 0.5], rel=1e-6)
    again = HybridFusionRetriever.from_dict(hybrid.to_dict(), retrievers=hybrid.legs)
    assert (again.mode, again.normalization, again.weights) == (
        hybrid.mode,
        hybrid.normalization,
        hybrid.weights,
    )


async def test_multilingual_dense_leg_leads_the_fusion_async() -> None:
    hybrid = hybrid_over("BAAI/bge-m3")
    sync = hybrid.retrieve(QUERY)
    asynchronous = await hybrid.aretrieve(QUERY)
    assert [r.node.node_id for r in asynchronous][:2] == ["answer", "distractor"]
    assert [r.node.node_id for r in asynchronous] == [r.node.node_id for r in sync]
    assert [r.score for r in asynchronous] == pytest.approx([r.score for r in sync])


@pytest.mark.parametrize(
    "model_name", ["sentence-transformers/all-MiniLM-L6-v2", "bge-small-en-v1.5"]
)
async def test_english_only_dense_leg_gets_the_english_defaults(model_name: str) -> None:
    hybrid = hybrid_over(model_name)
    settings = (hybrid.mode, hybrid.normalization, hybrid.weights)
    assert settings == (FusionMode.SCORE, Normalization.ZSCORE, (1.0, 1.0))
    assert hybrid.weights == ENGLISH_FUSION_DEFAULTS["weights"]
    assert hybrid.english_only_legs == ("dense",)
    # the dense leg is muted on Chinese text: BM25's order, as with RRF and equal weights
    assert [r.node.node_id for r in hybrid.retrieve(QUERY)][:2] == ["distractor", "partial"]
    assert [r.node.node_id for r in await hybrid.aretrieve(QUERY)][:2] == ["distractor", "partial"]


EN_QUERY = "cat food price list"
EN_VECTORS = {  # cosine with the query: the first coordinate
    EN_QUERY: (1.0, 0.0),
    "A bag of kibble costs ten euros.": (0.9, math.sqrt(1 - 0.9**2)),
    "Cat food price list: cat food prices.": (0.4, math.sqrt(1 - 0.4**2)),
    "The weather is nice today.": (0.3, math.sqrt(1 - 0.3**2)),
    "Tomorrow it rains.": (0.1, math.sqrt(1 - 0.1**2)),
}
EN_CORPUS = [TextNode(text=t, id_=i) for i, t in zip(IDS, list(EN_VECTORS)[1:], strict=True)]


class EnglishLookupEmbedding(HashEmbedding):
    def _vector(self, text: str) -> list[float]:
        return list(EN_VECTORS[text])


def english_hybrid(**settings: object) -> HybridFusionRetriever:
    model = EnglishLookupEmbedding(model_name="bge-small-en-v1.5")
    index = VectorStoreIndex(EN_CORPUS, embed_model=model)
    return HybridFusionRetriever.from_defaults(
        index, nodes=EN_CORPUS, similarity_top_k=4, **settings
    )


async def test_english_defaults_let_the_dense_leg_lead_on_english_text() -> None:
    # BM25 returns only the distractor (the only text sharing a term with the question): z 0,
    # and the floor -1 for the nodes it missed. Z-score, equal weights: the answer scores
    # z_dense(answer) - 1, the distractor z_dense(distractor) + 0. RRF with equal weights (the
    # earlier default) puts the distractor first: 1/62 + 1/61 against the answer's 1/61.
    cosines = [vector[0] for vector in list(EN_VECTORS.values())[1:]]
    z = [(c - statistics.fmean(cosines)) / statistics.pstdev(cosines) for c in cosines]
    hybrid = english_hybrid()
    results = hybrid.retrieve(EN_QUERY)
    assert [r.node.node_id for r in results][:2] == ["answer", "distractor"]
    assert [r.score for r in results][:2] == pytest.approx([z[0] - 1.0, z[1]], rel=1e-6)
    asynchronous = await hybrid.aretrieve(EN_QUERY)
    assert [r.node.node_id for r in asynchronous] == [r.node.node_id for r in results]
    assert [r.score for r in asynchronous] == pytest.approx([r.score for r in results])
    assert english_hybrid(mode="rrf").retrieve(EN_QUERY)[0].node.node_id == "distractor"


RRF, MINMAX, ZSCORE = FusionMode.RRF, Normalization.MINMAX, Normalization.ZSCORE


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"mode": "rrf"}, (RRF, (1.0, 1.0), 60, MINMAX)),
        ({"weights": [1.0, 1.0]}, (RRF, (1.0, 1.0), 60, MINMAX)),
        ({"k": 10}, (RRF, (1.0, 1.0), 10, MINMAX)),
        ({"normalization": "zscore"}, (RRF, (1.0, 1.0), 60, ZSCORE)),
    ],
)
@pytest.mark.parametrize("model_name", ["multilingual-e5-small-q4", "bge-small-en-v1.5"])
def test_a_given_fusion_setting_keeps_the_class_defaults_for_the_rest(
    given: dict, expected: tuple, model_name: str
) -> None:
    hybrid = hybrid_over(model_name, **given)
    assert (hybrid.mode, hybrid.weights, hybrid.k, hybrid.normalization) == expected
    assert hybrid.retrieve(QUERY)[0].node.node_id == "distractor"  # RRF, equal weights
