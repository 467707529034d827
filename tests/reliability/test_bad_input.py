"""Bad input through the public API of every parser, retriever, postprocessor, query engine and
the CLI: a result or a clear error naming the problem, no hang, nothing silently dropped.

Sizes are the smallest that show each behaviour (a 100 KB text without punctuation is one
"sentence" as a 10 MB one is); the 10 MB and 100k-sentence cases are marked ``heavy`` and
run with ``ADVRAG_HEAVY=1``. Outcomes are counted (``reliability_outcomes``) and printed.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable
from typing import Any

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import BaseNode, NodeWithScore, QueryBundle, TextNode
from reliability_outcomes import record

from llama_index_ext_advrag import (
    AdaptiveSlidingWindowNodeParser,
    ConsecutiveMergePostprocessor,
    ContextCompressionPostprocessor,
    DriftAwareWindowPostprocessor,
    HierarchicalAutoMergingRetriever,
    HierarchicalSentenceNodeParser,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    PrevNextPostprocessor,
    SafePandasQueryEngine,
    TwoLayerMilvusRetriever,
    UnitAnnotator,
    WindowReplacementPostprocessor,
)
from llama_index_ext_advrag.cli import main as cli_main
from llama_index_ext_advrag.milvus import check_storable_nodes
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits

pytestmark = pytest.mark.timeout(300)
HEAVY = os.environ.get("ADVRAG_HEAVY") == "1"
heavy = pytest.mark.skipif(not HEAVY, reason="heavy input: run with ADVRAG_HEAVY=1")

# --- the inputs ---------------------------------------------------------------------------------

TEXTS: dict[str, str] = {
    "empty": "",
    "whitespace": " \n\t \u3000 \n",
    "no-punctuation-100KB": "word " * 20_000,
    "line-200KB": "A short sentence here. " * 9_000,
    "token-200KB": "x" * 200_000,
    "replacement-characters": "\ufffd\ufffd broken bytes \ufffd here. Then text.",
    "lone-surrogates": "Broken \ud800 text. More \udfff here.",
    "nul": "Null\x00byte in text. Another\x00 sentence.",
    "emoji": "Cats 🐱 purr 😀. Dogs 🐶 bark! 🎉🎉🎉",
    "combining-marks": "Cafe\u0301 au lait. Z\u0351\u0352\u0353algo\u0300\u0301 text.",
    "right-to-left": "مرحبا بالعالم. هذا اختبار للنص. שלום עולם.",
    "mixed-zh-en-code": "新冠病毒 COVID-19 的潜伏期为5天。See `f(x)`.\n\n```python\nprint('潜伏期')\n```\n",
    "one-word-sentences-5k": "Word. " * 5_000,
    "punctuation-only": "?!。，…;:.",
}
HEAVY_TEXTS: dict[str, str] = {
    "no-punctuation-10MB": "word " * 2_000_000,
    "one-word-sentences-100k": "Word. " * 100_000,
}
METADATA: dict[str, dict[Any, Any]] = {
    "nested": {"a": {"b": [1, {"c": "d"}]}, "list": [1, 2, 3]},
    "very-long-value": {"blob": "v" * 100_000},
    "non-string-keys": {1: "one", 2.5: "two and a half"},
    "tuple-key": {(1, 2): "pair"},
    "surrogate-key": {"k\ud800": "v"},
}


def _ok_nodes(nodes: list[BaseNode], documents: list[Document]) -> str | None:
    """Why a parse result is wrong: a document with text but no node (silently dropped),
    a node Milvus cannot store, or text not covered by the nodes (by their char spans)."""
    for document in documents:
        text = document.get_content()
        mine = [n for n in nodes if n.ref_doc_id == document.node_id]
        if text.strip() and not mine:
            return f"document {document.node_id!r} with text produced no node"
        covered = bytearray(len(text))
        for node in mine:
            span = node.metadata.get("char_span")
            if span:
                covered[span[0] : span[1]] = b"\x01" * (span[1] - span[0])
        missing = [i for i, char in enumerate(text) if not char.isspace() and not covered[i]]
        if mine and missing:
            return f"{len(missing)} characters of {document.node_id!r} in no node"
    try:
        check_storable_nodes(nodes)
    except ValueError as error:
        return f"a node Milvus cannot store: {error}"
    return None


PARSERS: dict[str, Callable[[], Any]] = {
    "sliding-fixed": lambda: AdaptiveSlidingWindowNodeParser(),
    "sliding-sentence": lambda: AdaptiveSlidingWindowNodeParser(
        embed_unit="sentence", min_embed_tokens=8
    ),
    "sliding-adaptive": lambda: AdaptiveSlidingWindowNodeParser(
        mode="adaptive", embed_model=HashEmbedding()
    ),
    "hierarchy": lambda: HierarchicalSentenceNodeParser(chunk_sizes=[256, 64]),
}


def _parse(parser_name: str, documents: list[Document]) -> list[BaseNode]:
    nodes = PARSERS[parser_name]().get_nodes_from_documents(documents)
    UnitAnnotator()(nodes)  # the ingest-time annotation takes them too
    return nodes


@pytest.mark.parametrize("parser_name", sorted(PARSERS))
@pytest.mark.parametrize("text_name", sorted(TEXTS))
def test_parsers_take_bad_text(parser_name: str, text_name: str) -> None:
    documents = [Document(text=TEXTS[text_name], id_=text_name)]
    outcome, value = record(
        "parsers",
        f"{parser_name}/{text_name}",
        lambda: _parse(parser_name, documents),
        check=lambda nodes: _ok_nodes(nodes, documents),
    )
    assert outcome == "result", value


@heavy
@pytest.mark.parametrize("parser_name", ["sliding-fixed", "hierarchy"])
@pytest.mark.parametrize("text_name", sorted(HEAVY_TEXTS))
def test_parsers_take_heavy_text(parser_name: str, text_name: str) -> None:
    documents = [Document(text=HEAVY_TEXTS[text_name], id_=text_name)]
    outcome, value = record(
        "parsers-heavy",
        f"{parser_name}/{text_name}",
        lambda: PARSERS[parser_name]().get_nodes_from_documents(documents),
        check=lambda nodes: _ok_nodes(nodes, documents),
    )
    assert outcome == "result", value


@pytest.mark.parametrize("parser_name", sorted(PARSERS))
def test_parsers_take_duplicate_documents_and_ids(parser_name: str) -> None:
    same = Document(text="Same text. Twice over.", id_="dup")
    documents = [same, same, Document(text="Other text. Same id.", id_="dup")]
    outcome, value = record(
        "parsers",
        f"{parser_name}/duplicates",
        lambda: _parse(parser_name, documents),
        check=lambda nodes: (
            None
            if len({n.node_id for n in nodes}) == len(nodes)
            and {n.metadata["document_id"] for n in nodes} == {"dup", "dup#1", "dup#2"}
            else "duplicate documents share node ids"
        ),
    )
    assert outcome == "result", value


@pytest.mark.parametrize("metadata_name", sorted(METADATA))
def test_parsers_take_odd_metadata(metadata_name: str) -> None:
    """Metadata Milvus cannot store as given: parsing keeps it (core does too), and the
    pack's Milvus builders refuse it before embedding with an error naming the node."""
    outcome, value = record(
        "parsers",
        f"metadata/{metadata_name}",
        lambda: _parse(
            "sliding-fixed",
            [Document(text="Some text. More text.", id_="m", metadata=METADATA[metadata_name])],
        ),
        ("metadata", "string"),  # core's Document refuses non-string keys itself
        check=lambda nodes: None if nodes else "no node",
    )
    assert outcome != "other", value


