"""Drive a decision generator: the shape that lets sync and async share one piece of logic.

A component writes its decisions as a generator that yields I/O requests and receives their
results (``result = yield request``), and returns its outcome. :func:`drive` answers the requests
with a sync function, :func:`adrive` with an async one; the decisions are written once.

>>> def plan():
...     doubled = yield 21
...     return doubled + 0
>>> drive(plan(), lambda request: request * 2)
42
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

T = TypeVar("T")


def drive(plan: Generator[Any, Any, T], execute: Callable[[Any], Any]) -> T:
    """Run ``plan`` to its end, answering each yielded request with ``execute(request)``."""
    result: Any = None
    try:
        while True:
            result = execute(plan.send(result))
    except StopIteration as stop:
        return stop.value


async def adrive(plan: Generator[Any, Any, T], execute: Callable[[Any], Awaitable[Any]]) -> T:
    """:func:`drive` with an async ``execute``."""
    result: Any = None
    try:
        while True:
            result = await execute(plan.send(result))
    except StopIteration as stop:
        return stop.value


__all__ = ["adrive", "drive"]
