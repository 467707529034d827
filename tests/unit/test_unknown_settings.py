"""Every public component of the pack refuses a keyword that is not one of its settings (issue
#39: ``BgeSmallOnnxEmbedding(bogus_option=1)`` and ``MultilingualE5Embedding(max_length=4)`` were
accepted and ignored, so a misspelt setting silently did nothing)."""

from __future__ import annotations

import importlib
import inspect

import pytest
from llama_index.core.bridge.pydantic import BaseModel, ValidationError
from llama_index.core.embeddings import MockEmbedding

PACKAGES = [
    "llama_index_ext_advrag",
    "llama_index_ext_advrag.embeddings",
    "llama_index_ext_advrag.judges",
    "llama_index_ext_advrag.node_parser",
    "llama_index_ext_advrag.postprocessor",
    "llama_index_ext_advrag.query_engine",
    "llama_index_ext_advrag.retrievers",
    "llama_index_ext_advrag.tables",
]
# LlamaIndex's MilvusVectorStore under the pack's checks: its keywords are core's to judge.
CORE_OWNED = {"CheckedMilvusVectorStore"}


def public_components() -> dict[str, type[BaseModel]]:
    found: dict[str, type[BaseModel]] = {}
    for package in PACKAGES:
        module = importlib.import_module(package)
        for name in module.__all__:
            value = getattr(module, name)
            if inspect.isclass(value) and issubclass(value, BaseModel) and name not in CORE_OWNED:
                found[name] = value
    return found


def test_every_public_component_forbids_unknown_settings() -> None:
    components = public_components()
    assert {"BgeSmallOnnxEmbedding", "CRAGPostprocessor", "LLMRelevanceJudge"} <= set(components)
    lenient = sorted(n for n, c in components.items() if c.model_config.get("extra") != "forbid")
    assert lenient == []


def refused(build) -> str:
    with pytest.raises(ValidationError) as raised:
        build()
    assert isinstance(raised.value, ValueError)
    return str(raised.value)


def test_the_embedding_models_name_an_unknown_keyword() -> None:
    from llama_index_ext_advrag.embeddings import BgeSmallOnnxEmbedding, MultilingualE5Embedding

    message = refused(lambda: BgeSmallOnnxEmbedding(bogus_option=1))
    assert "bogus_option\n  Extra inputs are not permitted" in message
    message = refused(lambda: MultilingualE5Embedding(max_length=4))
    assert "max_length\n  Extra inputs are not permitted" in message
    assert BgeSmallOnnxEmbedding(max_length=64).max_length == 64  # a real setting still works


def test_parsers_postprocessors_and_judges_name_an_unknown_keyword() -> None:
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge
    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
    from llama_index_ext_advrag.postprocessor import CRAGPostprocessor, PrevNextPostprocessor

    judge = EmbeddingRelevanceJudge(embed_model=MockEmbedding(embed_dim=4))
    builds = {
        "window_sise": lambda: AdaptiveSlidingWindowNodeParser(window_sise=3),
        "upper_threshold": lambda: CRAGPostprocessor(judge=judge, upper_threshold=0.9),
        "num_nodes_": lambda: PrevNextPostprocessor(docstore=SimpleDocumentStore(), num_nodes_=2),
        "nmae": lambda: EmbeddingRelevanceJudge(embed_model=MockEmbedding(embed_dim=4), nmae="x"),
    }
    for keyword, build in builds.items():
        assert f"{keyword}\n  Extra inputs are not permitted" in refused(build), keyword
