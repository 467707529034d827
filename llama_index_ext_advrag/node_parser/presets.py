"""Adaptive-window presets by document type, selectable by name and overridable field by field.

The numbers follow common practice rather than tuning on one benchmark:

- ``general``: 128-token windows, half-window stride, breakpoints at the 95th percentile of
  adjacent-sentence distance (the default of LlamaIndex's ``SemanticSplitterNodeParser``). The
  window size was measured with bge-small-en-v1.5, the default embedding: at equal context
  tokens 128-token windows cover 6-10 points more than 256-token ones on COVID-QA (the set it
  was chosen on), and no less on SQuAD 2.0 (0 to +0.7) or CMRC 2018 (+4.5 to +6.1); larger
  windows (384, 512) cover 5-11 points less (docs/node_parsers.md).
- ``technical``: manuals and API docs have long steps and code blocks that belong together and
  are sectioned by headings: 384-token windows, a third of a window of overlap, fewer
  semantic breaks (97th percentile), since headings already mark the topic changes.
- ``legal``: clauses are long and cross-reference each other; contracts and statutes are
  usually chunked at 512 tokens or more: 512-token windows with a quarter-window overlap, 97th
  percentile breaks.
- ``qa``: FAQs and interview transcripts: short windows (192 tokens) with half-window stride,
  and a question is always kept with the sentence that follows it (its answer).
- ``article``: papers, reports and articles read sentence by sentence: each sentence is
  embedded alone (``embed_unit="sentence"``, with what follows it when shorter than 16
  tokens) and carries a 160-token window, three quarters of it after the sentence, that stops
  at blank lines; no semantic breakpoints (paragraphs already end topics). These numbers were
  measured: the unit, forward ratio and barriers chosen on COVID-QA questions 401-1,380 with
  all-MiniLM, the window size (280 before) again with bge-small-en-v1.5 at equal context tokens
  on COVID-QA and reported on SQuAD 2.0 and CMRC 2018, see docs/node_parsers.md.

The four window presets place their breakpoints with the ``lexical`` signal (TF-IDF word blocks,
no model call). Measured at equal context tokens (benchmarks/results/breakpoint_signal.txt): on
COVID-QA it ties sentence embeddings and keeps ingest at the embedding-only floor (embeddings:
2.5-3.7x); on CMRC 2018 embeddings cover about 2.6 points more. ``breakpoint_signal="auto"``
takes embeddings for Chinese documents only, for that gain at that cost.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

from llama_index_ext_advrag._enums import parse_enum

logger = logging.getLogger(__name__)


class DocumentPreset(str, Enum):
    """Document types with preset adaptive-window settings."""

    GENERAL = "general"
    TECHNICAL = "technical"
    LEGAL = "legal"
    QA = "qa"
    ARTICLE = "article"


_COMMON: dict[str, Any] = {
    "mode": "adaptive",
    "breakpoint_signal": "lexical",
    "breakpoint_buffer": None,
    "breakpoint_threshold": None,
}

PRESETS: dict[DocumentPreset, dict[str, Any]] = {
    DocumentPreset.GENERAL: {
        **_COMMON,
        "max_window_tokens": 128,
        "stride_ratio": 0.5,
        "breakpoint_percentile": 95.0,
        "keep_questions_with_answers": False,
    },
    DocumentPreset.TECHNICAL: {
        **_COMMON,
        "max_window_tokens": 384,
        "stride_ratio": 0.67,
        "breakpoint_percentile": 97.0,
        "keep_questions_with_answers": False,
    },
    DocumentPreset.LEGAL: {
        **_COMMON,
        "max_window_tokens": 512,
        "stride_ratio": 0.75,
        "breakpoint_percentile": 97.0,
        "keep_questions_with_answers": False,
    },
    DocumentPreset.QA: {
        **_COMMON,
        "max_window_tokens": 192,
        "stride_ratio": 0.5,
        "breakpoint_percentile": 95.0,
        "keep_questions_with_answers": True,
    },
    DocumentPreset.ARTICLE: {
        **_COMMON,
        "embed_unit": "sentence",
        "max_window_tokens": 160,
        "stride_ratio": 0.5,
        "forward_ratio": 0.75,
        "min_embed_tokens": 16,
        "split_at_paragraphs": True,
        "breakpoint_percentile": None,
        "keep_questions_with_answers": False,
    },
}


# Presets whose values changed after `advrag compare` first keyed its indexes by the preset's
# name alone (window sizes re-fitted to bge-small): their window size enters the index key
# (evaluation/compose.py), so an index parsed with the old windows is not reused. The other
# presets keep their keys.
REFITTED_PRESETS = frozenset({DocumentPreset.ARTICLE, DocumentPreset.GENERAL})


def preset_values(preset: DocumentPreset | str) -> dict[str, Any]:
    """Return a copy of the field values of ``preset``.

    Raises:
        ValueError: ``preset`` is not one of the names of :class:`DocumentPreset`.
    """
    return dict(PRESETS[parse_enum(DocumentPreset, preset, "preset", also="None")])


__all__ = ["PRESETS", "REFITTED_PRESETS", "DocumentPreset", "preset_values"]
