"""Advanced-RAG components for LlamaIndex.

Every component records its decisions under ``node.metadata[TRACE_KEY]`` (or the response
metadata for query engines), so a user can see why the context looks the way it does.

Public classes are importable from here; they are loaded on first use so that ``import
llama_index_ext_advrag`` stays cheap and optional heavy imports happen only where needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_getattr
from llama_index_ext_advrag.trace import TRACE_KEY
from llama_index_ext_advrag.tracing import install_span_writer

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from llama_index_ext_advrag.embeddings import BgeSmallOnnxEmbedding as BgeSmallOnnxEmbedding
    from llama_index_ext_advrag.embeddings import CachedEmbedding as CachedEmbedding
    from llama_index_ext_advrag.embeddings import MultilingualE5Embedding as MultilingualE5Embedding
    from llama_index_ext_advrag.embeddings import is_english_only as is_english_only
    from llama_index_ext_advrag.judges import BaseRelevanceJudge as BaseRelevanceJudge
    from llama_index_ext_advrag.judges import ColbertRelevanceJudge as ColbertRelevanceJudge
    from llama_index_ext_advrag.judges import (
        CrossEncoderRelevanceJudge as CrossEncoderRelevanceJudge,
    )
    from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge as EmbeddingRelevanceJudge
    from llama_index_ext_advrag.judges import Grade as Grade
    from llama_index_ext_advrag.judges import GradeLabel as GradeLabel
    from llama_index_ext_advrag.judges import LanguageRoutedJudge as LanguageRoutedJudge
    from llama_index_ext_advrag.judges import LLMRelevanceJudge as LLMRelevanceJudge
    from llama_index_ext_advrag.milvus import (
        MilvusAuthenticationError as MilvusAuthenticationError,
    )
    from llama_index_ext_advrag.milvus import MilvusConnectionError as MilvusConnectionError
    from llama_index_ext_advrag.milvus.registry import IndexLayoutError as IndexLayoutError
    from llama_index_ext_advrag.models import ModelResolutionError as ModelResolutionError
    from llama_index_ext_advrag.models import decide_embed_model as decide_embed_model
    from llama_index_ext_advrag.models import resolve_embed_model as resolve_embed_model
    from llama_index_ext_advrag.models import resolve_llm as resolve_llm
    from llama_index_ext_advrag.node_parser import (
        AdaptiveSlidingWindowNodeParser as AdaptiveSlidingWindowNodeParser,
    )
    from llama_index_ext_advrag.node_parser import (
        HierarchicalSentenceNodeParser as HierarchicalSentenceNodeParser,
    )
    from llama_index_ext_advrag.node_parser import UnitAnnotator as UnitAnnotator
    from llama_index_ext_advrag.postprocessor import (
        ConsecutiveMergePostprocessor as ConsecutiveMergePostprocessor,
    )
    from llama_index_ext_advrag.postprocessor import (
        ContextCompressionPostprocessor as ContextCompressionPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor import CRAGPostprocessor as CRAGPostprocessor
    from llama_index_ext_advrag.postprocessor import (
        DriftAwareWindowPostprocessor as DriftAwareWindowPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor import (
        JudgeRerankPostprocessor as JudgeRerankPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor import PrevNextPostprocessor as PrevNextPostprocessor
    from llama_index_ext_advrag.postprocessor import (
        WindowReplacementPostprocessor as WindowReplacementPostprocessor,
    )
    from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine as SelfRAGQueryEngine
    from llama_index_ext_advrag.retrievers import BM25Retriever as BM25Retriever
    from llama_index_ext_advrag.retrievers import (
        HierarchicalAutoMergingRetriever as HierarchicalAutoMergingRetriever,
    )
    from llama_index_ext_advrag.retrievers import HybridFusionRetriever as HybridFusionRetriever
    from llama_index_ext_advrag.retrievers import JiebaBM25Retriever as JiebaBM25Retriever
    from llama_index_ext_advrag.retrievers import MilvusBM25Retriever as MilvusBM25Retriever
    from llama_index_ext_advrag.retrievers import (
        RecursiveIndexNodeRetriever as RecursiveIndexNodeRetriever,
    )
    from llama_index_ext_advrag.retrievers import SecondHopRetriever as SecondHopRetriever
    from llama_index_ext_advrag.retrievers import TwoLayerMilvusRetriever as TwoLayerMilvusRetriever
    from llama_index_ext_advrag.tables import SafePandasQueryEngine as SafePandasQueryEngine
    from llama_index_ext_advrag.tables import UnsafeCodeError as UnsafeCodeError
    from llama_index_ext_advrag.text import split_sentences as split_sentences

__version__ = "0.1.0"

# The pack's decisions onto OpenTelemetry spans when a tracer runs (docs/tracing.md); idle without.
install_span_writer()

_EXPORTS = {
    "AdaptiveSlidingWindowNodeParser": "llama_index_ext_advrag.node_parser",
    "HierarchicalSentenceNodeParser": "llama_index_ext_advrag.node_parser",
    "UnitAnnotator": "llama_index_ext_advrag.node_parser",
    "HierarchicalAutoMergingRetriever": "llama_index_ext_advrag.retrievers",
    "TwoLayerMilvusRetriever": "llama_index_ext_advrag.retrievers",
    "RecursiveIndexNodeRetriever": "llama_index_ext_advrag.retrievers",
    "HybridFusionRetriever": "llama_index_ext_advrag.retrievers",
    "JiebaBM25Retriever": "llama_index_ext_advrag.retrievers",
    "MilvusBM25Retriever": "llama_index_ext_advrag.retrievers",
    "SafePandasQueryEngine": "llama_index_ext_advrag.tables",
    "PrevNextPostprocessor": "llama_index_ext_advrag.postprocessor",
    "DriftAwareWindowPostprocessor": "llama_index_ext_advrag.postprocessor",
    "ConsecutiveMergePostprocessor": "llama_index_ext_advrag.postprocessor",
    "WindowReplacementPostprocessor": "llama_index_ext_advrag.postprocessor",
    "IndexLayoutError": "llama_index_ext_advrag.milvus.registry",
    "ModelResolutionError": "llama_index_ext_advrag.models",
    "MilvusConnectionError": "llama_index_ext_advrag.milvus",
    "MilvusAuthenticationError": "llama_index_ext_advrag.milvus",
    "UnsafeCodeError": "llama_index_ext_advrag.tables",
    "BgeSmallOnnxEmbedding": "llama_index_ext_advrag.embeddings",
    "MultilingualE5Embedding": "llama_index_ext_advrag.embeddings",
    "CachedEmbedding": "llama_index_ext_advrag.embeddings",
    "is_english_only": "llama_index_ext_advrag.embeddings",
    "decide_embed_model": "llama_index_ext_advrag.models",
    "JudgeRerankPostprocessor": "llama_index_ext_advrag.postprocessor",
    "CRAGPostprocessor": "llama_index_ext_advrag.postprocessor",
    "BaseRelevanceJudge": "llama_index_ext_advrag.judges",
    "Grade": "llama_index_ext_advrag.judges",
    "GradeLabel": "llama_index_ext_advrag.judges",
    "ColbertRelevanceJudge": "llama_index_ext_advrag.judges",
    "CrossEncoderRelevanceJudge": "llama_index_ext_advrag.judges",
    "EmbeddingRelevanceJudge": "llama_index_ext_advrag.judges",
    "LLMRelevanceJudge": "llama_index_ext_advrag.judges",
    "LanguageRoutedJudge": "llama_index_ext_advrag.judges",
    "SelfRAGQueryEngine": "llama_index_ext_advrag.query_engine",
    "resolve_embed_model": "llama_index_ext_advrag.models",
    "resolve_llm": "llama_index_ext_advrag.models",
    "split_sentences": "llama_index_ext_advrag.text",
    "SecondHopRetriever": "llama_index_ext_advrag.retrievers",
    "ContextCompressionPostprocessor": "llama_index_ext_advrag.postprocessor",
}

# Former names, still importable (building one warns) but not listed in __all__.
_DEPRECATED = {"BM25Retriever": "llama_index_ext_advrag.retrievers"}

__all__ = ["TRACE_KEY", "__version__", *sorted(_EXPORTS)]

__getattr__ = lazy_getattr(__name__, {**_EXPORTS, **_DEPRECATED})


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
