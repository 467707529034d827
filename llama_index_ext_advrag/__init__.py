"""Advanced-RAG components for LlamaIndex.

Every component records its decisions under ``node.metadata[TRACE_KEY]`` (or the response
metadata for query engines), so a user can see why the context looks the way it does.

Public classes are importable from here; they are loaded on first use so that ``import
llama_index_ext_advrag`` stays cheap and optional heavy imports happen only where needed.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr
from llama_index_ext_advrag.trace import TRACE_KEY

__version__ = "0.1.0"

_EXPORTS = {
    "AdaptiveSlidingWindowNodeParser": "llama_index_ext_advrag.node_parser",
    "HierarchicalSentenceNodeParser": "llama_index_ext_advrag.node_parser",
    "HierarchicalAutoMergingRetriever": "llama_index_ext_advrag.retrievers",
    "TwoLayerMilvusRetriever": "llama_index_ext_advrag.retrievers",
    "RecursiveIndexNodeRetriever": "llama_index_ext_advrag.retrievers",
    "HybridFusionRetriever": "llama_index_ext_advrag.retrievers",
    "BM25Retriever": "llama_index_ext_advrag.retrievers",
    "PrevNextPostprocessor": "llama_index_ext_advrag.postprocessor",
    "DriftAwareWindowPostprocessor": "llama_index_ext_advrag.postprocessor",
    "ConsecutiveMergePostprocessor": "llama_index_ext_advrag.postprocessor",
    "UnitAnnotator": "llama_index_ext_advrag.postprocessor",
    "WindowReplacementPostprocessor": "llama_index_ext_advrag.postprocessor",
    "JudgeRerankPostprocessor": "llama_index_ext_advrag.postprocessor",
    "CRAGPostprocessor": "llama_index_ext_advrag.postprocessor",
    "BaseRelevanceJudge": "llama_index_ext_advrag.judges",
    "Grade": "llama_index_ext_advrag.judges",
    "GradeLabel": "llama_index_ext_advrag.judges",
    "CrossEncoderRelevanceJudge": "llama_index_ext_advrag.judges",
    "EmbeddingRelevanceJudge": "llama_index_ext_advrag.judges",
    "LLMRelevanceJudge": "llama_index_ext_advrag.judges",
    "LanguageRoutedJudge": "llama_index_ext_advrag.judges",
    "SelfRAGQueryEngine": "llama_index_ext_advrag.query_engine",
    "resolve_embed_model": "llama_index_ext_advrag.models",
    "resolve_llm": "llama_index_ext_advrag.models",
    "split_sentences": "llama_index_ext_advrag.text",
}

__all__ = ["TRACE_KEY", "__version__", *sorted(_EXPORTS)]

__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
