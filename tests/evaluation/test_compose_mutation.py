"""compose.py rule by rule, with in-memory stand-ins (no Milvus): which parser, retriever and
postprocessors a spec builds and with which settings (k, fetch_multiplier, budgets), the errors
naming a bad spec value, the indexes asked of the store, the layout retrievers opened and
closed, and the order and number of a composed pipeline's results."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import PUMP, RIVER
from llama_index.core import VectorStoreIndex
from llama_index.core.bridge.pydantic import Field
from llama_index.core.node_parser import (
    HierarchicalNodeParser,
    SentenceSplitter,
    SentenceWindowNodeParser,
)
from llama_index.core.postprocessor import MetadataReplacementPostProcessor
from llama_index.core.schema import Document, MetadataMode, NodeWithScore, QueryBundle, TextNode
from llama_index.vector_stores.milvus import MilvusVectorStore

from llama_index_ext_advrag import postprocessor as pack
from llama_index_ext_advrag import retrievers as pack_retrievers
from llama_index_ext_advrag.evaluation import compose
from llama_index_ext_advrag.evaluation.compose import (
    COMPRESSION_TOKENS_PER_SLOT,
    HIERARCHY_PARSERS,
    PARSERS,
    POSTPROCESSORS,
    RETRIEVERS,
    BuildContext,
    Component,
    ComposedPipeline,
    LayoutRetrievers,
    PipelineSpec,
    SecondHopFactory,
    SpecError,
    split_second_hop,
)
from llama_index_ext_advrag.evaluation.ingest import BuiltIndex, IngestRecord
from llama_index_ext_advrag.node_parser import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
    UnitAnnotator,
)
from llama_index_ext_advrag.retrievers import HybridFusionRetriever, JiebaBM25Retriever
from llama_index_ext_advrag.retrievers._config import ConfiguredRetriever

pytestmark = pytest.mark.unit

DOCUMENTS = [Document(text=PUMP, id_="pump"), Document(text=RIVER, id_="river")]
SPLITTER = Component("SentenceSplitter", {"chunk_size": 48, "chunk_overlap": 0})
PUMP_QUERY = QueryBundle("Ferro pump pressure bar")


class MemoryStore:
    """``IndexStore``'s interface over in-memory indexes: records what compose asks of it."""

    def __init__(self, layout_mode: str = "build") -> None:
        self.documents = list(DOCUMENTS)
        self.embed_model = HashEmbedding(dim=64)
        self.uri = "memory-uri"
        self.token = "memory-token"
        self.show_progress = False
        self.vector_calls: list[tuple[str, dict[str, Any], Any]] = []
        self.bm25_calls: list[tuple[BuiltIndex, Any]] = []
        self.layout_calls: list[tuple[str, dict[str, Any]]] = []
        self.layout_mode = layout_mode

    def vector_index(
        self, name: str, make_parser: Any, settings: dict[str, Any], transform: Any = None
    ) -> BuiltIndex:
        self.vector_calls.append((name, settings, transform))
        nodes = make_parser().get_nodes_from_documents(self.documents)
        if transform is not None:
            nodes = transform(nodes)
        index = VectorStoreIndex(nodes, embed_model=self.embed_model)
        record = IngestRecord(name, "collection", len(nodes), 0.0, False)
        # the neighbour postprocessors take a MilvusVectorStore: an unconnected one (never read)
        store = MilvusVectorStore.model_construct()
        return BuiltIndex(name, "collection", store, index, nodes, record)

    def bm25(self, built: BuiltIndex, make_parser: Any) -> JiebaBM25Retriever:
        self.bm25_calls.append((built, make_parser()))
        return JiebaBM25Retriever(built.nodes)

    def layout_index(self, key: str, settings: dict[str, Any], build: Any, reopen: Any) -> str:
        self.layout_calls.append((key, settings))
        if self.layout_mode == "build":
            build("built_collection")
        elif self.layout_mode == "reuse":
            reopen("reused_collection")
        elif self.layout_mode == "twice":  # reopened, then built again
            reopen("twice_collection")
            build("twice_collection")
        return f"{self.layout_mode}_collection"


def context_of(store: MemoryStore | None = None, **options: Any) -> BuildContext:
    return BuildContext(store or MemoryStore(), **options)  # type: ignore[arg-type]


def texts(nodes: list[NodeWithScore]) -> list[str]:
    return [n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]


# --- specs and context ------------------------------------------------------------------------


def test_a_component_key_sorts_its_params_and_writes_any_value() -> None:
    assert Component("T", {"b": 1, "a": "x"}).key() == 'T:{"a": "x", "b": 1}'
    odd = Component("U", {"z": 2, "p": QueryBundle})  # not JSON: written as str() gives it
    assert odd.key() == f'U:{{"p": "{QueryBundle!s}", "z": 2}}'
    assert Component("V").params == {} and Component("V").key() == "V:{}"


def test_spec_and_context_defaults() -> None:
    spec = PipelineSpec("p", Component("dense"))
    assert spec.parser is None and spec.postprocessors == ()
    assert spec.fetch_multiplier == 1 and spec.annotate is False and spec.description == ""
    store = MemoryStore()
    context = BuildContext(store)  # type: ignore[arg-type]
    assert context.llm is None and context.judge is None
    assert context.english_only_embedding is True and context.doc_type == "general"
    assert context.embed_model is store.embed_model


