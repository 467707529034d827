"""Node parsers: adaptive sentence sliding windows, a sentence-aligned hierarchy, and the
ingest-time annotation the drift-aware window reads.

Classes are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
    from llama_index_ext_advrag.node_parser.annotations import UnitAnnotator as UnitAnnotator
    from llama_index_ext_advrag.node_parser.hierarchical import (
        HierarchicalSentenceNodeParser as HierarchicalSentenceNodeParser,
    )
    from llama_index_ext_advrag.node_parser.sliding_window import (
        AdaptiveSlidingWindowNodeParser as AdaptiveSlidingWindowNodeParser,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
