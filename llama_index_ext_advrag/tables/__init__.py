"""The safe table route: pandas code an LLM writes, checked against an allowlist and run in a
sandboxed child process (`SafePandasQueryEngine`), and workbooks read into tables and pointers.

It sits below the retrievers (the recursive retriever routes to it) and above the floors.
Classes are imported lazily so that ``import llama_index_ext_advrag.tables`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from llama_index_ext_advrag.tables.pandas_check import UnsafeCodeError as UnsafeCodeError
    from llama_index_ext_advrag.tables.pandas_check import (
        check_pandas_code as check_pandas_code,
    )
    from llama_index_ext_advrag.tables.pandas_engine import (
        SafePandasQueryEngine as SafePandasQueryEngine,
    )
    from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits as SandboxLimits
    from llama_index_ext_advrag.tables.pandas_sandbox import SandboxResult as SandboxResult
    from llama_index_ext_advrag.tables.pandas_sandbox import (
        arun_pandas_code as arun_pandas_code,
    )
    from llama_index_ext_advrag.tables.pandas_sandbox import (
        run_pandas_code as run_pandas_code,
    )

_EXPORTS = {
    "SafePandasQueryEngine": ".pandas_engine",
    "SandboxLimits": ".pandas_sandbox",
    "SandboxResult": ".pandas_sandbox",
    "run_pandas_code": ".pandas_sandbox",
    "arun_pandas_code": ".pandas_sandbox",
    "UnsafeCodeError": ".pandas_check",
    "check_pandas_code": ".pandas_check",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