def test_the_offline_judge_is_built_once_from_the_embedding(monkeypatch) -> None:
    from llama_index_ext_advrag.evaluation import offline_judge

    made: list[Any] = []

    def fake(embed_model: Any = None) -> object:
        made.append(embed_model)
        return object()

    monkeypatch.setattr(offline_judge, "offline_relevance_judge", fake)
    store = MemoryStore()
    context = context_of(store)
    first = context.relevance_judge()
    assert context.relevance_judge() is first and context.judge is first
    assert made == [store.embed_model]
    given = object()
    assert context_of(judge=given).relevance_judge() is given
    assert len(made) == 1


# --- parsers ----------------------------------------------------------------------------------


def test_each_parser_is_built_from_its_params() -> None:
    context = context_of(doc_type="article")
    splitter = PARSERS["SentenceSplitter"]({"chunk_size": 64, "chunk_overlap": 4}, context)
    assert isinstance(splitter, SentenceSplitter)
    assert (splitter.chunk_size, splitter.chunk_overlap) == (64, 4)
    window = PARSERS["SentenceWindowNodeParser"]({"window_size": 2}, context)
    assert isinstance(window, SentenceWindowNodeParser) and window.window_size == 2
    core = PARSERS["HierarchicalNodeParser"]({"chunk_sizes": [96, 48]}, context)
    assert isinstance(core, HierarchicalNodeParser) and core.chunk_sizes == [96, 48]
    ours = PARSERS["HierarchicalSentenceNodeParser"]({"chunk_sizes": [200, 80]}, context)
    assert isinstance(ours, HierarchicalSentenceNodeParser) and ours.chunk_sizes == [200, 80]
    params = {"preset": "auto"}
    adaptive = PARSERS["AdaptiveSlidingWindowNodeParser"](params, context)
    assert isinstance(adaptive, AdaptiveSlidingWindowNodeParser)
    assert adaptive.preset == "article" and params == {"preset": "auto"}  # the spec's is kept
    assert adaptive.embed_model is context.embed_model
    technical = PARSERS["AdaptiveSlidingWindowNodeParser"]({"preset": "technical"}, context)
    assert technical.preset == "technical"
    assert set(PARSERS) == {
        "SentenceSplitter",
        "SentenceWindowNodeParser",
        "AdaptiveSlidingWindowNodeParser",
        "HierarchicalSentenceNodeParser",
        "HierarchicalNodeParser",
    }
    assert HIERARCHY_PARSERS == ("HierarchicalSentenceNodeParser", "HierarchicalNodeParser")


def test_make_parser_fails_at_once_and_names_the_pipeline_and_parser() -> None:
    context = context_of()
    spec = PipelineSpec("nop", Component("dense"))
    with pytest.raises(SpecError, match=r"^pipeline 'nop': retriever 'dense' needs a parser$"):
        compose.make_parser(spec, context)
    bad = PipelineSpec("bad", Component("dense"), Component("SentenceSplitter", {"bogus": 1}))
    with pytest.raises(SpecError, match=r"^pipeline 'bad': parser SentenceSplitter: ") as info:
        compose.make_parser(bad, context)
    assert info.value.__cause__ is None and info.value.__suppress_context__
    overlap = Component("SentenceSplitter", {"chunk_size": 10, "chunk_overlap": 20})
    with pytest.raises(SpecError, match=r"pipeline 'big': parser SentenceSplitter: .*overlap"):
        compose.make_parser(PipelineSpec("big", Component("dense"), overlap), context)
    build = compose.make_parser(PipelineSpec("ok", Component("dense"), SPLITTER), context)
    first, second = build(), build()
    assert isinstance(first, SentenceSplitter) and first is not second
    assert first.chunk_size == 48


def test_make_parser_raises_unknown_errors_as_they_are() -> None:
    context = context_of()

    def broken(params: dict[str, Any], context: BuildContext) -> Any:
        raise KeyError("inner")

    PARSERS["Broken"] = broken
    try:
        with pytest.raises(KeyError, match="inner"):
            compose.make_parser(PipelineSpec("k", Component("dense"), Component("Broken")), context)
    finally:
        del PARSERS["Broken"]


def test_the_dense_index_is_named_and_keyed_by_the_parser_settings() -> None:
    store = MemoryStore()
    context = context_of(store, doc_type="article")
    spec = PipelineSpec(
        "a",
        Component("dense"),
        Component("AdaptiveSlidingWindowNodeParser", {"preset": "auto", "mode": "adaptive"}),
    )
    built = compose.dense_index(spec, context)
    [(name, settings, transform)] = store.vector_calls
    params = {"preset": "article", "mode": "adaptive", "max_window_tokens": 160}
    assert settings == {"type": "AdaptiveSlidingWindowNodeParser", "params": params,
                        "annotate": False}  # fmt: skip
    assert name == (
        'AdaptiveSlidingWindowNodeParser:{"max_window_tokens": 160, "mode": "adaptive", '
        '"preset": "article"}:False'
    )
    assert transform is None and built.nodes
    assert spec.parser is not None and spec.parser.params == {"preset": "auto", "mode": "adaptive"}
    # a given window is kept; other parsers and presets get no window setting
    given = PipelineSpec(
        "g",
        Component("dense"),
        Component(
            "AdaptiveSlidingWindowNodeParser", {"preset": "general", "max_window_tokens": 99}
        ),
    )
    assert compose._parser_settings(given, context)["params"]["max_window_tokens"] == 99
    technical = PipelineSpec(
        "t", Component("dense"), Component("AdaptiveSlidingWindowNodeParser", {"preset": "qa"})
    )
    assert compose._parser_settings(technical, context)["params"] == {"preset": "qa"}
    other = PipelineSpec("o", Component("dense"), Component("SentenceSplitter", {"preset": "auto"}))
    assert compose._parser_settings(other, context) == {
        "type": "SentenceSplitter",
        "params": {"preset": "article"},
        "annotate": False,
    }
    unnamed = PipelineSpec(
        "u", Component("dense"), Component("AdaptiveSlidingWindowNodeParser", {"mode": "adaptive"})
    )
    assert compose._parser_settings(unnamed, context)["params"] == {"mode": "adaptive"}


