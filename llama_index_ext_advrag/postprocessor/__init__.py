"""Node postprocessors: prev-next expansion, drift-aware windows, consecutive merge.

Classes are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "PrevNextPostprocessor": "prev_next",
    "DriftAwareWindowPostprocessor": "drift_window",
    "ConsecutiveMergePostprocessor": "consecutive_merge",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
