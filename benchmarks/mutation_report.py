"""Summarise a mutmut run (``make mutation``) per module: killed, surviving, untested mutants.

Reads the ``mutants/**/*.py.meta`` files mutmut leaves behind and the list of equivalent
mutants (``benchmarks/mutation_equivalents.toml``: mutants that cannot change behaviour, each
with its reason). Printed per module: mutants checked, killed (including timeouts), survived,
not reached by any selected test, equivalents excluded, and the survival rate of the
behaviour-changing mutants, ``(survived + untested - equivalent) / (checked - equivalent)``.
Then each behaviour-changing survivor by name (``mutmut show NAME`` prints its diff).

    python benchmarks/mutation_report.py                    # after `make mutation`
    python benchmarks/mutation_report.py --output benchmarks/results/mutation.txt
    python benchmarks/mutation_report.py --mutants RUN1/mutants --mutants RUN2/mutants

Equivalents of modules outside the run are not flagged as stale (a narrowed run).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

import tomllib

REPO_ROOT = Path(__file__).resolve().parents[1]
EQUIVALENTS = Path(__file__).resolve().parent / "mutation_equivalents.toml"

# mutmut's exit codes (mutmut/stats.py) folded into the columns reported here.
KILLED, SURVIVED, UNTESTED, TIMEOUT, UNCHECKED, OTHER = (
    "killed", "survived", "untested", "timeout", "unchecked", "other"
)  # fmt: skip
STATUS_BY_EXIT_CODE = {
    1: KILLED, 3: KILLED, 37: KILLED, 0: SURVIVED, 5: UNTESTED, 33: UNTESTED,
    36: TIMEOUT, 24: TIMEOUT, -24: TIMEOUT, 152: TIMEOUT, 255: TIMEOUT, None: UNCHECKED,
}  # fmt: skip


def module_of(mutant: str) -> str:
    """``pkg.mod.x_func__mutmut_3`` / ``pkg.mod.xǁClassǁmethod__mutmut_3`` -> ``pkg.mod``."""
    return mutant.rsplit(".", 1)[0]


def load_statuses(mutants_dir: Path) -> dict[str, str]:
    """Mutant name -> status, from every ``.meta`` file of the run."""
    statuses = {}
    for meta in sorted(mutants_dir.rglob("*.py.meta")):
        data = json.loads(meta.read_text(encoding="utf-8"))
        for name, code in data.get("exit_code_by_key", {}).items():
            statuses[name] = STATUS_BY_EXIT_CODE.get(code, OTHER)
    return statuses


def load_equivalents(path: Path) -> dict[str, str]:
    """Mutant name -> why it is equivalent."""
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {name: entry["reason"] for name, entry in data.get("equivalent", {}).items()}


def report(statuses: dict[str, str], equivalents: dict[str, str]) -> list[str]:
    by_module: dict[str, Counter[str]] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    run_modules = {module_of(name) for name in statuses}
    stale = sorted(
        name
        for name in equivalents
        if module_of(name) in run_modules and statuses.get(name) not in {SURVIVED, UNTESTED}
    )
    for name, status in statuses.items():
        module = module_of(name)
        by_module[module][status] += 1
        if status in {SURVIVED, UNTESTED}:
            if name in equivalents:
                by_module[module]["equivalent"] += 1
            else:
                survivors[module].append(name)
    lines = [
        f"{'module':<50} {'checked':>7} {'killed':>6} {'surv.':>5} {'untest':>6} "
        f"{'equiv':>5} {'rate':>6} {'not run':>7}"
    ]
    totals: Counter[str] = Counter()
    for module in sorted(by_module):
        counts = by_module[module]
        checked = sum(n for status, n in counts.items() if status not in {UNCHECKED, "equivalent"})
        totals.update(counts)
        if not checked:
            continue
        lines.append(row(module, counts, checked))
    total_checked = sum(n for s, n in totals.items() if s not in {UNCHECKED, "equivalent"})
    lines.append(row("all", totals, total_checked))
    lines.append("")
    lines.append("rate = (survived + untested - equivalent) / (checked - equivalent); 'not run':")
    lines.append("mutants the run did not reach (an interrupted or narrowed run)")
    for module in sorted(survivors):
        lines.append(f"\nbehaviour-changing survivors in {module}:")
        lines.extend(f"  {name} ({statuses[name]})" for name in sorted(survivors[module]))
    if stale:
        lines.append("\nlisted as equivalent but not surviving in this run (renumbered or killed):")
        lines.extend(f"  {name}" for name in stale)
    return lines


def row(module: str, counts: Counter[str], checked: int) -> str:
    killed = counts[KILLED] + counts[TIMEOUT]
    equivalent = counts["equivalent"]
    alive = counts[SURVIVED] + counts[UNTESTED] - equivalent
    rate = alive / (checked - equivalent) if checked > equivalent else 0.0
    return (
        f"{module:<50} {checked:>7} {killed:>6} {counts[SURVIVED]:>5} {counts[UNTESTED]:>6} "
        f"{equivalent:>5} {rate:>6.1%} {counts[UNCHECKED]:>7}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--mutants",
        type=Path,
        action="append",
        help="mutmut's mutants/ folder (default ./mutants); repeat to merge narrowed runs",
    )
    parser.add_argument("--equivalents", type=Path, default=EQUIVALENTS)
    parser.add_argument("--output", type=Path, default=None, help="also write the report here")
    args = parser.parse_args(argv)
    folders = args.mutants or [REPO_ROOT / "mutants"]
    statuses: dict[str, str] = {}
    for folder in folders:
        statuses.update(load_statuses(folder))
    if not statuses:
        raise SystemExit(f"no mutmut results under {folders}: run `make mutation` first")
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"mutmut run summarised {stamp}",
        "",
        *report(statuses, load_equivalents(args.equivalents)),
    ]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
