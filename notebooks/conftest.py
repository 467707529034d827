"""The tutorial notebooks run as tests (``pytest --nbmake``, part of ``make test``).

Each notebook runs in its own Jupyter kernel, top to bottom, offline: Milvus Lite files in a
temporary folder, the packaged embedding model, no LLM unless ``OPENAI_API_KEY`` is set. They
belong to the ``milvus_lite`` tier (real local services, no network) and carry a ``notebook``
marker, so ``-m "not notebook"`` leaves them out of a quick run.
"""

from __future__ import annotations

import pytest


def pytest_itemcollected(item: pytest.Item) -> None:
    if item.path.suffix == ".ipynb":
        item.add_marker(pytest.mark.milvus_lite)
        item.add_marker(pytest.mark.notebook)
