"""Query engines: Self-RAG by prompting (retrieve-or-not, relevance, support and usefulness
critique, bounded re-retrieval), on any LLM or none.

Classes are imported lazily.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "SelfRAGQueryEngine": ".self_rag",
    "GenerationMode": ".self_rag_critique",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