def test_an_annotated_index_gets_the_unit_annotator_and_its_own_name() -> None:
    store = MemoryStore()
    spec = PipelineSpec("a", Component("dense"), SPLITTER, annotate=True)
    built = compose.dense_index(spec, context_of(store))
    [(name, settings, transform)] = store.vector_calls
    assert isinstance(transform, UnitAnnotator)
    assert settings["annotate"] is True
    assert name == 'SentenceSplitter:{"chunk_overlap": 0, "chunk_size": 48}:True'
    assert built.nodes and all("unit_tokens" in n.metadata for n in built.nodes)


# --- retrievers -------------------------------------------------------------------------------


def test_a_dense_pipeline_returns_the_k_best_of_its_index_in_order() -> None:
    store = MemoryStore()
    pipeline = compose.compose(PipelineSpec("d", Component("dense"), SPLITTER), context_of(store))
    [(_, _, _)] = store.vector_calls
    nodes = pipeline.retrieve(PUMP_QUERY, 2)
    assert len(nodes) == 2
    index = VectorStoreIndex(
        SentenceSplitter(chunk_size=48, chunk_overlap=0).get_nodes_from_documents(DOCUMENTS),
        embed_model=HashEmbedding(dim=64),
    )
    expected = index.as_retriever(similarity_top_k=2).retrieve(PUMP_QUERY)
    assert texts(nodes) == texts(expected)
    assert "3.5 bar" in texts(nodes)[0]
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)
    assert len(pipeline.retrieve(PUMP_QUERY, 3)) == 3


def test_dense_retriever_params_reach_the_index_retriever() -> None:
    store = MemoryStore()
    spec = PipelineSpec("d", Component("dense", {"verbose": True}), SPLITTER)
    built = compose.dense_index(spec, context_of(store))
    at = compose._dense(spec, context_of(store), built)
    assert at(2)._verbose is True and at(3).similarity_top_k == 3


def hybrid_of(context: BuildContext, params: dict[str, Any] | None = None) -> tuple[Any, Any]:
    spec = PipelineSpec("h", Component("hybrid", params or {}), SPLITTER)
    built = compose.dense_index(spec, context)
    return compose._hybrid(spec, context, built), built


def test_the_hybrid_over_a_multilingual_embedding_fuses_z_scores_with_30_per_leg() -> None:
    store = MemoryStore()
    make, built = hybrid_of(context_of(store, english_only_embedding=False))
    [(bm25_built, parser)] = store.bm25_calls
    assert bm25_built is built and isinstance(parser, SentenceSplitter) and parser.chunk_size == 48
    three = make(3)
    assert isinstance(three, HybridFusionRetriever)
    assert (three.mode.value, three.normalization.value) == ("score", "zscore")
    assert three.weights == (1.0, 1.0) and three.english_only_legs == ()
    assert (three.leg_top_k, three.similarity_top_k, three.leg_names) == (30, 3, ["dense", "bm25"])
    legs = three.legs
    assert isinstance(legs[1], JiebaBM25Retriever) and not isinstance(legs[0], JiebaBM25Retriever)
    wide = make(40)  # a leg never fetches fewer than the results asked for
    assert (wide.leg_top_k, wide.similarity_top_k) == (40, 40)
    at_limit = make(30)
    assert (at_limit.leg_top_k, at_limit.similarity_top_k) == (30, 30)
    assert "3.5 bar" in " ".join(texts(make(2).retrieve(PUMP_QUERY)))


def test_the_hybrid_over_an_english_embedding_takes_the_sentence_defaults() -> None:
    make, _ = hybrid_of(context_of(english_only_embedding=True))
    two = make(2)
    assert (two.mode.value, two.normalization.value, two.weights) == ("score", "zscore", (1.0, 0.3))
    assert two.english_only_legs == ("dense",) and two.leg_top_k == 30
    given, _ = hybrid_of(
        context_of(english_only_embedding=True),
        {"mode": "rrf", "leg_top_k": 5, "english_only_legs": []},
    )
    rrf = given(2)
    assert (rrf.mode.value, rrf.weights, rrf.leg_top_k, rrf.english_only_legs) == (
        "rrf", (1.0, 1.0), 5, ()
    )  # fmt: skip
    assert given(6).leg_top_k == 6
    weighted, _ = hybrid_of(context_of(english_only_embedding=True), {"weights": [1.0, 2.0]})
    assert weighted(2).weights == (1.0, 2.0) and weighted(2).mode.value == "score"
    assert weighted(2).normalization.value == "zscore"
    for key in ("normalization", "k"):
        other, _ = hybrid_of(context_of(english_only_embedding=True), {key: 60 if key == "k"
                                                                       else "minmax"})  # fmt: skip
        assert other(2).weights == (1.0, 1.0), key


