"""Retrievers: Milvus auto-merging, two-layer routing, recursive IndexNode routing, hybrid fusion.

Classes are imported lazily so that optional, heavy or fragile imports (pandas query engines
from llama-index-experimental) happen only when the class is used.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "HierarchicalAutoMergingRetriever": "auto_merging",
    "TwoLayerMilvusRetriever": "two_layer",
    "RecursiveIndexNodeRetriever": "recursive",
    "HybridFusionRetriever": "hybrid",
    "BM25Retriever": "bm25",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
