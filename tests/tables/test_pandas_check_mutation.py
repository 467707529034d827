"""The pandas guard's refusals pinned exactly: named aggregations, limits (inclusive), messages,
sequence repetition, aggregation dict keys; hostile code refused, safe code accepted (found by
mutation testing)."""

from __future__ import annotations

import ast

import pytest

from llama_index_ext_advrag.tables.pandas_allowlist import (
    AGGREGATIONS,
    MAX_DEPTH,
    MAX_NODES,
)
from llama_index_ext_advrag.tables.pandas_check import (
    UnsafeCodeError,
    check_pandas_code,
    refusal_reason,
)

NAMED = 'keyword {} of agg() must be a named aggregation ("column", "<listed aggregation>")'


def test_named_aggregation_keyword_may_not_start_with_an_underscore() -> None:
    check_pandas_code("df.groupby('a').agg(total=('b', 'sum'))")
    assert refusal_reason("df.groupby('a').agg(_total=('b', 'sum'))") == NAMED.format("'_total'")


def test_named_aggregation_refusal_says_what_is_allowed() -> None:
    assert refusal_reason("df.agg(total=('a', 'nope'))") == NAMED.format("'total'")
    assert refusal_reason("df.agg(total=('a',))") == NAMED.format("'total'")


# --- exact refusals of hostile or malformed code (each pins one decision or message) ------------

LONG = "a" * 50


def _refused(code: str) -> UnsafeCodeError:
    with pytest.raises(UnsafeCodeError) as info:
        check_pandas_code(code)
    return info.value


def test_error_code_defaults_to_empty_text() -> None:
    error = UnsafeCodeError("why")
    assert error.code == ""
    assert error.reason == "why"
    assert str(error) == "refused to run generated pandas code: why"


def test_too_long_code_is_refused_with_the_code_attached() -> None:
    code = "df\n" * 4000
    error = _refused(code)
    assert error.reason == "code longer than 10000 characters"
    assert error.code == code


def test_parser_memory_error_is_a_refusal_naming_it() -> None:
    code = "-" * 9999 + "1"
    error = _refused(code)
    assert error.reason == "not valid Python (MemoryError)"
    assert error.code == code


def test_empty_code_is_refused_as_no_code() -> None:
    assert refusal_reason("") == "no code"
    assert refusal_reason("# only a comment") == "no code"


def _node_count(code: str) -> int:
    return sum(1 for _ in ast.walk(ast.parse(code)))


def _code_with_nodes(total: int) -> str:
    # statements "[1, 1, ...]" : Module 1, then per statement Expr + List + Load + items.
    statements = []
    remaining = total - 1
    while remaining:
        items = min(remaining - 3, 900)
        statements.append("[" + ", ".join(["1"] * items) + "]")
        remaining -= items + 3
    return "\n".join(statements)


def test_node_limit_is_inclusive() -> None:
    at_limit = _code_with_nodes(MAX_NODES)
    assert _node_count(at_limit) == MAX_NODES
    assert refusal_reason(at_limit) is None
    over = _code_with_nodes(MAX_NODES + 1)
    assert _node_count(over) == MAX_NODES + 1
    assert refusal_reason(over) == f"more than {MAX_NODES} syntax nodes"


def _depth(node: ast.AST) -> int:
    return 1 + max((_depth(child) for child in ast.iter_child_nodes(node)), default=0)


def test_depth_limit_is_inclusive() -> None:
    at_limit = "-" * (MAX_DEPTH - 3) + "1"  # Module, Expr, the unary chain, its last operand
    assert _depth(ast.parse(at_limit)) == MAX_DEPTH
    assert refusal_reason(at_limit) is None
    over = "-" * (MAX_DEPTH - 2) + "1"
    assert refusal_reason(over) == f"expressions nested more than {MAX_DEPTH} deep"


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ("a = b = df", "assignments may only bind one plain name"),
        ("a, b = df, df", "assignments may only bind one plain name"),
        (
            "np.abs",
            "np.abs is not an allowed constant (module functions must be called directly)",
        ),
        (
            f"np.{LONG}",
            f"np.{'a' * 40} is not an allowed constant (module functions must be called directly)",
        ),
        (f"np.{LONG}(1)", f"np.{'a' * 40}() is not allowed"),
        (f"{LONG}(1)", f"calling {'a' * 40!r} is not allowed"),
        ("(df['a'] ** 2) ** 2", "'**' of a '**' expression is not allowed"),
        ("[0] * 3", "repeating a sequence with '*' is not allowed"),
        ("3 * 'ab'", "repeating a sequence with '*' is not allowed"),
        ("df['a'].tolist() * 3", "repeating a sequence with '*' is not allowed"),
        ("'%s' % df", "'%' string formatting is not allowed"),
        ("{**df}", "'**' unpacking is not allowed"),
        ("df.sum(**{'axis': 0})", "'**' unpacking is not allowed"),
        # a call of a call's result: refused as a call, not crashed on
        ("df['a'](1) * 2", "calling a Subscript is not allowed"),
        (
            "df.pivot_table(aggfunc='nope')",
            "pivot_table() may only name a listed aggregation, got 'nope'"
            f" (allowed: {', '.join(sorted(AGGREGATIONS))})",
        ),
        (
            "df.agg('nope')",
            "agg() may only name a listed aggregation, got 'nope'"
            f" (allowed: {', '.join(sorted(AGGREGATIONS))})",
        ),
        (
            "df.agg({1.5: 'sum'})",
            "agg() takes a literal aggregation name (or a list or dict of them), got Dict",
        ),
        (
            "df.pivot_table(foo=1)",
            "keyword 'foo' is not allowed for pivot_table() (allowed: aggfunc, columns, "
            "dropna, fill_value, index, margins, observed, values)",
        ),
        ("df.tolist(foo=1)", "keyword 'foo' is not allowed for tolist() (allowed: none)"),
    ],
)
def test_exact_refusal(code: str, reason: str) -> None:
    assert refusal_reason(code) == reason
    assert _refused(code).code == code


@pytest.mark.parametrize(
    "code",
    [
        "df.aggregate(total=('a', 'sum'))",
        "df.agg(total=('a', 'sum'))",
        "df['a'].sum() * 2",
        "2 * df['a'].max()",
        "df.agg({'a': 'sum', 1: ['min', 'max']})",
    ],
)
def test_safe_code_passes(code: str) -> None:
    assert refusal_reason(code) is None
