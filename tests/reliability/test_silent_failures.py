"""The silent failures of issue 19, each now a result or a clear error naming the problem.

Every test here failed on the code before its fix (the report lists the failure each gave).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.milvus import (
    MilvusConnectionError,
    check_storable_nodes,
    flush,
    open_client,
    open_vector_store,
)
from llama_index_ext_advrag.milvus.lite_files import diagnose_lite_path
from llama_index_ext_advrag.node_parser import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
)
from llama_index_ext_advrag.retrievers import (
    HierarchicalAutoMergingRetriever,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    TwoLayerMilvusRetriever,
)
from llama_index_ext_advrag.text import DEFAULT_MAX_SENTENCE_CHARS
from llama_index_ext_advrag.trace import TRACE_KEY

REPO_ROOT = Path(__file__).resolve().parents[2]
PARSERS = [
    pytest.param(lambda: AdaptiveSlidingWindowNodeParser(window_size=2, stride=1), id="sliding"),
    pytest.param(
        lambda: AdaptiveSlidingWindowNodeParser(embed_unit="sentence"), id="sliding-sentence"
    ),
    pytest.param(lambda: HierarchicalSentenceNodeParser(chunk_sizes=[64, 16]), id="hierarchy"),
]


class StrictEmbedding(HashEmbedding):
    """A fake embedding that, like every real tokenizer, cannot take a lone surrogate."""

    def _vector(self, text: str) -> list[float]:
        text.encode("utf-8")
        return super()._vector(text)


# --- duplicate document ids ----------------------------------------------------------------------


@pytest.mark.parametrize("make_parser", PARSERS)
def test_two_documents_with_one_id_keep_distinct_nodes(make_parser, caplog) -> None:
    documents = [
        Document(text="Alpha one. Alpha two. Alpha three.", id_="same"),
        Document(text="Beta one. Beta two. Beta three.", id_="same"),
    ]
    with caplog.at_level(logging.WARNING):
        nodes = make_parser().get_nodes_from_documents(documents)
    ids = [node.node_id for node in nodes]
    assert len(ids) == len(set(ids)), "two documents' nodes share ids: one would overwrite"
    texts = " ".join(node.get_content() for node in nodes)
    assert "Alpha" in texts and "Beta" in texts
    assert {node.metadata["document_id"] for node in nodes} == {"same", "same#1"}
    assert {node.ref_doc_id for node in nodes} == {"same"}  # both still belong to "same"
    assert "'same'" in caplog.text and "'same#1'" in caplog.text


def test_duplicate_ids_are_in_the_sliding_window_trace() -> None:
    documents = [Document(text="A a. B b.", id_="d"), Document(text="C c. D d.", id_="d")]
    nodes = AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(documents)
    traces = [node.metadata[TRACE_KEY]["sliding_window"] for node in nodes]
    assert [t.get("duplicate_document_id") for t in traces] == [None, None, "d", "d"]


def test_a_document_id_of_the_form_of_a_suffix_is_not_reused() -> None:
    documents = [
        Document(text="One.", id_="x"),
        Document(text="Two.", id_="x#1"),
        Document(text="Three.", id_="x"),
    ]
    nodes = AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(documents)
    assert [n.metadata["document_id"] for n in nodes] == ["x", "x#1", "x#2"]
    assert len({n.node_id for n in nodes}) == 3


# --- oversize units -----------------------------------------------------------------------------


@pytest.mark.parametrize("make_parser", PARSERS)
@pytest.mark.parametrize(
    "text",
    [
        pytest.param("word " * 20_000, id="100KB-no-punctuation"),
        pytest.param("x" * 50_000, id="50KB-token"),
        pytest.param("中" * 30_000, id="30K-CJK-no-punctuation"),
    ],
)
def test_a_sentence_without_end_is_cut_and_reported(make_parser, text, caplog) -> None:
    parser = make_parser()
    with caplog.at_level(logging.WARNING):
        nodes = parser.get_nodes_from_documents([Document(text=text, id_="long")])
    check_storable_nodes(nodes)  # every node fits a Milvus text field
    assert max(len(node.get_content()) for node in nodes) <= 3 * DEFAULT_MAX_SENTENCE_CHARS + 2
    covered = "".join(
        node.get_content() for node in nodes if node.metadata.get("hierarchy_level", 0) == 0
    )
    if isinstance(parser, HierarchicalSentenceNodeParser):  # level 0 tiles the text
        assert "".join(covered.split()) == "".join(text.split())
    assert "'long'" in caplog.text and "cut into pieces" in caplog.text


def test_cut_sentences_are_in_the_trace() -> None:
    parser = AdaptiveSlidingWindowNodeParser(window_size=1)
    nodes = parser.get_nodes_from_documents([Document(text="Short. " + "Y" * 9_000)])
    traces = [node.metadata[TRACE_KEY]["sliding_window"] for node in nodes]
    assert [t.get("cut_sentences") for t in traces] == [None, 1, 1, 1]


def test_an_oversize_node_is_refused_before_embedding(tmp_path) -> None:
    class CountingEmbedding(HashEmbedding):
        calls: int = 0

        def _get_text_embeddings(self, texts):
            self.calls += len(texts)
            return super()._get_text_embeddings(texts)

    embed = CountingEmbedding()
    leaf = TextNode(text="z" * 70_000, id_="big", metadata={"document_id": "doc"})
    with pytest.raises(ValueError, match=r"node 'big' of document 'doc' holds 70,000 bytes"):
        HierarchicalAutoMergingRetriever.from_nodes(
            [leaf], uri=str(tmp_path / "m.db"), embed_model=embed
        )
    assert embed.calls == 0


# --- lone surrogates ----------------------------------------------------------------------------


@pytest.mark.parametrize("make_parser", PARSERS)
def test_a_document_with_a_lone_surrogate_is_parsed_and_named(make_parser, caplog) -> None:
    document = Document(
        text="Hello \ud800 world. Next sentence here.", id_="broken", metadata={"k": "v\udfff"}
    )
    with caplog.at_level(logging.WARNING):
        nodes = make_parser().get_nodes_from_documents([document])
    assert nodes and all("\ufffd" in n.get_content() or "Next" in n.get_content() for n in nodes)
    check_storable_nodes(nodes)
    assert document.text == "Hello \ud800 world. Next sentence here."  # the caller's document
    assert "'broken'" in caplog.text and "surrogate" in caplog.text


def _hybrid_in_memory() -> HybridFusionRetriever:
    nodes = [
        TextNode(text=t, id_=str(i))
        for i, t in enumerate(["Cats purr when content.", "Dogs bark at night."])
    ]
    index = VectorStoreIndex(nodes, embed_model=StrictEmbedding())
    return HybridFusionRetriever(
        [index.as_retriever(similarity_top_k=2), JiebaBM25Retriever(nodes)],
        leg_names=["dense", "bm25"],
        similarity_top_k=2,
    )


def test_a_query_with_a_lone_surrogate_uses_every_leg(caplog) -> None:
    hybrid = _hybrid_in_memory()
    with caplog.at_level(logging.WARNING):
        results = hybrid.retrieve("cats \ud800 purr")
    assert results and results[0].node.node_id == "0"
    trace = results[0].node.metadata[TRACE_KEY]["hybrid_fusion"]
    assert "degraded" not in trace, trace
    assert "surrogate" in caplog.text


async def test_a_query_with_a_lone_surrogate_async() -> None:
    results = await _hybrid_in_memory().aretrieve("cats \ud800 purr")
    assert "degraded" not in results[0].node.metadata[TRACE_KEY]["hybrid_fusion"]


@pytest.mark.milvus_lite
def test_auto_merging_takes_a_query_with_a_lone_surrogate(tmp_path) -> None:
    retriever = HierarchicalAutoMergingRetriever.from_documents(
        [Document(text="Cats purr when content. Dogs bark at night. Birds sing.", id_="d")],
        uri=str(tmp_path / "m.db"),
        embed_model=StrictEmbedding(),
        chunk_sizes=[32, 8],
    )
    results = retriever.retrieve("cats \ud800 purr")
    assert results


# --- two-layer metadata -------------------------------------------------------------------------


def test_two_layer_from_documents_keeps_the_documents_metadata(milvus_uri, collection_name) -> None:
    documents = [
        Document(
            text="# Cats\n\nCats purr when content. They sleep a lot.",
            id_="cats",
            metadata={"source_url": "https://example.org/cats", "author": "Ann"},
        ),
        Document(
            text="# Dogs\n\nDogs bark at night. They guard houses.",
            id_="dogs",
            metadata={"source_url": "https://example.org/dogs", "author": "Bo"},
        ),
    ]
    retriever = TwoLayerMilvusRetriever.from_documents(
        documents,
        uri=milvus_uri,
        embed_model=HashEmbedding(),
        collection_name=collection_name,
        overwrite=True,
        route_top_k=1,
    )
    try:
        results = retriever.retrieve("Do cats purr?")
        assert results
        metadata = results[0].node.metadata
        assert metadata["source_url"] == "https://example.org/cats"
        assert metadata["author"] == "Ann"
    finally:
        client = open_client(milvus_uri)
        for suffix in ("_summary", "_details"):
            if client.has_collection(collection_name + suffix):
                client.drop_collection(collection_name + suffix)


def test_two_layer_names_the_documents_it_skips(caplog) -> None:
    from llama_index_ext_advrag.retrievers._units import UnitGranularity, document_units

    with caplog.at_level(logging.WARNING):
        units = document_units(
            [Document(text="  ", id_="blank"), Document(text="Text here.", id_="ok")],
            UnitGranularity.DOCUMENT,
            64,
        )
    assert [u.key for u in units] == ["ok"]
    assert "'blank'" in caplog.text


# --- async over open_vector_store from a second event loop --------------------------------------


def test_hybrid_over_open_vector_store_from_a_second_asyncio_run(
    milvus_uri, collection_name, drop_after, caplog
) -> None:
    nodes = [
        TextNode(text=t, id_=str(i))
        for i, t in enumerate(["Cats purr when content.", "Dogs bark.", "Birds sing songs."])
    ]
    store = open_vector_store(milvus_uri, collection_name, dim=64, overwrite=True)
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=HashEmbedding(),
    )
    flush(store)
    hybrid = HybridFusionRetriever(
        [index.as_retriever(similarity_top_k=2), JiebaBM25Retriever(nodes)],
        leg_names=["dense", "bm25"],
        similarity_top_k=2,
    )

    async def query() -> list[tuple[str, object]]:
        results = await hybrid.aretrieve("cats purr")
        return [
            (r.node.node_id, r.node.metadata[TRACE_KEY]["hybrid_fusion"].get("degraded"))
            for r in results
        ]

    with caplog.at_level(logging.WARNING):
        first = asyncio.run(query())
        second = asyncio.run(query())  # a new event loop: core's client was bound to the first
    assert first == second
    assert all(degraded is None for _, degraded in second), second
    assert "leg dense failed" not in caplog.text


# --- Milvus Lite files that cannot be opened ----------------------------------------------------

HOLD_LITE = "from pymilvus import MilvusClient; c = MilvusClient({uri!r}); print('held', flush=True); import time; time.sleep(120)"


@pytest.mark.milvus_lite
def test_a_lite_file_held_by_another_process_is_named(tmp_path) -> None:
    uri = str(tmp_path / "held.db")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LITE.format(uri=uri)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(MilvusConnectionError) as raised:
            open_client(uri)
        message = str(raised.value)
        assert uri in message and "another process holds its lock" in message
        with pytest.raises(MilvusConnectionError, match="another process holds its lock"):
            open_vector_store(uri, "docs", dim=4)
    finally:
        holder.kill()
        holder.wait()


def _diagnose_as_another_user(uri: str) -> str:
    """``diagnose_lite_path(uri)`` in a forked child that cannot write ``uri``'s folder.

    The child is forked from this process, so it needs nothing from disk (the clone may sit in a
    private folder that another user cannot read); as root it drops to uid/gid 65534 first,
    because root writes anywhere. Bounded: killed after 60 s.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        status = 1
        try:
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            try:
                os.stat(Path(uri).parent)
            except OSError as error:
                os.write(write_end, f"unreachable: {error}".encode("utf-8", "replace"))
            else:
                os.write(write_end, diagnose_lite_path(uri).encode("utf-8", "replace"))
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    deadline = time.monotonic() + 60
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the diagnosing child did not finish in 60 s")
        time.sleep(0.05)
    with os.fdopen(read_end, "rb") as reader:
        return reader.read().decode("utf-8")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork to drop privileges")
