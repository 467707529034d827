"""The ``*-compress`` pipelines of ``advrag compare``: run only when named, their context at k
stays within ``tokens_per_slot * k`` tokens, and a bad ``tokens_per_slot`` in a spec file is
refused with the pipeline named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus

from llama_index_ext_advrag.evaluation.compose import COMPRESSION_TOKENS_PER_SLOT, SpecError
from llama_index_ext_advrag.evaluation.registry import (
    load_spec,
    offline_pipeline_names,
    registered_pipelines,
)
from llama_index_ext_advrag.evaluation.session import CompareOptions, run_compare


def test_compress_pipelines_are_registered_and_run_only_when_named() -> None:
    pipelines = registered_pipelines()
    for name in ("baseline-compress", "hybrid-compress"):
        assert pipelines[name].by_name_only and not pipelines[name].needs_llm
    assert "baseline-compress" in offline_pipeline_names()  # offline, though not in the default set


@pytest.mark.milvus_lite
def test_compressed_context_follows_k(tmp_path: Path) -> None:
    docs, qa = write_corpus(tmp_path)
    per_slot = 20
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pipelines": ["baseline", {
        "name": "tight-compress", "retriever": "dense",
        "parser": {"type": "SentenceSplitter", "chunk_size": 256, "chunk_overlap": 20},
        "postprocessors": [{"type": "ContextCompressionPostprocessor", "tokens_per_slot": per_slot}],
        "fetch_multiplier": 3,
    }, "baseline-compress", "hybrid-compress"]}), encoding="utf-8")  # fmt: skip
    options = CompareOptions(
        docs=[str(docs)], questions=str(qa), spec=str(spec),
        uri=str(tmp_path / "m.db"), out=str(tmp_path / "report"), state_dir=str(tmp_path / "s"),
        k=1, ks=[1, 2], embed_model=HashEmbedding(dim=64), use_llm=False, show_progress=False,
    )  # fmt: skip
    run, _ = run_compare(options)
    tight = [r for r in run.results if r.pipeline == "tight-compress"]
    assert tight and all(r.context_tokens <= per_slot * r.k for r in tight)
    for name in ("baseline-compress", "hybrid-compress"):
        default = [r for r in run.results if r.pipeline == name]
        assert default and all(
            r.context_tokens <= COMPRESSION_TOKENS_PER_SLOT * r.k for r in default
        )
        assert any(r.covered for r in default), name


@pytest.mark.milvus_lite
def test_a_bad_tokens_per_slot_is_refused(tmp_path: Path) -> None:
    docs, qa = write_corpus(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"pipelines": [{
        "name": "bad-compress", "retriever": "dense", "parser": "SentenceSplitter",
        "postprocessors": [{"type": "ContextCompressionPostprocessor", "tokens_per_slot": 0}],
    }]}), encoding="utf-8")  # fmt: skip
    assert [p.name for p in load_spec(spec)] == ["bad-compress"]
    options = CompareOptions(
        docs=[str(docs)], questions=str(qa), spec=str(spec),
        uri=str(tmp_path / "m.db"), out=str(tmp_path / "report"), state_dir=str(tmp_path / "s"),
        k=1, ks=[1], embed_model=HashEmbedding(dim=64), use_llm=False, show_progress=False,
    )  # fmt: skip
    with pytest.raises(SpecError, match="bad-compress.*tokens_per_slot must be an integer >= 1"):
        run_compare(options)
