"""Evaluation: answer-coverage metrics, corpus and QA loaders, pipeline runs."""

from llama_index_ext_advrag.evaluation.compose import SpecError
from llama_index_ext_advrag.evaluation.corpus import QAItem, load_documents, load_qa
from llama_index_ext_advrag.evaluation.metrics import (
    answer_covered,
    normalize_for_match,
    summarize_runs,
)
from llama_index_ext_advrag.evaluation.questions import QuestionFormatError
from llama_index_ext_advrag.evaluation.sources import DocumentError

__all__ = [
    "DocumentError",
    "QAItem",
    "QuestionFormatError",
    "SpecError",
    "answer_covered",
    "load_documents",
    "load_qa",
    "normalize_for_match",
    "summarize_runs",
]