# --- retrievers, postprocessors and query engines over a small bad corpus -----------------------

CORPUS = [
    Document(text=TEXTS[name], id_=name)
    for name in (
        "replacement-characters",
        "lone-surrogates",
        "nul",
        "emoji",
        "combining-marks",
        "right-to-left",
        "mixed-zh-en-code",
    )
] + [Document(text="Cats purr when content. Dogs bark at night. Birds sing.", id_="animals")]

QUERIES: dict[str, str] = {
    "empty": "",
    "whitespace": "   \n",
    "50KB": "cats purr " * 5_000,
    "punctuation-only": "?!。，…",
    "lone-surrogate": "cats \ud800 purr",
    "nul": "cats\x00purr",
    "emoji": "🐱 purr?",
    "right-to-left": "مرحبا",
    "mixed": "潜伏期 COVID-19 `f(x)`",
}
QUERY_NAMES = ("query", "empty", "blank", "surrogate", "utf-8", "encode", "text")
TOP_KS = {"zero": 0, "negative": -1, "huge": 10**9}


@pytest.fixture(scope="module")
def corpus_nodes() -> list[BaseNode]:
    return AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(CORPUS)


def _retrievers(nodes: list[BaseNode]) -> dict[str, Any]:
    dense = VectorStoreIndex(nodes, embed_model=HashEmbedding()).as_retriever(similarity_top_k=4)
    return {
        "bm25": JiebaBM25Retriever(nodes, similarity_top_k=4),
        "hybrid": HybridFusionRetriever(
            [dense, JiebaBM25Retriever(nodes)], leg_names=["dense", "bm25"], similarity_top_k=4
        ),
    }