class FakeLayout(ConfiguredRetriever):
    """A layout retriever stand-in: records its builds, opens and closes in ``EVENTS``."""

    EVENTS: ClassVar[list[tuple[str, Any]]] = []
    top_k_setting: ClassVar[str | None] = "details_top_k"
    details_top_k: int = Field(default=2, ge=1)
    mode: str = Field(default="a")
    label: str = Field(default="")

    @classmethod
    def class_name(cls) -> str:
        return "FakeLayout"

    @classmethod
    def from_documents(cls, documents: list[Document], **options: Any) -> FakeLayout:
        cls.EVENTS.append(("build", {"documents": len(documents), **options}))
        return cls(label=f"built:{options['collection_name']}")

    @classmethod
    def from_uri(cls, uri: str, **options: Any) -> FakeLayout:
        cls.EVENTS.append(("open", {"uri": uri, **options}))
        return cls(label=f"opened:{options['collection_name']}")

    def close(self) -> None:
        self.EVENTS.append(("close", self.label))

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [
            NodeWithScore(node=TextNode(id_=f"{self.mode}{i}", text=f"t{i}"), score=1.0 - i / 10)
            for i in range(self.details_top_k)
        ]


@pytest.fixture
def fake_layouts(monkeypatch) -> list[tuple[str, Any]]:
    FakeLayout.EVENTS = []
    monkeypatch.setattr(pack_retrievers, "HierarchicalAutoMergingRetriever", FakeLayout)
    monkeypatch.setattr(pack_retrievers, "TwoLayerMilvusRetriever", FakeLayout)
    return FakeLayout.EVENTS


def test_auto_merging_builds_its_index_once_with_the_parser(fake_layouts) -> None:
    store = MemoryStore()
    parser = Component("HierarchicalSentenceNodeParser", {"chunk_sizes": [200, 80]})
    params = {"chunk_sizes": [200, 80], "mode": "b"}
    spec = PipelineSpec("am", Component("auto-merging", params), parser)
    pipeline = compose.compose(spec, context_of(store))
    [(key, settings)] = store.layout_calls
    assert settings == {"retriever": "auto-merging", "parser": parser.key(), "params": params}
    assert key == (
        'auto-merging:{"params": {"chunk_sizes": [200, 80], "mode": "b"}, "parser": '
        '"HierarchicalSentenceNodeParser:{\\"chunk_sizes\\": [200, 80]}", '
        '"retriever": "auto-merging"}'
    )
    assert store.vector_calls == []  # no dense index
    [(event, options)] = fake_layouts
    assert event == "build"
    node_parser = options.pop("node_parser")
    assert isinstance(node_parser, HierarchicalSentenceNodeParser)
    assert node_parser.chunk_sizes == [200, 80]
    assert options == {
        "documents": 2,
        "uri": "memory-uri",
        "collection_name": "built_collection",
        "overwrite": True,
        "show_progress": False,
        "embed_model": store.embed_model,
        "token": "memory-token",
        "chunk_sizes": [200, 80],
        "mode": "b",
    }
    nodes = pipeline.retrieve(PUMP_QUERY, 3)
    assert [n.node.node_id for n in nodes] == ["b0", "b1", "b2"]  # the query setting applied
    assert not pipeline._prefix_stable
    pipeline.close()
    assert fake_layouts[-1] == ("close", "built:built_collection")


def test_auto_merging_without_a_parser_and_with_a_flat_parser(fake_layouts) -> None:
    store = MemoryStore(layout_mode="reuse")
    compose.compose(PipelineSpec("am", Component("auto-merging")), context_of(store))
    [(key, settings)] = store.layout_calls
    assert settings == {"retriever": "auto-merging", "parser": None, "params": {}}
    assert key == 'auto-merging:{"params": {}, "parser": null, "retriever": "auto-merging"}'
    assert fake_layouts == [
        ("open", {"uri": "memory-uri", "collection_name": "reused_collection",
                  "embed_model": store.embed_model, "token": "memory-token"}),
    ]  # fmt: skip
    flat = PipelineSpec("flat", Component("auto-merging"), SPLITTER)
    message = (
        r"^pipeline 'flat': auto-merging needs a hierarchy parser \(HierarchicalSentenceNodeParser, "
        r"HierarchicalNodeParser\), got 'SentenceSplitter'$"
    )
    with pytest.raises(SpecError, match=message):
        compose.compose(flat, context_of())
    core = Component("HierarchicalNodeParser", {"chunk_sizes": [96, 48]})
    compose.compose(PipelineSpec("core", Component("auto-merging"), core), context_of())
    assert isinstance(fake_layouts[-1][1]["node_parser"], HierarchicalNodeParser)


def test_a_layout_index_built_earlier_is_opened_once_and_extras_are_closed(fake_layouts) -> None:
    known = MemoryStore(layout_mode="known")
    compose.compose(PipelineSpec("t", Component("two-layer")), context_of(known))
    assert [e for e, _ in fake_layouts] == ["open"]
    assert fake_layouts[0][1]["collection_name"] == "known_collection"
    fake_layouts.clear()
    twice = MemoryStore(layout_mode="twice")
    pipeline = compose.compose(PipelineSpec("t", Component("two-layer")), context_of(twice))
    assert fake_layouts == [
        ("open", {"uri": "memory-uri", "collection_name": "twice_collection",
                  "embed_model": twice.embed_model, "token": "memory-token"}),
        ("build", {"documents": 2, "uri": "memory-uri", "collection_name": "twice_collection",
                   "overwrite": True, "show_progress": False, "embed_model": twice.embed_model,
                   "token": "memory-token", "llm": None}),
        ("close", "opened:twice_collection"),
    ]  # fmt: skip
    pipeline.close()
    assert fake_layouts[-1] == ("close", "built:twice_collection")


def test_a_bad_query_setting_closes_the_opened_layout_index(fake_layouts) -> None:
    spec = PipelineSpec("t", Component("two-layer", {"bogus": 1}))
    with pytest.raises(SpecError, match=r"^pipeline 't': .*bogus"):
        compose.compose(spec, context_of())
    assert fake_layouts[-1] == ("close", "built:built_collection")
    assert [e for e, _ in fake_layouts] == ["build", "close"]


