"""A small, seeded sample of real mutants, run by `make test` (tests/unit/test_mutation_sample.py).

`make mutation` runs mutmut over every module of pyproject.toml [tool.mutmut] only_mutate, far too
long for CI. This draws a few mutants from mutmut's own generator (``create_mutations``, the same
mutants and names as `mutmut run`), runs for each only the selected test files (the table's
``pytest_add_cli_args_test_selection``) that import its module, and reports every mutant those
tests do not notice. Mutants listed in benchmarks/mutation_equivalents.toml (``[equivalent]``: they
cannot change behaviour; ``[survivor]``: measured survivors within a module's 5% budget) are not
drawn.

The sample: one mutant from each of the most recently changed modules (git history; uncommitted
changes count as newest), and one from each of further modules drawn at random. The seed is
derived from the mutated modules' and the equivalents list's contents, so the same tree always
draws the same mutants (no flaky verdict) and any change draws again; it is printed and
``ADVRAG_MUTATION_SEED`` overrides it. ``ADVRAG_MUTATION_SAMPLE`` sets the sample size and
``ADVRAG_MUTATION_MUTANTS`` (comma-separated mutant names) runs given mutants instead.

A mutant is applied without touching the tree: the child interpreter that runs pytest imports the
mutated module's source in place of the file (an import hook keyed on the module's name); each run
is bounded in CPU seconds (a mutant that loops is stopped and counts as noticed, as in mutmut).

    python tests/mutation_sample.py              # the sample `make test` runs
    ADVRAG_MUTATION_SEED=7 python tests/mutation_sample.py --size 3
    python tests/mutation_sample.py --mutant 'llama_index_ext_advrag.plan.x_run__mutmut_2'
"""

from __future__ import annotations

import argparse
import ast
import difflib
import fnmatch
import functools
import hashlib
import importlib.util
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "llama_index_ext_advrag"
EQUIVALENTS = Path("benchmarks") / "mutation_equivalents.toml"
DOCTESTS = "tests/unit/test_doctests.py"  # runs the examples of the public modules
SEED_ENV, SIZE_ENV, NAMES_ENV = (
    "ADVRAG_MUTATION_SEED", "ADVRAG_MUTATION_SAMPLE", "ADVRAG_MUTATION_MUTANTS"
)  # fmt: skip
DEFAULT_SIZE = 8
CPU_SECONDS_PER_MUTANT = 40
NOT_IMPORTED = 86  # the child's exit status when no test imported the mutated module

# The child: the mutated source replaces the module's file at import, then pytest runs.
_RUNNER = r"""
import importlib.abc, importlib.util, os, resource, sys
name, path, mutated, cpu_seconds = sys.argv[1:5]
resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_seconds), int(cpu_seconds) + 5))
with open(mutated, encoding="utf-8") as handle:
    source = handle.read()
loaded = []

class _Loader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        loaded.append(name)
        exec(compile(source, path, "exec"), module.__dict__)

class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, target_path=None, target_module=None):
        if fullname != name:
            return None
        package = [os.path.dirname(path)] if path.endswith("__init__.py") else None
        return importlib.util.spec_from_file_location(
            name, path, loader=_Loader(), submodule_search_locations=package
        )

sys.meta_path.insert(0, _Finder())
import pytest

status = int(pytest.main(sys.argv[5:]))
sys.exit(NOT_IMPORTED if status == 0 and not loaded else status)
""".replace("NOT_IMPORTED", str(NOT_IMPORTED))


@dataclass(eq=False)
class Mutant:
    """One mutant: mutmut's name for it, its module (a path under the root) and its source."""

    name: str
    module: str
    original: str
    _tree: Any = field(repr=False)
    _mutation: Any = field(repr=False)

    @functools.cached_property
    def mutated(self) -> str:
        """The module's source with this one mutation (rendered on demand: a module has
        hundreds of mutants and the sample needs a few)."""
        from mutmut.mutation.file_mutation import deep_replace

        return deep_replace(
            self._tree, self._mutation.original_node, self._mutation.mutated_node
        ).code  # type: ignore[union-attr]

    def diff(self) -> str:
        lines = difflib.unified_diff(
            self.original.splitlines(keepends=True),
            self.mutated.splitlines(keepends=True),
            self.module,
            self.module,
            n=1,
        )
        return "".join(lines)


