"""Faults injected at every LLM call site and at the storage steps: each is survived (a result
with the fallback recorded) or is a clear error, and nothing is half-written or duplicated."""

from __future__ import annotations

import errno
import logging

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Document
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.storage.docstore import SimpleDocumentStore

from llama_index_ext_advrag import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalAutoMergingRetriever,
    JiebaBM25Retriever,
    PrevNextPostprocessor,
    SafePandasQueryEngine,
    TwoLayerMilvusRetriever,
)
from llama_index_ext_advrag.milvus import count_rows, open_client
from llama_index_ext_advrag.retrievers import bm25 as bm25_module
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits
from llama_index_ext_advrag.tables.workbooks import table_pointers
from llama_index_ext_advrag.trace import TRACE_KEY

LIMITS = SandboxLimits(timeout_seconds=60, cpu_seconds=5, memory_mb=256)


def _raise(error: Exception):
    def answer(prompt: str) -> str:
        raise error

    return answer


LLM_FAULTS = {
    "timeout": _raise(TimeoutError("the LLM did not answer within 30 s")),
    "exception": _raise(RuntimeError("LLM server returned 500")),
    "empty": lambda prompt: "",
    "garbage": lambda prompt: "\x00%%%}{#@ ### \ufffd" * 20,
}
RAISING = ("timeout", "exception")


# --- LLM call sites -----------------------------------------------------------------------------


def _corpus_nodes():
    text = "Cats purr. Dogs bark. Birds sing. Fish swim. Cows moo."
    return AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(
        [Document(text=text, id_="animals")]
    )


@pytest.mark.parametrize("fault", sorted(LLM_FAULTS))
async def test_prev_next_direction_llm_faults_fall_back(fault: str, caplog) -> None:
    nodes = _corpus_nodes()
    store = SimpleDocumentStore()
    store.add_documents(nodes)
    postprocessor = PrevNextPostprocessor(
        docstore=store, mode="auto", num_nodes=1, llm=ScriptedLLM(LLM_FAULTS[fault])
    )
    hits = [NodeWithScore(node=nodes[2], score=1.0)]
    with caplog.at_level(logging.INFO):
        results = postprocessor.postprocess_nodes(hits, query_bundle=QueryBundle("birds"))
        again = await postprocessor.apostprocess_nodes(hits, query_bundle=QueryBundle("birds"))
    for output in (results, again):
        assert output and "Birds sing." in output[0].node.get_content()
        trace = output[0].node.metadata[TRACE_KEY]["prev_next"]
        assert trace["direction"] == postprocessor.fallback_direction.value
        assert trace["source"] == ("llm_error" if fault in RAISING else "fallback")
        if fault in RAISING:
            assert trace["error"].split(":")[0] in ("TimeoutError", "RuntimeError")


@pytest.mark.parametrize("fault", sorted(LLM_FAULTS))
def test_table_summary_llm_faults_use_the_description(fault: str) -> None:
    frames = {"people": pd.DataFrame({"name": ["Ann", "Bo"], "age": [70, 50]})}
    pointers, engines = table_pointers(frames, llm=ScriptedLLM(LLM_FAULTS[fault]), limits=LIMITS)
    text = pointers[0].get_content()
    assert "people" in text and "name" in text  # the description (name, columns) stands in
    assert list(engines) == ["table::people"]


@pytest.mark.parametrize("fault", sorted(LLM_FAULTS))
def test_two_layer_summary_llm_faults_keep_the_heuristic_summary(fault: str) -> None:
    from llama_index_ext_advrag.retrievers._two_layer_store import summarise_with_llm
    from llama_index_ext_advrag.retrievers._units import UnitGranularity, document_units

    (unit,) = document_units(
        [Document(text="# Cats\n\nCats purr when content.", id_="cats")],
        UnitGranularity.DOCUMENT,
        64,
    )
    summarised, source = summarise_with_llm(unit, ScriptedLLM(LLM_FAULTS[fault]))
    if fault == "garbage":  # long enough to be kept: what the model said is the summary
        assert source == "llm" and summarised.summary.startswith(unit.name)
    else:
        assert source == "heuristic" and summarised == unit


@pytest.mark.parametrize("fault", sorted(LLM_FAULTS))
async def test_pandas_engine_llm_faults(fault: str) -> None:
    engine = SafePandasQueryEngine(
        pd.DataFrame({"a": [1, 2]}), llm=ScriptedLLM(LLM_FAULTS[fault]), limits=LIMITS
    )
    if fault in RAISING:  # the engine's one job is the LLM's code: its error, unchanged
        with pytest.raises((TimeoutError, RuntimeError), match="LLM"):
            engine.query("total?")
        with pytest.raises((TimeoutError, RuntimeError), match="LLM"):
            await engine.aquery("total?")
        return
    response = engine.query("total?")
    trace = response.metadata[TRACE_KEY]["pandas"]
    assert trace["outcome"] != "answered"  # refused, recorded, answered with the description
    assert trace["attempts"], trace


