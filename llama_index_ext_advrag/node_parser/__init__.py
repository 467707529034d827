"""Node parsers: adaptive sentence sliding windows, a sentence-aligned hierarchy, and the
ingest-time annotation the drift-aware window reads.

Classes are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from llama_index_ext_advrag.node_parser.annotations import UnitAnnotator as UnitAnnotator
    from llama_index_ext_advrag.node_parser.hierarchical import (
        HierarchicalSentenceNodeParser as HierarchicalSentenceNodeParser,
    )
    from llama_index_ext_advrag.node_parser.sliding_window import (
        AdaptiveSlidingWindowNodeParser as AdaptiveSlidingWindowNodeParser,
    )

_EXPORTS = {
    "AdaptiveSlidingWindowNodeParser": ".sliding_window",
    "HierarchicalSentenceNodeParser": ".hierarchical",
    "UnitAnnotator": ".annotations",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