def test_two_layer_splits_build_and_query_settings(fake_layouts) -> None:
    store = MemoryStore()
    llm = object()
    params = {"granularity": "sentence", "detail_chunk_tokens": 64, "mode": "c"}
    pipeline = compose.compose(
        PipelineSpec("t", Component("two-layer", params)), context_of(store, llm=llm)
    )
    [(key, settings)] = store.layout_calls
    build_params = {"granularity": "sentence", "detail_chunk_tokens": 64}
    assert settings == {"retriever": "two-layer", "params": build_params}
    assert key == (
        'two-layer:{"params": {"detail_chunk_tokens": 64, "granularity": "sentence"}, '
        '"retriever": "two-layer"}'
    )
    [(event, options)] = fake_layouts
    assert event == "build" and options["llm"] is llm
    assert options["granularity"] == "sentence" and options["detail_chunk_tokens"] == 64
    assert "mode" not in options
    nodes = pipeline.retrieve(PUMP_QUERY, 4)
    assert [n.node.node_id for n in nodes] == ["c0", "c1", "c2", "c3"]
    assert pipeline._prefix_stable
    assert pipeline.retrieve(PUMP_QUERY, 2) == nodes[:2]


def test_layout_retrievers_close_the_opened_index() -> None:
    FakeLayout.EVENTS = []
    opened = FakeLayout(label="x")
    at = LayoutRetrievers(opened, {"mode": "q"})
    assert (at(5).details_top_k, at(5).mode) == (5, "q")
    at.close()
    assert FakeLayout.EVENTS == [("close", "x")]


def test_retriever_kinds() -> None:
    assert {name: (k.needs_dense_index, k.prefix_stable) for name, k in RETRIEVERS.items()} == {
        "dense": (True, True),
        "hybrid": (True, True),
        "auto-merging": (False, False),
        "two-layer": (False, True),
    }


# --- second hop -------------------------------------------------------------------------------


def test_split_second_hop_takes_the_mapping_out() -> None:
    spec = PipelineSpec("s", Component("dense", {"second_hop": {"seed_count": 2}, "a": 1}))
    plain, settings = split_second_hop(spec)
    assert settings == {"seed_count": 2} and plain.retriever == Component("dense", {"a": 1})
    assert spec.retriever.params == {"second_hop": {"seed_count": 2}, "a": 1}
    untouched = PipelineSpec("u", Component("dense", {"a": 1}))
    assert split_second_hop(untouched) == (untouched, None)
    with pytest.raises(
        SpecError,
        match=r"^pipeline 'b': second_hop must be a mapping of SecondHopRetriever settings, "
        r"got 3$",
    ):
        split_second_hop(PipelineSpec("b", Component("dense", {"second_hop": 3})))


class Closable:
    def __init__(self) -> None:
        self.closed = 0

    def __call__(self, n: int) -> Any:
        return FakeLayout(details_top_k=n, mode="h")

    def close(self) -> None:
        self.closed += 1


def test_a_second_hop_factory_closes_the_inner_factory() -> None:
    inner = Closable()
    factory = SecondHopFactory(inner, {"seed_count": 1})
    hop = factory(3)
    assert isinstance(hop, pack_retrievers.SecondHopRetriever)
    assert hop.similarity_top_k == 3 and hop.seed_count == 1
    factory.close()
    assert inner.closed == 1
    SecondHopFactory(lambda n: None, {}).close()  # nothing to close
    not_callable = SecondHopFactory(Closable(), {})
    not_callable._inner.close = None  # type: ignore[attr-defined]
    not_callable.close()


def test_a_second_hop_pipeline_is_not_prefix_stable_and_bad_settings_are_named() -> None:
    spec = PipelineSpec("s", Component("dense", {"second_hop": {}}), SPLITTER)
    pipeline = compose.compose(spec, context_of())
    assert not pipeline._prefix_stable
    assert isinstance(pipeline._retriever_at, SecondHopFactory)
    assert pipeline.spec.retriever.params == {}
    assert len(pipeline.retrieve(PUMP_QUERY, 2)) == 2
    bad = PipelineSpec("s2", Component("dense", {"second_hop": {"seed_count": -1}}), SPLITTER)
    with pytest.raises(
        SpecError, match=r"^pipeline 's2': 1 validation error for SecondHopRetriever\nseed_count"
    ):
        compose.compose(bad, context_of())


# --- postprocessors ---------------------------------------------------------------------------


def dense_built(store: MemoryStore | None = None) -> tuple[BuildContext, BuiltIndex]:
    context = context_of(store)
    spec = PipelineSpec("p", Component("dense"), SPLITTER)
    return context, compose.dense_index(spec, context)


def post(
    name: str,
    params: dict[str, Any] | None = None,
    *,
    context: BuildContext | None = None,
    built: BuiltIndex | None = None,
    fetch_multiplier: int = 1,
    spec_name: str = "p",
) -> Any:
    context = context or context_of()
    component = Component(name, params or {})
    spec = PipelineSpec(
        spec_name, Component("dense"), SPLITTER, (component,), fetch_multiplier=fetch_multiplier
    )
    return compose._postprocessor(component, spec, context, built)


def test_metadata_replacement_reads_the_window_unless_told() -> None:
    default = post("MetadataReplacementPostProcessor")(3)
    assert isinstance(default, MetadataReplacementPostProcessor)
    assert default.target_metadata_key == "window"
    given = post("MetadataReplacementPostProcessor", {"target_metadata_key": "whole"})(3)
    assert given.target_metadata_key == "whole"


