"""Write ``notebooks/*.ipynb`` from the sources in ``notebooks/src/*.py``, without outputs.

A source is plain Python in the "percent" format: ``# %%`` starts a code cell and
``# %% [markdown]`` a Markdown cell whose lines start with ``# ``. Edit the source, then run
``python notebooks/build_notebooks.py``; ``tests/unit/test_notebooks.py`` checks that the
notebooks in git match their sources and carry no outputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
SOURCES = HERE / "src"
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


def split_cells(source: str) -> list[tuple[str, str]]:
    """Return ``(kind, text)`` per cell, kind ``"code"`` or ``"markdown"``."""
    cells: list[tuple[str, list[str]]] = []
    for line in source.splitlines():
        if line.startswith("# %%"):
            kind = "markdown" if "[markdown]" in line else "code"
            cells.append((kind, []))
        elif cells:
            kind, lines = cells[-1]
            if kind == "markdown":
                line = line[2:] if line.startswith("# ") else line.lstrip("#")
            lines.append(line)
    return [(kind, "\n".join(lines).strip("\n")) for kind, lines in cells]


def build_notebook(source: str) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = dict(KERNELSPEC)
    notebook.metadata["language_info"] = {"name": "python"}
    for number, (kind, text) in enumerate(split_cells(source)):
        make = nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell
        cell = make(text)
        cell["id"] = f"cell-{number:02d}"  # stable ids keep the files identical across builds
        notebook.cells.append(cell)
    nbformat.validate(notebook)
    return notebook


def render(source_path: Path) -> str:
    return nbformat.writes(build_notebook(source_path.read_text(encoding="utf-8"))) + "\n"


def main() -> int:
    for source_path in sorted(SOURCES.glob("*.py")):
        target = HERE / f"{source_path.stem}.ipynb"
        target.write_text(render(source_path), encoding="utf-8")
        print(f"wrote {target.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
