"""What the retrievers over a recorded Milvus layout share: reopening, query embedding, dicts.

:class:`HierarchicalAutoMergingRetriever` and :class:`TwoLayerMilvusRetriever` keep their
collections on a Milvus uri and a layout record (collection names, embedding model and dim) in
the registry, so a new process reopens them from the uri alone. This base holds that plumbing
once (opening, building, ``to_dict``/``from_dict``, query embedding); each subclass keeps its
own stores, config and retrieval logic.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.callbacks.base import CallbackManager

from llama_index_ext_advrag.milvus import AsyncLoopBinding
from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.retrievers._config import ConfiguredRetriever

logger = logging.getLogger(__name__)

ConfigT = TypeVar("ConfigT", bound=BaseModel)
RetrieverT = TypeVar("RetrieverT", bound="MilvusLayoutRetriever[Any]")
_RETRIEVER_OPTIONS = ("callback_manager", "verbose")  # constructor options that are not settings


class MilvusLayoutRetriever(ConfiguredRetriever, Generic[ConfigT]):
    """Base of the retrievers whose index is described by a layout record in Milvus.

    The configuration pattern of every retriever of the package: the query settings are one
    validated pydantic model, the public ``config`` attribute, and :meth:`to_dict` /
    :meth:`from_dict` round-trip them (here with where the index lives). The constructor takes
    the index's two stores, the embedding model, the recorded layout and where it lives, and
    the settings as keyword arguments (``config_class(**settings)``). Subclasses set
    ``config_class``, implement :meth:`_open_stores` (read the layout, open the two stores) and
    :meth:`_collection_name`, and build through :meth:`_build_index` / reopen through
    :meth:`_open_index`.
    """

    config: ConfigT
    config_class: ClassVar[type[BaseModel]]

    def __init__(
        self,
        first_store: Any,
        second_store: Any,
        embed_model: BaseEmbedding | None = None,
        layout: dict[str, Any] | None = None,
        uri: str | None = None,
        token: str = "",
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **settings: Any,
    ) -> None:
        self.config = self.config_class(**settings)  # type: ignore[assignment]
        self._stores = (first_store, second_store)
        self._embed_model = embed_model
        self._layout = dict(layout or {})
        self._uri = uri
        self._loop_binding = AsyncLoopBinding(uri, token)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__

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

    @classmethod
    def _open_stores(cls, uri: str, collection_name: str, token: str) -> tuple[dict, Any, Any]:
        """Read the layout of ``collection_name`` and open its two stores."""
        raise NotImplementedError

    @classmethod
    def _open_index(
        cls: type[RetrieverT],
        uri: str,
        collection_name: str,
        embed_model: BaseEmbedding | None,
        token: str,
        options: dict[str, Any],
    ) -> RetrieverT:
        """What ``from_uri`` does: open the recorded index, warn on a different query model.

        Raises:
            IndexLayoutError: no such index at ``uri`` (the message lists the existing ones).
        """
        layout, first, second = cls._open_stores(uri, collection_name, token)
        warn_on_model_mismatch(layout, embed_model, collection_name)
        construct: Callable[..., RetrieverT] = cls
        return construct(
            first, second, embed_model=embed_model, layout=layout, uri=uri, token=token, **options
        )

    @classmethod
    def _build_index(
        cls: type[RetrieverT],
        build: Callable[[BaseEmbedding], tuple[dict[str, Any], Any, Any]],
        uri: str,
        embed_model: BaseEmbedding | None,
        token: str,
        options: dict[str, Any],
    ) -> RetrieverT:
        """What the builders do: check the query settings, resolve the embedding model, run
        ``build(embedder)`` (returns ``(layout, first_store, second_store)``) and open it."""
        settings = {k: v for k, v in options.items() if k not in _RETRIEVER_OPTIONS}
        cls.config_class(**settings)  # fail before minutes of building, not after
        embedder = resolve_embed_model(embed_model)
        layout, first, second = build(embedder)
        construct: Callable[..., RetrieverT] = cls
        return construct(
            first, second, embed_model=embedder, layout=layout, uri=uri, token=token, **options
        )

    def to_dict(self) -> dict[str, Any]:
        """Where the index lives and the query settings (no model, no client, no token)."""
        return {
            "class_name": self.class_name(),
            "uri": self._uri,
            "collection_name": self._collection_name(),
            **self.config.model_dump(mode="json"),
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
