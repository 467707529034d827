"""Query engines: Self-RAG by prompting (retrieve-or-not, relevance, support and usefulness
critique, bounded re-retrieval) on any LLM or none; the safe pandas (table) engine lives in
:mod:`llama_index_ext_advrag.tables` and is re-exported here.

Classes are imported lazily so that ``import llama_index_ext_advrag.query_engine`` stays cheap.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from llama_index_ext_advrag.query_engine.self_rag import (
        SelfRAGQueryEngine as SelfRAGQueryEngine,
    )
    from llama_index_ext_advrag.query_engine.self_rag_critique import (
        GenerationMode as GenerationMode,
    )
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
    "SafePandasQueryEngine": "llama_index_ext_advrag.tables.pandas_engine",
    "SandboxLimits": "llama_index_ext_advrag.tables.pandas_sandbox",
    "SandboxResult": "llama_index_ext_advrag.tables.pandas_sandbox",
    "run_pandas_code": "llama_index_ext_advrag.tables.pandas_sandbox",
    "arun_pandas_code": "llama_index_ext_advrag.tables.pandas_sandbox",
    "UnsafeCodeError": "llama_index_ext_advrag.tables.pandas_check",
    "check_pandas_code": "llama_index_ext_advrag.tables.pandas_check",
    "SelfRAGQueryEngine": ".self_rag",
    "GenerationMode": ".self_rag_critique",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
