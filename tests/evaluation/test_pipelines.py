"""Every registered pipeline builds from the pack's public classes and answers on Milvus Lite;
indexes are reused when corpus and settings are unchanged and rebuilt otherwise."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus
from llama_index.core.schema import Document, MetadataMode, QueryBundle

from llama_index_ext_advrag.evaluation.compose import BuildContext
from llama_index_ext_advrag.evaluation.ingest import IndexStore, collection_name_for, index_key
from llama_index_ext_advrag.evaluation.registry import (
    BUILTIN_SPECS,
    get_pipeline,
    offline_pipeline_names,
    register_pipeline,
    registered_pipelines,
)
from llama_index_ext_advrag.evaluation.sources import load_corpus

pytestmark = pytest.mark.milvus_lite

ISSUE_NAMES = ("baseline", "sentence-window", "adaptive-window", "article", "auto-merging",
               "two-layer", "hybrid", "prev-next", "drift-window")  # fmt: skip


def test_registry_holds_the_issue_pipelines_and_stays_open() -> None:
    assert set(ISSUE_NAMES) <= set(registered_pipelines())
    assert set(ISSUE_NAMES) <= set(offline_pipeline_names())

    def build(context: BuildContext):
        raise AssertionError("not built here")

    register_pipeline("test-llm-only", build, description="x", needs_llm=True, replace=True)
    try:
        assert "test-llm-only" not in offline_pipeline_names()
        with pytest.raises(ValueError, match="already registered"):
            register_pipeline("test-llm-only", build)
    finally:
        from llama_index_ext_advrag.evaluation import registry

        registry._REGISTRY.pop("test-llm-only")


@pytest.fixture
def store(tmp_path: Path) -> IndexStore:
    docs, _ = write_corpus(tmp_path)
    return IndexStore(
        load_corpus([docs]),
        str(tmp_path / "milvus.db"),
        HashEmbedding(dim=64),
        state_dir=tmp_path / "state",
        show_progress=False,
    )


@pytest.mark.parametrize("name", [spec.name for spec in BUILTIN_SPECS])
def test_each_pipeline_builds_and_retrieves(store: IndexStore, name: str) -> None:
    context = BuildContext(store, llm=None, english_only_embedding=False, doc_type="general")
    pipeline = get_pipeline(name).build(context)
    query = QueryBundle("Ferro pump pressure bar")
    nodes = pipeline.retrieve(query, 2)
    assert nodes, name
    text = "\n".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)
    assert "pump" in text.lower()
    # a smaller k never returns more context nodes than a larger one on the same question
    assert len(pipeline.retrieve(query, 1)) <= len(pipeline.retrieve(query, 4))


def test_hybrid_finds_chinese_through_bm25(store: IndexStore) -> None:
    context = BuildContext(store, llm=None, english_only_embedding=True)
    pipeline = get_pipeline("hybrid").build(context)
    nodes = pipeline.retrieve(QueryBundle("渡灯节在哪一天举行？"), 1)
    assert "七月初七" in nodes[0].node.get_content(metadata_mode=MetadataMode.NONE)


@pytest.mark.parametrize(
    ("english_only", "params", "expected"),
    [
        (True, {}, ("score", "zscore", (1.0, 0.3))),  # fitted with bge-small (English-only)
        (False, {}, ("score", "zscore", (1.0, 1.0))),  # a multilingual model: unchanged
        (True, {"weights": [1.0, 1.0]}, ("score", "zscore", (1.0, 1.0))),  # a given setting
        (True, {"mode": "rrf"}, ("rrf", "zscore", (1.0, 1.0))),
    ],
)
def test_hybrid_fusion_settings_follow_the_embedding(
    store: IndexStore, english_only: bool, params: dict, expected: tuple
) -> None:
    from llama_index_ext_advrag.evaluation.compose import compose
    from llama_index_ext_advrag.evaluation.registry import HYBRID, _c

    spec = replace(HYBRID, retriever=_c("hybrid", **params)) if params else HYBRID
    context = BuildContext(store, llm=None, english_only_embedding=english_only)
    retriever = compose(spec, context)._retriever(4)
    assert (retriever.mode.value, retriever.normalization.value, retriever.weights) == expected
    assert retriever.english_only_legs == (("dense",) if english_only else ())


def reopen(tmp_path: Path, documents: list[Document]) -> IndexStore:
    return IndexStore(
        documents,
        str(tmp_path / "milvus.db"),
        HashEmbedding(dim=64),
        state_dir=tmp_path / "state",
        show_progress=False,
    )


def test_index_is_reused_when_unchanged_and_rebuilt_when_changed(tmp_path: Path) -> None:
    from llama_index.core.node_parser import SentenceSplitter
    from pymilvus import MilvusClient

    docs, _ = write_corpus(tmp_path)
    documents = load_corpus([docs])
    settings = {"chunk_size": 64}

    def parse():
        return SentenceSplitter(chunk_size=64, chunk_overlap=0)

    first = reopen(tmp_path, documents).vector_index("splitter", parse, settings)
    assert not first.record.reused and first.record.nodes > 0
    again = reopen(tmp_path, documents).vector_index("splitter", parse, settings)
    assert again.record.reused and again.collection == first.collection
    assert again.record.embedded_texts == 0
    assert again.index.as_retriever(similarity_top_k=1).retrieve("Ferro pump bar")

    first_doc = documents[0]
    edited = Document(
        text=first_doc.text + "\nNew line.", id_=first_doc.id_, metadata=first_doc.metadata
    )
    changed = [edited, *documents[1:]]
    rebuilt = reopen(tmp_path, changed).vector_index("splitter", parse, settings)
    assert not rebuilt.record.reused
    assert rebuilt.collection != first.collection
    client = MilvusClient(str(tmp_path / "milvus.db"))
    try:  # the stale collection of the same parser is dropped
        assert not client.has_collection(first.collection)
        assert client.has_collection(rebuilt.collection)
    finally:
        client.close()
    other = reopen(tmp_path, changed).vector_index("splitter", parse, {"chunk_size": 65})
    assert not other.record.reused  # other settings: another index


def test_collection_names_are_valid_and_keyed_by_content() -> None:
    key = index_key("corpus", "SentenceSplitter:{}", {"a": 1}, "model")
    assert key != index_key("corpus2", "SentenceSplitter:{}", {"a": 1}, "model")
    assert key != index_key("corpus", "SentenceSplitter:{}", {"a": 2}, "model")
    name = collection_name_for('AdaptiveSlidingWindowNodeParser:{"preset": "article"}', key)
    assert name.startswith("advrag_adaptiveslidingwindownodeparser_preset")
    assert name.endswith(key[:12]) and len(name) <= 255
    assert name.replace("_", "").isalnum()
