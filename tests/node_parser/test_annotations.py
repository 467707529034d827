"""UnitAnnotator: ingest-time token counts and cues, used by the drift window at query time."""

from __future__ import annotations

import asyncio

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import MetadataMode, QueryBundle, TextNode
from postprocessor._corpus import docstore_of, hits, sentence_nodes

from llama_index_ext_advrag import postprocessor
from llama_index_ext_advrag.layout import UNIT_CUES_KEY, UNIT_TOKENS_KEY, stored_cues, stored_tokens
from llama_index_ext_advrag.node_parser import UnitAnnotator
from llama_index_ext_advrag.node_parser.annotations import annotate_unit
from llama_index_ext_advrag.postprocessor import (
    DriftAwareWindowPostprocessor,
    _growth,
    _window_session,
)
from llama_index_ext_advrag.text import count_tokens, extract_cues
from llama_index_ext_advrag.trace import get_trace

EMBED = HashEmbedding(dim=64)


def query(text: str) -> QueryBundle:
    return QueryBundle(text, embedding=EMBED.get_query_embedding(text))


def forbid_text_analysis(monkeypatch) -> None:
    def fail(text: str):
        raise AssertionError(f"analysed at query time: {text!r}")

    monkeypatch.setattr(_growth, "count_tokens", fail)
    monkeypatch.setattr(_window_session, "extract_cues", fail)


def test_annotation_is_a_copy_and_leaves_embedding_and_llm_text_unchanged() -> None:
    node = TextNode(text="In 1901 a storm hit Velmar and the NATO-2 pier.", metadata={"page": 3})
    annotated = annotate_unit(node)
    assert UNIT_TOKENS_KEY not in node.metadata  # the input is not modified
    assert annotated.metadata[UNIT_TOKENS_KEY] == count_tokens(node.get_content())
    assert annotated.metadata[UNIT_CUES_KEY] == sorted(extract_cues(node.get_content()))
    assert "1901" in annotated.metadata[UNIT_CUES_KEY]
    for mode in (MetadataMode.EMBED, MetadataMode.LLM):
        assert annotated.get_content(mode) == node.get_content(mode)
    assert annotated.node_id == node.node_id and annotated.metadata["page"] == 3


def test_annotator_in_an_ingestion_pipeline_sync_and_async() -> None:
    nodes = sentence_nodes(embed=False)
    pipeline = IngestionPipeline(transformations=[UnitAnnotator()])
    sync = pipeline.run(nodes=nodes)
    async_ = asyncio.run(IngestionPipeline(transformations=[UnitAnnotator()]).arun(nodes=nodes))
    assert [n.metadata for n in sync] == [n.metadata for n in async_]
    assert all(stored_tokens(n.metadata) == count_tokens(n.get_content()) for n in sync)
    assert UnitAnnotator.from_dict(UnitAnnotator().to_dict()).class_name() == "UnitAnnotator"
    assert UnitAnnotator()([]) == []
    shown = UnitAnnotator()(nodes, show_progress=True)  # a progress bar on long corpora
    assert [n.metadata for n in shown] == [n.metadata for n in sync]


@pytest.mark.parametrize("value", ["12", True, -1, 1.5, None])
def test_malformed_token_annotations_are_ignored(value) -> None:
    assert stored_tokens({UNIT_TOKENS_KEY: value}) is None


@pytest.mark.parametrize("value", ["storm", [1, 2], None, {"a": 1}])
def test_malformed_cue_annotations_are_ignored(value) -> None:
    assert stored_cues({UNIT_CUES_KEY: value}) is None


def test_the_window_uses_stored_annotations_and_gives_the_same_result(monkeypatch) -> None:
    plain = sentence_nodes()
    annotated = UnitAnnotator()(plain)
    kwargs = {"embed_model": EMBED, "min_sim": -1.0, "prune_sim": 0.2}
    bundle = query("storm pier granite")
    expected = DriftAwareWindowPostprocessor(docstore=docstore_of(plain), **kwargs)
    wanted = expected.postprocess_nodes(hits(plain, "In 1901", "Its lamp"), bundle)
    forbid_text_analysis(monkeypatch)
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(annotated), **kwargs)
    output = post.postprocess_nodes(hits(annotated, "In 1901", "Its lamp"), bundle)
    assert [n.node.get_content() for n in output] == [n.node.get_content() for n in wanted]
    assert [get_trace(n.node, "drift_window")["records"] for n in output] == [
        get_trace(n.node, "drift_window")["records"] for n in wanted
    ]
    joined = [n.node for n in output if len(get_trace(n.node, "drift_window")["members"]) > 1]
    assert joined and all(UNIT_TOKENS_KEY not in n.metadata for n in joined)


def test_annotations_survive_milvus_and_are_read_with_the_light_rows(
    milvus_uri, collection_name, monkeypatch
) -> None:
    from llama_index_ext_advrag.milvus import flush, open_vector_store

    annotated = UnitAnnotator()(sentence_nodes())
    vector_store = open_vector_store(milvus_uri, collection_name, dim=64)
    try:
        vector_store.add(annotated)
        flush(vector_store)
        kwargs = {"embed_model": EMBED, "min_sim": -1.0, "prune_sim": 0.2}
        bundle = query("storm pier granite")
        results = hits(annotated, "After the storm", "Its lamp")
        wanted = DriftAwareWindowPostprocessor(docstore=docstore_of(annotated), **kwargs)
        expected = [n.node.get_content() for n in wanted.postprocess_nodes(results, bundle)]
        forbid_text_analysis(monkeypatch)
        post = DriftAwareWindowPostprocessor(vector_store=vector_store, **kwargs)
        assert [n.node.get_content() for n in post.postprocess_nodes(results, bundle)] == expected
    finally:
        vector_store.client.drop_collection(collection_name)


def test_annotator_is_exported_from_root_and_parsers_only() -> None:
    import llama_index_ext_advrag as root

    assert root.UnitAnnotator is UnitAnnotator
    assert "UnitAnnotator" not in postprocessor.__all__  # an ingest step, not a postprocessor
    with pytest.raises(AttributeError):
        _ = postprocessor.UnitAnnotator
