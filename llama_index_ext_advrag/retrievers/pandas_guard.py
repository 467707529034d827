"""Guarded execution of LLM-written pandas code, and a pandas query engine that uses it.

An LLM that answers questions over a DataFrame writes pandas code, and running model-written
code is the risk. Code runs only when it passes :func:`check_pandas_code`, an AST allow-list:

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

Code that passes then runs through llama-index-experimental's restricted evaluation
(``safe_exec``/``safe_eval``: restricted builtins and imports, its own checks) on a copy of the
DataFrame, under a time limit (SIGALRM in the main thread, a trace-function deadline
everywhere). Refused code raises :class:`UnsafeCodeError` and nothing of it runs.
This is defence in depth for trusted tables and a cooperative model, not an OS sandbox.
"""

from __future__ import annotations

import ast
import logging
import math
import re
import sys
import threading
import time
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.callbacks import CallbackManager
from llama_index.core.llms import LLM
from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag.models import resolve_llm

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 10.0
EXPERIMENTAL_HINT = (
    "the pandas route needs llama-index-experimental: pip install llama-index-experimental"
)
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


# --- the allow-list check ---------------------------------------------------------------------


def check_pandas_code(code: str) -> None:
    """Raise :class:`UnsafeCodeError` unless ``code`` passes the allow-list (see module doc).

    Example:
        >>> check_pandas_code("df[df['Age'] > 60]['Name'].tolist()")
        >>> check_pandas_code("__import__('os').system('id')")
        Traceback (most recent call last):
        ...
        llama_index_ext_advrag.retrievers.pandas_guard.UnsafeCodeError: refused to run generated pandas code: name '__import__' starts with '_'
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


# --- running checked code ---------------------------------------------------------------------


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Raise TimeoutError inside traced Python code once ``seconds`` have passed."""
    limit = time.monotonic() + seconds

    def tracer(frame: types.FrameType, event: str, arg: Any) -> Any:
        if time.monotonic() > limit:
            raise TimeoutError(f"generated code exceeded the {seconds:g}s time limit")
        return tracer if frame.f_code.co_filename == "<string>" else None

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        yield
    finally:
        sys.settrace(previous)


def _experimental() -> Any:
    try:
        from llama_index.experimental import exec_utils
    except ImportError as exc:
        raise ImportError(EXPERIMENTAL_HINT) from exc
    return exec_utils


def _restricted(kind: str, source: str, namespace: dict[str, Any], seconds: float) -> Any:
    """``safe_exec``/``safe_eval`` of llama-index-experimental under our deadline. Outside the
    main thread (no SIGALRM) its own source check and restricted globals are used directly."""
    exec_utils = _experimental()
    with _deadline(seconds):
        if threading.current_thread() is threading.main_thread():
            run = exec_utils.safe_exec if kind == "exec" else exec_utils.safe_eval
            return run(source, namespace, namespace, timeout_seconds=max(1, math.ceil(seconds)))
        exec_utils._verify_source_safety(source)
        scope = exec_utils._get_restricted_globals(namespace)
        return (exec if kind == "exec" else eval)(source, scope, namespace)


