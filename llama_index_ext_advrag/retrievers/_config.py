"""The retrievers' one configuration pattern: settings in a validated pydantic ``config``.

Every retriever keeps its settings in one pydantic model, the public ``config`` attribute, and
round-trips it with ``to_dict``/``from_dict``. :class:`ConfigAttribute` keeps the settings
readable and writable as plain attributes (``retriever.similarity_top_k = 5``, which
``hybrid.with_top_k`` relies on): a write validates the new value and replaces ``config``.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from llama_index.core.bridge.pydantic import BaseModel
from llama_index.core.retrievers import BaseRetriever

T = TypeVar("T")


class ConfiguredRetriever(BaseRetriever):
    """A retriever whose settings are the validated pydantic model ``config``.

    ``to_dict`` returns them as plain JSON data; each subclass's ``from_dict`` takes that data
    back plus what is not settings (nodes, legs, routing dicts, a Milvus uri) and validates it.
    """

    config: BaseModel

    def to_dict(self) -> dict[str, Any]:
        """The settings as JSON data (live objects such as nodes or legs are not included)."""
        return self.config.model_dump(mode="json")


def config_kwargs(config: BaseModel) -> dict[str, Any]:
    """The constructor keyword arguments that rebuild ``config`` (its fields, not dumped)."""
    return {name: getattr(config, name) for name in type(config).model_fields}


class ConfigAttribute(Generic[T]):
    """An attribute that reads one field of its owner's ``config`` and writes it validated."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type | None = None) -> T:
        if instance is None:
            return self  # type: ignore[return-value]  # the descriptor, for introspection
        value: T = getattr(instance.config, self.name)
        return value

    def __set__(self, instance: Any, value: T) -> None:
        config = instance.config
        instance.config = type(config).model_validate({**dict(config), self.name: value})


__all__ = ["ConfigAttribute", "ConfiguredRetriever", "config_kwargs"]
