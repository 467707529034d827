"""Parsing a mode or option name into its ``str`` Enum, with an error that lists the choices."""

from __future__ import annotations

from collections.abc import Callable
from enum import Enum
from typing import TypeVar

E = TypeVar("E", bound=Enum)


def allowed_values(enum: type[Enum]) -> str:
    """The values of ``enum`` as a comma-separated list, for error messages.

    Example:
        >>> from enum import Enum
        >>> allowed_values(Enum("Mode", {"FIXED": "fixed", "AUTO": "auto"}))
        'fixed, auto'
    """
    return ", ".join(str(member.value) for member in enum)


def parse_enum(
    enum: type[E],
    value: E | str,
    name: str,
    *,
    normalise: Callable[[str], str] | None = None,
    also: str | None = None,
) -> E:
    """``value`` as a member of ``enum``.

    Args:
        enum: The ``str`` Enum to parse into.
        value: A member of ``enum`` (returned as it is) or one of its values.
        name: The argument's name, for the error message.
        normalise: Applied to a string before the lookup (``str.upper`` for case-insensitive names).
        also: Another accepted input the caller handles itself (``"None"``), named in the error.

    Raises:
        ValueError: ``value`` is not a value of ``enum``; the message names it and lists the allowed
            ones.

    Example:
        >>> from enum import Enum
        >>> Mode = Enum("Mode", {"FIXED": "fixed", "AUTO": "auto"})
        >>> parse_enum(Mode, "auto", "mode")
        <Mode.AUTO: 'auto'>
        >>> parse_enum(Mode, "fast", "mode")
        Traceback (most recent call last):
        ValueError: mode='fast' is not one of: fixed, auto
    """
    if isinstance(value, enum):
        return value
    try:
        return enum(normalise(value) if normalise and isinstance(value, str) else value)
    except ValueError:
        allowed = allowed_values(enum) + (f", or {also}" if also else "")
        raise ValueError(f"{name}={value!r} is not one of: {allowed}") from None


__all__ = ["allowed_values", "parse_enum"]
