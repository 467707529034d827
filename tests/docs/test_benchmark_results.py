"""docs/benchmarks.md lists every file of benchmarks/results/ with the command that writes it, and
a user page, notebook or test cites every run kept there."""

from __future__ import annotations

import fnmatch
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


USER_PAGES = (
    "docs/**/*.md",
    "README.md",
    "notebooks/*.ipynb",
    "notebooks/src/*.py",
    "tests/**/*.py",
)
_TOKEN = re.compile(r"[\w.*{},-]+")
SUFFIXES = ("", ".txt", ".json", ".rows.jsonl")
_RUN_SUFFIX = re.compile(r"\.(rows\.jsonl|json|txt)$")


def _expand(token: str) -> list[str]:
    """``a_{1,2}.txt`` -> ``a_1.txt``, ``a_2.txt`` (nested braces expand too)."""
    match = re.search(r"\{([^{}]*)\}", token)
    if match is None:
        return [token]
    head, tail = token[: match.start()], token[match.end() :]
    return [name for alt in match.group(1).split(",") for name in _expand(head + alt + tail)]


def _cited_runs(files: set[str]) -> set[str]:
    """The runs (file names without .txt/.json/.rows.jsonl) a user page, notebook or test cites:
    by name, a brace or ``*`` pattern, or a command's ``--name``/``--results-name`` (benchmarks
    prefix ``bench_``). This page and this test do not count."""
    names: set[str] = set()
    patterns: set[str] = set()
    pages = {p for pattern in USER_PAGES for p in REPO_ROOT.glob(pattern)}
    for page in pages - {PAGE, Path(__file__).resolve()}:
        text = page.read_text(encoding="utf-8").replace("txt|json", "{txt,json}")
        for name in re.findall(r"--(?:results-)?name\s+([\w.-]+)", text):
            names.update((name, f"bench_{name}"))
        for token in _TOKEN.findall(text):
            if re.search("[A-Za-z]{4}", token):
                for name in _expand(token):  # a file name or pattern, not a plain word
                    if "*" in name:
                        patterns.add(name)
                    elif _RUN_SUFFIX.search(name):
                        names.add(_RUN_SUFFIX.sub("", name))
    runs = {_RUN_SUFFIX.sub("", name) for name in files}
    return {run for run in runs if run in names or any(
        fnmatch.fnmatch(run + suffix, p) for p in patterns for suffix in SUFFIXES
    )}  # fmt: skip


def test_every_results_run_is_cited_by_a_user_page_or_a_test() -> None:
    """A results file nobody cites is a leftover: delete it (its command regenerates it)."""
    files = _results_files()
    cited = _cited_runs(files)
    uncited = sorted(name for name in files if _RUN_SUFFIX.sub("", name) not in cited)
    assert not uncited, f"results no guide, notebook or test cites: {uncited}"


def test_the_citation_check_can_fail() -> None:
    assert _cited_runs({"never_cited.txt", "never_cited.json"}) == set()
    assert _cited_runs({"probes_cmrc.json"}) == {"probes_cmrc"}  # twin of the cited .txt
    assert _cited_runs({"postprocessors_latency_s3_2.json"}) == {"postprocessors_latency_s3_2"}
