"""Token counting with LlamaIndex's bundled tokenizer."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.utils import get_tokenizer

from llama_index_ext_advrag.text import count_tokens, longest_prefix_within


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


# --- longest_prefix_within: the cut at a model's token limit --------------------------------------


def count_words(text: str) -> int:
    return len(text.split())


def count_calls(counter: list[int]):
    def count(text: str) -> int:
        counter.append(len(text))
        return count_words(text)

    return count


def test_a_text_that_fits_is_returned_whole_after_one_count() -> None:
    probes: list[int] = []
    assert longest_prefix_within("a b c", count_calls(probes), 3) == "a b c"
    assert probes == [5]


def test_the_cut_is_the_longest_prefix_within_the_limit() -> None:
    text = "one two three four five"
    for limit in range(0, 6):
        prefix = longest_prefix_within(text, count_words, limit, first_probe=2)
        assert count_words(prefix) <= limit
        assert prefix == text or count_words(text[: len(prefix) + 1]) > limit


def test_a_huge_text_is_never_counted_whole() -> None:
    text = "word " * 1_000_000  # 5 MB
    probes: list[int] = []
    prefix = longest_prefix_within(text, count_calls(probes), 512)
    assert count_words(prefix) == 512 and text.startswith(prefix)
    assert max(probes) <= 2 * len(prefix) + 4096  # only prefixes about the answer's size
    assert len(probes) <= 30


def test_a_limit_below_the_empty_text_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens 1"):
        longest_prefix_within("abc", lambda s: len(s) + 2, 1)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=st.sampled_from("ab c"), max_size=300),
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=1, max_value=64),
)
def test_the_prefix_fits_even_for_a_tokenizer_that_is_not_monotone(
    text: str, limit: int, first_probe: int
) -> None:
    # "ab" counts as one token, "a" and "b" alone as two: adding a letter can lower the count.
    def count(s: str) -> int:
        return len(s.replace("ab", "X").replace(" ", ""))

    prefix = longest_prefix_within(text, count, limit, first_probe)
    assert text.startswith(prefix) and count(prefix) <= limit
    assert prefix == text or count(text[: len(prefix) + 1]) > limit
