"""``plan.llm_completion``'s two routes, read back exactly (sync and async): a completion call
with the call's arguments, or for a chat model given a system message or arguments, ``chat()``
with [system, user] read back as a ``CompletionResponse`` (a chat model's ``complete()`` drops
log-probabilities). Kills the mutants of ``llm_completion`` and ``chat_as_completion`` that the
Self-RAG tests reach only through the engine."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LogProb,
    MessageRole,
)

from llama_index_ext_advrag.plan import (
    arun_call,
    chat_as_completion,
    llm_completion,
    plain_timeout,
    run_call,
)

LOGPROBS = [[LogProb(token="yes", logprob=-0.1, bytes=[])]]


class FakeLLM:
    """Records each call; a chat reply carries text, log-probabilities, raw and extra fields."""

    def __init__(self, chat_model: bool) -> None:
        self.metadata = SimpleNamespace(is_chat_model=chat_model)
        self.calls: list[tuple[str, Any, dict[str, Any]]] = []

    def _chat_reply(self) -> ChatResponse:
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content="chat answer"),
            logprobs=LOGPROBS,
            raw={"id": "r1"},
            additional_kwargs={"usage": 3},
        )

    def complete(self, prompt: str, **kwargs: Any) -> CompletionResponse:
        self.calls.append(("complete", prompt, kwargs))
        return CompletionResponse(text="completion answer")

    async def acomplete(self, prompt: str, **kwargs: Any) -> CompletionResponse:
        self.calls.append(("acomplete", prompt, kwargs))
        return CompletionResponse(text="completion answer")

    def chat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls.append(("chat", [(m.role, m.content) for m in messages], kwargs))
        return self._chat_reply()

    async def achat(self, messages: list[ChatMessage], **kwargs: Any) -> ChatResponse:
        self.calls.append(("achat", [(m.role, m.content) for m in messages], kwargs))
        return self._chat_reply()


def run(flavour: str, llm: FakeLLM, **kwargs: Any) -> Any:
    call = llm_completion(llm, "the prompt", 5.0, **kwargs)
    assert (call.timeout, call.what, call.error) == (5.0, "the LLM", plain_timeout)
    return run_call(call) if flavour == "sync" else asyncio.run(arun_call(call))


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_completion_model_gets_the_prompt_and_the_arguments(flavour: str) -> None:
    llm = FakeLLM(chat_model=False)
    result = run(flavour, llm, system="be brief", call_kwargs={"logprobs": True})
    assert result.text == "completion answer"
    name = "complete" if flavour == "sync" else "acomplete"
    assert llm.calls == [(name, "the prompt", {"logprobs": True})]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_chat_model_without_system_or_arguments_is_completed(flavour: str) -> None:
    llm = FakeLLM(chat_model=True)
    assert run(flavour, llm).text == "completion answer"
    assert llm.calls == [("complete" if flavour == "sync" else "acomplete", "the prompt", {})]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_chat_model_with_a_system_message_is_chatted(flavour: str) -> None:
    llm = FakeLLM(chat_model=True)
    result = run(flavour, llm, system="be brief", call_kwargs={"logprobs": True, "top": 2})
    assert llm.calls == [
        (
            "chat" if flavour == "sync" else "achat",
            [(MessageRole.SYSTEM, "be brief"), (MessageRole.USER, "the prompt")],
            {"logprobs": True, "top": 2},
        )
    ]
    assert isinstance(result, CompletionResponse)
    assert result.text == "chat answer" and result.logprobs == LOGPROBS
    assert result.raw == {"id": "r1"} and result.additional_kwargs == {"usage": 3}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_chat_model_with_arguments_only_gets_the_user_message(flavour: str) -> None:
    llm = FakeLLM(chat_model=True)
    assert run(flavour, llm, call_kwargs={"logprobs": True}).text == "chat answer"
    assert llm.calls == [
        (
            "chat" if flavour == "sync" else "achat",
            [(MessageRole.USER, "the prompt")],
            {"logprobs": True},
        )
    ]


def test_a_chat_reply_without_content_reads_as_empty_text() -> None:
    response = ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=None))
    result = chat_as_completion(response)
    assert result.text == "" and result.logprobs is None and result.additional_kwargs == {}


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_an_llm_without_metadata_is_completed(flavour: str) -> None:
    llm = FakeLLM(chat_model=True)
    del llm.metadata  # a plain object with complete()/chat(): not known to be a chat model
    assert run(flavour, llm, system="be brief").text == "completion answer"
    assert [name for name, _, _ in llm.calls] == ["complete" if flavour == "sync" else "acomplete"]


def test_a_zero_timeout_is_reported_as_zero_seconds() -> None:
    import time

    from llama_index_ext_advrag.plan import StepTimeoutError, run_within

    with pytest.raises(StepTimeoutError) as caught:
        run_within(lambda: time.sleep(0.3), 0.0, "the call")
    assert caught.value.seconds == 0.0
