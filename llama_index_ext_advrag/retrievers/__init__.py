"""Retrievers: Milvus auto-merging, two-layer routing, recursive IndexNode routing, hybrid fusion.

Classes are imported lazily so that optional or heavy imports happen only when the class is
used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from llama_index_ext_advrag.retrievers.auto_merging import (
        AutoMergingConfig as AutoMergingConfig,
    )
    from llama_index_ext_advrag.retrievers.auto_merging import (
        HierarchicalAutoMergingRetriever as HierarchicalAutoMergingRetriever,
    )
    from llama_index_ext_advrag.retrievers.bm25 import BM25Config as BM25Config
    from llama_index_ext_advrag.retrievers.bm25 import BM25Retriever as BM25Retriever
    from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever as JiebaBM25Retriever
    from llama_index_ext_advrag.retrievers.hybrid import (
        HybridFusionConfig as HybridFusionConfig,
    )
    from llama_index_ext_advrag.retrievers.hybrid import (
        HybridFusionRetriever as HybridFusionRetriever,
    )
    from llama_index_ext_advrag.retrievers.milvus_bm25 import (
        MilvusBM25Retriever as MilvusBM25Retriever,
    )
    from llama_index_ext_advrag.retrievers.recursive import (
        RecursiveConfig as RecursiveConfig,
    )
    from llama_index_ext_advrag.retrievers.recursive import (
        RecursiveIndexNodeRetriever as RecursiveIndexNodeRetriever,
    )
    from llama_index_ext_advrag.retrievers.second_hop import (
        SecondHopRetriever as SecondHopRetriever,
    )
    from llama_index_ext_advrag.retrievers.two_layer import (
        TwoLayerConfig as TwoLayerConfig,
    )
    from llama_index_ext_advrag.retrievers.two_layer import (
        TwoLayerMilvusRetriever as TwoLayerMilvusRetriever,
    )

# Every retriever is configured the same way (docs/design.md, Configuration): its settings are
# pydantic fields on the retriever, ``to_dict``/``from_dict`` round-trip them. The ``*Config``
# classes are deprecated models generated from those fields, kept for backwards compatibility.
_EXPORTS = {
    "HierarchicalAutoMergingRetriever": ".auto_merging",
    "AutoMergingConfig": ".auto_merging",
    "TwoLayerMilvusRetriever": ".two_layer",
    "TwoLayerConfig": ".two_layer",
    "RecursiveIndexNodeRetriever": ".recursive",
    "RecursiveConfig": ".recursive",
    "HybridFusionRetriever": ".hybrid",
    "HybridFusionConfig": ".hybrid",
    "JiebaBM25Retriever": ".bm25",
    "BM25Config": ".bm25",
    "MilvusBM25Retriever": ".milvus_bm25",
    "SecondHopRetriever": ".second_hop",
}
# Former names, still importable (building one warns) but not listed in __all__.
_DEPRECATED = {"BM25Retriever": ".bm25"}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, {**_EXPORTS, **_DEPRECATED})
