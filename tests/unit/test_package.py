"""The package root re-exports the public names lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import llama_index_ext_advrag as pkg


def test_root_import_does_not_import_experimental() -> None:
    code = "import sys, llama_index_ext_advrag; print('llama_index.experimental' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("name", sorted(pkg._EXPORTS))
def test_public_names_resolve(name: str) -> None:
    assert getattr(pkg, name) is not None
    assert name in pkg.__all__


def test_unknown_name_raises() -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = pkg.NoSuchThing  # type: ignore[attr-defined]


def test_trace_key() -> None:
    assert pkg.TRACE_KEY == "advrag_trace"
