"""No absolute path of a build machine in the repository: code, docs, notebooks, results."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Home folders and the build workplace; /tmp paths inside hostile-code test strings are targets,
# not machine facts, and are allowed.
MACHINE_PATH = re.compile(
    r"(?<![\w.])(/work/|/root/|/home/[a-z_][\w-]*/|/Users/\w+/|[A-Z]:\\\\Users\\\\)"
)


def _tracked_files() -> list[Path]:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [REPO_ROOT / name for name in listed.decode().split("\0") if name]


def test_no_machine_paths_in_tracked_files() -> None:
    offenders = []
    for path in _tracked_files():
        if path == Path(__file__) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files (xlsx, png)
        for number, line in enumerate(text.splitlines(), 1):
            if MACHINE_PATH.search(line):
                offenders.append(f"{path.relative_to(REPO_ROOT)}:{number}: {line.strip()[:120]}")
    assert not offenders, "machine paths in the repository:\n" + "\n".join(offenders[:30])


@pytest.mark.parametrize(
    "line, bad",
    [
        ('"datasets": "/work/shared/datasets"', True),
        ("see /root/.cache/pip", True),
        ("/home/alice/project", True),
        ("../shared/datasets/covidqa", False),
        ("df.to_csv('/tmp/advrag-bench-sentinel')", False),
        ("a/work/b", False),
    ],
)
def test_the_pattern(line: str, bad: bool) -> None:
    assert bool(MACHINE_PATH.search(line)) is bad