def _results_ok(results: Any) -> str | None:
    if not isinstance(results, list) or not all(isinstance(r, NodeWithScore) for r in results):
        return f"not a list of NodeWithScore: {type(results).__name__}"
    return None


def _query_each(suite: str, retrievers: dict[str, Any], query_name: str) -> None:
    """Every retriever, sync and async, with one bad query: a result or a clear error."""
    query = QUERIES[query_name]
    for name, retriever in retrievers.items():
        for mode, run in (
            ("sync", lambda r=retriever: r.retrieve(query)),
            ("async", lambda r=retriever: asyncio.run(r.aretrieve(query))),
        ):
            outcome, value = record(
                suite, f"{name}/{mode}/{query_name}", run, QUERY_NAMES, _results_ok
            )
            assert outcome != "other", value


@pytest.mark.parametrize("query_name", sorted(QUERIES))
def test_retrievers_take_bad_queries(corpus_nodes, query_name: str) -> None:
    _query_each("retrievers", _retrievers(corpus_nodes), query_name)


@pytest.mark.parametrize("top_k_name", sorted(TOP_KS))
def test_retrievers_take_bad_top_k(corpus_nodes, top_k_name: str) -> None:
    top_k = TOP_KS[top_k_name]
    dense = VectorStoreIndex(corpus_nodes, embed_model=HashEmbedding()).as_retriever()
    cases: dict[str, Callable[[], Any]] = {
        "bm25": lambda: JiebaBM25Retriever(corpus_nodes, similarity_top_k=top_k).retrieve("cats"),
        "hybrid": lambda: HybridFusionRetriever(
            [dense, JiebaBM25Retriever(corpus_nodes)], similarity_top_k=top_k
        ).retrieve("cats"),
        "hybrid-leg": lambda: HybridFusionRetriever(
            [dense, JiebaBM25Retriever(corpus_nodes)], leg_top_k=top_k
        ).retrieve("cats"),
        "window-replacement": lambda: WindowReplacementPostprocessor(top_n=top_k),
    }
    for name, run in cases.items():
        outcome, value = record(
            "top_k",
            f"{name}/{top_k_name}",
            run,
            ("similarity_top_k", "top_k", "top_n", "leg_top_k", "greater than", "less than"),
            lambda v: None if v is not None else "None",
        )
        assert outcome != "other", value
        if top_k_name != "huge":  # 0 and -1 are refused, a huge k returns what there is
            assert outcome == "clear_error", (name, value)


