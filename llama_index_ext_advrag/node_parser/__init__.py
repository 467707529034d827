"""Node parsers: adaptive sentence sliding windows and a sentence-aligned hierarchy.

Classes are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AdaptiveSlidingWindowNodeParser": "sliding_window",
    "HierarchicalSentenceNodeParser": "hierarchical",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
