"""The package's internal imports, read with ``ast`` (nothing is imported or run).

Run ``python tests/import_graph.py`` from the repository root to print the import graph between
the package's subpackages (and top-level modules) and any import of another package's private
module. ``tests/unit/test_import_graph.py`` uses the same functions to fail on such an import.

A module ``a/_x.py`` is private to package ``a``: only modules inside ``a`` may import it.
Imports inside functions (lazy imports) and under ``TYPE_CHECKING`` (a package's lazy exports)
count like top-level ones; so do the modules that deprecated aliases (``Deprecated(module, ...)``
in ``__init__.py`` files) point to.
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

PACKAGE = "llama_index_ext_advrag"
REPO_ROOT = Path(__file__).resolve().parents[1]


class Import(NamedTuple):
    """One import edge: ``importer`` imports ``imported`` (both dotted module names)."""

    importer: str
    imported: str
    line: int


def module_name(path: Path, root: Path) -> str:
    """Dotted name of the module at ``path`` (``root`` holds the top package folder)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(root: Path = REPO_ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module of ``package`` by dotted name."""
    return {module_name(path, root): path for path in sorted((root / package).rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _lazy_exports(tree: ast.Module) -> Iterator[tuple[str, int]]:
    """Module paths named by deprecated aliases: ``Deprecated("module", ...)`` calls."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "Deprecated"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            yield node.args[0].value, node.lineno


def module_imports(name: str, path: Path, known: set[str]) -> list[Import]:
    """The modules of the package (``known``) that module ``name`` imports, each once.

    ``from a import b`` counts as an import of ``a.b`` when that is a module, else of ``a``.
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: list[Import] = []
    seen: set[str] = set()  # one edge per imported module, at its first import

    def add(target: str, line: int) -> None:
        while target and target not in known:  # `import a.b.c` where c is a name, not a module
            target = target.rpartition(".")[0]
        if target and target not in seen:
            seen.add(target)
            found.append(Import(name, target, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, is_package, node.level, node.module)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                add(submodule if submodule in known else base, node.lineno)
    for target, line in _lazy_exports(tree):
        add(_resolve(name, is_package, 1, target[1:]) if target.startswith(".") else target, line)
    return found


def all_imports(root: Path = REPO_ROOT, package: str = PACKAGE) -> list[Import]:
    """Every internal import of ``package``."""
    modules = package_modules(root, package)
    known = set(modules)
    return [edge for name, path in modules.items() for edge in module_imports(name, path, known)]


def private_owner(module: str) -> str | None:
    """The package a private module belongs to (``a`` for ``a._x`` or ``a._x.y``), else ``None``."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:index])
    return None


def private_violations(imports: list[Import]) -> list[Import]:
    """Imports of a private module from outside the package that owns it."""
    bad = []
    for edge in imports:
        owner = private_owner(edge.imported)
        if owner is not None and not (
            edge.importer == owner or edge.importer.startswith(owner + ".")
        ):
            bad.append(edge)
    return bad


def layer(module: str, package: str = PACKAGE) -> str:
    """The subpackage or top-level module of the package that ``module`` belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "(root)"


# The floors, lowest first (docs/design.md draws the same picture). A unit may import from its
# own floor or a lower one, never from a higher one; a new subpackage or top-level module must
# be given a floor here before it can land.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("_enums", "_lazy", "_onnx", "_progress", "text", "layout", "trace", "similarity", "events",
     "plan", "queries", "llm_calls", "configuration", "tracing"),
    ("embeddings", "milvus"),
    ("models",),
    ("judges", "node_parser", "tables"),
    ("postprocessor",),
    ("retrievers",),
    ("query_engine",),
    ("evaluation",),
    ("cli_compare",),
    ("cli",),
    ("(root)",),
)  # fmt: skip


def floor_of(unit: str) -> int:
    """The floor of a subpackage or top-level module (``KeyError`` when it has none)."""
    for number, units in enumerate(FLOORS):
        if unit in units:
            return number
    raise KeyError(f"{unit!r} has no floor in tests/import_graph.py FLOORS")


def upward_imports(imports: list[Import]) -> list[Import]:
    """Imports from a unit to a unit on a higher floor (or to one without a floor)."""
    upward = []
    for edge in imports:
        importer, imported = layer(edge.importer), layer(edge.imported)
        if importer == imported:
            continue
        try:
            if floor_of(imported) > floor_of(importer):
                upward.append(edge)
        except KeyError:
            upward.append(edge)
    return upward


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """Groups of modules that import each other, directly or through others (strongly connected
    components of more than one module, each sorted; imports under ``TYPE_CHECKING`` and inside
    functions count too, as a reader must follow them all the same)."""
    graph: dict[str, set[str]] = {}
    for edge in imports:
        if edge.importer != edge.imported:
            graph.setdefault(edge.importer, set()).add(edge.imported)
            graph.setdefault(edge.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(graph):  # Tarjan's algorithm, iterative (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return sorted(cycles)


def layer_graph(imports: list[Import]) -> Counter[tuple[str, str]]:
    """How many imports run from one subpackage (or top-level module) to another."""
    return Counter(
        (layer(edge.importer), layer(edge.imported))
        for edge in imports
        if layer(edge.importer) != layer(edge.imported)
    )


def format_report(root: Path = REPO_ROOT) -> str:
    imports = all_imports(root)
    graph = layer_graph(imports)
    lines = ["import graph between subpackages (importer -> imported: number of module pairs)"]
    for importer in sorted({a for a, _ in graph}):
        targets = sorted((b, n) for (a, b), n in graph.items() if a == importer)
        lines.append(f"  {importer} -> " + ", ".join(f"{b} ({n})" for b, n in targets))
    lines.append("module imports across subpackages")
    short = len(PACKAGE) + 1
    for edge in sorted(imports):
        if layer(edge.importer) != layer(edge.imported) and edge.importer != PACKAGE:
            lines.append(f"  {edge.importer[short:]} -> {edge.imported[short:]}")
    for cycle in import_cycles(imports):
        lines.append("import cycle: " + " <-> ".join(m[short:] for m in cycle))
    bad = private_violations(imports)
    lines.append(f"imports of another package's private module: {len(bad)}")
    lines += [f"  {edge.importer}:{edge.line} -> {edge.imported}" for edge in bad]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(format_report(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT) + "\n")
