"""The mutation run's scope covers the whole package: every module is mutated by `make mutation`
(pyproject.toml [tool.mutmut] only_mutate) or named, with its reason, in the ``[not_mutated]``
table of benchmarks/mutation_equivalents.toml, so a new module without mutation coverage fails
here, and a mutated module needs a selected test that imports it. Pure Python, no mutmut run (a
second or less); benchmarks/results/mutation.txt holds the measured survival per module.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import tomllib
from mutation_sample import dotted_name, imported_modules

REPO_ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "llama_index_ext_advrag"
KINDS = {"re-export", "service", "child-process", "backlog"}


def _mutmut() -> dict:
    return tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
        "mutmut"
    ]


def _not_mutated() -> dict[str, dict[str, str]]:
    path = REPO_ROOT / "benchmarks" / "mutation_equivalents.toml"
    return tomllib.loads(path.read_text(encoding="utf-8")).get("not_mutated", {})


def _modules() -> list[str]:
    return sorted(p.relative_to(REPO_ROOT).as_posix() for p in (REPO_ROOT / PACKAGE).rglob("*.py"))


def _listed(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in patterns)  # as mutmut matches


def test_every_module_is_mutated_or_excluded_with_a_reason() -> None:
    patterns, excluded = _mutmut()["only_mutate"], _not_mutated()
    neither = [m for m in _modules() if not _listed(m, patterns) and m not in excluded]
    both = [m for m in _modules() if _listed(m, patterns) and m in excluded]
    assert not neither, (
        f"modules outside the mutation run: {neither}; add each to [tool.mutmut] only_mutate "
        "(with a test that kills its mutants) or to [not_mutated] in "
        "benchmarks/mutation_equivalents.toml with its reason"
    )
    assert not both, f"modules both mutated and excluded: {both}"


def test_exclusions_name_existing_modules_with_a_kind_and_a_reason() -> None:
    modules = set(_modules())
    for module, entry in _not_mutated().items():
        assert module in modules, f"[not_mutated] names {module!r}, which does not exist"
        assert entry.get("kind") in KINDS, (module, entry.get("kind"), sorted(KINDS))
        assert len(entry.get("reason", "").split()) >= 4, f"{module}: give the reason"


def test_every_pattern_and_selected_test_exists() -> None:
    config = _mutmut()
    for pattern in config["only_mutate"]:
        assert any(fnmatch.fnmatch(m, pattern) for m in _modules()), f"{pattern} matches nothing"
    for selected in config["pytest_add_cli_args_test_selection"]:
        assert (REPO_ROOT / selected).exists(), f"selected test {selected} does not exist"


def test_every_mutated_module_is_imported_by_a_selected_test() -> None:
    config = _mutmut()
    files: list[Path] = []
    for selected in config["pytest_add_cli_args_test_selection"]:
        path = REPO_ROOT / selected
        files.extend(sorted(path.rglob("test_*.py")) if path.is_dir() else [path])
    imported = set().union(*(imported_modules(f) for f in files))
    listed = [m for m in _modules() if _listed(m, config["only_mutate"])]
    untested = [
        m for m in listed if dotted_name(m) not in imported and not m.endswith("__init__.py")
    ]
    assert not untested, f"mutated modules no selected test imports: {untested}"
