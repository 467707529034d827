"""Node postprocessors: prev-next expansion, drift-aware windows, consecutive merge, window
replacement, judge rerank, CRAG, context compression.

Classes are imported lazily, so importing the package stays cheap. ``UnitAnnotator``, which
runs at ingest, lives in :mod:`llama_index_ext_advrag.node_parser`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
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

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
