"""Compose a retrieval pipeline from a spec: parser + retriever + postprocessors, by name.

Only public classes are used: LlamaIndex core's parsers and postprocessors and the pack's
root exports. Every name is looked up in an allow-list (no imports of arbitrary paths from a
spec file). A pipeline answers ``retrieve(query, k)``: the context handed to the LLM for the
``k`` best hits.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_ext_advrag.evaluation.ingest import BuiltIndex, IndexStore

logger = logging.getLogger(__name__)


class SpecError(ValueError):
    """A pipeline spec that cannot be built; the message names the pipeline and the field."""


@dataclass(frozen=True)
class Component:
    """A named class and its keyword arguments, as written in a spec."""

    type: str
    params: dict[str, Any] = field(default_factory=dict)

    def key(self) -> str:
        return f"{self.type}:{json.dumps(self.params, sort_keys=True, default=str)}"


@dataclass(frozen=True)
class PipelineSpec:
    """parser -> retriever -> postprocessors. ``fetch_multiplier``: candidates retrieved per
    context slot (e.g. 4 for a no-repeat window replacement that skips covered hits)."""

    name: str
    retriever: Component
    parser: Component | None = None
    postprocessors: tuple[Component, ...] = ()
    fetch_multiplier: int = 1
    annotate: bool = False  # UnitAnnotator at ingest (token counts and cues per node)
    description: str = ""


@dataclass
class BuildContext:
    """What pipelines are built from: the corpus' index store, the models, options."""

    store: IndexStore
    llm: Any = None
    english_only_embedding: bool = True
    doc_type: str = "general"
    judge: Any = None  # the relevance judge of judge rerank, CRAG, Self-RAG (None: offline)

    @property
    def embed_model(self) -> Any:
        return self.store.embed_model

    def relevance_judge(self) -> Any:
        """The run's judge: ``judge`` when set, else the offline judge (built once)."""
        if self.judge is None:
            from llama_index_ext_advrag.evaluation.offline_judge import offline_relevance_judge

            self.judge = offline_relevance_judge(self.embed_model)
        return self.judge


class RetrievalPipeline(Protocol):
    name: str

    def retrieve(self, query: QueryBundle, k: int) -> list[NodeWithScore]: ...


# --- parsers --------------------------------------------------------------------------------


def _core_sentence_splitter(params: dict[str, Any], context: BuildContext) -> NodeParser:
    from llama_index.core.node_parser import SentenceSplitter

    return SentenceSplitter(**params)


def _core_sentence_window(params: dict[str, Any], context: BuildContext) -> NodeParser:
    from llama_index.core.node_parser import SentenceWindowNodeParser

    return SentenceWindowNodeParser.from_defaults(**params)


def _adaptive(params: dict[str, Any], context: BuildContext) -> NodeParser:
    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser

    params = dict(params)
    if params.get("preset") == "auto":
        params["preset"] = context.doc_type
    return AdaptiveSlidingWindowNodeParser(embed_model=context.embed_model, **params)


def _hierarchical(params: dict[str, Any], context: BuildContext) -> NodeParser:
    from llama_index_ext_advrag.node_parser import HierarchicalSentenceNodeParser

    return HierarchicalSentenceNodeParser(**params)


def _core_hierarchical(params: dict[str, Any], context: BuildContext) -> NodeParser:
    from llama_index.core.node_parser import HierarchicalNodeParser

    return HierarchicalNodeParser.from_defaults(**params)


PARSERS: dict[str, Callable[[dict[str, Any], BuildContext], NodeParser]] = {
    "SentenceSplitter": _core_sentence_splitter,
    "SentenceWindowNodeParser": _core_sentence_window,
    "AdaptiveSlidingWindowNodeParser": _adaptive,
    "HierarchicalSentenceNodeParser": _hierarchical,
    "HierarchicalNodeParser": _core_hierarchical,
}
HIERARCHY_PARSERS = ("HierarchicalSentenceNodeParser", "HierarchicalNodeParser")


def make_parser(spec: PipelineSpec, context: BuildContext) -> Callable[[], NodeParser]:
    parser = spec.parser
    if parser is None:
        raise SpecError(f"pipeline {spec.name!r}: retriever {spec.retriever.type!r} needs a parser")

    def build() -> NodeParser:
        try:
            return PARSERS[parser.type](parser.params, context)
        except (TypeError, ValueError) as exc:
            raise SpecError(f"pipeline {spec.name!r}: parser {parser.type}: {exc}") from None

    build()  # fail now on bad parameters, not halfway through a run
    return build


