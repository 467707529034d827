"""Deny-by-default check of LLM-written pandas code: accepted only if every AST node is allowed.

:func:`check_pandas_code` parses the code and accepts it only when every node is of an allowed
kind and every name, attribute, call, keyword and literal is on the lists of
:mod:`.pandas_allowlist`; the first thing that is not raises :class:`UnsafeCodeError` naming it.

* statements: expressions, and assignments to one plain name (not ``pd``, ``np`` or a builtin);
  the last statement is the answer;
* names: ``df``; ``pd``/``np`` only as ``pd.f(...)``/``np.f(...)`` for the listed pure functions
  or a listed constant (``np.nan``); listed builtins only when called (``len(...)``), the plain
  types ``int``/``float``/``str``/``bool`` also as values; names bound earlier by the code;
* attributes: a listed property (``df.shape``, ``s.str``), or a listed method that is called
  directly, with at most its listed number of positional arguments and only its listed keywords;
* string dispatch (``agg``/``aggregate``/``apply``/``transform``, ``aggfunc=``): only literal
  names from :data:`~.pandas_allowlist.AGGREGATIONS`, or lists/dicts of them, or named
  aggregations ``total=("column", "sum")``; never a computed string, a function or extra
  arguments;
* operators: arithmetic, comparison, boolean and bitwise (masks); ``**`` only with a literal
  exponent up to :data:`~.pandas_allowlist.MAX_EXPONENT`; no sequence repetition
  (``[0] * n``, ``"a" * n``), no ``%`` formatting of a string literal, no shifts or ``@``;
* literals: ``None``, booleans, numbers up to 10**15 in size, strings up to 500 characters, and
  lists, tuples, sets and dicts of at most 1,000 items;
* everything else - lambdas, comprehensions, f-strings, imports, ``def``/``class``, loops,
  ``with``, ``try``, the walrus, ``*``/``**`` unpacking, ``eval``/``query``, I/O - is refused.

Running accepted code is :mod:`.pandas_sandbox`'s job (a child process with limits).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from llama_index_ext_advrag.tables.pandas_allowlist import (
    AGGREGATIONS,
    BUILTIN_FUNCTIONS,
    BUILTIN_TYPES,
    DATAFRAME_NAME,
    DISPATCH_KEYWORDS,
    DISPATCH_METHODS,
    MAX_ABS_INT,
    MAX_CODE_CHARS,
    MAX_COLLECTION_ITEMS,
    MAX_DEPTH,
    MAX_EXPONENT,
    MAX_NODES,
    MAX_STATEMENTS,
    MAX_STRING_CHARS,
    METHODS,
    MODULE_NAMES,
    PROPERTIES,
    RESERVED_NAMES,
    CallSpec,
)

_ARITHMETIC = (
    ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.BitAnd, ast.BitOr,
    ast.BitXor,
)  # fmt: skip
_UNARY = (ast.UAdd, ast.USub, ast.Not, ast.Invert)
_SEQUENCE_LITERALS = (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.JoinedStr)
_SEQUENCE_BUILTINS = frozenset({"list", "tuple", "str", "sorted", "set"})
_SEQUENCE_METHODS = frozenset({"tolist", "to_list", "join", "split", "lower", "upper", "strip"})


class UnsafeCodeError(ValueError):
    """Generated code was refused; ``reason`` says what, ``code`` is the refused text.

    Example:
        >>> try:
        ...     check_pandas_code("__import__('os').system('id')")
        ... except UnsafeCodeError as error:
        ...     print(error.code)
        __import__('os').system('id')
    """

    def __init__(self, reason: str, code: str = "") -> None:
        super().__init__(f"refused to run generated pandas code: {reason}")
        self.reason = reason
        self.code = code


def _quote(name: str) -> str:
    return repr(name[:40])


def check_pandas_code(code: str) -> None:
    """Raise :class:`UnsafeCodeError` unless every part of ``code`` is allowed (see module doc).

    Example:
        >>> check_pandas_code("df[df['Age'] > 60]['Name'].tolist()")
        >>> check_pandas_code("df.agg('to_' + 'csv')")
        Traceback (most recent call last):
        ...
        llama_index_ext_advrag.tables.pandas_check.UnsafeCodeError: refused to run generated pandas code: agg() takes a literal aggregation name (or a list or dict of them), got BinOp
    """
    if len(code) > MAX_CODE_CHARS:
        raise UnsafeCodeError(f"code longer than {MAX_CODE_CHARS} characters", code)
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as exc:
        raise UnsafeCodeError(f"not valid Python ({exc.msg})", code) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # null bytes, deep nesting
        raise UnsafeCodeError(f"not valid Python ({type(exc).__name__})", code) from None
    try:
        _check_module(tree)
    except UnsafeCodeError as exc:
        raise UnsafeCodeError(exc.reason, code) from None


def refusal_reason(code: str) -> str | None:
    """Why ``code`` is refused, ``None`` when it is accepted."""
    try:
        check_pandas_code(code)
    except UnsafeCodeError as exc:
        return exc.reason
    return None


def _check_module(tree: ast.Module) -> None:
    if not tree.body:
        raise UnsafeCodeError("no code")
    if len(tree.body) > MAX_STATEMENTS:
        raise UnsafeCodeError(f"more than {MAX_STATEMENTS} statements")
    nodes, depth = _size_and_depth(tree)
    if nodes > MAX_NODES:
        raise UnsafeCodeError(f"more than {MAX_NODES} syntax nodes")
    if depth > MAX_DEPTH:
        raise UnsafeCodeError(f"expressions nested more than {MAX_DEPTH} deep")
    checker = _Checker()
    for statement in tree.body:
        checker.statement(statement)


def _size_and_depth(tree: ast.AST) -> tuple[int, int]:
    """Node count and depth of ``tree``, without recursion."""
    nodes, deepest = 0, 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return nodes, deepest


class _Checker:
    """Walks statements in order; ``bound`` holds the names assigned so far."""

    def __init__(self) -> None:
        self.bound: set[str] = set()
        self.rules: dict[type[ast.AST], Callable[[Any], None]] = {
            ast.Constant: self.constant,
            ast.Name: self.name,
            ast.Attribute: self.attribute,
            ast.Subscript: self.subscript,
            ast.Call: self.call,
            ast.BinOp: self.binop,
            ast.UnaryOp: self.unaryop,
            ast.BoolOp: self.boolop,
            ast.Compare: self.compare,
            ast.IfExp: self.ifexp,
            ast.List: self.collection,
            ast.Tuple: self.collection,
            ast.Set: self.collection,
            ast.Dict: self.dict,
        }

    # --- statements ----------------------------------------------------------------------------

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Expr):
            self.expr(node.value)
        elif isinstance(node, ast.Assign):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise UnsafeCodeError("assignments may only bind one plain name")
            target = node.targets[0].id
            self.expr(node.value)
            if target.startswith("_") or target in RESERVED_NAMES:
                raise UnsafeCodeError(f"assigning the name {_quote(target)} is not allowed")
            self.bound.add(target)
        else:
            raise UnsafeCodeError(f"{type(node).__name__} statements are not allowed")

    # --- expressions ---------------------------------------------------------------------------

    def expr(self, node: ast.AST) -> None:
        rule = self.rules.get(type(node))
        if rule is None:
            raise UnsafeCodeError(f"{type(node).__name__} is not allowed")
        rule(node)

    def constant(self, node: ast.Constant) -> None:
        value = node.value
        if value is None or isinstance(value, bool | float):
            return
        if isinstance(value, int):
            if abs(value) > MAX_ABS_INT:
                raise UnsafeCodeError(f"integer literal larger than {MAX_ABS_INT:.0e}")
            return
        if isinstance(value, str):
            if len(value) > MAX_STRING_CHARS:
                raise UnsafeCodeError(f"string literal longer than {MAX_STRING_CHARS} characters")
            return
        raise UnsafeCodeError(f"{type(value).__name__} literals are not allowed")

    def name(self, node: ast.Name) -> None:
        if node.id == DATAFRAME_NAME or node.id in self.bound or node.id in BUILTIN_TYPES:
            return
        if node.id in MODULE_NAMES:
            raise UnsafeCodeError(f"module {node.id!r} may only be used as {node.id}.<listed name>")
        if node.id in BUILTIN_FUNCTIONS:
            raise UnsafeCodeError(f"builtin {node.id!r} may only be called")
        raise UnsafeCodeError(f"name {_quote(node.id)} is not allowed")

    def attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name) and node.value.id in MODULE_NAMES:
            _, constants = MODULE_NAMES[node.value.id]
            if node.attr not in constants:
                raise UnsafeCodeError(
                    f"{node.value.id}.{node.attr[:40]} is not an allowed constant"
                    " (module functions must be called directly)"
                )
            return
        if node.attr not in PROPERTIES:
            if node.attr in METHODS:
                raise UnsafeCodeError(f"method {node.attr!r} must be called directly")
            raise UnsafeCodeError(f"attribute {_quote(node.attr)} is not allowed")
        self.expr(node.value)

    def subscript(self, node: ast.Subscript) -> None:
        self.expr(node.value)
        index = node.slice
        for part in index.elts if isinstance(index, ast.Tuple) else [index]:
            if isinstance(part, ast.Slice):
                for bound in (part.lower, part.upper, part.step):
                    if bound is not None:
                        self.expr(bound)
            else:
                self.expr(part)

    def binop(self, node: ast.BinOp) -> None:
        if not isinstance(node.op, _ARITHMETIC):
            raise UnsafeCodeError(f"operator {type(node.op).__name__} is not allowed")
        if isinstance(node.op, ast.Pow):
            exponent = _literal_number(node.right)
            if exponent is None or abs(exponent) > MAX_EXPONENT:
                raise UnsafeCodeError(
                    f"'**' needs a literal exponent of at most {MAX_EXPONENT} in size"
                )
            if isinstance(node.left, ast.BinOp) and isinstance(node.left.op, ast.Pow):
                raise UnsafeCodeError("'**' of a '**' expression is not allowed")
        if isinstance(node.op, ast.Mult) and (
            _is_sequence_literal(node.left) or _is_sequence_literal(node.right)
        ):
            raise UnsafeCodeError("repeating a sequence with '*' is not allowed")
        if isinstance(node.op, ast.Mod) and _is_sequence_literal(node.left):
            raise UnsafeCodeError("'%' string formatting is not allowed")
        self.expr(node.left)
        self.expr(node.right)

    def unaryop(self, node: ast.UnaryOp) -> None:
        if not isinstance(node.op, _UNARY):
            raise UnsafeCodeError(f"operator {type(node.op).__name__} is not allowed")
        self.expr(node.operand)

    def boolop(self, node: ast.BoolOp) -> None:
        for value in node.values:
            self.expr(value)

    def compare(self, node: ast.Compare) -> None:
        self.expr(node.left)
        for value in node.comparators:
            self.expr(value)

    def ifexp(self, node: ast.IfExp) -> None:
        for part in (node.test, node.body, node.orelse):
            self.expr(part)

    def collection(self, node: ast.List | ast.Tuple | ast.Set) -> None:
        if len(node.elts) > MAX_COLLECTION_ITEMS:
            raise UnsafeCodeError(f"a literal with more than {MAX_COLLECTION_ITEMS} items")
        for element in node.elts:
            self.expr(element)

    def dict(self, node: ast.Dict) -> None:
        if len(node.keys) > MAX_COLLECTION_ITEMS:
            raise UnsafeCodeError(f"a literal with more than {MAX_COLLECTION_ITEMS} items")
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                raise UnsafeCodeError("'**' unpacking is not allowed")
            self.expr(key)
            self.expr(value)

    # --- calls ---------------------------------------------------------------------------------

    def call(self, node: ast.Call) -> None:
        name, spec = self.callee(node.func)
        keywords = [(k.arg, k) for k in node.keywords if k.arg is not None]
        if len(keywords) != len(node.keywords):
            raise UnsafeCodeError("'**' unpacking is not allowed")
        method = name if isinstance(node.func, ast.Attribute) else None
        dispatch = method in DISPATCH_METHODS
        if len(node.args) > spec.positional:
            raise UnsafeCodeError(
                f"{name}() takes at most {spec.positional} positional argument(s) here, "
                f"got {len(node.args)}"
            )
        for position, argument in enumerate(node.args):
            if dispatch and position == 0:
                _check_aggregation(name, argument)
            else:
                self.expr(argument)
        for arg, keyword in keywords:
            if arg in DISPATCH_KEYWORDS and arg in spec.keywords:
                _check_aggregation(name, keyword.value)
            elif arg in spec.keywords:
                self.expr(keyword.value)
            elif method in {"agg", "aggregate"}:
                _check_named_aggregation(name, arg, keyword.value)
            else:
                allowed = ", ".join(sorted(spec.keywords)) or "none"
                raise UnsafeCodeError(
                    f"keyword {_quote(arg)} is not allowed for {name}() (allowed: {allowed})"
                )

    def callee(self, func: ast.expr) -> tuple[str, CallSpec]:
        """The called name and how it may be called; refuses anything not listed."""
        if isinstance(func, ast.Name):
            if func.id in BUILTIN_FUNCTIONS:
                return func.id, BUILTIN_FUNCTIONS[func.id]
            raise UnsafeCodeError(f"calling {_quote(func.id)} is not allowed")
        if not isinstance(func, ast.Attribute):
            raise UnsafeCodeError(f"calling a {type(func).__name__} is not allowed")
        if isinstance(func.value, ast.Name) and func.value.id in MODULE_NAMES:
            functions, _ = MODULE_NAMES[func.value.id]
            if func.attr not in functions:
                raise UnsafeCodeError(f"{func.value.id}.{func.attr[:40]}() is not allowed")
            return f"{func.value.id}.{func.attr}", functions[func.attr]
        if func.attr not in METHODS:
            raise UnsafeCodeError(f"method {_quote(func.attr)} is not allowed")
        self.expr(func.value)
        return func.attr, METHODS[func.attr]


def _literal_number(node: ast.AST) -> float | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _literal_number(node.operand)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    return None


def _is_sequence_literal(node: ast.AST) -> bool:
    """A literal string or collection, or a call that plainly returns a list or string (the
    sandbox's memory limit bounds repetition of values whose type only shows at run time)."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str | bytes)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Name):
            return func.id in _SEQUENCE_BUILTINS
        return isinstance(func, ast.Attribute) and func.attr in _SEQUENCE_METHODS
    return isinstance(node, _SEQUENCE_LITERALS)


def _is_aggregation_name(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value in AGGREGATIONS


def _check_aggregation(name: str, node: ast.AST) -> None:
    """A dispatch argument: a literal aggregation name, or a list/tuple/dict of them."""
    if _is_aggregation_name(node):
        return
    if (
        isinstance(node, ast.List | ast.Tuple)
        and node.elts
        and all(_is_aggregation_name(e) for e in node.elts)
    ):
        return
    if isinstance(node, ast.Dict) and node.keys:
        columns_literal = all(
            isinstance(k, ast.Constant) and isinstance(k.value, str | int) for k in node.keys
        )
        values_ok = all(
            _is_aggregation_name(v)
            or (isinstance(v, ast.List) and v.elts and all(map(_is_aggregation_name, v.elts)))
            for v in node.values
        )
        if columns_literal and values_ok:
            return
    shown = node.value if isinstance(node, ast.Constant) else None
    if isinstance(shown, str):
        raise UnsafeCodeError(
            f"{name}() may only name a listed aggregation, got {_quote(shown)}"
            f" (allowed: {', '.join(sorted(AGGREGATIONS))})"
        )
    raise UnsafeCodeError(
        f"{name}() takes a literal aggregation name (or a list or dict of them), "
        f"got {type(node).__name__}"
    )


def _check_named_aggregation(name: str, arg: str, value: ast.AST) -> None:
    """``total=("column", "sum")``: a literal column and a listed aggregation."""
    if (
        isinstance(value, ast.Tuple)
        and len(value.elts) == 2
        and isinstance(value.elts[0], ast.Constant)
        and isinstance(value.elts[0].value, str | int)
        and _is_aggregation_name(value.elts[1])
        and not arg.startswith("_")
    ):
        return
    raise UnsafeCodeError(
        f"keyword {_quote(arg)} of {name}() must be a named aggregation "
        '("column", "<listed aggregation>")'
    )


__all__ = ["UnsafeCodeError", "check_pandas_code", "refusal_reason"]
