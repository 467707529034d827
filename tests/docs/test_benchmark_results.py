"""docs/benchmarks.md lists every file of benchmarks/results/ with the command that writes it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = REPO_ROOT / "docs" / "benchmarks.md"


def _results_files() -> set[str]:
    """The committed results files (a benchmark run locally but not committed does not count)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "benchmarks/results"],
            cwd=REPO_ROOT, capture_output=True, text=True, check=True, timeout=60,
        ).stdout.split()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        listed = []
    if listed:
        return {Path(name).name for name in listed}
    return {p.name for p in (REPO_ROOT / "benchmarks" / "results").iterdir() if p.is_file()}


def _table() -> dict[str, str]:
    """File name -> its command cell, from the page's table rows."""
    rows: dict[str, str] = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_every_results_file_is_listed_and_every_listed_file_exists() -> None:
    listed = set(_table())
    present = _results_files()
    assert not present - listed, (
        f"results without a command in docs/benchmarks.md: {sorted(present - listed)}"
    )
    assert not listed - present, (
        f"docs/benchmarks.md lists missing files: {sorted(listed - present)}"
    )


def test_every_command_names_a_script_that_exists() -> None:
    for name, command in _table().items():
        scripts = re.findall(r"benchmarks/[\w]+\.py", command)
        if scripts:
            assert all((REPO_ROOT / s).is_file() for s in scripts), (name, command)
        else:  # a make target, or a pointer to the guide holding the command
            assert "make " in command or re.search(r"\]\([\w.]+\.md", command), (name, command)
