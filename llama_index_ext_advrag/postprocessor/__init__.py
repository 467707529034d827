"""Node postprocessors: prev-next expansion, drift-aware windows, consecutive merge.

Classes are imported lazily, so importing the package stays cheap.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "PrevNextPostprocessor": ".prev_next",
    "DriftAwareWindowPostprocessor": ".drift_window",
    "ConsecutiveMergePostprocessor": ".consecutive_merge",
    "UnitAnnotator": ".annotations",
    "WindowReplacementPostprocessor": ".window_replacement",
    "JudgeRerankPostprocessor": ".judge_rerank",
    "CRAGPostprocessor": ".crag",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)