def test_window_replacement_returns_k_windows_unless_told() -> None:
    at = post("WindowReplacementPostprocessor")
    assert isinstance(at(3), pack.WindowReplacementPostprocessor)
    assert (at(3).top_n, at(5).top_n) == (3, 5)
    assert post("WindowReplacementPostprocessor", {"top_n": 2})(5).top_n == 2


def test_store_postprocessors_get_the_dense_index_store() -> None:
    context, built = dense_built()
    context.llm = llm = object()
    prev = post("PrevNextPostprocessor", {"num_nodes": 2}, context=context, built=built)(3)
    assert isinstance(prev, pack.PrevNextPostprocessor)
    assert prev.vector_store is built.vector_store and prev.num_nodes == 2 and prev.llm is llm
    own = object()
    assert post("PrevNextPostprocessor", {"llm": own}, context=context, built=built)(1).llm is own
    drift = post("DriftAwareWindowPostprocessor", context=context, built=built)(3)
    assert isinstance(drift, pack.DriftAwareWindowPostprocessor)
    assert drift.vector_store is built.vector_store
    assert drift.embed_model is context.embed_model
    merge = post("ConsecutiveMergePostprocessor", {"fill_gaps": True}, context=context, built=built)
    assert merge(2).vector_store is built.vector_store and merge(2).fill_gaps
    plain = post("ConsecutiveMergePostprocessor", context=context, built=built)(2)
    assert isinstance(plain, pack.ConsecutiveMergePostprocessor)
    assert plain.vector_store is None and not plain.fill_gaps
    merge_off = post("ConsecutiveMergePostprocessor", {"fill_gaps": False}, built=None)(2)
    assert merge_off.vector_store is None


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("PrevNextPostprocessor", {}),
        ("DriftAwareWindowPostprocessor", {}),
        ("ConsecutiveMergePostprocessor", {"fill_gaps": True}),
    ],
)
def test_store_postprocessors_without_a_dense_index_are_refused(name: str, params: dict) -> None:
    message = rf"^pipeline 'np': {name} needs a dense index \(retriever 'dense'\)$"
    with pytest.raises(SpecError, match=message):
        post(name, params, built=None, spec_name="np")


def test_judge_rerank_grades_k_times_the_fetch_multiplier_with_the_run_judge() -> None:
    judge = keyword_judge()
    context = context_of(judge=judge)
    at = post("JudgeRerankPostprocessor", context=context, fetch_multiplier=4)
    rerank = at(3)
    assert isinstance(rerank, pack.JudgeRerankPostprocessor)
    assert rerank.top_n == 12 and rerank._judge is judge
    assert post("JudgeRerankPostprocessor", {"top_n": 2}, context=context)(3).top_n == 2


def test_crag_corrects_with_bm25_over_the_dense_index() -> None:
    store = MemoryStore()
    context, built = dense_built(store)
    context.judge = judge = keyword_judge()
    crag = post("CRAGPostprocessor", {"lower": 0.2}, context=context, built=built)(3)
    assert isinstance(crag, pack.CRAGPostprocessor)
    assert crag._judge is judge and crag.lower == 0.2
    [(bm25_built, parser)] = store.bm25_calls
    assert bm25_built is built and isinstance(parser, SentenceSplitter)
    assert isinstance(crag._retriever, JiebaBM25Retriever)
    alone = post("CRAGPostprocessor", context=context_of(judge=judge), built=None)(3)
    assert alone._retriever is None


def test_compression_keeps_k_slots_of_tokens() -> None:
    context = context_of()
    at = post("ContextCompressionPostprocessor", context=context)
    three = at(3)
    assert isinstance(three, pack.ContextCompressionPostprocessor)
    assert three.max_context_tokens == 3 * COMPRESSION_TOKENS_PER_SLOT == 360
    assert three.embed_model is context.embed_model
    params = {"tokens_per_slot": 50}
    assert post("ContextCompressionPostprocessor", params)(4).max_context_tokens == 200
    fixed = post("ContextCompressionPostprocessor", {"max_context_tokens": 77})(4)
    assert fixed.max_context_tokens == 77
    assert (
        post("ContextCompressionPostprocessor", {"tokens_per_slot": 1})(2).max_context_tokens == 2
    )


@pytest.mark.parametrize("value", [0, -3, True, 2.5, "100", None])
def test_a_bad_tokens_per_slot_is_named(value: Any) -> None:
    with pytest.raises(SpecError) as info:
        post("ContextCompressionPostprocessor", {"tokens_per_slot": value}, spec_name="c")
    assert str(info.value) == (
        f"pipeline 'c': tokens_per_slot must be an integer >= 1, got {value!r}"
    )


def test_an_unknown_postprocessor_lists_the_allowed_ones() -> None:
    allowed = ", ".join(POSTPROCESSORS)
    with pytest.raises(SpecError) as info:
        post("LLMRerank", spec_name="u")
    assert str(info.value) == f"pipeline 'u': unknown postprocessor 'LLMRerank'; allowed {allowed}"
    assert allowed.startswith("MetadataReplacementPostProcessor, WindowReplacement")


