"""A Question is answerable when it has answer groups and has evidence when it names gold
passages or documents (the only logic of evaluation/question.py; mutmut 3.8.1 does not mutate
properties, so this file is the module's selected test)."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.evaluation.question import Question

pytestmark = pytest.mark.unit


def test_answerable_and_evidence() -> None:
    bare = Question("q1", "What is it?")
    assert (bare.answerable, bare.has_evidence) == (False, False)
    assert Question("q2", "?", answer_groups=(("a",),)).answerable
    assert Question("q3", "?", evidence_texts=("passage",)).has_evidence
    assert Question("q4", "?", evidence_docs=("d1",)).has_evidence
    assert Question("q5", "?", extra={"x": 1}) == Question("q5", "?")  # extra is not compared
