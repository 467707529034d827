"""The allow-list that LLM-written pandas code must pass before anything of it runs.

:func:`check_pandas_code` parses the code and walks its AST; the first construct outside the
allow-list raises :class:`UnsafeCodeError` naming it:

* statements: expressions and assignments to plain names or ``df[...]``; no imports, function
  or class definitions, loops, ``with``, ``try``, ``del``, ``global``, ``await``, ``yield``;
* names: ``df``, ``pd`` and ``np`` (the modules only as ``pd.<name>``/``np.<name>``, never a
  sub-module such as ``pd.io``), a few harmless builtins (``len``, ``sum``, ``sorted``...)
  and names the code itself binds; nothing starting with ``_``;
* attributes: nothing starting with ``_``; no file, network or database I/O (``read_*``,
  ``to_*`` writers, ``np.save``, ``tofile``, ``HDFStore``...), no ``eval``/``exec``, no
  plotting or styling, no option setting; string constants naming such a method or holding
  ``__`` are refused too (``df.agg("to_pickle", ...)``); ``df.query`` strings are parsed and
  checked like code and may not use ``@``; no ``**`` unpacking or ``buf=`` in calls;
* resources: constant integer expressions are bounded, large literal call arguments refused.

Running code that passed is :mod:`.pandas_guard`'s job.
"""

from __future__ import annotations

import ast
import math
import re
import types
from typing import Any

DATAFRAME_NAMES = frozenset({"df"})
MODULE_NAMES = frozenset({"pd", "np"})
_SAFE_BUILTINS = (
    "abs all any bool enumerate filter float int isinstance len list map max min round set "
    "sorted str sum tuple zip reversed True False None "
)
SAFE_BUILTINS = frozenset(_SAFE_BUILTINS.split())
_DENIED_ATTRIBUTES = (
    "eval exec compile open system popen spawn fork kill remove unlink rmdir read_csv "
    "read_excel read_json read_html read_xml read_parquet read_feather read_orc read_stata "
    "read_sas read_spss read_sql read_sql_table read_sql_query read_gbq read_hdf read_pickle "
    "read_table read_fwf read_clipboard to_csv to_excel to_json to_html to_xml to_parquet "
    "to_feather to_orc to_stata to_hdf to_pickle to_sql to_gbq to_clipboard to_latex "
    "to_markdown scan_csv scan_parquet scan_ipc write_csv write_parquet write_ipc load save "
    "savez savez_compressed loadtxt savetxt genfromtxt fromfile tofile fromregex memmap dump "
    "dumps DataSource HDFStore ExcelWriter ExcelFile ctypes plot hist boxplot savefig style "
    "set_option reset_option options option_context set_printoptions seterr setbufsize mro "
    "format format_map f_globals f_locals f_builtins gi_frame gi_code cr_frame tb_frame "
    "func_globals "
)
DENIED_ATTRIBUTES = frozenset(_DENIED_ATTRIBUTES.split())
DENIED_KEYWORDS = frozenset({"buf", "path_or_buf", "filepath_or_buffer", "excel_writer"})
MAX_INT_DIGITS = 30  # constant integer expressions beyond ~10**30 are refused
MAX_CALL_LITERAL = 10_000_000  # e.g. np.ones(10**9) would exhaust memory
_BACKTICKS = re.compile(r"`[^`]*`")  # df.query() column quoting
_ALLOWED_NODES: tuple[type[ast.AST], ...] = (
    ast.Module, ast.Expression, ast.Expr, ast.Assign, ast.AugAssign, ast.Name, ast.Load,
    ast.Store, ast.Constant, ast.Attribute, ast.Subscript, ast.Slice, ast.Tuple, ast.List,
    ast.Dict, ast.Set, ast.Call, ast.keyword, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
    ast.IfExp, ast.Lambda, ast.arguments, ast.arg, ast.ListComp, ast.SetComp, ast.DictComp,
    ast.GeneratorExp, ast.comprehension, ast.JoinedStr, ast.FormattedValue, ast.Starred,
    ast.operator, ast.unaryop, ast.boolop, ast.cmpop, ast.expr_context,
)  # fmt: skip