def keyword_judge() -> Any:
    from llama_index_ext_advrag.judges import BaseRelevanceJudge

    class Keyword(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list:
            return [self.grade(float("bar" in t)) for t in texts]

    return Keyword()


# --- the composed pipeline --------------------------------------------------------------------


class Counting:
    """A retriever factory: the retriever at n returns n numbered nodes; counts the calls."""

    def __init__(self) -> None:
        self.made: list[int] = []
        self.fetched: list[tuple[str, int]] = []
        self.closed = 0

    def __call__(self, n: int) -> Any:
        self.made.append(n)
        outer = self

        class At:
            def retrieve(self, query: QueryBundle) -> list[NodeWithScore]:
                outer.fetched.append((query.query_str, n))
                return [
                    NodeWithScore(node=TextNode(id_=f"n{i}", text=f"t{i}"), score=1.0 - i / 100)
                    for i in range(n)
                ]

        return At()

    def close(self) -> None:
        self.closed += 1


class Recorder:
    """A postprocessor factory recording each k it is built at and each call."""

    def __init__(self, keep: int | None = None) -> None:
        self.built: list[int] = []
        self.calls: list[tuple[int, int, str]] = []
        self.keep = keep

    def __call__(self, k: int) -> Any:
        self.built.append(k)
        outer = self

        class Post:
            def postprocess_nodes(
                self, nodes: list[NodeWithScore], query_bundle: QueryBundle
            ) -> list[NodeWithScore]:
                outer.calls.append((k, len(nodes), query_bundle.query_str))
                return list(reversed(nodes))[: outer.keep or len(nodes)]

        return Post()


def test_a_prefix_stable_pipeline_answers_a_smaller_k_from_the_last_fetch() -> None:
    factory = Counting()
    spec = PipelineSpec("c", Component("dense"), fetch_multiplier=2)
    pipeline = ComposedPipeline(spec, factory, True, [])
    assert pipeline.name == "c" and pipeline.spec is spec
    q = QueryBundle("q")
    assert [n.node.node_id for n in pipeline.retrieve(q, 3)] == [f"n{i}" for i in range(6)]
    assert [n.node.node_id for n in pipeline.retrieve(q, 2)] == ["n0", "n1", "n2", "n3"]
    assert factory.fetched == [("q", 6)]
    pipeline.retrieve(q, 3)  # equal: from the memo too
    assert factory.fetched == [("q", 6)]
    pipeline.retrieve(q, 4)  # larger: fetched
    assert factory.fetched == [("q", 6), ("q", 8)]
    pipeline.retrieve(QueryBundle("other"), 1)  # another question: fetched
    assert factory.fetched[-1] == ("other", 2)
    pipeline.retrieve(QueryBundle("other"), 4)  # the retriever at 8 is reused
    assert factory.made == [6, 8, 2]


def test_a_pipeline_that_is_not_prefix_stable_fetches_each_k() -> None:
    factory = Counting()
    pipeline = ComposedPipeline(PipelineSpec("c", Component("x")), factory, False, [])
    q = QueryBundle("q")
    pipeline.warm(q, 5)
    assert factory.fetched == []  # warm fetches nothing
    assert len(pipeline.retrieve(q, 3)) == 3
    assert len(pipeline.retrieve(q, 2)) == 2
    assert factory.fetched == [("q", 3), ("q", 2)]


def test_warm_fetches_the_largest_k_once() -> None:
    factory = Counting()
    pipeline = ComposedPipeline(PipelineSpec("w", Component("x"), fetch_multiplier=3), factory,
                                True, [])  # fmt: skip
    q = QueryBundle("q")
    pipeline.warm(q, 4)
    assert factory.fetched == [("q", 12)]
    for k in (4, 3, 1):
        assert len(pipeline.retrieve(q, k)) == 3 * k
    assert factory.fetched == [("q", 12)]


def test_close_closes_the_factory_and_forgets_the_fetches() -> None:
    factory = Counting()
    pipeline = ComposedPipeline(PipelineSpec("c", Component("x")), factory, True, [])
    q = QueryBundle("q")
    pipeline.retrieve(q, 2)
    pipeline.close()
    assert factory.closed == 1
    pipeline.retrieve(q, 2)
    assert factory.fetched == [("q", 2), ("q", 2)] and factory.made == [2, 2]
    plain = ComposedPipeline(PipelineSpec("c", Component("x")), lambda n: None, True, [])
    plain.close()  # a factory without close


def test_postprocessors_are_built_once_per_k_and_run_in_order() -> None:
    factory, first, second = Counting(), Recorder(), Recorder(keep=2)
    spec = PipelineSpec("c", Component("x"), fetch_multiplier=2)
    pipeline = ComposedPipeline(spec, factory, True, [first, second])
    q = QueryBundle("q")
    nodes = pipeline.retrieve(q, 3)
    assert isinstance(nodes, list)
    assert [n.node.node_id for n in nodes] == ["n0", "n1"]  # reversed twice, then cut
    assert first.calls == [(3, 6, "q")] and second.calls == [(3, 6, "q")]
    pipeline.retrieve(q, 3)
    pipeline.retrieve(q, 1)
    assert first.built == [3, 1] and second.built == [3, 1]
    assert second.calls[-1] == (1, 2, "q")


# --- compose ----------------------------------------------------------------------------------


def test_compose_names_an_unknown_retriever_and_a_bad_multiplier() -> None:
    with pytest.raises(SpecError) as info:
        compose.compose(PipelineSpec("u", Component("sparse")), context_of())
    assert str(info.value) == (
        "pipeline 'u': unknown retriever 'sparse'; allowed dense, hybrid, auto-merging, two-layer"
    )
    with pytest.raises(SpecError) as info:
        compose.compose(PipelineSpec("m", Component("dense"), SPLITTER, fetch_multiplier=0),
                        context_of())  # fmt: skip
    assert str(info.value) == "pipeline 'm': fetch_multiplier must be >= 1"
    one = compose.compose(PipelineSpec("one", Component("dense"), SPLITTER, fetch_multiplier=1),
                          context_of())  # fmt: skip
    assert len(one.retrieve(PUMP_QUERY, 2)) == 2


def test_compose_validates_postprocessors_at_build_time() -> None:
    spec = PipelineSpec(
        "v", Component("dense"), SPLITTER, (Component("WindowReplacementPostprocessor",
                                                     {"top_n": 0}),)
    )  # fmt: skip
    with pytest.raises(SpecError, match=r"^pipeline 'v': 1 validation error for Window") as info:
        compose.compose(spec, context_of())
    assert info.value.__cause__ is None and info.value.__suppress_context__
    unknown = PipelineSpec("v2", Component("dense"), SPLITTER, (Component("Nope"),))
    with pytest.raises(SpecError, match=r"^pipeline 'v2': unknown postprocessor 'Nope'"):
        compose.compose(unknown, context_of())


def test_a_composed_pipeline_runs_its_postprocessors_over_k_times_the_multiplier() -> None:
    spec = PipelineSpec(
        "wr",
        Component("dense"),
        SPLITTER,
        (Component("WindowReplacementPostprocessor"),),
        fetch_multiplier=3,
    )
    pipeline = compose.compose(spec, context_of())
    nodes = pipeline.retrieve(PUMP_QUERY, 2)
    assert len(nodes) == 2 and "3.5 bar" in texts(nodes)[0]
    assert pipeline._memo is not None and pipeline._memo[1] == 6


def test_a_compressed_pipeline_keeps_its_budget_per_k() -> None:
    spec = PipelineSpec(
        "cc",
        Component("dense"),
        SPLITTER,
        (Component("ContextCompressionPostprocessor", {"tokens_per_slot": 30}),),
        fetch_multiplier=2,
    )
    pipeline = compose.compose(spec, context_of())
    nodes = pipeline.retrieve(PUMP_QUERY, 2)
    assert nodes and pipeline._built_post[2][0].max_context_tokens == 60
    bad = PipelineSpec("cb", Component("dense"), SPLITTER,
                       (Component("ContextCompressionPostprocessor", {"tokens_per_slot": 0}),))  # fmt: skip
    with pytest.raises(SpecError, match=r"^pipeline 'cb': tokens_per_slot must be an integer"):
        compose.compose(bad, context_of())


# --- the first run's survivors ----------------------------------------------------------------

ADAPTIVE_AUTO = Component("AdaptiveSlidingWindowNodeParser", {"preset": "auto"})


def test_the_hybrid_bm25_leg_parses_with_the_run_context() -> None:
    store = MemoryStore()
    context = context_of(store, doc_type="article", english_only_embedding=False)
    spec = PipelineSpec("ha", Component("hybrid"), ADAPTIVE_AUTO)
    compose.compose(spec, context)
    [(_, parser)] = store.bm25_calls
    assert isinstance(parser, AdaptiveSlidingWindowNodeParser) and parser.preset == "article"
    assert parser.embed_model is context.embed_model


def test_crag_bm25_parses_with_the_run_context() -> None:
    store = MemoryStore()
    context = context_of(store, doc_type="article", judge=keyword_judge())
    component = Component("CRAGPostprocessor")
    spec = PipelineSpec("ca", Component("dense"), ADAPTIVE_AUTO, (component,))
    built = compose.dense_index(spec, context)
    compose._postprocessor(component, spec, context, built)(2)
    [(bm25_built, parser)] = store.bm25_calls
    assert bm25_built is built and parser.preset == "article"


def test_auto_merging_without_a_parser_builds_with_none(fake_layouts) -> None:
    compose.compose(PipelineSpec("am", Component("auto-merging")), context_of())
    [(event, options)] = fake_layouts
    assert event == "build" and options["node_parser"] is None


def test_the_drift_window_takes_its_params() -> None:
    context, built = dense_built()
    params = {"max_window_tokens": 64, "drift_patience": 2}
    drift = post("DriftAwareWindowPostprocessor", params, context=context, built=built)(3)
    assert (drift.max_window_tokens, drift.drift_patience) == (64, 2)


def test_a_hybrid_with_a_second_hop_composes_and_returns_k() -> None:
    spec = PipelineSpec("hh", Component("hybrid", {"second_hop": {}}), SPLITTER)
    pipeline = compose.compose(spec, context_of(english_only_embedding=False))
    nodes = pipeline.retrieve(PUMP_QUERY, 2)
    assert len(nodes) == 2 and "3.5 bar" in " ".join(texts(nodes))


def test_compose_gives_the_store_postprocessors_the_dense_index() -> None:
    store = MemoryStore()
    spec = PipelineSpec(
        "pn",
        Component("dense"),
        SPLITTER,
        (Component("PrevNextPostprocessor"), Component("CRAGPostprocessor")),
    )
    pipeline = compose.compose(spec, context_of(store, judge=keyword_judge()))
    prev, crag = (make(2) for make in pipeline._postprocessors)
    assert isinstance(prev.vector_store, MilvusVectorStore)
    assert isinstance(crag._retriever, JiebaBM25Retriever) and len(store.bm25_calls) == 1


def test_a_budget_valid_at_one_slot_composes() -> None:
    """Validated at k=1: a per-slot budget at the bound (1,000,000 tokens) is accepted."""
    spec = PipelineSpec(
        "big",
        Component("dense"),
        SPLITTER,
        (Component("ContextCompressionPostprocessor", {"tokens_per_slot": 1_000_000}),),
    )
    pipeline = compose.compose(spec, context_of())
    assert pipeline._postprocessors[0](1).max_context_tokens == 1_000_000
