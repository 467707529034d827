"""A real mutation sample in `make test` (tests/mutation_sample.py), and the sampler's own tests.

``test_a_seeded_sample_of_mutants_is_noticed`` applies a few mutants drawn from mutmut's generator
over the modules of pyproject.toml [tool.mutmut] only_mutate, each run against the selected test
files that import its module, and fails naming the module, the mutant's diff and the tests when
one survives (a new module whose tests notice nothing is among the most recently changed ones, so
it is always drawn). About 4 CPU-seconds per killed mutant; the seed is in the failure message.
The sampler's tests build a two-file package in a temporary folder: a weak test must be reported,
a strong one must not.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from mutation_sample import (
    DEFAULT_SIZE,
    NAMES_ENV,
    SEED_ENV,
    SIZE_ENV,
    Config,
    default_seed,
    describe,
    draw,
    generate_mutants,
    run_mutant,
    run_sample,
)

PRICE = '''
def price(units: int, unit_cost: int) -> int:
    """What ``units`` cost: one unit free from ten."""
    if units >= 10:
        return (units - 1) * unit_cost
    return units * unit_cost
'''
WEAK_TEST = """
from toypkg.calc import price


def test_price_runs():
    price(5, 3)
"""
STRONG_TEST = """
from toypkg.calc import price


def test_price_matches_its_definition():
    for units in range(15):
        assert price(units, 3) == 3 * (units - (units >= 10)), units
