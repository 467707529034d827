"""User docs speak to users: no session language or build narrative in docs/, README.md or the
notebook sources ("Measured in this session", "later in the session", "the previous run")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
# Phrases that tell how a working session or a run went instead of what a user gets. "The test
# session" (pytest's) is a user-visible thing and stays allowed.
SESSION_LANGUAGE = re.compile(
    r"\b(?:this session|(?:in|during|later in|earlier in|late in|early in) the session"
    r"|(?:in|of|from) this run|this run (?:has|had|was|is)|the (?:first|previous|earlier|last) run"
    r"|today'?s|the closing note|(?:the|an?) (?:first|earlier|previous|older) version"
    r"|(?:we|I) (?:tried|found|measured|ran|fixed|changed|decided)|what was tried"
    r"|used to (?:be|drop|read|give|take|return)|turned out)\b",
    re.IGNORECASE,
)


def _user_docs() -> list[Path]:
    docs = sorted((REPO_ROOT / "docs").rglob("*.md"))
    notebooks = sorted((REPO_ROOT / "notebooks" / "src").glob("*.py"))
    return [REPO_ROOT / "README.md", *docs, *notebooks]


def test_user_docs_have_no_session_language() -> None:
    offenders = []
    for path in _user_docs():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            found = SESSION_LANGUAGE.search(line)
            if found:
                where = path.relative_to(REPO_ROOT).as_posix()
                offenders.append(f"{where}:{number}: {found.group(0)!r} in {line.strip()[:100]}")
    assert not offenders, "session language in user docs:\n" + "\n".join(offenders[:40])


@pytest.mark.parametrize(
    ("line", "bad"),
    [
        ("## Measured in this session (a shared 2-core machine)", True),
        ("alternating, later in the session when the machine ran slower", True),
        ("The wall figures (0.63 per s in this run, 0.23 in the first)", True),
        ("The previous run of the same command took 29.1 min", True),
        ("hybrids 0.797-0.800 against today's 0.703.", True),
        ("(the first version measured 28.9 ms on the same machine)", True),
        ("a negative value used to drop questions silently", True),
        ("Before any test runs, the test session proves each service really serves", False),
        ("p50 ms (run 1 / run 2), two back-to-back runs on the quiet machine", False),
        ("Sessions of the SQLite cache are closed on exit", False),
    ],
)
def test_the_pattern(line: str, bad: bool) -> None:
    assert bool(SESSION_LANGUAGE.search(line)) is bad
