"""Query engines: the safe pandas (table) engine.

Classes are imported lazily so that ``import llama_index_ext_advrag.query_engine`` stays cheap.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "SafePandasQueryEngine": ".pandas_engine",
    "SandboxLimits": ".pandas_sandbox",
    "SandboxResult": ".pandas_sandbox",
    "run_pandas_code": ".pandas_sandbox",
    "UnsafeCodeError": ".pandas_check",
    "check_pandas_code": ".pandas_check",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
