"""Retrievers: Milvus auto-merging, two-layer routing, recursive IndexNode routing, hybrid fusion.

Classes are imported lazily so that optional or heavy imports happen only when the class is
used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import Deprecated, lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
    from llama_index_ext_advrag.retrievers.auto_merging import (
        HierarchicalAutoMergingRetriever as HierarchicalAutoMergingRetriever,
    )
    from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever as JiebaBM25Retriever
    from llama_index_ext_advrag.retrievers.hybrid import (
        HybridFusionRetriever as HybridFusionRetriever,
    )
    from llama_index_ext_advrag.retrievers.milvus_bm25 import (
        MilvusBM25Retriever as MilvusBM25Retriever,
    )
    from llama_index_ext_advrag.retrievers.recursive import (
        RecursiveIndexNodeRetriever as RecursiveIndexNodeRetriever,
    )
    from llama_index_ext_advrag.retrievers.second_hop import (
        SecondHopRetriever as SecondHopRetriever,
    )
    from llama_index_ext_advrag.retrievers.two_layer import (
        TwoLayerMilvusRetriever as TwoLayerMilvusRetriever,
    )

# Every retriever is configured the same way (docs/design.md, Configuration): its settings are
# pydantic fields on the retriever, ``to_dict``/``from_dict`` round-trip them. The ``*Config``
# models of earlier versions and the former name ``BM25Retriever`` still resolve for one release.
_CONFIG = "set the settings on the retriever itself (to_dict/from_dict)"

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    __file__,
    deprecated={
        "AutoMergingConfig": Deprecated(".auto_merging", _CONFIG),
        "BM25Config": Deprecated(".bm25", _CONFIG),
        "BM25Retriever": Deprecated(".bm25", "use JiebaBM25Retriever (same class)"),
        "HybridFusionConfig": Deprecated(".hybrid", _CONFIG),
        "RecursiveConfig": Deprecated(".recursive", _CONFIG),
        "TwoLayerConfig": Deprecated(".two_layer", _CONFIG),
    },
)