# --- BM25 persistence: a full disk leaves the previous index -----------------------------------


def test_a_full_disk_while_persisting_bm25_keeps_the_previous_index(tmp_path, monkeypatch) -> None:
    nodes = _corpus_nodes()
    folder = tmp_path / "bm25" / "docs"
    JiebaBM25Retriever(nodes[:2]).persist(folder)
    written = []
    real = bm25_module.doc_to_json

    def fill_disk(node):
        written.append(node.node_id)
        if len(written) == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(node)

    monkeypatch.setattr(bm25_module, "doc_to_json", fill_disk)
    with pytest.raises(OSError, match="No space left"):
        JiebaBM25Retriever(nodes).persist(folder)
    monkeypatch.undo()
    loaded = JiebaBM25Retriever.from_persist_dir(folder)
    assert [n.node_id for n in loaded._nodes] == [n.node_id for n in nodes[:2]]
    assert loaded.retrieve("cats")[0].node.node_id == nodes[0].node_id
    assert sorted(p.name for p in folder.parent.iterdir()) == ["docs"]  # no staging left


def test_a_truncated_bm25_nodes_file_is_refused(tmp_path) -> None:
    folder = JiebaBM25Retriever(_corpus_nodes()).persist(tmp_path / "docs")
    lines = (folder / bm25_module.NODES_FILE).read_text(encoding="utf-8").splitlines()
    (folder / bm25_module.NODES_FILE).write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="incomplete"):
        JiebaBM25Retriever.from_persist_dir(folder)


# --- a crash between the two collections of a build --------------------------------------------

DOCUMENTS = [
    Document(text="# Cats\n\nCats purr when content. They sleep all day.", id_="cats"),
    Document(text="# Dogs\n\nDogs bark at night. They guard houses.", id_="dogs"),
]


class Crash(RuntimeError):
    pass


def _crash_on(monkeypatch, module, suffix: str) -> None:
    real = module.open_vector_store

    def open_or_crash(uri, name, *args, **kwargs):
        if name.endswith(suffix):
            raise Crash(f"process killed before {name}")
        return real(uri, name, *args, **kwargs)

    monkeypatch.setattr(module, "open_vector_store", open_or_crash)


def _drop_collections(client, prefix: str) -> None:
    for name in client.list_collections():
        if name.startswith(prefix):
            client.drop_collection(name)


def test_rerunning_an_interrupted_auto_merging_build_repairs_it(
    milvus_uri, collection_name, monkeypatch
) -> None:
    from llama_index_ext_advrag.retrievers import _auto_merging_store

    build = dict(
        uri=milvus_uri,
        embed_model=HashEmbedding(),
        chunk_sizes=[32, 8],
        collection_name=collection_name,
    )
    _crash_on(monkeypatch, _auto_merging_store, "_parents")
    with pytest.raises(Crash):
        HierarchicalAutoMergingRetriever.from_documents(DOCUMENTS, **build)
    monkeypatch.undo()
    client = open_client(milvus_uri)
    try:
        leaves_before = count_rows(client, collection_name)
        assert leaves_before > 0  # the leaves were written before the crash
        retriever = HierarchicalAutoMergingRetriever.from_documents(DOCUMENTS, **build)
        assert count_rows(client, collection_name) == leaves_before  # nothing duplicated
        assert retriever.retrieve("Do cats purr?")
        with pytest.raises(ValueError, match="already exist"):  # a complete index is kept
            HierarchicalAutoMergingRetriever.from_documents(DOCUMENTS, **build)
    finally:
        _drop_collections(client, collection_name)


def test_rerunning_an_interrupted_two_layer_build_repairs_it(
    milvus_uri, collection_name, monkeypatch
) -> None:
    from llama_index_ext_advrag.retrievers import _two_layer_store

    build = dict(uri=milvus_uri, embed_model=HashEmbedding(), collection_name=collection_name)
    _crash_on(monkeypatch, _two_layer_store, "_details")
    with pytest.raises(Crash):
        TwoLayerMilvusRetriever.from_documents(DOCUMENTS, **build)
    monkeypatch.undo()
    client = open_client(milvus_uri)
    try:
        retriever = TwoLayerMilvusRetriever.from_documents(DOCUMENTS, **build)
        assert count_rows(client, collection_name + "_summary") == 2
        results = retriever.retrieve("Do cats purr?")
        assert results and results[0].node.metadata["unit_key"] == "cats"
    finally:
        _drop_collections(client, collection_name)