@dataclass
class Outcome:
    mutant: Mutant
    tests: list[str]
    status: str  # killed / survived / timeout / not imported / no tests
    cpu_seconds: float
    output: str = field(repr=False, default="")

    @property
    def noticed(self) -> bool:
        return self.status in {"killed", "timeout"}


@dataclass
class Config:
    """What the sample reads from pyproject.toml [tool.mutmut] and the equivalents list."""

    root: Path
    package: str
    patterns: list[str]
    selection: list[str]
    pytest_args: list[str]
    skipped: set[str]

    @classmethod
    def load(cls, root: Path = REPO_ROOT) -> Config:
        table = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
        mutmut = table["tool"]["mutmut"]
        skipped: set[str] = set()
        if (root / EQUIVALENTS).is_file():
            listed = tomllib.loads((root / EQUIVALENTS).read_text(encoding="utf-8"))
            skipped = set(listed.get("equivalent", {})) | set(listed.get("survivor", {}))
        return cls(
            root=root,
            package=mutmut.get("source_paths", [PACKAGE])[0],
            patterns=list(mutmut["only_mutate"]),
            selection=list(mutmut.get("pytest_add_cli_args_test_selection", [])),
            pytest_args=list(mutmut.get("pytest_add_cli_args", [])),
            skipped=skipped,
        )

    def modules(self) -> list[str]:
        """Every module under the mutated source that a pattern of only_mutate matches."""
        found = sorted(
            p.relative_to(self.root).as_posix() for p in (self.root / self.package).rglob("*.py")
        )
        return [m for m in found if any(fnmatch.fnmatch(m, p) for p in self.patterns)]

    def test_files(self) -> list[Path]:
        files: list[Path] = []
        for selected in self.selection:
            path = self.root / selected
            files.extend(sorted(path.rglob("test_*.py")) if path.is_dir() else [path])
        return files

    def tests_for(self, module: str) -> list[str]:
        """The selected test files that import ``module`` (directly or by a re-exported name),
        and its docstring examples where the selected doctest file runs them (as the full
        mutmut run does: a mutant its examples notice is killed there too)."""
        dotted = dotted_name(module)
        tests = [
            f.relative_to(self.root).as_posix()
            for f in self.test_files()
            if dotted in imported_modules(f, self.root)
        ]
        if DOCTESTS in self.selection and dotted in doctested_modules(self.root):
            tests.append(f"{DOCTESTS}::test_docstring_examples[{dotted}]")
        return tests


@functools.cache
def doctested_modules(root: Path) -> frozenset[str]:
    """The modules whose examples ``tests/unit/test_doctests.py`` runs in the unit tier."""
    spec = importlib.util.spec_from_file_location("_advrag_doctests", root / DOCTESTS)
    assert spec is not None and spec.loader is not None
    doctests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(doctests)
    return frozenset(doctests.public_modules()) - frozenset(doctests.MILVUS_MODULES)


def dotted_name(module: str) -> str:
    return module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def _source(module: str, root: Path) -> Path | None:
    base = root / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def defining_module(module: str, name: str, root: Path = REPO_ROOT, depth: int = 0) -> str:
    """Where ``from module import name`` finds ``name``, read from the package ``__init__``
    files' own imports (their ``TYPE_CHECKING`` blocks name every lazy re-export): static, so
    nothing heavy is imported."""
    path = _source(module, root)
    if path is None or path.name != "__init__.py" or depth > 5:
        return module
    if _source(f"{module}.{name}", root) is not None:
        return f"{module}.{name}"  # a submodule imported by name
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and any((alias.asname or alias.name) == name for alias in node.names)
        ):
            return defining_module(node.module, name, root, depth + 1)
    return module


