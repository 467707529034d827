"""Lazy exports written once.

A package lists its public names once, as the ``from module import Name as Name`` lines of its
``if TYPE_CHECKING:`` block: type checkers and editors follow those imports, and
:func:`lazy_exports` reads the same lines (with ``ast``, when the package is imported) to build
``__all__`` and a module ``__getattr__`` that imports each name on first use. This is the scheme
of scientific-python's SPEC 1 (``lazy_loader.attach_stub``), with the block in ``__init__.py``
itself instead of a stub file.
"""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple


class Deprecated(NamedTuple):
    """A former public name, still importable for one release: reading it warns."""

    module: str  # where the object lives (absolute, or relative to the package)
    advice: str  # what to use instead, e.g. "import it from llama_index_ext_advrag.tables"
    attribute: str | None = None  # its name there, when it was renamed (default: the same)


class LazyExports(NamedTuple):
    """What :func:`lazy_exports` gives a package: assign the three to the module's own names."""

    getattr: Callable[[str], Any]
    dir: Callable[[], list[str]]
    all: list[str]


def type_checking_exports(source: str, package: str) -> dict[str, str]:
    """Name -> absolute module path of every ``from M import N as N`` in the source's top-level
    ``if TYPE_CHECKING:`` block(s).

    Raises:
        ValueError: a statement in the block is not such an import (``import M``, ``from M
            import *``, a name re-bound under another name, code), so the table and what type
            checkers see cannot drift apart.
    """
    exports: dict[str, str] = {}
    for statement in ast.parse(source).body:
        if not (isinstance(statement, ast.If) and ast.unparse(statement.test) == "TYPE_CHECKING"):
            continue
        for line in statement.body:
            if not isinstance(line, ast.ImportFrom) or line.module is None and line.level == 0:
                raise ValueError(
                    f"{package}: only `from module import Name as Name` lines may stand under "
                    f"TYPE_CHECKING, not {ast.unparse(line)!r}"
                )
            module = _absolute(package, line.level, line.module)
            for alias in line.names:
                if alias.asname != alias.name:
                    raise ValueError(
                        f"{package}: write `from {module} import {alias.name} as {alias.name}` "
                        f"under TYPE_CHECKING (an explicit re-export), not {ast.unparse(line)!r}"
                    )
                exports[alias.name] = module
    return exports


def _absolute(package: str, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = package.split(".")[: len(package.split(".")) - (level - 1)]
    return ".".join([*base, module] if module else base)


def lazy_exports(
    package: str,
    init_file: str,
    *,
    eager: Iterable[str] = (),
    deprecated: Mapping[str, Deprecated] | None = None,
) -> LazyExports:
    """Build ``__getattr__``, ``__dir__`` and ``__all__`` for ``package`` from the
    ``TYPE_CHECKING`` block of its ``__init__.py`` (``init_file``).

    ``eager`` names are defined by the package itself and only added to ``__all__``;
    ``deprecated`` names resolve (with a ``DeprecationWarning``) but are not listed.

    >>> __getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)  # doctest: +SKIP
    """
    exports = type_checking_exports(Path(init_file).read_text(encoding="utf-8"), package)
    public = sorted({*exports, *eager})

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(public))

    return LazyExports(module_getattr(package, exports, deprecated), __dir__, public)


def module_getattr(
    package: str,
    exports: Mapping[str, str],
    deprecated: Mapping[str, Deprecated] | None = None,
) -> Callable[[str], Any]:
    """A module ``__getattr__``: ``exports`` (name -> absolute module) are imported on first
    use; ``deprecated`` names are imported with a ``DeprecationWarning``; anything else is an
    ``AttributeError`` naming the module."""
    former = dict(deprecated or {})

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        if name in former:
            path, advice, attribute = former[name]
            warnings.warn(
                f"{package}.{name} is deprecated and will be removed in the next release: {advice}",
                DeprecationWarning,
                stacklevel=2,
            )
            module = importlib.import_module(path, package if path.startswith(".") else None)
            return getattr(module, attribute or name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def warn_renamed(owner: object, old: str, new: str) -> None:
    """Warn that method ``old`` of ``owner`` is kept for one release under its former name;
    call it first thing in the old method, which then returns ``self.new(...)``."""
    warnings.warn(
        f"{type(owner).__name__}.{old}() is deprecated and will be removed in the next "
        f"release: use {new}()",
        DeprecationWarning,
        stacklevel=3,
    )