POSTPROCESSORS: dict[str, Callable[[list[BaseNode]], Any]] = {
    "prev-next": lambda nodes: PrevNextPostprocessor(
        docstore=_docstore(nodes), num_nodes=1, mode="fixed"
    ),
    "prev-next-auto": lambda nodes: PrevNextPostprocessor(
        docstore=_docstore(nodes), num_nodes=1, mode="auto", llm=ScriptedLLM(["NEXT"])
    ),
    "drift-window": lambda nodes: DriftAwareWindowPostprocessor(
        docstore=_docstore(nodes), embed_model=HashEmbedding()
    ),
    "consecutive-merge": lambda nodes: ConsecutiveMergePostprocessor(docstore=_docstore(nodes)),
    "window-replacement": lambda nodes: WindowReplacementPostprocessor(),
    "compression": lambda nodes: ContextCompressionPostprocessor(
        embed_model=HashEmbedding(), docstore=_docstore(nodes), max_context_tokens=40
    ),
}


def _docstore(nodes: list[BaseNode]) -> Any:
    from llama_index.core.storage.docstore import SimpleDocumentStore

    store = SimpleDocumentStore()
    store.add_documents(nodes)
    return store


@pytest.mark.parametrize("query_name", sorted(QUERIES))
def test_postprocessors_take_bad_queries_and_nodes(corpus_nodes, query_name: str) -> None:
    hits = JiebaBM25Retriever(corpus_nodes, similarity_top_k=6).retrieve("cats text")
    hits += [NodeWithScore(node=TextNode(text="", id_="empty-node"), score=None)]
    bundle = QueryBundle(QUERIES[query_name])
    for name, make in POSTPROCESSORS.items():
        postprocessor = make(corpus_nodes)
        cases: dict[str, tuple[Callable[[], Any], Callable[[Any], str | None]]] = {
            "sync": (
                lambda p=postprocessor: p.postprocess_nodes(hits, query_bundle=bundle),
                _results_ok,
            ),
            "async": (
                lambda p=postprocessor: asyncio.run(
                    p.apostprocess_nodes(hits, query_bundle=bundle)
                ),
                _results_ok,
            ),
            "no-nodes": (
                lambda p=postprocessor: p.postprocess_nodes([], query_bundle=bundle),
                lambda v: None if v == [] else f"{len(v)} nodes out of none",
            ),
        }
        for case, (run, check) in cases.items():
            outcome, value = record(
                "postprocessors", f"{name}/{case}/{query_name}", run, QUERY_NAMES, check
            )
            assert outcome != "other", value


@pytest.mark.parametrize("query_name", sorted(QUERIES))
def test_query_engines_take_bad_queries(corpus_nodes, query_name: str) -> None:
    table = pd.DataFrame({"name": ["Ann", "Bo"], "age": [70, 50]})
    pandas_engine = SafePandasQueryEngine(
        table,
        llm=ScriptedLLM(["```python\nlen(df)\n```"]),
        limits=SandboxLimits(timeout_seconds=60, cpu_seconds=5, memory_mb=256),
    )
    retriever_engine = RetrieverQueryEngine.from_args(
        _retrievers(corpus_nodes)["hybrid"], llm=ScriptedLLM(["an answer"])
    )
    for name, engine in (("pandas", pandas_engine), ("hybrid-engine", retriever_engine)):
        outcome, value = record(
            "query_engines",
            f"{name}/{query_name}",
            lambda e=engine: e.query(QUERIES[query_name]),
            QUERY_NAMES,
            lambda response: None if isinstance(str(response), str) else "no text",
        )
        assert outcome != "other", value


# --- Milvus-backed retrievers over the bad corpus ------------------------------------------------