"""


def _toy_root(tmp_path: Path, test_source: str) -> Config:
    (tmp_path / "toypkg").mkdir()
    (tmp_path / "toypkg" / "__init__.py").write_text("")
    (tmp_path / "toypkg" / "calc.py").write_text(PRICE)
    (tmp_path / "toypkg" / "other.py").write_text("def one():\n    return 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(textwrap.dedent(test_source))
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent(
            """
            [tool.mutmut]
            source_paths = ["toypkg"]
            only_mutate = ["toypkg/calc.py", "toypkg/other.py"]
            pytest_add_cli_args_test_selection = ["tests/test_calc.py"]
            pytest_add_cli_args = ["-p", "no:timeout"]
            """
        )
    )
    return Config.load(tmp_path)


def test_a_seeded_sample_of_mutants_is_noticed() -> None:
    config = Config.load()
    seed = int(os.environ[SEED_ENV]) if os.environ.get(SEED_ENV) else None
    seed = default_seed(config, config.modules()) if seed is None else seed
    size = int(os.environ.get(SIZE_ENV, DEFAULT_SIZE))
    names = [n for n in os.environ.get(NAMES_ENV, "").split(",") if n]
    outcomes = run_sample(config, seed, size, names)
    assert len(outcomes) == (len(names) or size)
    missed = [o for o in outcomes if not o.noticed]
    assert not missed, (
        f"mutation sample (seed {seed}; again: {SEED_ENV}={seed} python tests/mutation_sample.py): "
        f"{len(missed)} of {len(outcomes)} mutants survived. Kill each with a test, or list it in "
        "benchmarks/mutation_equivalents.toml ([equivalent] with the reason it cannot change "
        "behaviour)\n\n" + "\n".join(describe(o) for o in missed)
    )


def test_the_sampler_reports_a_weak_test(tmp_path: Path) -> None:
    config = _toy_root(tmp_path, WEAK_TEST)
    assert config.tests_for("toypkg/calc.py") == ["tests/test_calc.py"]
    assert config.tests_for("toypkg/other.py") == []  # no test imports it
    mutant = next(m for m in generate_mutants("toypkg/calc.py", tmp_path) if "x_price" in m.name)
    outcome = run_mutant(mutant, config.tests_for(mutant.module), config)
    assert outcome.status == "survived", outcome.output
    message = describe(outcome)
    assert message.startswith(f"toypkg/calc.py: mutant {mutant.name} survived")
    assert "tests: tests/test_calc.py" in message
    assert "\n-" in message and "\n+" in message  # the diff
    lonely = run_mutant(generate_mutants("toypkg/other.py", tmp_path)[0], [], config)
    assert lonely.status == "no tests" and not lonely.noticed


def test_the_sampler_passes_a_strong_test_and_finds_the_mutated_module(tmp_path: Path) -> None:
    config = _toy_root(tmp_path, STRONG_TEST)
    mutants = generate_mutants("toypkg/calc.py", tmp_path)
    outcomes = [run_mutant(m, config.tests_for(m.module), config) for m in mutants[:3]]
    assert [o.status for o in outcomes] == ["killed"] * 3, [o.output for o in outcomes]
    # a test that never imports the module does not pass for one that noticed nothing
    (tmp_path / "tests" / "test_calc.py").write_text("def test_nothing():\n    pass\n")
    outcome = run_mutant(mutants[0], ["tests/test_calc.py"], config)
    assert outcome.status == "not imported" and not outcome.noticed


def test_a_looping_mutant_is_stopped_and_counts_as_noticed(tmp_path: Path) -> None:
    config = _toy_root(tmp_path, STRONG_TEST)
    mutant = generate_mutants("toypkg/calc.py", tmp_path)[0]
    mutant.__dict__["mutated"] = PRICE.replace(
        "    if units", "    while True:\n        pass\n    if units"
    )
    outcome = run_mutant(mutant, ["tests/test_calc.py"], config, cpu_seconds=3)
    assert outcome.status == "timeout" and outcome.noticed
    assert 2.5 <= outcome.cpu_seconds < 12


def test_the_draw_is_seeded_skips_listed_mutants_and_takes_recent_modules(tmp_path: Path) -> None:
    config = _toy_root(tmp_path, WEAK_TEST)
    names = [m.name for m in generate_mutants("toypkg/calc.py", tmp_path)]
    assert names[:2] == [
        "toypkg.calc.x_price__mutmut_1",
        "toypkg.calc.x_price__mutmut_2",
    ]  # mutmut's naming
    assert [m.name for m in draw(config, 3, 1)] == [m.name for m in draw(config, 3, 1)]
    assert len({draw(config, seed, 1)[0].name for seed in range(12)}) > 1
    config.skipped = set(names[1:])
    assert {draw(config, seed, 1)[0].name for seed in range(6)} <= {
        names[0],
        "toypkg.other.x_one__mutmut_1",
    }
    newest = {"toypkg/other.py": 2.0, "toypkg/calc.py": 1.0}
    assert [m.module for m in draw(config, 0, 2, newest)] == ["toypkg/other.py", "toypkg/calc.py"]
    config.skipped = set(names)
    assert [m.module for m in draw(config, 0, 2, newest)] == ["toypkg/other.py"]


def test_listed_mutants_name_mutants_the_generator_makes() -> None:
    """Every equivalent or survivor listed for a mutated module names a mutant of today's code
    (mutmut numbers mutants per function: an edit renumbers them and the list must follow)."""
    config = Config.load()
    made = {m.name for module in config.modules() for m in generate_mutants(module, config.root)}
    mutated = {module.removesuffix(".py").replace("/", ".") for module in config.modules()}
    stale = sorted(n for n in config.skipped if n.rsplit(".", 1)[0] in mutated and n not in made)
    assert not stale, f"listed mutants that no longer exist (renumbered?): {stale}"


@pytest.mark.parametrize("seed", [0, 1])
def test_the_seed_follows_the_sources(tmp_path: Path, seed: int) -> None:
    config = _toy_root(tmp_path, WEAK_TEST)
    before = default_seed(config, config.modules())
    assert before == default_seed(config, config.modules())
    (tmp_path / "toypkg" / "calc.py").write_text(PRICE + f"\n# {seed}\n")
    assert default_seed(config, config.modules()) != before
