"""Guarded execution of LLM-written pandas code, and a pandas query engine that uses it.

An LLM that answers questions over a DataFrame writes pandas code, and running model-written
code is the risk. Code runs only when it passes :func:`~.pandas_check.check_pandas_code`, an
AST allow-list (imports, dunders, I/O, ``eval``/``exec``, sub-modules and oversized constants
are refused; see :mod:`.pandas_check`). Code that passes then runs through
llama-index-experimental's restricted evaluation (``safe_exec``/``safe_eval``: restricted
builtins and imports, its own checks) on a copy of the DataFrame, under a time limit (SIGALRM
in the main thread, a trace-function deadline everywhere). Refused code raises
:class:`UnsafeCodeError` and nothing of it runs. This is defence in depth for trusted tables and
a cooperative model, not an OS sandbox.
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
from llama_index_ext_advrag.retrievers.pandas_check import UnsafeCodeError, check_pandas_code

logger = logging.getLogger(__name__)

DEFAULT_TIMEOUT_SECONDS = 10.0
EXPERIMENTAL_HINT = (
    "the pandas route needs llama-index-experimental: pip install llama-index-experimental"
)


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


__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "GuardedPandasInstructionParser",
    "GuardedPandasQueryEngine",
    "UnsafeCodeError",
    "check_pandas_code",
    "extract_code",
    "refusal_reason",
    "render_result",
    "run_pandas_code",
]
