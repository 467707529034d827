"""Query engines: Self-RAG by prompting (retrieve-or-not, relevance, support and usefulness
critique, bounded re-retrieval) on any LLM or none.

The safe pandas (table) engine lives in :mod:`llama_index_ext_advrag.tables`; its names are
still readable from here for one release, with a ``DeprecationWarning``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import Deprecated, lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
    from llama_index_ext_advrag.query_engine.self_rag import (
        SelfRAGQueryEngine as SelfRAGQueryEngine,
    )
    from llama_index_ext_advrag.query_engine.self_rag_critique import (
        GenerationMode as GenerationMode,
    )
    from llama_index_ext_advrag.query_engine.self_rag_critique import (
        GenerationPassages as GenerationPassages,
    )

_TABLES = "import it from llama_index_ext_advrag.tables"

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    __file__,
    deprecated={
        name: Deprecated("llama_index_ext_advrag.tables", _TABLES)
        for name in (
            "SafePandasQueryEngine",
            "SandboxLimits",
            "SandboxResult",
            "UnsafeCodeError",
            "arun_pandas_code",
            "check_pandas_code",
            "run_pandas_code",
        )
    },
)
