"""Evaluation: answer-coverage metrics, corpus and QA loaders, pipeline runs."""

from llama_index_ext_advrag.evaluation.corpus import QAItem, load_documents, load_qa
from llama_index_ext_advrag.evaluation.metrics import (
    answer_covered,
    normalize_for_match,
    summarize_runs,
)

__all__ = [
    "QAItem",
    "answer_covered",
    "load_documents",
    "load_qa",
    "normalize_for_match",
    "summarize_runs",
]
