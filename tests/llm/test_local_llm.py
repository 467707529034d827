"""Local LLM tier: a real llama.cpp OpenAI-compatible server with Gemma 3 270M.

The model is a tiny base model; its answers are poor. These tests prove the transport (a real
completion and a real chat round trip through ``llama-index-llms-openai-like``), not quality.
"""

from __future__ import annotations

import pytest
from llama_index.core.llms import ChatMessage, MessageRole

pytestmark = pytest.mark.local_llm


def test_completion_round_trip(local_llm) -> None:
    response = local_llm.complete("The capital of France is")
    assert isinstance(response.text, str)
    assert response.text.strip(), "the server returned an empty completion"
    assert response.raw is not None  # a real HTTP reply was parsed


def test_chat_round_trip(local_llm) -> None:
    messages = [
        ChatMessage(role=MessageRole.SYSTEM, content="You answer in one short sentence."),
        ChatMessage(role=MessageRole.USER, content="Say hello to the user."),
    ]
    response = local_llm.chat(messages)
    assert response.message.role == MessageRole.ASSISTANT
    assert response.message.content and response.message.content.strip()


async def test_async_chat_round_trip(local_llm) -> None:
    response = await local_llm.acomplete("One, two, three,")
    assert response.text.strip()
