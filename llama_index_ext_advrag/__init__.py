"""Advanced-RAG components for LlamaIndex.

Every component records its decisions under ``node.metadata[TRACE_KEY]`` (or the response
metadata for query engines), so a user can see why the context looks the way it does.

Public classes are importable from here; they are loaded on first use so that ``import
llama_index_ext_advrag`` stays cheap and optional heavy imports happen only where needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import Deprecated, lazy_exports
from llama_index_ext_advrag.trace import TRACE_KEY as TRACE_KEY
from llama_index_ext_advrag.tracing import install_span_writer

# The public names, written once: type checkers and editors read these imports; at run time
# lazy_exports reads the same lines into __all__ and a __getattr__ that imports on first use.
if TYPE_CHECKING:
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

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    __file__,
    eager=("TRACE_KEY", "__version__"),
    # former names, still importable for one release (reading one warns), not in __all__
    deprecated={
        "BM25Retriever": Deprecated(".retrievers", "use JiebaBM25Retriever (same class)"),
    },
)
