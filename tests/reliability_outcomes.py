"""Outcome counting for the reliability suite (tests/reliability): bad-input and hostile cases.

Each case is recorded as ``result`` (the component returned something), ``clear_error`` (it
raised an error naming the problem) or ``other`` (anything else: an error that does not name
the problem, a wrong type, a silent drop); the counts are printed at the end of the run, and
a test fails on any ``other``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pytest

OUTCOMES: Counter[tuple[str, str]] = Counter()
OTHER_CASES: list[str] = []
CLEAR_ERROR_TYPES = (ValueError, TypeError, ConnectionError, FileNotFoundError, LookupError)


def record(
    suite: str,
    case: str,
    run: Callable[[], Any],
    names: Iterable[str] = (),
    check: Callable[[Any], str | None] | None = None,
) -> tuple[str, Any]:
    """Run one case and count its outcome.

    An exception is a clear error when it is one of :data:`CLEAR_ERROR_TYPES` and its message
    mentions one of ``names`` (words naming the problem, case-insensitive). ``check`` looks
    at a result and returns why it is wrong (``None`` when it is fine).
    """
    try:
        value = run()
    except CLEAR_ERROR_TYPES as error:
        message = str(error).lower()
        if any(word.lower() in message for word in names):
            OUTCOMES[(suite, "clear_error")] += 1
            return "clear_error", error
        OUTCOMES[(suite, "other")] += 1
        OTHER_CASES.append(f"{suite}/{case}: unclear {type(error).__name__}: {error}"[:500])
        return "other", error
    except Exception as error:  # noqa: BLE001 - counted, and the test fails on it
        OUTCOMES[(suite, "other")] += 1
        OTHER_CASES.append(f"{suite}/{case}: {type(error).__name__}: {error}"[:500])
        return "other", error
    problem = check(value) if check is not None else None
    if problem is not None:
        OUTCOMES[(suite, "other")] += 1
        OTHER_CASES.append(f"{suite}/{case}: {problem}"[:500])
        return "other", problem
    OUTCOMES[(suite, "result")] += 1
    return "result", value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not OUTCOMES:
        return
    terminalreporter.section("reliability outcomes (results / clear errors / other)")
    for suite in sorted({suite for suite, _ in OUTCOMES}):
        counts = [OUTCOMES[(suite, kind)] for kind in ("result", "clear_error", "other")]
        terminalreporter.write_line(f"{suite:28s} {counts[0]:5d} {counts[1]:5d} {counts[2]:5d}")
    totals = [
        sum(n for (_, kind), n in OUTCOMES.items() if kind == k)
        for k in ("result", "clear_error", "other")
    ]
    terminalreporter.write_line(f"{'total':28s} {totals[0]:5d} {totals[1]:5d} {totals[2]:5d}")
    for line in OTHER_CASES:
        terminalreporter.write_line(f"  other: {line}")
