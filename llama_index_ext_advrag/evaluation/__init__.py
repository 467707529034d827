"""Evaluation: answer-coverage metrics, document and question loaders, pipeline comparison."""

from llama_index_ext_advrag.evaluation.compare import answer_groups_covered
from llama_index_ext_advrag.evaluation.compose import SpecError
from llama_index_ext_advrag.evaluation.metrics import answer_covered, normalize_for_match
from llama_index_ext_advrag.evaluation.questions import (
    Question,
    QuestionFormatError,
    load_questions,
)
from llama_index_ext_advrag.evaluation.sources import DocumentError, load_corpus

__all__ = [
    "DocumentError",
    "Question",
    "QuestionFormatError",
    "SpecError",
    "answer_covered",
    "answer_groups_covered",
    "load_corpus",
    "load_questions",
    "normalize_for_match",
]
