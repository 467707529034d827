"""Token counting with LlamaIndex's bundled tokenizer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.utils import get_tokenizer

from llama_index_ext_advrag.text import count_tokens


def test_known_counts() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello world") == 2  # cl100k_base: "hello", " world"
    assert count_tokens("hello world hello world") == 4


def test_special_token_text_is_counted_not_rejected() -> None:
    assert count_tokens("<|endoftext|>") == 1


def test_chinese_text_is_counted() -> None:
    assert count_tokens("游戏也融入了佛教和道教的哲学元素。") > 5


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_matches_llama_index_tokenizer(text: str) -> None:
    assert count_tokens(text) == len(get_tokenizer()(text))