def test_a_lite_file_in_a_read_only_folder_is_named() -> None:
    # Not under pytest's tmp_path: its root (pytest-of-<user>) is private to this user.
    base = Path(tempfile.mkdtemp(prefix="advrag-ro-"))
    try:
        base.chmod(0o755)  # the unprivileged child must reach the folder to be refused in it
        folder = base / "read_only"
        folder.mkdir()
        folder.chmod(0o555)
        uri = str(folder / "x.db")
        reason = _diagnose_as_another_user(uri)
        if reason.startswith("unreachable"):
            pytest.skip(f"the temporary folder is private to this user: {reason}")
        assert reason.startswith("its folder cannot be written"), reason
        assert "Permission denied" in reason and str(folder) in reason
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.milvus_lite
def test_a_lite_file_whose_folder_cannot_be_made_is_named(tmp_path) -> None:
    # End to end through the public opener, for any user and wherever the clone lives: the
    # folder of the file cannot be created because its parent is a regular file.
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("a file", encoding="utf-8")
    uri = str(blocker / "x.db")
    with pytest.raises(MilvusConnectionError) as raised:
        open_client(uri)
    message = str(raised.value)
    assert uri in message and "cannot be written" in message, message
    assert str(blocker) in message


# --- logging: nothing adds a root handler -------------------------------------------------------

IMPORT_EVERYTHING = textwrap.dedent(
    """
    import importlib, logging, pkgutil, sys
    sys.path[:0] = [{root!r}, {tests!r}]
    import pandas as pd
    import llama_index_ext_advrag as package
    assert package.__file__.startswith({root!r}), package.__file__
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        importlib.import_module(module.name)
    for name in package.__all__:
        getattr(package, name)
    from advrag_testing import ScriptedLLM
    engine = package.SafePandasQueryEngine(
        pd.DataFrame({{"a": [1, 2]}}), llm=ScriptedLLM(["df['a'].sum()"])
    )
    assert str(engine.query("total?")) == "3"
    assert not logging.getLogger().handlers, logging.getLogger().handlers
    assert "llama_index.experimental" not in sys.modules
    print("clean")
    """
)


def test_importing_every_module_and_the_table_route_add_no_root_handler(tmp_path) -> None:
    script = IMPORT_EVERYTHING.format(root=str(REPO_ROOT), tests=str(REPO_ROOT / "tests"))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("clean")
