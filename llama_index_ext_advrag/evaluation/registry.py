"""Pipelines by name, and YAML/JSON spec files that compose new ones.

The registry is open: ``register_pipeline("crag", build, description=..., needs_llm=True)``
adds a pipeline whose ``build(context)`` returns any object with ``name`` and
``retrieve(query, k)``. The built-in pipelines are specs, each with the settings its guide in
docs/ recommends:

| name | parser | retriever | postprocessors |
|---|---|---|---|
| baseline | core SentenceSplitter(256, overlap 20) | dense | |
| baseline-1024 | core SentenceSplitter() (LlamaIndex's default 1024/200) | dense | |
| sentence-window | core SentenceWindowNodeParser(3) | dense | core MetadataReplacementPostProcessor |
| adaptive-window | AdaptiveSlidingWindowNodeParser(preset = --doc-type) | dense | |
| article | AdaptiveSlidingWindowNodeParser(preset="article") | dense, 4 hits per slot | WindowReplacementPostprocessor |
| auto-merging | HierarchicalSentenceNodeParser([1024, 256, 64]) | HierarchicalAutoMergingRetriever | |
| two-layer | (the retriever's own units: sections) | TwoLayerMilvusRetriever | |
| hybrid | as article | dense + jieba BM25, z-score fusion, dense muted on CJK text | WindowReplacementPostprocessor |
| prev-next | sentences (window 1) + UnitAnnotator | dense | PrevNextPostprocessor(±2) |
| drift-window | sentences (window 1) + UnitAnnotator | dense | DriftAwareWindowPostprocessor |
| baseline-second-hop | as baseline | dense + SecondHopRetriever (k results) | |

Run only when named (they grade passages with a relevance judge, see
:mod:`~llama_index_ext_advrag.evaluation.judged`):

| name | pipeline |
|---|---|
| hybrid-rerank | hybrid, 4k candidates reordered by JudgeRerankPostprocessor, then window replacement |
| crag | hybrid windows + CRAGPostprocessor (offline: keyword rewrites, BM25 corrective retrieval) |
| hybrid-second-hop | hybrid with a SecondHopRetriever in front of window replacement |
| baseline-second-hop-compress | baseline-second-hop's 3k chunks compressed to 120 * k tokens |
| self-rag | SelfRAGQueryEngine over hybrid's retrieval at k (generates: answers only) |
| baseline-compress | baseline's 3k chunks compressed to 120 * k tokens (ContextCompressionPostprocessor) |
| hybrid-compress | hybrid's windows for 3k slots compressed to 120 * k tokens |
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index_ext_advrag.evaluation.compose import (
    PARSERS,
    POSTPROCESSORS,
    RETRIEVERS,
    BuildContext,
    Component,
    PipelineSpec,
    RetrievalPipeline,
    SpecError,
    compose,
)


@dataclass(frozen=True)
class RegisteredPipeline:
    name: str
    build: Callable[[BuildContext], RetrievalPipeline]
    description: str
    needs_llm: bool = False
    generates: bool = False  # answers itself: runs only in an answer-level comparison
    by_name_only: bool = False  # left out of the default set (slow); run when named


_REGISTRY: dict[str, RegisteredPipeline] = {}


def register_pipeline(
    name: str,
    build: Callable[[BuildContext], RetrievalPipeline] | PipelineSpec,
    description: str = "",
    needs_llm: bool = False,
    replace: bool = False,
    generates: bool = False,
    by_name_only: bool = False,
) -> None:
    """Add a pipeline under ``name`` (a spec, or a function of the build context).

    ``generates``: the pipeline answers itself (an ``answer(query, k)`` method returning the
    answer and its passages) and runs only with answers evaluated; an optional
    ``refused(answer, question)`` method tells its own refusals, which are counted and not
    judged. ``by_name_only``: run only when named, not in the default set.

    Raises:
        ValueError: ``name`` is taken (unless ``replace``).
    """
    if name in _REGISTRY and not replace:
        raise ValueError(f"a pipeline named {name!r} is already registered")
    if isinstance(build, PipelineSpec):
        spec = build
        description = description or spec.description

        def build_spec(context: BuildContext) -> RetrievalPipeline:
            return compose(spec, context)

        build = build_spec
    _REGISTRY[name] = RegisteredPipeline(
        name, build, description, needs_llm, generates, by_name_only
    )


def registered_pipelines() -> dict[str, RegisteredPipeline]:
    return dict(_REGISTRY)


def get_pipeline(name: str) -> RegisteredPipeline:
    try:
        return _REGISTRY[name]
    except KeyError:
        allowed = ", ".join(_REGISTRY)
        raise SpecError(f"unknown pipeline {name!r}; registered: {allowed}") from None


def offline_pipeline_names() -> list[str]:
    """The registered pipelines that need no LLM, in registration order."""
    return [p.name for p in _REGISTRY.values() if not p.needs_llm and not p.generates]


def _c(type_: str, **params: Any) -> Component:
    return Component(type_, params)


SENTENCES = _c("AdaptiveSlidingWindowNodeParser", window_size=1, stride=1)
ARTICLE = _c("AdaptiveSlidingWindowNodeParser", preset="article")

BUILTIN_SPECS = (
    PipelineSpec("baseline", _c("dense"), _c("SentenceSplitter", chunk_size=256, chunk_overlap=20),
                 description="core SentenceSplitter(256) + dense retrieval"),
    PipelineSpec("baseline-1024", _c("dense"), _c("SentenceSplitter"),
                 description="core SentenceSplitter() at LlamaIndex's defaults (1024/200) + dense"),
    PipelineSpec("sentence-window", _c("dense"), _c("SentenceWindowNodeParser", window_size=3),
                 (_c("MetadataReplacementPostProcessor", target_metadata_key="window"),),
                 description="core SentenceWindowNodeParser(3) + MetadataReplacementPostProcessor"),
    PipelineSpec("adaptive-window", _c("dense"), _c("AdaptiveSlidingWindowNodeParser", preset="auto"),
                 description="AdaptiveSlidingWindowNodeParser, preset by document type (--doc-type)"),
    PipelineSpec("article", _c("dense"), ARTICLE, (_c("WindowReplacementPostprocessor"),),
                 fetch_multiplier=4,
                 description="sentence-unit adaptive windows (preset article) + no-repeat window replacement"),
    PipelineSpec("auto-merging", _c("auto-merging", chunk_sizes=[1024, 256, 64]),
                 _c("HierarchicalSentenceNodeParser", chunk_sizes=[1024, 256, 64]),
                 description="sentence-aligned hierarchy [1024, 256, 64] + Milvus auto-merging"),
    PipelineSpec("two-layer", _c("two-layer", granularity="section"),
                 description="summaries route (sections, workbook sheets), details answer"),
    PipelineSpec("hybrid", _c("hybrid"), ARTICLE, (_c("WindowReplacementPostprocessor"),),
                 fetch_multiplier=4,
                 description="article + jieba/English BM25 leg, z-score fusion, language-aware"),
    PipelineSpec("prev-next", _c("dense"), SENTENCES, (_c("PrevNextPostprocessor", num_nodes=2),),
                 annotate=True, description="sentence nodes + PrevNextPostprocessor(±2)"),
    PipelineSpec("drift-window", _c("dense"), SENTENCES, (_c("DriftAwareWindowPostprocessor"),),
                 annotate=True, description="sentence nodes + DriftAwareWindowPostprocessor"),
)  # fmt: skip

for _spec in BUILTIN_SPECS:
    register_pipeline(_spec.name, _spec)

HYBRID = next(spec for spec in BUILTIN_SPECS if spec.name == "hybrid")
JUDGED_SPECS = (
    PipelineSpec("hybrid-rerank", _c("hybrid"), ARTICLE,
                 (_c("JudgeRerankPostprocessor"), _c("WindowReplacementPostprocessor")),
                 fetch_multiplier=4,
                 description="hybrid, its 4k candidates reranked by the offline language-routed "
                             "judge before window replacement"),
    PipelineSpec("crag", _c("hybrid"), ARTICLE,
                 (_c("WindowReplacementPostprocessor"), _c("CRAGPostprocessor")),
                 fetch_multiplier=4,
                 description="hybrid windows graded by CRAG (offline language-routed judge, BM25 "
                             "corrective retrieval of keyword rewrites, strip refinement)"),
)  # fmt: skip
for _spec in JUDGED_SPECS:
    register_pipeline(_spec.name, _spec, by_name_only=True)

# Context compression embeds the sentences of every candidate (cached per question across k):
# run when named. The budget follows k (compose.COMPRESSION_TOKENS_PER_SLOT tokens per slot).
COMPRESS_SPECS = (
    PipelineSpec("baseline-compress", _c("dense"), _c("SentenceSplitter", chunk_size=256, chunk_overlap=20),
                 (_c("ContextCompressionPostprocessor"),), fetch_multiplier=3,
                 description="baseline's 3k chunks compressed to 120 * k tokens (sentences scored "
                             "by bge cosine + rank prior, +-1 neighbours)"),
    PipelineSpec("hybrid-compress", _c("hybrid"), ARTICLE,
                 (_c("WindowReplacementPostprocessor", top_n=None), _c("ContextCompressionPostprocessor")),
                 fetch_multiplier=3,
                 description="hybrid's windows for 3k slots compressed to 120 * k tokens"),
)  # fmt: skip
for _spec in COMPRESS_SPECS:
    register_pipeline(_spec.name, _spec, by_name_only=True)

# A second hop (docs/retrievers_second_hop.md): the retriever's ``second_hop`` param wraps it in a
# SecondHopRetriever with those settings ({}: the class defaults) returning k results.
SECOND_HOP: dict[str, Any] = {"second_hop": {}}
SECOND_HOP_SPECS = (
    PipelineSpec("baseline-second-hop", _c("dense", **SECOND_HOP),
                 _c("SentenceSplitter", chunk_size=256, chunk_overlap=20),
                 description="baseline + an LLM-free second hop (hop-1 passages expand the question)"),
)  # fmt: skip
for _spec in SECOND_HOP_SPECS:
    register_pipeline(_spec.name, _spec)
# The second hop's k chunks compressed as baseline-compress compresses them (run when named).
register_pipeline(
    "baseline-second-hop-compress",
    PipelineSpec("baseline-second-hop-compress", _c("dense", **SECOND_HOP),
                 _c("SentenceSplitter", chunk_size=256, chunk_overlap=20),
                 (_c("ContextCompressionPostprocessor"),), fetch_multiplier=3,
                 description="baseline-second-hop's 3k chunks compressed to 120 * k tokens"),
    by_name_only=True,
)  # fmt: skip
register_pipeline(
    "hybrid-second-hop",
    PipelineSpec("hybrid-second-hop", _c("hybrid", **SECOND_HOP), ARTICLE,
                 (_c("WindowReplacementPostprocessor"),), fetch_multiplier=4,
                 description="hybrid with a second hop in front of window replacement"),
    by_name_only=True,
)  # fmt: skip


def _build_self_rag(context: BuildContext) -> RetrievalPipeline:
    from llama_index_ext_advrag.evaluation.judged import SelfRAGPipeline

    return SelfRAGPipeline("self-rag", compose(HYBRID, context), context)


register_pipeline(
    "self-rag",
    _build_self_rag,
    description="Self-RAG (joint generation, ISREL by the offline judge, up to 2 retrievals) "
    "over hybrid windows; answers itself, so only with --answers",
    needs_llm=True,
    generates=True,
    by_name_only=True,
)


# --- spec files -----------------------------------------------------------------------------

SPEC_KEYS = ("name", "parser", "retriever", "postprocessors", "fetch_multiplier", "annotate",
             "description")  # fmt: skip


def _component(value: Any, where: str, allowed: Sequence[str]) -> Component:
    if isinstance(value, str):
        value = {"type": value}
    if not isinstance(value, dict) or "type" not in value:
        raise SpecError(f"{where}: expected a mapping with 'type' (one of {', '.join(allowed)})")
    type_ = value["type"]
    if type_ not in allowed:
        raise SpecError(f"{where}: unknown type {type_!r}; allowed {', '.join(allowed)}")
    params = {k: v for k, v in value.items() if k != "type"}
    return Component(str(type_), params)


def spec_from_dict(data: Any, where: str) -> PipelineSpec:
    """One pipeline from a spec mapping (``where`` prefixes the error messages)."""
    if not isinstance(data, dict):
        raise SpecError(f"{where}: a pipeline is a mapping or a registered name, got {data!r:.60}")
    unknown = sorted(set(data) - set(SPEC_KEYS))
    if unknown:
        raise SpecError(f"{where}: unknown key(s) {unknown}; allowed {', '.join(SPEC_KEYS)}")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise SpecError(f"{where}: 'name' (a non-empty string) is required")
    where = f"{where} ({name})"
    if "retriever" not in data:
        raise SpecError(f"{where}: 'retriever' is required; one of {', '.join(RETRIEVERS)}")
    retriever = _component(data["retriever"], f"{where}: retriever", list(RETRIEVERS))
    parser = (
        _component(data["parser"], f"{where}: parser", list(PARSERS)) if "parser" in data else None
    )
    posts = data.get("postprocessors", [])
    if not isinstance(posts, list):
        raise SpecError(f"{where}: 'postprocessors' must be a list")
    multiplier = data.get("fetch_multiplier", 1)
    if not isinstance(multiplier, int) or isinstance(multiplier, bool) or multiplier < 1:
        raise SpecError(f"{where}: 'fetch_multiplier' must be an integer >= 1, got {multiplier!r}")
    return PipelineSpec(
        name=name.strip(),
        retriever=retriever,
        parser=parser,
        postprocessors=tuple(
            _component(p, f"{where}: postprocessors[{i}]", POSTPROCESSORS)
            for i, p in enumerate(posts)
        ),
        fetch_multiplier=multiplier,
        annotate=bool(data.get("annotate", False)),
        description=str(data.get("description", "")),
    )


def load_spec(path: str | Path) -> list[RegisteredPipeline]:
    """Pipelines from a YAML or JSON file: ``{"pipelines": [<spec or registered name>, ...]}``.

    Raises:
        FileNotFoundError: no such file.
        SpecError: unreadable YAML/JSON or an invalid entry (the file and entry are named).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"spec file {str(path)!r} does not exist")
    text = path.read_text(encoding="utf-8")
    try:
        if path.suffix.lower() == ".json":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except (json.JSONDecodeError, ValueError) as exc:
        raise SpecError(f"{path.name}: not valid JSON ({exc})") from None
    except Exception as exc:  # yaml.YAMLError
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SpecError(f"{path.name}: not valid YAML ({first})") from None
    if isinstance(data, dict):
        data = data.get("pipelines")
    if not isinstance(data, list) or not data:
        raise SpecError(f"{path.name}: expected a non-empty list under 'pipelines'")
    pipelines: list[RegisteredPipeline] = []
    for index, entry in enumerate(data):
        where = f"{path.name}: pipelines[{index}]"
        if isinstance(entry, str):
            pipelines.append(get_pipeline(entry))
            continue
        spec = spec_from_dict(entry, where)

        def build(context: BuildContext, spec: PipelineSpec = spec) -> RetrievalPipeline:
            return compose(spec, context)

        pipelines.append(RegisteredPipeline(spec.name, build, spec.description))
    names = [p.name for p in pipelines]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise SpecError(f"{path.name}: pipeline name(s) {duplicates} occur more than once")
    return pipelines


__all__ = [
    "BUILTIN_SPECS",
    "RegisteredPipeline",
    "get_pipeline",
    "load_spec",
    "offline_pipeline_names",
    "register_pipeline",
    "registered_pipelines",
    "spec_from_dict",
]
