"""The usage examples in the node parser docstrings run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["planning", "hierarchical", "sliding_window"])
def test_docstring_examples(module):
    imported = importlib.import_module(f"llama_index_ext_advrag.node_parser.{module}")
    result = doctest.testmod(imported, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
