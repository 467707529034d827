"""Which embedding models read only English, judged from the model's name.

Hybrid fusion scales down a dense leg on Chinese text only when its model cannot read Chinese,
and :func:`~llama_index_ext_advrag.models.decide_embed_model` warns when such a model meets a
mostly Chinese corpus. Both ask :func:`is_english_only`.
"""

from __future__ import annotations

import re
from typing import Any

# Checked first: a name with any of these reads Chinese (multilingual-e5-*, bge-m3, LaBSE,
# paraphrase-multilingual-*, bge-*-zh, text2vec-*-chinese, m3e, OpenAI's text-embedding-3).
MULTILINGUAL_PATTERNS = (
    r"multilingual",
    r"bge-m3",
    r"labse",
    r"xlm",
    r"-zh\b",
    r"\bzh-",
    r"chinese",
    r"m3e",
    r"text-embedding-3",
    r"jina-embeddings-v3",
    r"gte-multilingual",
)
# Then: known English-only families (all-MiniLM-*, all-mpnet-*, bge-*-en*, English e5-*-v2,
# gte-small/base/large, nomic-embed-text, msmarco-*, multi-qa-*).
ENGLISH_ONLY_PATTERNS = (
    r"minilm",
    r"mpnet",
    r"bge-[a-z]+-en",
    r"(^|/)e5-(small|base|large)",
    r"(^|/)gte-(small|base|large)",
    r"nomic-embed-text",
    r"msmarco",
    r"multi-qa",
)


def model_name_of(embed_model: Any) -> str:
    """The model name behind ``embed_model`` (a ``BaseEmbedding``, a wrapper exposing the
    wrapped model as ``inner``, or a name), lower-cased; ``""`` when it has none."""
    seen = 0
    while hasattr(embed_model, "inner") and seen < 10:  # unwrap caches and the like
        embed_model = embed_model.inner
        seen += 1
    name = embed_model if isinstance(embed_model, str) else getattr(embed_model, "model_name", "")
    return str(name or "").lower().replace("_", "-")


def is_english_only(embed_model: Any) -> bool:
    """Whether ``embed_model`` is known to read English only (so Chinese text is noise to it).

    Judged from the model name (a local folder's path counts, so the packaged
    all-MiniLM-L6-v2 is recognised): multilingual names (``multilingual``, ``bge-m3``,
    ``labse``, ``-zh``, ``chinese``, ...) are not English-only; known English families
    (``MiniLM``, ``mpnet``, ``bge-*-en``, English ``e5-*``, ...) are; an unknown name is not
    (nothing is muted on a guess). Wrappers with an ``inner`` model are looked through.

    Args:
        embed_model: a LlamaIndex ``BaseEmbedding``, a wrapper of one, or a model name.

    Example:
        >>> is_english_only("sentence-transformers/all-MiniLM-L6-v2")
        True
        >>> is_english_only("intfloat/multilingual-e5-small")
        False
        >>> is_english_only("BAAI/bge-m3")
        False
    """
    name = model_name_of(embed_model)
    if not name or any(re.search(p, name) for p in MULTILINGUAL_PATTERNS):
        return False
    return any(re.search(p, name) for p in ENGLISH_ONLY_PATTERNS)


__all__ = ["ENGLISH_ONLY_PATTERNS", "MULTILINGUAL_PATTERNS", "is_english_only", "model_name_of"]
