"""Retrievers: Milvus auto-merging, two-layer routing, recursive IndexNode routing, hybrid fusion.

Classes are imported lazily so that optional or heavy imports happen only when the class is
used.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "HierarchicalAutoMergingRetriever": ".auto_merging",
    "TwoLayerMilvusRetriever": ".two_layer",
    "RecursiveIndexNodeRetriever": ".recursive",
    "HybridFusionRetriever": ".hybrid",
    "BM25Retriever": ".bm25",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