@functools.cache
def imported_modules(test_file: Path, root: Path = REPO_ROOT) -> frozenset[str]:
    """The modules a test file imports, directly or through a re-exported name."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(test_file.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            if _source(node.module.split(".")[0], root) is not None:  # a package of the root
                found.update(defining_module(node.module, alias.name, root) for alias in node.names)
    return frozenset(found)


def generate_mutants(module: str, root: Path = REPO_ROOT) -> list[Mutant]:
    """Every mutant mutmut makes of ``module`` (a path under ``root``), named as mutmut names
    them (``pkg.mod.x_function__mutmut_3``, ``pkg.mod.xǁClassǁmethod__mutmut_3``): only code in
    module-level functions and in methods of module-level classes is mutated, numbered per
    function in mutmut's order."""
    import libcst as cst
    from mutmut.mutation.file_mutation import create_mutations
    from mutmut.mutation.trampoline_templates import mangle_function_name

    original = (root / module).read_text(encoding="utf-8")
    tree, mutations, ignored_classes, ignored_functions = create_mutations(module, original)
    owner: dict[cst.CSTNode, str | None] = {}
    for statement in tree.body:
        if isinstance(statement, cst.FunctionDef):
            owner[statement] = None
        elif isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            for method in statement.body.body:
                if isinstance(method, cst.FunctionDef):
                    owner[method] = statement.name.value
    numbers: Counter[cst.CSTNode] = Counter()
    mutants = []
    for mutation in mutations:
        function = mutation.contained_by_top_level_function
        if function not in owner:
            continue
        numbers[function] += 1
        assert function is not None
        mangled = mangle_function_name(name=function.name.value, class_name=owner[function])
        name = f"{dotted_name(module)}.{mangled}__mutmut_{numbers[function]}"
        mutants.append(Mutant(name, module, original, tree, mutation))
    return mutants


def last_changes(modules: Sequence[str], root: Path) -> dict[str, float]:
    """Each module's last commit time; uncommitted changes count as now. Empty without git."""
    try:
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--", *modules],
            cwd=root, capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
        times = {}
        for module in modules:
            stamp = subprocess.run(
                ["git", "log", "-1", "--format=%ct", "--", module],
                cwd=root, capture_output=True, text=True, check=True, timeout=30,
            ).stdout.strip()  # fmt: skip
            times[module] = float(stamp) if stamp else time.time()
    except (OSError, subprocess.SubprocessError):
        return {}
    for line in changed.splitlines():
        path = line[3:].strip()
        if path in times:
            times[path] = time.time()
    return times


def default_seed(config: Config, modules: Sequence[str]) -> int:
    """A seed from the mutated modules' and the equivalents list's contents: the same tree draws
    the same mutants, a changed one draws again."""
    digest = hashlib.sha256()
    for path in [*modules, EQUIVALENTS.as_posix()]:
        file = config.root / path
        digest.update(path.encode())
        digest.update(file.read_bytes() if file.is_file() else b"")
    return int.from_bytes(digest.digest()[:4], "big")


