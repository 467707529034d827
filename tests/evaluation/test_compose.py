"""The comparison harness opens a Milvus layout index once per pipeline, whatever the number of
k values, and closes every Milvus client it opens."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from advrag_testing import HashEmbedding
from evaluation._corpus import write_corpus

from llama_index_ext_advrag.evaluation.session import CompareOptions, run_compare
from llama_index_ext_advrag.milvus import ReconnectingClient

pytestmark = pytest.mark.milvus_lite


class ClientCounter:
    """Every pack Milvus client (``ReconnectingClient``: from ``open_client`` and around each
    vector store's client) opened and closed while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.opened: list[Any] = []
        self.closed: set[int] = set()
        init, close = ReconnectingClient.__init__, ReconnectingClient.close

        def counting_init(opened: Any, *args: Any, **kwargs: Any) -> None:
            init(opened, *args, **kwargs)
            self.opened.append(opened)

        def counting_close(closing: Any) -> None:
            self.closed.add(id(closing))
            close(closing)

        monkeypatch.setattr(ReconnectingClient, "__init__", counting_init)
        monkeypatch.setattr(ReconnectingClient, "close", counting_close)

    def still_open(self) -> int:
        return sum(id(client) not in self.closed for client in self.opened)

    def reset(self) -> None:
        self.opened.clear()
        self.closed.clear()


def test_layout_indexes_open_once_for_every_k_and_every_client_is_closed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs, qa = write_corpus(tmp_path)
    counter = ClientCounter(monkeypatch)

    def compare(ks: list[int]) -> tuple[int, Any]:
        counter.reset()
        options = CompareOptions(
            docs=[str(docs)], questions=str(qa), pipelines=["auto-merging", "two-layer"],
            uri=str(tmp_path / "m.db"), out=str(tmp_path / "report"),
            state_dir=str(tmp_path / "s"), k=ks[0], ks=ks,
            embed_model=HashEmbedding(dim=64), use_llm=False, show_progress=False,
        )  # fmt: skip
        run, _ = run_compare(options)
        assert {s.k for s in run.summaries} == set(ks)
        assert counter.still_open() == 0, "a Milvus client was left open"
        return len(counter.opened), run

    compare([1, 2])  # builds both indexes
    one_k, run = compare([1])
    assert run.ingest and all(record.reused for record in run.ingest)
    many_k, run = compare([1, 2, 3, 4, 6])
    assert all(record.reused for record in run.ingest)
    assert one_k > 0
    assert many_k == one_k  # no index is reopened per k