def _parser_settings(spec: PipelineSpec, context: BuildContext) -> dict[str, Any]:
    assert spec.parser is not None  # checked by make_parser
    params = dict(spec.parser.params)
    if params.get("preset") == "auto":
        params["preset"] = context.doc_type
    preset = params.get("preset")
    if spec.parser.type == "AdaptiveSlidingWindowNodeParser" and isinstance(preset, str):
        from llama_index_ext_advrag.node_parser.presets import REFITTED_PRESETS, preset_values

        if preset in {p.value for p in REFITTED_PRESETS}:  # a re-fitted window: a new index
            params.setdefault("max_window_tokens", preset_values(preset)["max_window_tokens"])
    return {"type": spec.parser.type, "params": params, "annotate": spec.annotate}


def _index_name(spec: PipelineSpec, context: BuildContext) -> str:
    settings = _parser_settings(spec, context)
    return f"{settings['type']}:{json.dumps(settings['params'], sort_keys=True)}:{spec.annotate}"


def dense_index(spec: PipelineSpec, context: BuildContext) -> BuiltIndex:
    build = make_parser(spec, context)
    transform = None
    if spec.annotate:
        from llama_index_ext_advrag.node_parser import UnitAnnotator

        transform = UnitAnnotator()
    return context.store.vector_index(
        _index_name(spec, context), build, _parser_settings(spec, context), transform
    )


# --- retrievers: each returns a function (n) -> retriever of the n best -----------------------

RetrieverFactory = Callable[[int], Any]


def _dense(spec: PipelineSpec, context: BuildContext, built: BuiltIndex | None) -> RetrieverFactory:
    from llama_index_ext_advrag.retrievers.hybrid import with_top_k

    assert built is not None
    retriever = built.index.as_retriever(**spec.retriever.params)
    return lambda n: with_top_k(retriever, n)


def _hybrid(
    spec: PipelineSpec, context: BuildContext, built: BuiltIndex | None
) -> RetrieverFactory:
    from llama_index_ext_advrag.retrievers import HybridFusionRetriever
    from llama_index_ext_advrag.retrievers.hybrid import (
        FUSION_SETTINGS,
        default_fusion_settings,
        with_top_k,
    )

    assert built is not None
    bm25 = context.store.bm25(built, make_parser(spec, context))
    given = spec.retriever.params
    fusion: dict[str, Any] = {"mode": "score", "normalization": "zscore"}
    if context.english_only_embedding and not any(key in given for key in FUSION_SETTINGS):
        # the legs index single sentences (article units): fitted with bge-small on sentence
        # nodes, docs/retrievers_fusion.md
        fusion = default_fusion_settings(True, sentence_units=True)
    params = {**fusion, "leg_top_k": 30, **given}
    if context.english_only_embedding:
        params.setdefault("english_only_legs", ["dense"])
    leg_top_k = int(params.pop("leg_top_k"))
    # the legs are set to fetch leg_top_k by the hybrid itself (with_top_k on each leg)
    hybrid = HybridFusionRetriever(
        retrievers=[built.index.as_retriever(), bm25],
        leg_names=["dense", "bm25"],
        leg_top_k=leg_top_k,
        **params,
    )

    def make(n: int) -> Any:
        # a leg never fetches fewer than the n fused results asked for
        return with_top_k(hybrid.with_settings(leg_top_k=n) if n > leg_top_k else hybrid, n)

    return make


class LayoutRetrievers:
    """The retriever of a Milvus layout index (auto-merging, two-layer) at any k: the index is
    opened once with the query settings applied, and each k is the retriever's own
    :func:`~llama_index_ext_advrag.retrievers.with_top_k` copy on the same open collections,
    so no client is opened per k; :meth:`close` closes the clients opened."""

    def __init__(self, opened: Any, query_options: dict[str, Any]) -> None:
        self._opened = opened
        self._configured = opened.with_settings(**query_options)  # checked now

    def __call__(self, n: int) -> Any:
        from llama_index_ext_advrag.retrievers.hybrid import with_top_k

        return with_top_k(self._configured, n)

    def close(self) -> None:
        self._opened.close()


