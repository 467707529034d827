"""Token counting with LlamaIndex's tokenizer (bundled tiktoken files, no downloads)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import lru_cache

logger = logging.getLogger(__name__)


@lru_cache(maxsize=1)
def _tokenizer() -> Callable[[str], list]:
    """Return LlamaIndex's global tokenizer, resolved on first use and then reused.

    ``get_tokenizer`` points tiktoken at the encodings bundled with llama-index-core, so no
    network access is needed. A tokenizer installed later with ``set_global_tokenizer`` is not
    picked up by :func:`count_tokens` until ``_tokenizer.cache_clear()`` is called.
    """
    from llama_index.core.utils import get_tokenizer

    return get_tokenizer()


def count_tokens(text: str) -> int:
    """Count the tokens of ``text`` with LlamaIndex's tokenizer.

    Special-token strings such as ``"<|endoftext|>"`` are counted, not rejected.

    Args:
        text: Any text.

    Returns:
        int: Number of tokens; 0 for the empty string.

    Example:
        >>> count_tokens("hello world")
        2
    """
    if not text:
        return 0
    return len(_tokenizer()(text))


FIRST_PREFIX_PROBE = 2048  # characters; 512 model tokens are ~1,800 English or ~650 Chinese ones


def longest_prefix_within(
    text: str, count: Callable[[str], int], max_tokens: int, first_probe: int = FIRST_PREFIX_PROBE
) -> str:
    """The longest prefix of ``text`` that ``count`` (a model's own tokenizer) puts at or under
    ``max_tokens``: ``text`` itself when it fits.

    The prefix is found by doubling from ``first_probe`` characters, then bisecting, so only
    prefixes up to twice the answer's length are tokenized (a 5 MB text costs a few probes of
    a few KB, not a tokenization of 5 MB). The returned prefix was itself counted, so it holds
    at most ``max_tokens`` tokens even where a tokenizer is not monotone in the prefix length.

    Raises:
        ValueError: even the empty text counts more than ``max_tokens`` (a limit below the
            tokens a model adds to every input).

    Example:
        >>> longest_prefix_within("one two three four", lambda s: len(s.split()), 2, 4)
        'one two '
    """
    probe, fits = min(len(text), first_probe), 0
    while count(text[:probe]) <= max_tokens:
        if probe == len(text):
            return text
        fits, probe = probe, min(len(text), probe * 2)
    too_long = probe
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if count(text[:middle]) <= max_tokens:
            fits = middle
        else:
            too_long = middle
    if fits == 0 and count("") > max_tokens:
        raise ValueError(f"max_tokens {max_tokens} is below the tokens of an empty text")
    return text[:fits]