def run_pandas_code(code: str, df: Any, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> Any:
    """Check ``code`` and, if it passes, run it on a copy of ``df``; return the last
    expression's value (``None`` when the code ends with an assignment).

    Raises:
        UnsafeCodeError: the code was refused (nothing ran).
        TimeoutError: it ran longer than ``timeout_seconds``.
        ImportError: llama-index-experimental is missing.
    """
    check_pandas_code(code)
    import numpy as np
    import pandas as pd

    namespace: dict[str, Any] = {"df": df.copy(), "pd": pd, "np": np}
    body = ast.parse(code).body
    last = body[-1]
    for statement in body[:-1] if isinstance(last, ast.Expr) else body:
        _restricted("exec", ast.unparse(statement), namespace, timeout_seconds)
    if not isinstance(last, ast.Expr):
        return None
    return _restricted("eval", ast.unparse(last), namespace, timeout_seconds)


# --- the query engine -------------------------------------------------------------------------


def extract_code(llm_output: str) -> str:
    """The last fenced code block of an LLM answer, or the whole answer without quotes."""
    from llama_index.core.output_parsers.utils import parse_code_markdown

    found = parse_code_markdown(llm_output, only_last=True)
    code = found[0] if isinstance(found, list) else found
    return re.sub(r"^\s*(?:python|py)\s*\n", "", str(code)).strip()


def render_result(value: Any, max_rows: int = 50) -> str:
    """``str(value)`` with bounded pandas display options (restored afterwards)."""
    import pandas as pd

    with pd.option_context(
        "display.max_rows", max_rows, "display.max_columns", 50, "display.max_colwidth", 200,
        "display.width", 200,
    ):  # fmt: skip
        return str(value)


def refusal_reason(llm_output: str) -> str | None:
    """Why the code in ``llm_output`` would be refused, ``None`` if it passes the check."""
    try:
        check_pandas_code(extract_code(llm_output))
    except UnsafeCodeError as exc:
        return exc.reason
    return None


class GuardedPandasInstructionParser:
    """Drop-in for experimental's ``PandasInstructionParser``: runs code only through
    :func:`run_pandas_code`; refusals and errors become a short message, never an exception."""

    def __init__(self, df: Any, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
        self.df = df
        self.timeout_seconds = timeout_seconds

    def parse(self, output: str) -> str:
        code = extract_code(output)
        try:
            return render_result(run_pandas_code(code, self.df, self.timeout_seconds))
        except UnsafeCodeError as exc:
            logger.warning("Refused generated pandas code (%s): %r", exc.reason, code[:200])
            return f"Refused to run the generated pandas code: {exc.reason}"
        except ImportError:
            raise
        except Exception as exc:  # the model's code failed: a normal outcome, reported
            logger.info("Generated pandas code failed: %r (%r)", exc, code[:200])
            return f"Error running the generated pandas code: {exc!r}"


class GuardedPandasQueryEngine(BaseQueryEngine):
    """llama-index-experimental's ``PandasQueryEngine`` with the guarded parser above.

    The experimental package is imported on first query only. Without an LLM (none given, none
    in ``Settings``) no code is generated: the answer is the table's ``description`` and first
    rows, and ``metadata["pandas_skipped"]`` says why.

    Args:
        df: the table. name: its name (sheet name). llm: the code-writing LLM.
        timeout_seconds: time limit of the generated code. head: rows shown to the LLM.
        description: the text answered without an LLM (default: columns and first rows).
    """

    def __init__(
        self,
        df: Any,
        name: str = "table",
        llm: LLM | None = None,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        head: int = 5,
        description: str | None = None,
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if not 0 < timeout_seconds <= 600:
            raise ValueError(f"timeout_seconds must be in (0, 600], got {timeout_seconds}")
        if head < 1:
            raise ValueError(f"head must be >= 1, got {head}")
        self.df, self.name, self.head = df, name, head
        self.timeout_seconds = timeout_seconds
        self.description = description or render_result(df.head(head))
        self._llm = llm
        self._engines: dict[int, Any] = {}
        super().__init__(callback_manager=callback_manager)

    @classmethod
    def class_name(cls) -> str:
        return "GuardedPandasQueryEngine"

    def _get_prompt_modules(self) -> dict[str, Any]:
        return {}

    def _engine(self, llm: LLM) -> Any:
        if id(llm) not in self._engines:
            try:
                from llama_index.experimental.query_engine import PandasQueryEngine
            except ImportError as exc:
                raise ImportError(EXPERIMENTAL_HINT) from exc
            parser = GuardedPandasInstructionParser(self.df, self.timeout_seconds)
            self._engines[id(llm)] = PandasQueryEngine(
                df=self.df,
                llm=llm,
                head=self.head,
                instruction_parser=parser,  # type: ignore[arg-type]
            )
        return self._engines[id(llm)]

    def _no_llm(self) -> Response:
        metadata = {"table": self.name, "pandas_skipped": "no LLM to write pandas code"}
        return Response(response=self.description, metadata=metadata)

    def _annotate(self, response: Any) -> Response:
        metadata = dict(response.metadata or {})
        instructions = str(metadata.get("pandas_instruction_str", ""))
        metadata.update(
            table=self.name,
            pandas_code=extract_code(instructions),
            pandas_refused=refusal_reason(instructions),
        )
        return Response(response=str(response.response), metadata=metadata)

    def _query(self, query_bundle: QueryBundle) -> Response:
        llm = resolve_llm(self._llm)
        if llm is None:
            return self._no_llm()
        with _display_options_restored():
            return self._annotate(self._engine(llm).query(query_bundle))

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        llm = resolve_llm(self._llm)
        if llm is None:
            return self._no_llm()
        with _display_options_restored():
            return self._annotate(await self._engine(llm).aquery(query_bundle))


@contextmanager
def _display_options_restored() -> Iterator[None]:
    """The experimental engine sets pandas display options globally; put them back."""
    import pandas as pd

    keys = ("display.max_colwidth", "display.max_columns", "display.max_rows", "display.width")
    saved = [(key, pd.get_option(key)) for key in keys]
    try:
        yield
    finally:
        for key, value in saved:
            pd.set_option(key, value)
