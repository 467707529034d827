"""The tutorial notebooks in git are exactly what their sources build, without outputs.

``make test`` executes them (``pytest --nbmake``); this checks the files themselves.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SOURCES = sorted((NOTEBOOKS / "src").glob("*.py"))


def load_builder():
    spec = importlib.util.spec_from_file_location(
        "build_notebooks", NOTEBOOKS / "build_notebooks.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_source_has_its_notebook_and_back() -> None:
    assert len(SOURCES) >= 6
    built = {p.stem for p in NOTEBOOKS.glob("*.ipynb")}
    assert built == {p.stem for p in SOURCES}


@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.stem)
def test_notebook_matches_its_source_and_has_no_outputs(source: Path) -> None:
    notebook_path = NOTEBOOKS / f"{source.stem}.ipynb"
    text = notebook_path.read_text(encoding="utf-8")
    assert text == load_builder().render(source), "run python notebooks/build_notebooks.py"
    cells = json.loads(text)["cells"]
    code = [c for c in cells if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert cells[0]["cell_type"] == "markdown" and "".join(cells[0]["source"]).startswith("# ")


def test_split_cells() -> None:
    cells = load_builder().split_cells("# %% [markdown]\n# # Title\n#\n# text\n\n# %%\nx = 1\n")
    assert cells == [("markdown", "# Title\n\ntext"), ("code", "x = 1")]
