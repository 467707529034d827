"""The retrievers' side of the one configuration pattern (:mod:`llama_index_ext_advrag.configuration`).

LlamaIndex's ``BaseRetriever`` is not a pydantic model; :class:`ConfiguredRetriever` makes the
pack's retrievers one, like its postprocessors, parsers, judges and embeddings. The ``*Config``
models of earlier versions are generated from the fields (:func:`settings_model`) and kept for
backwards compatibility only: ``config=`` and ``.config`` warn.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryType

from llama_index_ext_advrag.configuration import (
    Configured,
    aclose_all,
    check_class_name,
    close_all,
    merge_config,
    setting_names,
    settings_model,
)


class ConfiguredRetriever(Configured, BaseRetriever):
    """A ``BaseRetriever`` whose settings are pydantic fields on the retriever itself.

    Subclasses declare their settings as ``Field``\\ s (description, bounds) and their live
    objects as ``PrivateAttr``\\ s set in ``__init__`` after ``super().__init__(**settings)``.
    ``callback_manager`` is, as in LlamaIndex's postprocessors, an excluded field.
    """

    callback_manager: CallbackManager = Field(
        default_factory=CallbackManager, exclude=True, description="LlamaIndex callbacks."
    )
    # the setting with_top_k writes (the number of results), None when there is none
    top_k_setting: ClassVar[str | None] = "similarity_top_k"

    _object_map: dict[str, Any] = PrivateAttr(default_factory=dict)
    _verbose: bool = PrivateAttr(default=False)

    def __init__(
        self,
        *,
        config: BaseModel | dict[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
        **settings: Any,
    ) -> None:
        settings = merge_config(type(self), config, settings)
        settings["callback_manager"] = callback_manager or CallbackManager()
        super().__init__(**settings)
        self._verbose = verbose

    @property
    def object_map(self) -> dict[str, Any]:
        """Core's ``IndexNode`` object map (unused by the pack's retrievers)."""
        return self._object_map

    @object_map.setter
    def object_map(self, value: dict[str, Any]) -> None:
        self._object_map = dict(value)

    @property
    def config(self) -> BaseModel:
        """Deprecated: the settings as the old ``*Config`` model (read the attributes)."""
        warnings.warn(
            f"{type(self).__name__}.config is deprecated: read the settings as attributes "
            "(retriever.similarity_top_k) or use to_dict()",
            DeprecationWarning,
            stacklevel=2,
        )
        values = {name: getattr(self, name) for name in setting_names(type(self))}
        return settings_model(type(self)).model_validate(values)

    def retrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Core's ``retrieve``, after refusing a query that is not text (a ``TypeError``
        naming its type: ``b"kettle"`` would fail inside core with an ``AttributeError``)."""
        from llama_index_ext_advrag.queries import check_query_type

        check_query_type(str_or_query_bundle, self.class_name())
        return super().retrieve(str_or_query_bundle)

    async def aretrieve(self, str_or_query_bundle: QueryType) -> list[NodeWithScore]:
        """Async :meth:`retrieve`."""
        from llama_index_ext_advrag.queries import check_query_type

        check_query_type(str_or_query_bundle, self.class_name())
        return await super().aretrieve(str_or_query_bundle)

    def close(self) -> None:
        """Release what this retriever opened itself (nothing here; Milvus retrievers close
        their clients, hybrid and recursive their legs)."""

    async def aclose(self) -> None:
        """Async :meth:`close` (also closes async Milvus clients)."""
        self.close()


__all__ = [
    "ConfiguredRetriever",
    "aclose_all",
    "check_class_name",
    "close_all",
    "merge_config",
    "setting_names",
    "settings_model",
]
