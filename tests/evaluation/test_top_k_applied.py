"""The compare harness sets k only through the retrievers' own ``with_top_k``: no harness
module names a retriever's top-k field, each k is a copy of one configured retriever, and the
hybrid's legs are set to fetch ``leg_top_k`` by the hybrid itself (no per-k cache of its own)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import VectorStoreIndex
from llama_index.core.bridge.pydantic import Field
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.evaluation import compose
from llama_index_ext_advrag.evaluation.compose import (
    Component,
    LayoutRetrievers,
    PipelineSpec,
    SecondHopFactory,
)
from llama_index_ext_advrag.retrievers import HybridFusionRetriever
from llama_index_ext_advrag.retrievers._config import ConfiguredRetriever
from llama_index_ext_advrag.retrievers.hybrid import with_top_k

pytestmark = pytest.mark.unit

EVALUATION = Path(compose.__file__).parent
TOP_K_FIELDS = ("similarity_top_k", "details_top_k", "top_k_field")


def test_no_harness_module_names_a_retrievers_top_k_field() -> None:
    for path in sorted(EVALUATION.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        named = [field for field in TOP_K_FIELDS if field in text]
        assert not named, f"evaluation/{path.name} names {named}: apply k with with_top_k"


def notes() -> list[TextNode]:
    return [TextNode(text=f"kettle note {i} about tea and water {i}") for i in range(6)]


def test_each_k_of_a_dense_pipeline_is_a_with_top_k_copy_of_one_retriever() -> None:
    index = VectorStoreIndex(notes(), embed_model=HashEmbedding(dim=64))
    at = compose._dense(PipelineSpec("p", Component("dense")), None, SimpleNamespace(index=index))  # type: ignore[arg-type]
    three, five = at(3), at(5)
    assert (three.similarity_top_k, five.similarity_top_k) == (3, 5)
    assert len(three.retrieve("kettle")) == 3 and len(five.retrieve("kettle")) == 5
    assert at(3).similarity_top_k == 3  # the shared retriever was not changed by k=5


class Layout(ConfiguredRetriever):
    """A layout retriever whose number of results is ``details_top_k``."""

    top_k_setting: ClassVar[str | None] = "details_top_k"
    details_top_k: int = Field(default=2, ge=1)
    mode: str = Field(default="a")

    @classmethod
    def class_name(cls) -> str:
        return "Layout"

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return []


def test_a_layout_retriever_gets_its_query_settings_once_and_each_k_through_with_top_k() -> None:
    opened = Layout()
    at = LayoutRetrievers(opened, {"mode": "b"})
    four = at(4)
    assert (four.details_top_k, four.mode) == (4, "b")
    assert (opened.details_top_k, opened.mode) == (2, "a")  # the opened index is untouched
    with pytest.raises(ValueError, match="bogus"):
        LayoutRetrievers(opened, {"bogus": 1})  # a bad query setting fails at build time


class RecordingLeg(BaseRetriever):
    """A leg returning ``similarity_top_k`` notes; records the number each call asked for."""

    def __init__(self, name: str, asked: list[tuple[str, int]]) -> None:
        super().__init__()
        self.name, self.asked, self.similarity_top_k = name, asked, 1

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.asked.append((self.name, self.similarity_top_k))
        return [
            NodeWithScore(node=TextNode(id_=f"{self.name}{i}", text="t"), score=1.0 / (i + 1))
            for i in range(self.similarity_top_k)
        ]


def test_the_hybrid_sets_its_legs_to_leg_top_k_on_every_copy_and_after_a_change() -> None:
    asked: list[tuple[str, int]] = []
    legs: list[Any] = [RecordingLeg("a", asked), RecordingLeg("b", asked)]
    hybrid = HybridFusionRetriever(retrievers=legs, leg_names=["a", "b"], leg_top_k=3)
    assert len(with_top_k(hybrid, 2).retrieve("q")) == 2
    assert asked == [("a", 3), ("b", 3)]
    asked.clear()
    wider = hybrid.with_settings(leg_top_k=6)
    wider.retrieve("q")
    hybrid.retrieve("q")
    assert asked == [("a", 6), ("b", 6), ("a", 3), ("b", 3)]
    asked.clear()
    hybrid.leg_top_k = 4  # a changed setting applies at the next call
    hybrid.retrieve("q")
    assert asked == [("a", 4), ("b", 4)]
    assert [leg.similarity_top_k for leg in legs] == [1, 1]  # the given legs are untouched


def test_a_second_hop_returns_k_results_unless_its_settings_fix_the_number() -> None:
    index = VectorStoreIndex(notes(), embed_model=HashEmbedding(dim=64))
    inner = index.as_retriever()
    at = SecondHopFactory(lambda n: with_top_k(inner, n), {})
    assert at(4).similarity_top_k == 4
    fixed = SecondHopFactory(lambda n: with_top_k(inner, n), {"similarity_top_k": 2})
    assert fixed(4).similarity_top_k == 2
