"""MemoEmbedding: each distinct text is embedded once per run, in one length-ordered pass."""

from __future__ import annotations

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_ext_advrag.evaluation.ingest import MemoEmbedding


class RecordingEmbedding(BaseEmbedding):
    """A vector per text from its length and first letter; records each model call."""

    _calls: list[list[str]] = PrivateAttr(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "RecordingEmbedding"

    @property
    def calls(self) -> list[list[str]]:
        return self._calls

    def _vector(self, text: str) -> list[float]:
        return [float(len(text)), float(ord(text[0]) if text else 0)]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        self._calls.append(list(texts))
        return [self._vector(t) for t in texts]


def test_a_batch_call_embeds_the_new_texts_once_sorted_by_length_across_model_batches() -> None:
    inner = RecordingEmbedding(model_name="rec", embed_batch_size=3)
    memo = MemoEmbedding(inner)
    texts = ["ccccc", "a", "dddddddd", "bb", "a", "eeeeeeeeeeeeeeee", "fff"]

    vectors = memo.get_text_embedding_batch(texts)

    assert vectors == [inner._vector(t) for t in texts]  # caller's order, duplicates included
    sent = [t for call in inner.calls for t in call]
    assert sent == sorted(set(texts), key=len)  # one global order, not sorted per batch of 3
    assert [len(call) for call in inner.calls] == [3, 3]  # the inner model's own batch size
    assert memo.embedded == 6


def test_texts_seen_before_are_not_embedded_again_and_only_new_ones_are_counted() -> None:
    inner = RecordingEmbedding(model_name="rec", embed_batch_size=64)
    memo = MemoEmbedding(inner)
    memo.get_text_embedding_batch(["one sentence", "two sentences"])
    inner.calls.clear()

    again = memo.get_text_embedding_batch(["two sentences", "a third, new one", "one sentence"])

    assert inner.calls == [["a third, new one"]]
    assert again[1] == inner._vector("a third, new one")
    assert memo.embedded == 3
    assert memo.get_text_embedding("one sentence") == inner._vector("one sentence")
    assert inner.calls == [["a third, new one"]]


class QueryCounting(RecordingEmbedding):
    """Counts the queries sent to the model; a query's vector differs from the passage's."""

    _queries: list[str] = PrivateAttr(default_factory=list)

    def _get_query_embedding(self, query: str) -> list[float]:
        self._queries.append(query)
        return [-x for x in self._vector(query)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def test_a_query_is_embedded_once_per_run_apart_from_the_same_text_as_a_passage() -> None:
    inner = QueryCounting(model_name="rec")
    memo = MemoEmbedding(inner)
    first = memo.get_query_embedding("what?")
    first.append(99.0)  # a caller changing its list does not change the remembered vector
    assert memo.get_query_embedding("what?") == [-5.0, -119.0]
    assert memo.get_text_embedding("what?") == [5.0, 119.0]  # the passage: its own vector
    assert inner._queries == ["what?"]  # the second query call was answered from memory
    assert memo.embedded == 1 and inner.calls == [["what?"]]


async def test_an_async_query_is_embedded_once_too() -> None:
    inner = QueryCounting(model_name="rec")
    memo = MemoEmbedding(inner)
    assert await memo.aget_query_embedding("why?") == [-4.0, -119.0]
    assert await memo.aget_query_embedding("why?") == [-4.0, -119.0]
    assert memo.get_query_embedding("why?") == [-4.0, -119.0]
    assert inner._queries == ["why?"]


def test_the_base_class_events_still_fire_for_every_text() -> None:
    from llama_index.core.callbacks import CallbackManager, CBEventType, LlamaDebugHandler

    handler = LlamaDebugHandler()
    inner = RecordingEmbedding(model_name="rec")
    memo = MemoEmbedding(inner, callback_manager=CallbackManager([handler]))
    memo.get_text_embedding_batch(["x", "yy", "x"])
    pairs = handler.get_event_pairs(CBEventType.EMBEDDING)
    assert pairs  # the memo answers through BaseEmbedding's batching, which reports events
