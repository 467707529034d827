"""Node postprocessors: prev-next expansion, drift-aware windows, consecutive merge, window
replacement, judge rerank, CRAG, context compression.

Classes are imported lazily, so importing the package stays cheap. ``UnitAnnotator``, which
runs at ingest, lives in :mod:`llama_index_ext_advrag.node_parser`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_getattr

if TYPE_CHECKING:  # what type checkers and IDEs see; at run time __getattr__ loads them
    from llama_index_ext_advrag.postprocessor.compression import (
        ContextCompressionPostprocessor as ContextCompressionPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor.consecutive_merge import (
        ConsecutiveMergePostprocessor as ConsecutiveMergePostprocessor,
    )
    from llama_index_ext_advrag.postprocessor.crag import CRAGPostprocessor as CRAGPostprocessor
    from llama_index_ext_advrag.postprocessor.drift_window import (
        DriftAwareWindowPostprocessor as DriftAwareWindowPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor.judge_rerank import (
        JudgeRerankPostprocessor as JudgeRerankPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor.prev_next import (
        PrevNextPostprocessor as PrevNextPostprocessor,
    )
    from llama_index_ext_advrag.postprocessor.window_replacement import (
        WindowReplacementPostprocessor as WindowReplacementPostprocessor,
    )

_EXPORTS = {
    "PrevNextPostprocessor": ".prev_next",
    "DriftAwareWindowPostprocessor": ".drift_window",
    "ConsecutiveMergePostprocessor": ".consecutive_merge",
    "WindowReplacementPostprocessor": ".window_replacement",
    "JudgeRerankPostprocessor": ".judge_rerank",
    "CRAGPostprocessor": ".crag",
    "ContextCompressionPostprocessor": ".compression",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
