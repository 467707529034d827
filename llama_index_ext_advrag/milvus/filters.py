"""Injection-safe Milvus filter expressions.

A Milvus boolean expression is a small language: ``name == "x" and year > 2020``. Building
one with an f-string lets a value such as ``x" or id != "`` turn a lookup into "match
everything". The builders here render values as literals only:

* field names must be plain identifiers (``[A-Za-z_][A-Za-z0-9_]*``, not a keyword);
* strings are double-quoted with ``\\``, ``"``, newline, carriage return and tab escaped;
* ints, floats and bools become numeric / ``true`` / ``false`` literals.

Both Milvus Lite 3.x and the Milvus 2.3 server were checked to parse these literals alike:
backslash, double quote, ``\\n``, ``\\r`` and ``\\t`` escapes work on both, while ``\\u``,
``\\x`` and octal escapes work on the server only, and a raw newline or carriage return
inside a literal is a syntax error on both. Other characters (other control characters,
emoji, CJK) are sent as they are, which both backends accept. An empty ``in`` list
(``id in []``) is valid on both and matches no row.
"""

from __future__ import annotations

import logging
import math
import numbers
import re
from collections.abc import Iterable
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

# Milvus int64 fields and JSON integers: a literal outside this range is a parse error.
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# Words the expression grammar reads as operators or literals, never as field names.
_RESERVED_WORDS = frozenset(
    {"and", "or", "not", "in", "like", "true", "false", "exists", "null", "is"}
)
_STRING_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def validate_field_name(field: str) -> str:
    """Return ``field`` if it is a plain identifier usable in an expression.

    Raises:
        ValueError: If ``field`` is not a string matching ``[A-Za-z_][A-Za-z0-9_]*`` or is a
            reserved word of the expression grammar; the message names the field.
    """
    if not isinstance(field, str) or not _FIELD_NAME.match(field):
        raise ValueError(
            f"invalid Milvus field name {field!r}: expected an identifier matching "
            "[A-Za-z_][A-Za-z0-9_]*"
        )
    if field.lower() in _RESERVED_WORDS:
        raise ValueError(
            f"invalid Milvus field name {field!r}: it is a reserved word of the filter grammar"
        )
    return field


def _quote_string(value: str) -> str:
    """Render ``value`` as a double-quoted Milvus string literal.

    >>> _quote_string('say "hi"')
    '"say \\\\"hi\\\\""'
    """
    return '"' + value.translate(_STRING_ESCAPES) + '"'


def _format_literal(value: Any) -> str:
    """Render one scalar as a Milvus literal.

    Strings are quoted and escaped, bools become ``true``/``false``, integers must fit in
    int64 and floats must be finite.

    Raises:
        ValueError: For an out-of-range integer or a NaN/infinite float.
        TypeError: For any other type (``None``, lists, dicts, bytes, ...).
    """
    if isinstance(value, str):
        return _quote_string(value)
    if isinstance(value, (bool, np.bool_)):  # before Integral: bool is an int subclass
        return "true" if value else "false"
    if isinstance(value, numbers.Integral):
        number = int(value)
        if not INT64_MIN <= number <= INT64_MAX:
            raise ValueError(f"integer filter value {value!r} does not fit in int64")
        return str(number)
    if isinstance(value, numbers.Real):
        real = float(value)
        if not math.isfinite(real):
            raise ValueError(f"float filter value {value!r} is not finite")
        return repr(real)
    raise TypeError(
        f"unsupported filter value {value!r} of type {type(value).__name__}: "
        "expected str, int, float or bool"
    )


def _kind(value: Any) -> str:
    if isinstance(value, str):
        return "string"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    return "number"


def eq_filter(field: str, value: Any) -> str:
    """Build ``field == <literal>``.

    Example:
        >>> eq_filter("table_name", "2023' or id > 0 or name == '")
        'table_name == "2023\\' or id > 0 or name == \\'"'
        >>> eq_filter("page", 3)
        'page == 3'
    """
    return f"{validate_field_name(field)} == {_format_literal(value)}"


def in_filter(field: str, values: Iterable[Any]) -> str:
    """Build ``field in [<literal>, ...]``; an empty ``values`` matches no row.

    Values must all be strings, all numbers (ints and floats may mix) or all bools, because
    Milvus rejects a list whose literals do not share the field's type.

    Example:
        >>> in_filter("id", ["a", 'b"c'])
        'id in ["a", "b\\\\"c"]'
        >>> in_filter("id", [])
        'id in []'

    Raises:
        ValueError: If ``values`` is a single string (a common slip for ``[value]``) or mixes kinds.
    """
    validate_field_name(field)
    if isinstance(values, (str, bytes)):
        raise ValueError(
            f"in_filter expects a list of values for field {field!r}, got the string "
            f"{values!r}; wrap it in a list"
        )
    items = list(values)
    kinds = {_kind(value) for value in items if isinstance(value, (str, numbers.Real, np.bool_))}
    if len(kinds) > 1:
        raise ValueError(
            f"in_filter values for field {field!r} mix {', '.join(sorted(kinds))}: {items!r}"
        )
    return f"{field} in [{', '.join(_format_literal(value) for value in items)}]"


__all__ = [
    "eq_filter",
    "in_filter",
    "validate_field_name",
]
