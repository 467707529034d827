"""The examples in the docstrings of the floor modules run and give what they show."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize("module", ["layout", "similarity", "_enums", "text.charsets"])
def test_docstring_examples(module):
    imported = importlib.import_module(f"llama_index_ext_advrag.{module}")
    result = doctest.testmod(imported, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0
