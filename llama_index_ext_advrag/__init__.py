"""Advanced-RAG components for LlamaIndex.

Every component records its decisions under ``node.metadata[TRACE_KEY]`` (or the response
metadata for query engines), so a user can see why the context looks the way it does.
"""

from __future__ import annotations

from llama_index_ext_advrag.trace import TRACE_KEY

__version__ = "0.1.0"

__all__ = ["TRACE_KEY", "__version__"]
