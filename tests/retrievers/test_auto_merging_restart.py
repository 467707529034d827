"""Restart test: an index built by one process is reopened by new processes on the same uri
and returns the same results (Milvus Lite file and Milvus server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from advrag_testing import HashEmbedding

from llama_index_ext_advrag.retrievers import HierarchicalAutoMergingRetriever

CHILD = Path(__file__).with_name("restart_child.py")


def run_child(*args: str) -> None:
    completed = subprocess.run(
        [sys.executable, str(CHILD), *args], capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]


def test_auto_merging_survives_restart(
    milvus_uri: str, collection_name: str, tmp_path: Path
) -> None:
    built, reopened = tmp_path / "built.json", tmp_path / "reopened.json"
    run_child("build", "auto_merging", milvus_uri, collection_name, str(built))
    run_child("open", "auto_merging", milvus_uri, collection_name, str(reopened))
    first = json.loads(built.read_text(encoding="utf-8"))
    second = json.loads(reopened.read_text(encoding="utf-8"))
    assert first == second
    here = HierarchicalAutoMergingRetriever.from_uri(
        milvus_uri, embed_model=HashEmbedding(dim=64), collection_name=collection_name,
        similarity_top_k=8,
    )  # fmt: skip
    for query, hits in first.items():
        assert [n.node.node_id for n in here.retrieve(query)] == [h["id"] for h in hits]
    assert all(first.values()), "every query returned nodes"
    merged = [r for hits in first.values() for r in hits if r["trace"]["auto_merging"]["merged"]]
    assert merged, "the reopened process merged parents it only had in Milvus"