def _layout_retriever(
    retriever_class: Any,
    context: BuildContext,
    *,
    settings: dict[str, Any],
    build_options: dict[str, Any],
    query_options: dict[str, Any],
) -> LayoutRetrievers:
    """A Milvus layout retriever (auto-merging, two-layer): its own builder writes the index
    once (reused while ``settings`` are unchanged), it is opened once, and each k is the
    retriever's own ``with_top_k`` copy on the same clients."""
    store = context.store
    location = {"embed_model": store.embed_model, "token": store.token}
    opened: list[Any] = []

    def build(collection: str) -> None:
        opened.append(
            retriever_class.from_documents(
                store.documents,
                uri=store.uri,
                collection_name=collection,
                overwrite=True,
                show_progress=store.show_progress,
                **location,
                **build_options,
            )
        )

    def reopen(collection: str) -> None:
        opened.append(retriever_class.from_uri(store.uri, collection_name=collection, **location))

    key = f"{settings['retriever']}:{json.dumps(settings, sort_keys=True)}"
    collection = store.layout_index(key, settings, build, reopen)
    if not opened:  # built earlier in this run: open it once
        reopen(collection)
    for extra in opened[:-1]:
        extra.close()
    try:
        return LayoutRetrievers(opened[-1], query_options)
    except BaseException:
        opened[-1].close()
        raise


def _auto_merging(
    spec: PipelineSpec, context: BuildContext, built: BuiltIndex | None
) -> RetrieverFactory:
    from llama_index_ext_advrag.retrievers import HierarchicalAutoMergingRetriever

    params = dict(spec.retriever.params)
    node_parser = None
    if spec.parser is not None:
        if spec.parser.type not in HIERARCHY_PARSERS:
            raise SpecError(
                f"pipeline {spec.name!r}: auto-merging needs a hierarchy parser "
                f"({', '.join(HIERARCHY_PARSERS)}), got {spec.parser.type!r}"
            )
        node_parser = make_parser(spec, context)()
    parser_key = spec.parser.key() if spec.parser else None
    return _layout_retriever(
        HierarchicalAutoMergingRetriever,
        context,
        settings={"retriever": "auto-merging", "parser": parser_key, "params": params},
        build_options={"node_parser": node_parser, **params},
        query_options={k: v for k, v in params.items() if k != "chunk_sizes"},
    )


def _two_layer(
    spec: PipelineSpec, context: BuildContext, built: BuiltIndex | None
) -> RetrieverFactory:
    from llama_index_ext_advrag.retrievers import TwoLayerMilvusRetriever

    build_keys = ("granularity", "detail_chunk_tokens")
    build_params = {k: v for k, v in spec.retriever.params.items() if k in build_keys}
    return _layout_retriever(
        TwoLayerMilvusRetriever,
        context,
        settings={"retriever": "two-layer", "params": build_params},
        build_options={"llm": context.llm, **build_params},
        query_options={k: v for k, v in spec.retriever.params.items() if k not in build_keys},
    )


SECOND_HOP_KEY = "second_hop"  # a retriever param: SecondHopRetriever settings ({} = defaults)


def split_second_hop(spec: PipelineSpec) -> tuple[PipelineSpec, dict[str, Any] | None]:
    """``spec`` without the retriever's ``second_hop`` param, and that param (``None``: none)."""
    params = dict(spec.retriever.params)
    if SECOND_HOP_KEY not in params:
        return spec, None
    settings = params.pop(SECOND_HOP_KEY)
    if not isinstance(settings, dict):
        raise SpecError(
            f"pipeline {spec.name!r}: {SECOND_HOP_KEY} must be a mapping of "
            f"SecondHopRetriever settings, got {settings!r}"
        )
    return replace(spec, retriever=Component(spec.retriever.type, params)), dict(settings)


class SecondHopFactory:
    """Wrap a retriever factory so each k's retriever gets a second hop returning k results;
    :meth:`close` closes what the wrapped factory opened."""

    def __init__(self, inner: RetrieverFactory, settings: dict[str, Any]) -> None:
        self._inner = inner
        self._settings = settings

    def __call__(self, n: int) -> Any:
        from llama_index_ext_advrag.retrievers import SecondHopRetriever
        from llama_index_ext_advrag.retrievers.hybrid import with_top_k

        hop = SecondHopRetriever(self._inner(n), **self._settings)
        # k results, unless the settings fix the number themselves
        return hop if hop.top_k_setting in self._settings else with_top_k(hop, n)

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if callable(close):
            close()