@pytest.fixture(scope="module")
def milvus_retrievers(tmp_path_factory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("bad_input")
    uri = str(folder / "bad.db")
    return {
        "auto-merging": HierarchicalAutoMergingRetriever.from_documents(
            CORPUS, uri=uri, embed_model=HashEmbedding(), chunk_sizes=[64, 16]
        ),
        "two-layer": TwoLayerMilvusRetriever.from_documents(
            CORPUS, uri=uri, embed_model=HashEmbedding()
        ),
    }


@pytest.mark.milvus_lite
@pytest.mark.parametrize("query_name", sorted(QUERIES))
def test_milvus_retrievers_take_bad_queries(milvus_retrievers, query_name: str) -> None:
    _query_each("milvus_retrievers", milvus_retrievers, query_name)


@pytest.mark.milvus_lite
@pytest.mark.parametrize("metadata_name", sorted(METADATA))
def test_milvus_builders_take_odd_metadata(tmp_path, metadata_name: str) -> None:
    def build_and_query() -> Any:
        documents = [
            Document(text="Cats purr. Dogs bark.", id_="m", metadata=METADATA[metadata_name]),
            Document(text="Birds sing. Fish swim.", id_="n"),
        ]
        return HierarchicalAutoMergingRetriever.from_documents(
            documents, uri=str(tmp_path / "m.db"), embed_model=HashEmbedding(), chunk_sizes=[64, 8]
        ).retrieve("cats")

    outcome, value = record(
        "milvus_builders",
        f"auto-merging/{metadata_name}",
        build_and_query,
        ("metadata", "json", "bytes", "surrogate", "string"),
        lambda results: None if results else "no result",
    )
    assert outcome != "other", value


@pytest.mark.parametrize("top_k_name", sorted(TOP_KS))
def test_milvus_retrievers_refuse_bad_top_k(top_k_name: str, tmp_path) -> None:
    top_k = TOP_KS[top_k_name]
    for name, make in (
        (
            "auto-merging",
            lambda: HierarchicalAutoMergingRetriever(None, None, similarity_top_k=top_k),
        ),
        ("two-layer", lambda: TwoLayerMilvusRetriever(None, None, route_top_k=top_k)),
    ):
        outcome, value = record(
            "top_k", f"{name}/{top_k_name}", make, ("top_k", "greater than", "less than")
        )
        assert outcome == "clear_error", (name, value)


# --- the CLI -------------------------------------------------------------------------------------


@pytest.mark.parametrize("k", ["0", "-1"])
def test_cli_refuses_a_bad_k(tmp_path, k: str, capsys) -> None:
    assert cli_main(["compare", "--docs", str(tmp_path), "--k", k, "--no-llm"]) == 1
    assert f"--k must be >= 1, got {k}" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # argparse: exit status 2 and the usage
        cli_main(["compare", "--docs", str(tmp_path), "--ks", f"1,{k}", "--no-llm"])
    assert "--ks values must be >= 1" in capsys.readouterr().err


@pytest.mark.milvus_lite
def test_cli_takes_a_folder_of_bad_documents(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_packaged_embed_model", lambda: HashEmbedding()
    )
    data = tmp_path / "data"
    data.mkdir()
    for name in ("empty", "whitespace", "emoji", "right-to-left", "mixed-zh-en-code", "nul"):
        (data / f"{name}.txt").write_text(TEXTS[name], encoding="utf-8")
    questions = tmp_path / "qa.jsonl"
    questions.write_text(
        json.dumps({"id": "q1", "question": "Do cats purr?", "answers": ["purr"]}) + "\n",
        encoding="utf-8",
    )

    def compare() -> tuple[int, str]:
        code = cli_main(
            ["compare", "--docs", str(data), "--questions", str(questions), "--pipelines",
             "baseline", "--ks", "1", "--k", "1", "--uri", str(tmp_path / "c.db"), "--state-dir",
             str(tmp_path / "state"), "--out", str(tmp_path / "out"), "--no-llm", "--quiet"]
        )  # fmt: skip
        return code, capsys.readouterr().err

    outcome, value = record(
        "cli", "bad-documents", compare, (),
        lambda done: None if done[0] == 0 else f"exit status {done[0]}: {done[1][-300:]}",
    )  # fmt: skip
    assert outcome == "result", value
    (data / "bad-bytes.txt").write_bytes(b"Invalid \xff\xfe bytes. Then text.")
    outcome, value = record(
        "cli", "not-utf8-document", compare, (),
        lambda done: None if done[0] == 1 and "bad-bytes.txt: not UTF-8 text (byte 0xff" in done[1]
        else f"exit status {done[0]}: {done[1][-300:]}",
    )  # fmt: skip
    assert outcome == "result", value
