"""Every public name has a docstring with an example, and the examples run and give what they
show.

Modules are the floors plus every module that defines a name exported from the package root.
The examples of the Milvus-backed retrievers build Milvus Lite files in the current folder, so
they run in the ``milvus_lite`` tier from a temporary folder; examples that need an optional
model (the cross-encoder, multilingual-e5) or a server are marked ``# doctest: +SKIP``.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
from pathlib import Path

import pytest

import llama_index_ext_advrag as pkg

FLOORS = ["layout", "similarity", "_enums", "_onnx", "text.charsets", "plan"]
LAZY_NAMES = [name for name in pkg.__all__ if name not in ("TRACE_KEY", "__version__")]
MILVUS_MODULES = {
    "llama_index_ext_advrag.retrievers.auto_merging",
    "llama_index_ext_advrag.retrievers.two_layer",
}
OPTIONS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS


def public_modules() -> list[str]:
    defining = {getattr(pkg, name).__module__ for name in LAZY_NAMES}
    return sorted(defining | {f"llama_index_ext_advrag.{m}" for m in FLOORS})


def examples_of(obj: object) -> int:
    finder = doctest.DocTestFinder(recurse=False)
    return sum(len(test.examples) for test in finder.find(obj, getattr(obj, "__name__", "obj")))


@pytest.mark.parametrize("name", sorted(LAZY_NAMES))
def test_every_public_name_has_a_docstring_with_an_example(name: str) -> None:
    obj = getattr(pkg, name)
    assert inspect.getdoc(obj), f"{name} has no docstring"
    assert examples_of(obj) > 0, f"{name}'s docstring has no >>> example"


def run_doctests(module_name: str) -> doctest.TestResults:
    return doctest.testmod(importlib.import_module(module_name), optionflags=OPTIONS)


@pytest.mark.parametrize("module", [m for m in public_modules() if m not in MILVUS_MODULES])
def test_docstring_examples(module: str) -> None:
    result = run_doctests(module)
    assert result.failed == 0


@pytest.mark.milvus_lite
@pytest.mark.parametrize("module", sorted(MILVUS_MODULES))
def test_milvus_docstring_examples(
    module: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the examples write ./rag.db and ./units.db
    result = run_doctests(module)
    assert result.attempted > 0
    assert result.failed == 0


def test_most_examples_run() -> None:
    """``+SKIP`` is for services and optional models only: most examples really run."""
    ran = skipped = 0
    for module_name in public_modules():
        module = importlib.import_module(module_name)
        for test in doctest.DocTestFinder().find(module):
            for example in test.examples:
                if example.options.get(doctest.SKIP):
                    skipped += 1
                else:
                    ran += 1
    assert ran > 4 * skipped, (ran, skipped)