@dataclass(frozen=True)
class RetrieverKind:
    factory: Callable[[PipelineSpec, BuildContext, BuiltIndex | None], RetrieverFactory]
    needs_dense_index: bool
    prefix_stable: bool  # the best n of a larger fetch are the fetch at n


RETRIEVERS: dict[str, RetrieverKind] = {
    "dense": RetrieverKind(_dense, True, True),
    "hybrid": RetrieverKind(_hybrid, True, True),
    "auto-merging": RetrieverKind(_auto_merging, False, False),
    "two-layer": RetrieverKind(_two_layer, False, True),
}


# --- postprocessors: each returns (k) -> postprocessor ----------------------------------------


def _postprocessor(
    component: Component, spec: PipelineSpec, context: BuildContext, built: BuiltIndex | None
) -> Callable[[int], Any]:
    from llama_index.core.postprocessor import MetadataReplacementPostProcessor

    from llama_index_ext_advrag import postprocessor as pack

    params = dict(component.params)
    store = built.vector_store if built is not None else None
    name = component.type
    if name == "MetadataReplacementPostProcessor":
        params.setdefault("target_metadata_key", "window")
        return lambda k: MetadataReplacementPostProcessor(**params)
    if name == "WindowReplacementPostprocessor":
        return lambda k: pack.WindowReplacementPostprocessor(**{"top_n": k, **params})
    needs_store = name in ("PrevNextPostprocessor", "DriftAwareWindowPostprocessor") or (
        name == "ConsecutiveMergePostprocessor" and params.get("fill_gaps")
    )
    if needs_store and store is None:
        raise SpecError(f"pipeline {spec.name!r}: {name} needs a dense index (retriever 'dense')")
    if name == "PrevNextPostprocessor":
        params.setdefault("llm", context.llm)
        return lambda k: pack.PrevNextPostprocessor(vector_store=store, **params)
    if name == "DriftAwareWindowPostprocessor":
        return lambda k: pack.DriftAwareWindowPostprocessor(
            vector_store=store, embed_model=context.embed_model, **params
        )
    if name == "ConsecutiveMergePostprocessor":
        extra = {"vector_store": store} if params.get("fill_gaps") else {}
        return lambda k: pack.ConsecutiveMergePostprocessor(**extra, **params)
    if name in ("JudgeRerankPostprocessor", "CRAGPostprocessor"):
        judge = context.relevance_judge()
        if name == "JudgeRerankPostprocessor":  # default: reorder every candidate fetched
            return lambda k: pack.JudgeRerankPostprocessor(
                judge=judge, **{"top_n": k * spec.fetch_multiplier, **params}
            )
        corrective = (
            context.store.bm25(built, make_parser(spec, context)) if built is not None else None
        )
        return lambda k: pack.CRAGPostprocessor(
            judge=judge,
            corrective_retriever=corrective,
            **params,  # offline: no LLM rewrite
        )
    if name == "ContextCompressionPostprocessor":
        return _compression(params, spec, context)
    allowed = ", ".join(POSTPROCESSORS)
    raise SpecError(f"pipeline {spec.name!r}: unknown postprocessor {name!r}; allowed {allowed}")


# Tokens of compressed context per context slot: at k the compressor keeps k * this many tokens
# of the k * fetch_multiplier passages fetched (an uncompressed 256-token chunk holds ~230).
COMPRESSION_TOKENS_PER_SLOT = 120


def _compression(
    params: dict[str, Any], spec: PipelineSpec, context: BuildContext
) -> Callable[[int], Any]:
    """``ContextCompressionPostprocessor`` whose budget follows k (``tokens_per_slot`` * k)."""
    from llama_index_ext_advrag.postprocessor import ContextCompressionPostprocessor

    per_slot = params.pop("tokens_per_slot", COMPRESSION_TOKENS_PER_SLOT)
    if not isinstance(per_slot, int) or isinstance(per_slot, bool) or per_slot < 1:
        raise SpecError(
            f"pipeline {spec.name!r}: tokens_per_slot must be an integer >= 1, got {per_slot!r}"
        )
    return lambda k: ContextCompressionPostprocessor(
        embed_model=context.embed_model, **{"max_context_tokens": k * per_slot, **params}
    )