class UnsafeCodeError(ValueError):
    """Generated code was refused; ``reason`` says what, ``code`` is the refused text."""

    def __init__(self, reason: str, code: str = "") -> None:
        super().__init__(f"refused to run generated pandas code: {reason}")
        self.reason = reason
        self.code = code


def check_pandas_code(code: str) -> None:
    """Raise :class:`UnsafeCodeError` unless ``code`` passes the allow-list (see module doc).

    Example:
        >>> check_pandas_code("df[df['Age'] > 60]['Name'].tolist()")
        >>> check_pandas_code("__import__('os')")
        Traceback (most recent call last):
        ...
        llama_index_ext_advrag.retrievers.pandas_check.UnsafeCodeError: refused to run generated pandas code: name '__import__' starts with '_'
    """
    try:
        tree = ast.parse(code, mode="exec")
    except SyntaxError as exc:
        raise UnsafeCodeError(f"not valid Python ({exc.msg})", code) from None
    except ValueError as exc:  # null bytes
        raise UnsafeCodeError(f"not valid Python ({exc})", code) from None
    if not tree.body:
        raise UnsafeCodeError("no code", code)
    try:
        _Checker(_bound_names(tree)).visit(tree)
    except UnsafeCodeError as exc:
        raise UnsafeCodeError(exc.reason, code) from None


def _bound_names(tree: ast.AST) -> set[str]:
    names = {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    names |= {a.arg for n in ast.walk(tree) if isinstance(n, ast.arguments) for a in _args(n)}
    return names


def _args(arguments: ast.arguments) -> list[ast.arg]:
    found = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]
    return found + [a for a in (arguments.vararg, arguments.kwarg) if a is not None]


class _Checker(ast.NodeVisitor):
    """Walk the tree and raise at the first construct outside the allow-list."""

    def __init__(self, bound: set[str]) -> None:
        self.bound = bound
        self.allowed_names = DATAFRAME_NAMES | MODULE_NAMES | SAFE_BUILTINS | bound
        self.parents: dict[int, ast.AST] = {}

    def generic_visit(self, node: ast.AST) -> None:
        if not isinstance(node, _ALLOWED_NODES):
            raise UnsafeCodeError(f"{type(node).__name__} is not allowed")
        for child in ast.iter_child_nodes(node):
            self.parents[id(child)] = node
            self.visit(child)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("_"):
            raise UnsafeCodeError(f"name {node.id!r} starts with '_'")
        if isinstance(node.ctx, ast.Store) and node.id in DATAFRAME_NAMES | MODULE_NAMES:
            raise UnsafeCodeError(f"rebinding {node.id!r} is not allowed")
        if node.id not in self.allowed_names:
            raise UnsafeCodeError(f"name {node.id!r} is not allowed")
        parent = self.parents.get(id(node))
        if node.id in MODULE_NAMES and not (
            isinstance(parent, ast.Attribute) and parent.value is node
        ):
            raise UnsafeCodeError(f"module {node.id!r} may only be used as {node.id}.<name>")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_"):
            raise UnsafeCodeError(f"attribute {node.attr!r} starts with '_'")
        if node.attr in DENIED_ATTRIBUTES:
            raise UnsafeCodeError(f"attribute {node.attr!r} (I/O, evaluation or globals)")
        if isinstance(node.ctx, ast.Store):
            raise UnsafeCodeError(f"assigning attribute {node.attr!r} is not allowed")
        _check_module_chain(node)
        self.generic_visit(node)

    def visit_Constant(self, node: ast.Constant) -> None:
        value = node.value
        if isinstance(value, str) and ("__" in value or value.strip() in DENIED_ATTRIBUTES):
            raise UnsafeCodeError(f"string {value[:40]!r} names a dunder or denied method")
        if isinstance(value, bytes):
            raise UnsafeCodeError("bytes literals are not allowed")

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            if not isinstance(target, ast.Name | ast.Subscript | ast.Tuple):
                raise UnsafeCodeError(f"assignment to {type(target).__name__} is not allowed")
        self.generic_visit(node)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        _check_constant_size(node)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            if keyword.arg is None:
                raise UnsafeCodeError("'**' unpacking in calls is not allowed")
            if keyword.arg in DENIED_KEYWORDS:
                raise UnsafeCodeError(f"keyword {keyword.arg!r} (writes to a file or buffer)")
        method = node.func.attr if isinstance(node.func, ast.Attribute) else None
        if method in {"to_string", "info"} and node.args:
            raise UnsafeCodeError(f"positional arguments to {method}() (a file or buffer)")
        if method == "query":
            _check_query_string(node)
        for argument in [*node.args, *(k.value for k in node.keywords)]:
            digits = _int_digits(argument)
            if digits is not None and digits > len(str(MAX_CALL_LITERAL)):
                raise UnsafeCodeError("a call argument above 10,000,000 (memory)")
        self.generic_visit(node)


