"""The usage examples in the judge and CRAG docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "module",
    [
        "judges.calibration",
        "judges.llm",
        "judges.routed",
        "postprocessor.crag",
        "postprocessor.crag_refine",
        "postprocessor.judge_rerank",
    ],
)
def test_docstring_examples(module: str) -> None:
    imported = importlib.import_module(f"llama_index_ext_advrag.{module}")
    result = doctest.testmod(imported, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
