"""Fixtures of the Milvus-layer tests: an open client that cleans up, and a child process for
restart tests."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

from llama_index_ext_advrag.milvus import open_client

RESTART_CHILD = Path(__file__).with_name("restart_child.py")


@pytest.fixture
def client(milvus_uri: str, collection_name: str) -> Iterator:
    """A client on the test's backend; the test's collection is dropped afterwards."""
    milvus = open_client(milvus_uri)
    yield milvus
    if milvus.has_collection(collection_name):
        milvus.drop_collection(collection_name)
    milvus.close()


@pytest.fixture(scope="session")
def child_module() -> ModuleType:
    """``restart_child.py`` imported under a unique name (its vectors and nodes)."""
    spec = importlib.util.spec_from_file_location("advrag_milvus_restart_child", RESTART_CHILD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_child() -> Callable[..., str]:
    """Run ``restart_child.py`` with arguments in a fresh interpreter; return its stdout."""

    def run(*args: str) -> str:
        completed = subprocess.run(
            [sys.executable, str(RESTART_CHILD), *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert completed.returncode == 0, completed.stderr[-3000:]
        return completed.stdout

    return run
