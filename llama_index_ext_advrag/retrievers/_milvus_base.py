"""What the retrievers over a recorded Milvus layout share: reopening, query embedding, dicts.

:class:`HierarchicalAutoMergingRetriever` and :class:`TwoLayerMilvusRetriever` keep their
collections on a Milvus uri and a layout record (collection names, embedding model and dim) in
the registry, so a new process reopens them from the uri alone. This base holds that plumbing
once; each subclass keeps its own stores, config and retrieval logic.
"""

from __future__ import annotations

import logging
from typing import Any, Generic, TypeVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.callbacks.base import CallbackManager

from llama_index_ext_advrag.milvus import AsyncLoopBinding
from llama_index_ext_advrag.models import resolve_embed_model

logger = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT", bound=BaseModel)
RetrieverT = TypeVar("RetrieverT", bound="MilvusLayoutRetriever[Any]")


class MilvusLayoutRetriever(BaseRetriever, Generic[ConfigT]):
    """Base of the retrievers whose index is described by a layout record in Milvus.

    Subclasses set ``_config`` (a pydantic model of query settings) before calling
    :meth:`_init_layout`, implement ``from_uri`` and :meth:`_collection_name`.
    """

    _config: ConfigT

    def _init_layout(
        self,
        embed_model: BaseEmbedding | None,
        layout: dict[str, Any] | None,
        uri: str | None,
        token: str,
        callback_manager: CallbackManager | None,
        verbose: bool,
    ) -> None:
        self._embed_model = embed_model
        self._layout = dict(layout or {})
        self._uri = uri
        self._loop_binding = AsyncLoopBinding(uri, token)
        BaseRetriever.__init__(self, callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__

    @property
    def config(self) -> ConfigT:
        return self._config

    @property
    def layout(self) -> dict[str, Any]:
        """The recorded layout: collection names, embedding dim and model, build settings."""
        return dict(self._layout)

    def _collection_name(self) -> str:
        """The name :meth:`from_uri` takes to reopen this index."""
        raise NotImplementedError

    @classmethod
    def from_uri(
        cls: type[RetrieverT],
        uri: str,
        embed_model: BaseEmbedding | None = None,
        **options: Any,
    ) -> RetrieverT:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """Where the index lives and the query settings (no model, no client, no token)."""
        return {
            "class_name": self.class_name(),
            "uri": self._uri,
            "collection_name": self._collection_name(),
            **self._config.model_dump(mode="json"),
        }

    @classmethod
    def from_dict(
        cls: type[RetrieverT],
        data: dict[str, Any],
        embed_model: BaseEmbedding | None = None,
        token: str = "",
    ) -> RetrieverT:
        """Reopen what :meth:`to_dict` describes.

        Raises:
            ValueError: ``data`` has no ``uri``.
        """
        if not data.get("uri"):
            raise ValueError(f"from_dict needs a 'uri', got {data.get('uri')!r}")
        options = {k: v for k, v in data.items() if k not in ("class_name", "uri")}
        return cls.from_uri(data["uri"], embed_model=embed_model, token=token, **options)

    def _embedder(self) -> BaseEmbedding:
        """The query embedding model, resolved at first use (never in ``__init__``)."""
        if self._embed_model is None:
            self._embed_model = resolve_embed_model(None)
        return self._embed_model

    def _check_dimensions(self, embedding: list[float]) -> None:
        """Raise ``ValueError`` when the query vector does not fit the index."""
        expected = self._layout.get("embed_dim")
        if expected is not None and len(embedding) != expected:
            raise ValueError(
                f"query embedding has {len(embedding)} dimensions but index "
                f"{self._collection_name()!r} was built with {expected} "
                f"(model {self._layout.get('embed_model')!r}); pass that embed_model"
            )


def warn_on_model_mismatch(
    layout: dict[str, Any], embed_model: BaseEmbedding | None, collection_name: str
) -> None:
    """Log when the query model is not the one the index was embedded with."""
    if embed_model is not None and embed_model.model_name != layout.get("embed_model"):
        logger.warning(
            "index %r was embedded with %r, querying with %r",
            collection_name,
            layout.get("embed_model"),
            embed_model.model_name,
        )


__all__ = ["MilvusLayoutRetriever", "warn_on_model_mismatch"]
