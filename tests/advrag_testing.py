"""Test doubles shared by the test suite: a scripted LLM, a deterministic fake embedding, and
collectors of instrumentation events and spans."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.base.llms.types import (
    CompletionResponse,
    CompletionResponseGen,
    LLMMetadata,
)
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events import BaseEvent
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index.core.llms.callbacks import llm_completion_callback
from llama_index.core.llms.custom import CustomLLM

from llama_index_ext_advrag.events import AdvragEvent


class ScriptedLLM(CustomLLM):
    """An LLM whose answers are scripted: a list consumed in order (the last one repeats) or a
    function of the prompt. Every prompt it receives is kept in ``prompts``."""

    responses: list[str] = Field(default_factory=list)
    _fn: Callable[[str], str] | None = PrivateAttr(default=None)
    _prompts: list[str] = PrivateAttr(default_factory=list)

    def __init__(self, responses: Sequence[str] | Callable[[str], str] = (), **kwargs: Any) -> None:
        if callable(responses):
            super().__init__(responses=[], **kwargs)
            self._fn = responses
        else:
            super().__init__(responses=list(responses), **kwargs)

    @property
    def prompts(self) -> list[str]:
        return self._prompts

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", context_window=8192, num_output=256)

    def _answer(self, prompt: str) -> str:
        self._prompts.append(prompt)
        if self._fn is not None:
            return self._fn(prompt)
        if not self.responses:
            return ""
        index = min(len(self._prompts) - 1, len(self.responses) - 1)
        return self.responses[index]

    @llm_completion_callback()
    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._answer(prompt))

    @llm_completion_callback()
    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponseGen:
        text = self._answer(prompt)

        def gen() -> CompletionResponseGen:
            yield CompletionResponse(text=text, delta=text)

        return gen()


_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedding(BaseEmbedding):
    """Deterministic bag-of-words embedding: texts sharing words are similar. No model, no I/O."""

    dim: int = 64

    @classmethod
    def class_name(cls) -> str:
        return "HashEmbedding"

    def _vector(self, text: str) -> list[float]:
        vec = np.zeros(self.dim, dtype=np.float64)
        for word in _WORD.findall(text.lower()):
            tokens = [word] if word.isascii() else list(word)
            for token in tokens:
                digest = hashlib.md5(token.encode("utf-8")).digest()
                vec[int.from_bytes(digest[:4], "little") % self.dim] += 1.0
        norm = np.linalg.norm(vec)
        if norm == 0:
            vec[0] = 1.0
            norm = 1.0
        return (vec / norm).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class EventCollector(BaseEventHandler):
    """Keeps the pack's instrumentation events (attach it to the root dispatcher)."""

    events: list[Any] = Field(default_factory=list)

    @classmethod
    def class_name(cls) -> str:
        return "EventCollector"

    def handle(self, event: BaseEvent, **kwargs: Any) -> None:
        if isinstance(event, AdvragEvent):
            self.events.append(event)


@contextmanager
def instrumented() -> Iterator[tuple[list[Any], SimpleSpanHandler]]:
    """The pack's events and every span (``SimpleSpanHandler``) of the calls made inside."""
    root = get_dispatcher()
    events, spans = EventCollector(), SimpleSpanHandler()
    root.add_event_handler(events)
    root.add_span_handler(spans)
    try:
        yield events.events, spans
    finally:
        root.event_handlers.remove(events)
        root.span_handlers.remove(spans)


def span_names(spans: SimpleSpanHandler) -> list[str]:
    """``Class.method`` of every completed span (span ids are ``Class.method-<uuid4>``)."""
    return [span.id_.rsplit("-", 5)[0] for span in spans.completed_spans]


def require_full_text(uri: str) -> None:
    """Skip, naming the detected version, on a Milvus backend without full-text search."""
    import pytest

    from llama_index_ext_advrag.milvus import open_client
    from llama_index_ext_advrag.milvus.full_text import backend_support

    client = open_client(uri)
    try:
        support = backend_support(str(client.get_server_version()))
    finally:
        client.close()
    if not support.supported:
        pytest.skip(support.reason)


def self_rag_reply(prompt: str) -> str:
    """A scripted LLM's replies for ``SelfRAGQueryEngine``: retrieve, the answer fully
    supported and rated 5, and "Every 15 minutes." for anything else (the generation)."""
    if "Does it need documents?" in prompt:
        return "yes"
    if "Support:" in prompt:
        return "fully"
    if "Rating:" in prompt:
        return "5"
    return "Every 15 minutes."
