"""The ``*-second-hop`` pipelines of ``advrag compare``: a retriever's ``second_hop`` param wraps
it in a SecondHopRetriever returning k results, in front of the spec's postprocessors."""

from __future__ import annotations

from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus
from llama_index.core.schema import MetadataMode, QueryBundle

from llama_index_ext_advrag.evaluation.compose import (
    COMPRESSION_TOKENS_PER_SLOT,
    BuildContext,
    Component,
    PipelineSpec,
    SpecError,
    compose,
    split_second_hop,
)
from llama_index_ext_advrag.evaluation.ingest import IndexStore
from llama_index_ext_advrag.evaluation.registry import get_pipeline, spec_from_dict
from llama_index_ext_advrag.evaluation.sources import load_corpus
from llama_index_ext_advrag.text import count_tokens
from llama_index_ext_advrag.trace import get_trace

SPLITTER = Component("SentenceSplitter", {"chunk_size": 64, "chunk_overlap": 0})


def test_split_second_hop() -> None:
    spec = spec_from_dict(
        {"name": "s", "parser": "SentenceSplitter",
         "retriever": {"type": "dense", "second_hop": {"cue": "title"}}}, "w"
    )  # fmt: skip
    plain, settings = split_second_hop(spec)
    assert settings == {"cue": "title"} and plain.retriever == Component("dense", {})
    assert split_second_hop(plain) == (plain, None)
    bad = PipelineSpec("b", Component("dense", {"second_hop": "yes"}), SPLITTER)
    with pytest.raises(SpecError, match=r"pipeline 'b': second_hop must be a mapping.*'yes'"):
        split_second_hop(bad)


@pytest.fixture
def context(tmp_path: Path) -> BuildContext:
    docs, _ = write_corpus(tmp_path)
    store = IndexStore(
        load_corpus([docs]),
        str(tmp_path / "milvus.db"),
        HashEmbedding(dim=64),
        state_dir=tmp_path / "state",
        show_progress=False,
    )
    return BuildContext(store, llm=None, english_only_embedding=False)


@pytest.mark.milvus_lite
@pytest.mark.parametrize(
    "name", ["baseline-second-hop", "hybrid-second-hop", "baseline-second-hop-compress"]
)
def test_second_hop_pipelines_retrieve_k_distinct_nodes_with_the_trace(
    context: BuildContext, name: str
) -> None:
    pipeline = get_pipeline(name).build(context)
    query = QueryBundle("Ferro pump pressure bar")
    for k in (1, 3):
        nodes = pipeline.retrieve(query, k)
        if name.endswith("-compress"):  # 3k chunks cut to the budget, not to k passages
            text = "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)
            assert nodes and count_tokens(text) <= COMPRESSION_TOKENS_PER_SLOT * k
        else:
            assert 0 < len(nodes) <= k
        ids = [n.node.node_id for n in nodes]
        assert len(ids) == len(set(ids))
        assert all(get_trace(n.node, "second_hop")["searches"] >= 1 for n in nodes)


@pytest.mark.milvus_lite
def test_bad_second_hop_settings_name_the_pipeline(context: BuildContext) -> None:
    spec = PipelineSpec("odd", Component("dense", {"second_hop": {"seed_count": -1}}), SPLITTER)
    with pytest.raises(SpecError, match=r"(?s)pipeline 'odd'.*seed_count"):
        compose(spec, context)
