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