def draw(
    config: Config,
    seed: int,
    size: int,
    recent: dict[str, float] | None = None,
) -> list[Mutant]:
    """``size`` mutants of distinct modules: one from each of the ``size // 2`` most recently
    changed modules (when ``recent`` has times), the rest from modules drawn with ``seed``.
    Listed equivalents and survivors are never drawn; a module with none left is passed over."""
    rng = random.Random(seed)
    modules = config.modules()
    by_recency = sorted(modules, key=lambda m: (-recent.get(m, 0.0), m)) if recent else []
    first = by_recency[: size // 2]
    others = [m for m in modules if m not in first]
    rng.shuffle(others)
    chosen: list[Mutant] = []
    for module in [*first, *others]:
        if len(chosen) == size:
            break
        candidates = [
            m for m in generate_mutants(module, config.root) if m.name not in config.skipped
        ]
        if candidates:
            chosen.append(rng.choice(candidates))
    return chosen


def named(config: Config, names: Iterable[str]) -> list[Mutant]:
    """The mutants with these names (to re-run a reported one)."""
    wanted = set(names)
    found = []
    for module in config.modules():
        if any(n.startswith(dotted_name(module) + ".") for n in wanted):
            found.extend(m for m in generate_mutants(module, config.root) if m.name in wanted)
    missing = wanted - {m.name for m in found}
    if missing:
        raise ValueError(f"no such mutants (renumbered after an edit?): {sorted(missing)}")
    return found


def run_mutant(
    mutant: Mutant,
    tests: Sequence[str],
    config: Config,
    cpu_seconds: int = CPU_SECONDS_PER_MUTANT,
) -> Outcome:
    """Run ``tests`` (paths under the root) with the mutant in place of its module."""
    if not tests:
        return Outcome(mutant, [], "no tests", 0.0)
    # -x: the first failing test is enough; the unit tier only (the table's own arguments).
    args = ["-x", "-q", "--no-header", "-p", "no:randomly", "-p", "no:cacheprovider"]
    args += [*config.pytest_args, *tests]
    # not an xdist worker, and not logging its tests' CPU into the outer run's log (the outer
    # test's record already holds its children's CPU)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))}
    env.pop("ADVRAG_TEST_CPU_LOG", None)
    env["OMP_NUM_THREADS"] = "1"
    with tempfile.TemporaryDirectory(prefix="advrag-mutant-") as scratch:
        source = Path(scratch) / "mutated.py"
        source.write_text(mutant.mutated, encoding="utf-8")
        command = [sys.executable, "-c", _RUNNER, dotted_name(mutant.module)]
        command += [str(config.root / mutant.module), str(source), str(cpu_seconds), *args]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        process = subprocess.Popen(
            command,
            cwd=config.root,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=max(120, 6 * cpu_seconds))
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    code = process.returncode
    if code == 4:  # pytest's usage error: the run says nothing about the mutant
        raise RuntimeError(f"pytest refused its arguments for {mutant.name}:\n{output[-3000:]}")
    status = {0: "survived", NOT_IMPORTED: "not imported", 5: "no tests"}.get(code, "killed")
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        status = "timeout"
    return Outcome(mutant, list(tests), status, cpu, output)


def describe(outcome: Outcome) -> str:
    """A failure message: the module, the mutant's diff, the tests that did not notice it."""
    why = {
        "survived": "every test passed with the mutant in place",
        "not imported": "no selected test imported the module",
        "no tests": "no selected test file imports the module",
    }[outcome.status]
    return (
        f"{outcome.mutant.module}: mutant {outcome.mutant.name} survived ({why})\n"
        f"tests: {' '.join(outcome.tests) or '(none)'}\n{outcome.mutant.diff()}"
    )


def run_sample(
    config: Config,
    seed: int | None = None,
    size: int = DEFAULT_SIZE,
    names: Sequence[str] = (),
    log=print,  # noqa: ANN001
) -> list[Outcome]:
    modules = config.modules()
    if names:
        mutants = named(config, names)
    else:
        seed = default_seed(config, modules) if seed is None else seed
        recent = last_changes(modules, config.root)
        log(
            f"mutation sample: seed {seed} (set {SEED_ENV}={seed} to draw it again), {size} mutants"
        )
        mutants = draw(config, seed, size, recent)
    outcomes = []
    for mutant in mutants:
        outcome = run_mutant(mutant, config.tests_for(mutant.module), config)
        log(f"  {outcome.status:9} {outcome.cpu_seconds:5.1f} CPU-s  {mutant.name}")
        outcomes.append(outcome)
    return outcomes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=os.environ.get(SEED_ENV))
    parser.add_argument("--size", type=int, default=int(os.environ.get(SIZE_ENV, DEFAULT_SIZE)))
    parser.add_argument(
        "--mutant",
        action="append",
        default=[n for n in os.environ.get(NAMES_ENV, "").split(",") if n],
    )
    args = parser.parse_args(argv)
    started = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcomes = run_sample(Config.load(), args.seed, args.size, args.mutant)
    ended = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(
        f"children: {ended.ru_utime + ended.ru_stime - started.ru_utime - started.ru_stime:.1f} CPU-s"
    )
    missed = [o for o in outcomes if not o.noticed]
    for outcome in missed:
        print(describe(outcome))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
