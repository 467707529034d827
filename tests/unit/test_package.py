"""The package root re-exports the public names lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import llama_index_ext_advrag as pkg

LAZY_NAMES = [name for name in pkg.__all__ if name not in ("TRACE_KEY", "__version__")]


def test_root_import_does_not_import_experimental() -> None:
    code = "import sys, llama_index_ext_advrag; print('llama_index.experimental' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", LAZY_NAMES)
def test_public_names_resolve(name: str) -> None:
    assert getattr(pkg, name) is not None
    assert name in pkg.__all__


def test_unknown_name_raises() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = pkg.NoSuchThing  # type: ignore[attr-defined]


def test_trace_key() -> None:
    assert pkg.TRACE_KEY == "advrag_trace"


def _pyproject() -> dict:
    from pathlib import Path

    import tomllib

    return tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())


def test_llamahub_class_authors_name_every_public_component() -> None:
    from llama_index.core.schema import BaseComponent

    components = {
        name
        for name in LAZY_NAMES
        if isinstance(getattr(pkg, name), type) and issubclass(getattr(pkg, name), BaseComponent)
    }
    retrievers_and_engines = {
        name
        for name in LAZY_NAMES
        if name.endswith(("Retriever", "QueryEngine", "Postprocessor", "NodeParser"))
    }
    authors = _pyproject()["tool"]["llamahub"]["class_authors"]
    assert components | retrievers_and_engines <= set(authors)
    assert set(authors) <= set(LAZY_NAMES), "class_authors names a class the root does not export"


def test_one_version_source_and_the_tested_python() -> None:
    import re

    pyproject = _pyproject()
    project = pyproject["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
    assert pyproject["tool"]["hatch"]["version"]["path"] == "llama_index_ext_advrag/__init__.py"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pkg.__version__)
    claimed = sorted(
        tuple(int(part) for part in c.rsplit(" :: ", 1)[1].split("."))
        for c in project["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert sys.version_info[:2] in claimed  # the tests run on a version the package claims
    assert project["requires-python"] == ">={}.{}".format(*claimed[0])


def test_licence_metadata() -> None:
    project = _pyproject()["project"]
    assert "License :: OSI Approved :: MIT License" in project["classifiers"]
    assert project["license-files"] == ["LICENSE"]
