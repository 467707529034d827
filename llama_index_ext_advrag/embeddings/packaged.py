"""The packaged all-MiniLM-L6-v2 (``offline`` extra) behind the pack's input step.

A plain ``HuggingFaceEmbedding`` given ``None`` or a lone surrogate fails only after core's
retries (about 8 seconds), with an error that names neither the input nor its position.
"""

from __future__ import annotations

from llama_index.embeddings.huggingface import HuggingFaceEmbedding

from llama_index_ext_advrag.embeddings.inputs import CleanInputEmbedding


class PackagedHuggingFaceEmbedding(CleanInputEmbedding, HuggingFaceEmbedding):
    """``HuggingFaceEmbedding`` whose public methods take strings only and replace lone
    surrogates (see :class:`~llama_index_ext_advrag.embeddings.inputs.CleanInputEmbedding`).
    It computes the same vectors; the model truncates at its own ``max_length``."""

    @classmethod
    def class_name(cls) -> str:
        # The same vectors as HuggingFaceEmbedding: keep its name, so cache keys
        # (embedding_identity) and serialised configs stay valid.
        return "HuggingFaceEmbedding"


__all__ = ["PackagedHuggingFaceEmbedding"]
