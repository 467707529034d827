"""The embedding models' one input step (``CleanInputEmbedding``), sync and async: a non-string
input is refused naming its type (and its position in a batch), lone surrogates reach the model
as U+FFFD with one warning naming the model and the count, a clean call warns nothing, the
batch options reach core, and each public call opens one span of its own, not two (kills the
mutants of embeddings/inputs.py; no model needed)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from advrag_testing import instrumented, span_names

from llama_index_ext_advrag.embeddings.inputs import CleanInputEmbedding


class Recording(CleanInputEmbedding):
    """Embeds a text as [its length]; remembers what the model was given."""

    seen: list[str] = []

    @classmethod
    def class_name(cls) -> str:
        return "Recording"

    def _vector(self, text: str) -> list[float]:
        self.seen.append(text)
        return [float(len(text)), 1.0]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


def call(model: Recording, method: str, value: Any, mode: str, **kwargs: Any) -> Any:
    if mode == "async":
        return asyncio.run(getattr(model, "a" + method)(value, **kwargs))
    return getattr(model, method)(value, **kwargs)


MODES = ["sync", "async"]
WARNING = (
    "Recording: the input holds {} lone surrogate code points, which no model can encode; "
    "replaced with U+FFFD"
)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("method", "name"), [("get_query_embedding", "query"), ("get_text_embedding", "text")]
)
def test_single_inputs_are_checked_and_cleaned(
    mode: str, method: str, name: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = Recording(seen=[])
    with pytest.raises(TypeError) as error:
        call(model, method, None, mode)
    assert str(error.value) == f"{name} must be a str, got NoneType"
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.embeddings.inputs"):
        assert call(model, method, "a\ud800b\udc00", mode) == [4.0, 1.0]
        assert model.seen == ["a\ufffdb\ufffd"]
        assert [r.getMessage() for r in caplog.records] == [WARNING.format(2)]
        caplog.clear()
        call(model, method, "clean", mode)
        assert caplog.records == []


@pytest.mark.parametrize("mode", MODES)
def test_batches_are_checked_cleaned_and_keep_their_options(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    model = Recording(seen=[], embed_batch_size=1)
    method = "get_text_embedding_batch"
    with pytest.raises(TypeError) as error:
        call(model, method, ["ok", 5], mode)
    assert str(error.value) == "texts[1] must be a str, got int"
    with pytest.raises(TypeError, match="got a single str; wrap it in a list"):
        call(model, method, "one text", mode)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.embeddings.inputs"):
        vectors = call(model, method, ["\ud800", "ab", "c\udfff"], mode, show_progress=False)
    assert vectors == [[1.0, 1.0], [2.0, 1.0], [2.0, 1.0]]
    assert model.seen == ["\ufffd", "ab", "c\ufffd"]
    assert [r.getMessage() for r in caplog.records] == [WARNING.format(2)]


@pytest.mark.parametrize("mode", MODES)
def test_batch_options_reach_core(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from llama_index.core.base.embeddings import base

    given: dict[str, Any] = {}
    original = "aget_text_embedding_batch" if mode == "async" else "get_text_embedding_batch"
    core = base.BaseEmbedding.__dict__[original]
    core = getattr(core, "__wrapped__", core)

    def spy(self: Any, texts: list[str], show_progress: bool = False, **kwargs: Any) -> Any:
        given.update(texts=texts, show_progress=show_progress, **kwargs)
        return core(self, texts, False)

    monkeypatch.setattr(base.BaseEmbedding, original, spy)
    call(Recording(seen=[]), "get_text_embedding_batch", ["x"], mode, show_progress=True, k=1)
    assert given == {"texts": ["x"], "show_progress": True, "k": 1}
    given.clear()
    call(Recording(seen=[]), "get_text_embedding_batch", ["y"], mode)
    assert given == {"texts": ["y"], "show_progress": False}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("method", "value"),
    [
        ("get_query_embedding", "q"),
        ("get_text_embedding", "t"),
        ("get_text_embedding_batch", ["t", "u"]),
    ],
)
def test_each_call_opens_its_span_once(mode: str, method: str, value: Any) -> None:
    with instrumented() as (_, spans):
        call(Recording(seen=[]), method, value, mode)
    name = f"{'a' if mode == 'async' else ''}{method}"
    public = [s for s in span_names(spans) if s.split(".", 1)[1] == name]
    assert public == [f"Recording.{name}"], span_names(spans)  # not core's span again
