"""No module imports another package's private module, no upward import, no cycle (read with ast)."""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import (
    PACKAGE,
    Import,
    all_imports,
    floor_of,
    import_cycles,
    layer,
    layer_graph,
    module_imports,
    package_modules,
    private_owner,
    private_violations,
    upward_imports,
)

MODULES = package_modules()


def test_no_import_of_another_packages_private_module() -> None:
    bad = private_violations(all_imports())
    assert not bad, "\n".join(f"{e.importer}:{e.line} imports {e.imported}" for e in bad)


def test_no_import_points_to_a_higher_floor() -> None:
    bad = upward_imports(all_imports())
    assert not bad, "\n".join(f"{e.importer}:{e.line} imports {e.imported}" for e in bad)


def test_no_import_cycle_anywhere_in_the_package() -> None:
    cycles = import_cycles(all_imports())
    assert not cycles, "\n".join(" <-> ".join(cycle) for cycle in cycles)


def test_a_cycle_is_caught() -> None:
    a, b, c, d = (f"{PACKAGE}.evaluation.{name}" for name in "abcd")
    loop = [Import(a, b, 1), Import(b, c, 1), Import(c, a, 1), Import(c, d, 1)]
    assert import_cycles(loop) == [[a, b, c]]
    assert import_cycles([Import(a, b, 1), Import(b, a, 2)]) == [[a, b]]
    assert import_cycles([Import(a, b, 1), Import(b, c, 1), Import(a, a, 1)]) == []


def test_every_unit_of_the_package_has_a_floor() -> None:
    units = {layer(name) for name in MODULES}
    assert {unit for unit in units if not _has_floor(unit)} == set()


def _has_floor(unit: str) -> bool:
    try:
        floor_of(unit)
    except KeyError:
        return False
    return True


def test_an_upward_import_is_caught() -> None:
    edge = Import(f"{PACKAGE}.text.words", f"{PACKAGE}.retrievers.hybrid", 1)
    down = Import(f"{PACKAGE}.retrievers.hybrid", f"{PACKAGE}.text.words", 1)
    assert upward_imports([edge, down]) == [edge]
    assert floor_of("tables") < floor_of("retrievers") < floor_of("query_engine")


def test_the_walk_sees_the_package() -> None:
    imports = all_imports()
    assert f"{PACKAGE}.layout" in MODULES and f"{PACKAGE}.node_parser._nodes" in MODULES
    # the parsers write the layout contract and the postprocessors read it: both edges exist
    graph = layer_graph(imports)
    assert graph[("node_parser", "layout")] > 0 and graph[("postprocessor", "layout")] > 0


@pytest.mark.parametrize(
    ("module", "owner"),
    [
        ("llama_index_ext_advrag.node_parser._nodes", "llama_index_ext_advrag.node_parser"),
        ("llama_index_ext_advrag._lazy", "llama_index_ext_advrag"),
        ("llama_index_ext_advrag.layout", None),
        ("llama_index_ext_advrag.postprocessor", None),
    ],
)
def test_private_owner(module: str, owner: str | None) -> None:
    assert private_owner(module) == owner


def test_a_violation_is_caught(tmp_path: Path) -> None:
    """A cross-package private import written in a throwaway tree is reported; one from
    inside the owning package is not."""
    root = tmp_path / "pkg"
    (root / "a").mkdir(parents=True)
    (root / "b").mkdir()
    for path in (root / "__init__.py", root / "a" / "__init__.py", root / "b" / "__init__.py"):
        path.write_text("")
    (root / "a" / "_x.py").write_text("X = 1\n")
    (root / "a" / "y.py").write_text("from ._x import X\n")
    (root / "b" / "z.py").write_text("from pkg.a._x import X\nfrom pkg.a import y\n")
    known = {"pkg", "pkg.a", "pkg.a._x", "pkg.a.y", "pkg.b", "pkg.b.z"}
    imports = [
        *module_imports("pkg.a.y", root / "a" / "y.py", known),
        *module_imports("pkg.b.z", root / "b" / "z.py", known),
    ]
    assert Import("pkg.a.y", "pkg.a._x", 1) in imports
    assert private_violations(imports) == [Import("pkg.b.z", "pkg.a._x", 1)]
