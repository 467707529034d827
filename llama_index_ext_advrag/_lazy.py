"""Lazy re-exports: public names resolve to their module on first attribute access."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(package: str, exports: Mapping[str, str]) -> Callable[[str], Any]:
    """Build a module ``__getattr__`` importing ``exports[name]`` (a module path, absolute or
    relative to ``package``) when ``name`` is first used."""

    def __getattr__(name: str) -> Any:
        if name in exports:
            module = importlib.import_module(
                exports[name], package if exports[name].startswith(".") else None
            )
            return getattr(module, name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