def _check_module_chain(node: ast.Attribute) -> None:
    """``pd.a.b``: every step resolved on the real module must not be a module itself."""
    chain: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        chain.append(current.attr)
        current = current.value
    if not (isinstance(current, ast.Name) and current.id in MODULE_NAMES):
        return
    import numpy
    import pandas

    value: Any = {"pd": pandas, "np": numpy}[current.id]
    path = current.id
    for attr in reversed(chain):
        path = f"{path}.{attr}"
        try:
            value = getattr(value, attr)
        except AttributeError:
            return  # fails at run time with an AttributeError; nothing to reach
        if isinstance(value, types.ModuleType):
            raise UnsafeCodeError(f"sub-module {path} is not allowed")


def _check_query_string(node: ast.Call) -> None:
    """``df.query("...")`` strings are code too: parse and check them (no ``@`` variables)."""
    if not node.args or not isinstance(node.args[0], ast.Constant):
        raise UnsafeCodeError("df.query() needs a literal string")
    expression = node.args[0].value
    if not isinstance(expression, str) or "@" in expression:
        raise UnsafeCodeError("df.query() strings may not reference '@' variables")
    cleaned = _BACKTICKS.sub("column", expression)
    try:
        tree = ast.parse(cleaned, mode="eval")
    except SyntaxError:
        raise UnsafeCodeError(f"df.query() string {expression[:40]!r} does not parse") from None
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    _Checker(_bound_names(tree) | names - MODULE_NAMES - DATAFRAME_NAMES).visit(tree)


def _int_digits(node: ast.AST) -> int | None:
    """Estimated decimal digits of a constant integer expression, ``None`` if not constant."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return len(str(abs(node.value)))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        return _int_digits(node.operand)
    if not isinstance(node, ast.BinOp):
        return None
    left, right = _int_digits(node.left), _int_digits(node.right)
    if left is None or right is None:
        return None
    if isinstance(node.op, ast.Pow):
        exponent = _constant_int(node.right)
        return MAX_INT_DIGITS + 1 if exponent is None or exponent > 200 else left * max(exponent, 1)
    if isinstance(node.op, ast.LShift):
        shift = _constant_int(node.right)
        return MAX_INT_DIGITS + 1 if shift is None else left + math.ceil(shift * 0.302)
    if isinstance(node.op, ast.Mult):
        return left + right
    return max(left, right) + 1


def _constant_int(node: ast.AST) -> int | None:
    return node.value if isinstance(node, ast.Constant) and type(node.value) is int else None


def _check_constant_size(node: ast.BinOp) -> None:
    digits = _int_digits(node)
    if digits is not None and digits > MAX_INT_DIGITS:
        raise UnsafeCodeError("a constant integer expression too large to compute")
    if isinstance(node.op, ast.Mult):
        for sequence, count in ((node.left, node.right), (node.right, node.left)):
            repeated = isinstance(sequence, ast.List | ast.Tuple) or (
                isinstance(sequence, ast.Constant) and isinstance(sequence.value, str)
            )
            count_digits = _int_digits(count)
            if repeated and count_digits is not None and count_digits > 6:
                raise UnsafeCodeError("repeating a sequence more than 1,000,000 times")


__all__ = [
    "DATAFRAME_NAMES",
    "DENIED_ATTRIBUTES",
    "DENIED_KEYWORDS",
    "MODULE_NAMES",
    "SAFE_BUILTINS",
    "UnsafeCodeError",
    "check_pandas_code",
]
