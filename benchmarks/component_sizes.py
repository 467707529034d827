"""Lines per component (issue 43, point 6), at any git revision, next to llama-index-core anchors.

A component is the table of files below; the figure is ``wc -l`` of each file (every line,
blank and comment lines included) read from git, so two revisions compare without a checkout::

    python benchmarks/component_sizes.py --rev 100f585 --rev HEAD

Files absent at a revision count 0 and are marked. The anchors are core's own files as
installed in the environment (whole file, as the issue counts them).
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "llama_index_ext_advrag"

COMPONENTS: dict[str, tuple[str, ...]] = {
    "CRAG": ("postprocessor/crag.py", "postprocessor/crag_io.py", "postprocessor/crag_refine.py"),
    "drift window": (
        "postprocessor/drift_window.py",
        "postprocessor/_window_session.py",
        "postprocessor/_growth.py",
        "postprocessor/_neighbours.py",
        "postprocessor/pieces.py",
    ),
    "drift window calibration": ("postprocessor/calibration.py",),
    "Self-RAG": (
        "query_engine/self_rag.py",
        "query_engine/self_rag_critique.py",
        "query_engine/self_rag_io.py",
    ),
}

ANCHORS: dict[str, tuple[str, str]] = {
    "MetadataReplacementPostProcessor": (
        "llama_index.core.postprocessor.metadata_replacement",
        "MetadataReplacementPostProcessor",
    ),
    "LLMRerank": ("llama_index.core.postprocessor.llm_rerank", "LLMRerank"),
    "QueryFusionRetriever": (
        "llama_index.core.retrievers.fusion_retriever",
        "QueryFusionRetriever",
    ),
}


def lines_at(rev: str, path: str) -> int | None:
    """Return the line count of ``path`` (package-relative) at ``rev``, or None if absent."""
    done = subprocess.run(
        ["git", "show", f"{rev}:{PACKAGE}/{path}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        return None
    return len(done.stdout.splitlines())


def anchor_lines(module: str, name: str) -> int | None:
    """Return the lines of the core file defining ``name`` in ``module``, or None if absent."""
    if importlib.util.find_spec(module.split(".")[0]) is None:
        return None
    found = importlib.import_module(module)
    source = inspect.getsourcefile(getattr(found, name))
    return None if source is None else len(Path(source).read_text().splitlines())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", action="append", help="git revision (repeatable); default HEAD")
    parser.add_argument("--files", action="store_true", help="also print each file")
    args = parser.parse_args()
    revs = args.rev or ["HEAD"]
    print(f"{'component':34s}" + "".join(f"{rev:>12s}" for rev in revs))
    for component, files in COMPONENTS.items():
        counts = [[lines_at(rev, path) for path in files] for rev in revs]
        totals = [sum(c or 0 for c in per_rev) for per_rev in counts]
        print(
            f"{component:34s}" + "".join(f"{t:>12d}" for t in totals) + f"   ({len(files)} files)"
        )
        if args.files:
            for index, path in enumerate(files):
                cells = ["-" if c[index] is None else str(c[index]) for c in counts]
                print(f"  {path:32s}" + "".join(f"{cell:>12s}" for cell in cells))
    print("anchors (llama-index-core files as installed):")
    for label, (module, name) in ANCHORS.items():
        found = anchor_lines(module, name)
        print(f"  {label:32s}{'absent' if found is None else found:>12}")


if __name__ == "__main__":
    main()
