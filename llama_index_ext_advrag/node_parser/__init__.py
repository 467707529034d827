"""Node parsers: adaptive sentence sliding windows and a sentence-aligned hierarchy.

Classes are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "AdaptiveSlidingWindowNodeParser": ".sliding_window",
    "HierarchicalSentenceNodeParser": ".hierarchical",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