POSTPROCESSORS = (
    "MetadataReplacementPostProcessor",
    "WindowReplacementPostprocessor",
    "PrevNextPostprocessor",
    "DriftAwareWindowPostprocessor",
    "ConsecutiveMergePostprocessor",
    "JudgeRerankPostprocessor",
    "CRAGPostprocessor",
    "ContextCompressionPostprocessor",
)


class ComposedPipeline:
    """A pipeline built from a :class:`PipelineSpec`.

    The candidates of the last query are remembered, so that the same question at a smaller
    k is answered from them when the retriever is prefix-stable (``warm`` fetches the largest
    k of a sweep once)."""

    def __init__(
        self,
        spec: PipelineSpec,
        retriever_at: RetrieverFactory,
        prefix_stable: bool,
        postprocessors: list[Callable[[int], Any]],
    ) -> None:
        self.name = spec.name
        self.spec = spec
        self._retriever_at = retriever_at
        self._retrievers: dict[int, Any] = {}
        self._prefix_stable = prefix_stable
        self._postprocessors = postprocessors
        self._built_post: dict[int, list[Any]] = {}
        self._memo: tuple[str, int, list[NodeWithScore]] | None = None

    def _retriever(self, n: int) -> Any:
        if n not in self._retrievers:
            self._retrievers[n] = self._retriever_at(n)
        return self._retrievers[n]

    def candidates(self, query: QueryBundle, n: int) -> list[NodeWithScore]:
        memo = self._memo
        if self._prefix_stable and memo and memo[0] == query.query_str and memo[1] >= n:
            return memo[2][:n]
        hits = list(self._retriever(n).retrieve(query))
        self._memo = (query.query_str, n, hits)
        return hits

    def warm(self, query: QueryBundle, k: int) -> None:
        """Fetch the candidates for ``k`` (the largest of a sweep) and remember them."""
        if self._prefix_stable:
            self.candidates(query, k * self.spec.fetch_multiplier)

    def close(self) -> None:
        """Close the Milvus clients this pipeline's retrievers opened themselves (the
        auto-merging and two-layer index, opened once for every k)."""
        close = getattr(self._retriever_at, "close", None)
        if callable(close):
            close()
        self._retrievers.clear()
        self._memo = None

    def retrieve(self, query: QueryBundle, k: int) -> list[NodeWithScore]:
        nodes = self.candidates(query, k * self.spec.fetch_multiplier)
        if k not in self._built_post:
            self._built_post[k] = [make(k) for make in self._postprocessors]
        for postprocessor in self._built_post[k]:
            nodes = postprocessor.postprocess_nodes(nodes, query_bundle=query)
        return list(nodes)


def compose(spec: PipelineSpec, context: BuildContext) -> ComposedPipeline:
    """Build ``spec``'s indexes (or reuse them) and return the pipeline.

    Raises:
        SpecError: an unknown class name or invalid parameters (the pipeline is named).
    """
    kind = RETRIEVERS.get(spec.retriever.type)
    if kind is None:
        raise SpecError(
            f"pipeline {spec.name!r}: unknown retriever {spec.retriever.type!r}; "
            f"allowed {', '.join(RETRIEVERS)}"
        )
    if spec.fetch_multiplier < 1:
        raise SpecError(f"pipeline {spec.name!r}: fetch_multiplier must be >= 1")
    spec, hop_settings = split_second_hop(spec)
    built = dense_index(spec, context) if kind.needs_dense_index else None
    try:
        retriever_at = kind.factory(spec, context, built)
        if hop_settings is not None:
            retriever_at = SecondHopFactory(retriever_at, hop_settings)
            retriever_at(1)  # validate the settings now
        postprocessors = [_postprocessor(c, spec, context, built) for c in spec.postprocessors]
        for make in postprocessors:
            make(1)  # validate parameters before the run
    except SpecError:
        raise
    except (TypeError, ValueError) as exc:
        raise SpecError(f"pipeline {spec.name!r}: {exc}") from None
    prefix_stable = kind.prefix_stable and hop_settings is None
    return ComposedPipeline(spec, retriever_at, prefix_stable, postprocessors)


__all__ = [
    "BuildContext",
    "Component",
    "ComposedPipeline",
    "LayoutRetrievers",
    "PARSERS",
    "POSTPROCESSORS",
    "PipelineSpec",
    "RETRIEVERS",
    "RetrievalPipeline",
    "SpecError",
    "compose",
]
