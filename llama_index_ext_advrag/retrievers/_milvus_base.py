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
from typing import Any, TypeVar

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

from llama_index_ext_advrag.milvus.connection import close_stores
from llama_index_ext_advrag.milvus.vector_store import AsyncLoopBinding
from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.retrievers._config import (
    ConfiguredRetriever,
    check_class_name,
    settings_model,
)

logger = logging.getLogger(__name__)

RetrieverT = TypeVar("RetrieverT", bound="MilvusLayoutRetriever")
_RETRIEVER_OPTIONS = ("callback_manager", "verbose", "config")  # options that are not settings


class MilvusLayoutRetriever(ConfiguredRetriever):
    """Base of the retrievers whose index is described by a layout record in Milvus.

    The pack's configuration pattern: the query settings are fields of the retriever, and so
    are ``uri`` and ``collection_name`` (where the index lives, fixed); the two stores, the
    embedding model, the recorded layout and the token are live objects set from ``__init__``
    arguments. ``to_dict()`` holds no model, client or token; ``from_dict(data,
    embed_model=..., token=...)`` reopens the index from the uri. :meth:`with_settings` gives
    a copy with other settings on the same open stores; :meth:`close` closes the stores'
    clients. Subclasses implement :meth:`_open_stores` (read the layout, open the two
    stores) and :meth:`_collection_from_layout`, and build through :meth:`_build_index` /
    reopen through :meth:`_open_index`.
    """

    uri: str | None = Field(
        default=None, frozen=True, description="The Milvus Lite file or server of the index."
    )
    collection_name: str = Field(
        default="", frozen=True, description="The index's name (from_uri's collection_name)."
    )

    _stores: tuple[Any, Any] = PrivateAttr(default=(None, None))
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    _layout: dict[str, Any] = PrivateAttr(default_factory=dict)
    _loop_binding: AsyncLoopBinding = PrivateAttr()

    def __init__(
        self,
        first_store: Any = None,
        second_store: Any = None,
        embed_model: BaseEmbedding | None = None,
        layout: dict[str, Any] | None = None,
        token: str = "",
        **settings: Any,
    ) -> None:
        layout = dict(layout or {})
        if not settings.get("collection_name"):
            settings["collection_name"] = self._collection_from_layout(layout)
        super().__init__(**settings)
        self._stores = (first_store, second_store)
        self._embed_model = embed_model
        self._layout = layout
        self._loop_binding = AsyncLoopBinding(self.uri, token)

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__

    @property
    def layout(self) -> dict[str, Any]:
        """The recorded layout: collection names, embedding dim and model, build settings."""
        return dict(self._layout)

    @classmethod
    def _collection_from_layout(cls, layout: dict[str, Any]) -> str:
        """The name :meth:`from_uri` takes to reopen the index ``layout`` describes."""
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
        try:
            return construct(
                first,
                second,
                embed_model=embed_model,
                layout=layout,
                uri=uri,
                token=token,
                collection_name=collection_name,
                **options,
            )
        except BaseException:
            close_stores(first, second)  # a bad setting must not leave the clients open
            raise

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
        settings_model(cls).model_validate(settings)  # fail before minutes of building
        embedder = resolve_embed_model(embed_model)
        layout, first, second = build(embedder)
        construct: Callable[..., RetrieverT] = cls
        return construct(
            first, second, embed_model=embedder, layout=layout, uri=uri, token=token, **options
        )

    @classmethod
    def from_dict(cls: type[RetrieverT], data: dict[str, Any], **kwargs: Any) -> RetrieverT:
        """Reopen what :meth:`to_dict` describes; ``kwargs``: ``embed_model``, ``token``.

        Raises:
            ValueError: ``data`` has no ``uri`` or describes another class.
        """
        options = {**check_class_name(cls, data), **kwargs}
        uri = options.pop("uri", None)
        if not uri:
            raise ValueError(f"from_dict needs a 'uri', got {uri!r}")
        return cls.from_uri(uri, **options)

    def close(self) -> None:
        """Close the Milvus clients of the two stores (shared with the copies made by
        :meth:`with_settings`, which are closed with them). After async use, call
        :meth:`aclose` to close the async clients too."""
        close_stores(*self._stores)

    async def aclose(self) -> None:
        """Close the sync and the async Milvus clients of the two stores."""
        close_stores(*self._stores)
        for store in self._stores:
            client = getattr(store, "_async_milvusclient", None)
            if client is not None:
                try:
                    await client.close()
                except Exception as exc:  # a dead channel cannot be closed twice
                    logger.debug("closing an async Milvus client failed: %s", exc)

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
                f"{self.collection_name!r} was built with {expected} "
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
