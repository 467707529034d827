"""The second hop's calls (retrievers/_hop_calls.py) on their own: which embedding model is found,
one batch call or one call per query (sync and async), and the bounded gather (its limit, an
error as an outcome, cancellation passed on). Kills the module's mutants that the retriever's
tests (test_second_hop.py) leave."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag.retrievers._hop_calls import (
    aembed_queries,
    bounded_gather,
    embed_queries,
    find_embed_model,
)


class Holder:
    def __init__(self, model: Any = None, legs: tuple = ()) -> None:
        self._embed_model = model
        self.legs = legs


class CountingEmbedding(HashEmbedding):
    """Records ``("batch", n)`` per batch call and ``("one", text)`` per single call."""

    def model_post_init(self, context: Any) -> None:
        super().model_post_init(context)
        object.__setattr__(self, "log", [])

    def _get_query_embedding(self, query: str) -> list[float]:
        self.log.append(("one", query))
        return super()._get_query_embedding(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        self.log.append(("one", query))
        return super()._get_query_embedding(query)


class NoBatch:
    """An embedding without batch methods: one call per query."""

    def __init__(self) -> None:
        self.log: list[str] = []

    def get_query_embedding(self, query: str) -> list[float]:
        self.log.append(query)
        return [float(len(query))]

    async def aget_query_embedding(self, query: str) -> list[float]:
        self.log.append(query)
        return [float(len(query))]


def test_the_embedding_model_is_found_on_the_retriever_or_a_leg() -> None:
    own, legs = HashEmbedding(), HashEmbedding()
    assert find_embed_model(Holder(own, (Holder(legs),))) is own
    assert find_embed_model(Holder(None, (Holder("not a model"), Holder(legs)))) is legs
    assert find_embed_model(Holder("not a model")) is None
    assert find_embed_model(object()) is None  # no attribute at all


def test_query_embeddings_come_in_one_batch_when_the_model_offers_it() -> None:
    model = CountingEmbedding()
    expected = [model.get_query_embedding(q) for q in ("a b", "c")]
    model.log.clear()
    assert embed_queries(model, ("a b", "c")) == expected
    assert [kind for kind, _ in model.log] == ["one", "one"]  # core's batch: one per text
    plain = NoBatch()
    assert embed_queries(plain, ["x", "yy"]) == [[1.0], [2.0]]
    assert plain.log == ["x", "yy"]


def test_async_query_embeddings_match_the_sync_ones() -> None:
    model = CountingEmbedding()
    assert asyncio.run(aembed_queries(model, ("a b", "c"))) == embed_queries(model, ["a b", "c"])
    plain = NoBatch()
    assert asyncio.run(aembed_queries(plain, ("x", "yy"))) == [[1.0], [2.0]]
    assert plain.log == ["x", "yy"]


def test_a_batch_method_is_used_whole() -> None:
    class Batching(NoBatch):
        def get_query_embedding_batch(self, queries: list[str]) -> list[list[float]]:
            assert isinstance(queries, list)
            self.log.append(f"batch of {len(queries)}")
            return [[0.5] for _ in queries]

        async def aget_query_embedding_batch(self, queries: list[str]) -> list[list[float]]:
            assert isinstance(queries, list)
            self.log.append(f"async batch of {len(queries)}")
            return [[0.5] for _ in queries]

    model = Batching()
    assert embed_queries(model, ("a", "b")) == [[0.5], [0.5]]
    assert asyncio.run(aembed_queries(model, ("a", "b", "c"))) == [[0.5]] * 3
    assert model.log == ["batch of 2", "async batch of 3"]


def _node(text: str) -> NodeWithScore:
    return NodeWithScore(node=TextNode(text=text, id_=text), score=1.0)


def test_the_gather_keeps_order_bounds_concurrency_and_returns_errors() -> None:
    running, peak = 0, 0

    def call(text: str, fail: bool = False) -> Any:
        async def go() -> list[NodeWithScore]:
            nonlocal running, peak
            running += 1
            peak = max(peak, running)
            await asyncio.sleep(0.01)
            running -= 1
            if fail:
                raise ValueError(f"leg {text} failed")
            return [_node(text)]

        return go

    calls = [call("a"), call("b", fail=True), call("c"), call("d"), call("e")]
    outcomes = asyncio.run(bounded_gather(calls, 2))
    assert peak == 2
    assert [o[0].node.node_id for o in outcomes if isinstance(o, list)] == ["a", "c", "d", "e"]
    assert isinstance(outcomes[1], ValueError) and str(outcomes[1]) == "leg b failed"
    assert all(isinstance(o, list) for i, o in enumerate(outcomes) if i != 1)


def test_the_gather_passes_cancellation_on() -> None:
    async def cancelled() -> list[NodeWithScore]:
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(bounded_gather([cancelled], 1))
