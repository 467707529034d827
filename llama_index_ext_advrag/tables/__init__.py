"""The safe table route: pandas code an LLM writes, checked against an allowlist and run in a
sandboxed child process (`SafePandasQueryEngine`), and workbooks read into tables and pointers.

It sits below the retrievers (the recursive retriever routes to it) and above the floors.
Classes are imported lazily so that ``import llama_index_ext_advrag.tables`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
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

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
