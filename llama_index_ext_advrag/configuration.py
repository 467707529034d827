"""The pack's one configuration pattern (docs/design.md, "Configuration").

Every public component is a pydantic model: its settings are fields with descriptions and
bounds on the component itself (readable and writable as attributes, writes validated); live
objects (clients, stores, nodes, retrievers, LLMs, judges, embedding models) are private
attributes set from ``__init__`` arguments; ``to_dict()`` is the settings plus ``class_name``
and ``from_dict(data, **live_objects)`` takes them back. LlamaIndex's postprocessors, parsers
and embeddings are pydantic already; :class:`Configured` gives the retrievers and query
engines (whose LlamaIndex bases are not) the same shape, plus :meth:`Configured.with_settings`.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, TypeVar

from llama_index.core.bridge.pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    SerializeAsAny,
    create_model,
)
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.schema import BaseComponent

ConfiguredT = TypeVar("ConfiguredT", bound="Configured")


def setting_names(component: type[BaseModel]) -> list[str]:
    """The names of ``component``'s settings: its serialised (not ``exclude``\\ d) fields."""
    return [name for name, info in component.model_fields.items() if not info.exclude]


_SETTINGS_MODELS: dict[type[BaseModel], type[BaseModel]] = {}


def settings_model(component: type[BaseModel], name: str | None = None) -> type[BaseModel]:
    """A pydantic model with ``component``'s settings as fields (the deprecated ``*Config``),
    made once per class; a subclass with the same settings (a deprecated alias such as
    ``BM25Retriever``) shares its base's."""
    if component in _SETTINGS_MODELS:
        return _SETTINGS_MODELS[component]
    for base in component.__mro__[1:]:
        if base in _SETTINGS_MODELS and setting_names(base) == setting_names(component):
            return _SETTINGS_MODELS[base]
    fields: dict[str, Any] = {
        field: (info.annotation, info)
        for field, info in component.model_fields.items()
        if not info.exclude
    }
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        name or f"{component.__name__}Config",
        __config__=ConfigDict(extra="forbid", arbitrary_types_allowed=True),
        __doc__=f"Deprecated: the settings of {component.__name__}, which are now its fields.",
        **fields,
    )
    _SETTINGS_MODELS[component] = model
    return model


def merge_config(
    component: type[BaseModel], config: BaseModel | dict[str, Any] | None, settings: dict
) -> dict[str, Any]:
    """``settings`` over the values set in a deprecated ``config=`` argument (with a warning)."""
    if config is None:
        return settings
    warnings.warn(
        f"{component.__name__}(config=...) is deprecated: pass the settings as keyword "
        "arguments (or use from_dict / with_settings)",
        DeprecationWarning,
        stacklevel=4,
    )
    if isinstance(config, BaseModel):
        given = {name: getattr(config, name) for name in config.model_fields_set}
    elif isinstance(config, dict):
        given = dict(config)
    else:
        raise TypeError(f"config must be a settings model or a dict, got {type(config).__name__}")
    given.pop("class_name", None)
    return {**given, **settings}


def check_class_name(component: type[BaseComponent], data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without its ``class_name``, which must be ``component``'s when present."""
    data = dict(data)
    found = data.pop("class_name", None)
    if found is not None and found != component.class_name():
        raise ValueError(
            f"data describes a {found!r}, not a {component.class_name()!r}; use {found}.from_dict"
        )
    return data


def close_all(objects: Iterable[Any]) -> None:
    """Call ``close()`` on every object that has one (legs, sub-retrievers, engines)."""
    for obj in objects:
        close = getattr(obj, "close", None)
        if callable(close):
            close()


async def aclose_all(objects: Iterable[Any]) -> None:
    """``await aclose()`` (or call ``close()``) on every object that has one."""
    for obj in objects:
        aclose = getattr(obj, "aclose", None)
        if callable(aclose):
            await aclose()
        else:
            close_all([obj])


def prompt_from_data(value: Any) -> Any:
    """A prompt template from its ``to_dict`` data (``PromptTemplate`` or
    ``ChatPromptTemplate``; core's own ``model_validate`` cannot read that data back) or from a
    template string; a template object is returned as it is."""
    from llama_index.core.llms import ChatMessage
    from llama_index.core.prompts import ChatPromptTemplate

    if isinstance(value, str):
        return PromptTemplate(value)
    if not isinstance(value, dict):
        return value
    common = {
        "prompt_type": (value.get("metadata") or {}).get("prompt_type", "custom"),
        "template_var_mappings": value.get("template_var_mappings"),
        **(value.get("kwargs") or {}),
    }
    if "message_templates" in value:
        messages = [ChatMessage.model_validate(m) for m in value["message_templates"]]
        return ChatPromptTemplate(message_templates=messages, **common)
    if "template" not in value:
        raise ValueError(f"a prompt needs a 'template' or 'message_templates', got {sorted(value)}")
    return PromptTemplate(value["template"], **common)


def checked_prompt(
    value: str | BasePromptTemplate, name: str, variables: Iterable[str], hint: str = ""
) -> BasePromptTemplate:
    """``value`` as a prompt template (a string becomes a ``PromptTemplate``) that holds every
    one of ``variables``; ``hint`` (e.g. the optional variables) ends the error message.

    Raises:
        TypeError: ``value`` is neither a string nor a prompt template.
        ValueError: the template lacks one of ``variables`` (named).
    """
    if isinstance(value, str):
        value = PromptTemplate(value)
    if not isinstance(value, BasePromptTemplate):
        raise TypeError(f"{name} must be a prompt template or a string, got {type(value).__name__}")
    needed = set(variables)
    missing = needed - set(value.template_vars)
    if missing:
        raise ValueError(
            f"{name} lacks the variables {sorted(missing)}; it needs {sorted(needed)}"
            + (f" {hint}" if hint else "")
        )
    return value


# The PromptMixin glue of a component whose prompts are settings: ``variables`` maps each
# prompt field to the template variables it must hold (``hints`` adds to an error message).
def check_prompts(
    component: Any, variables: Mapping[str, Iterable[str]], hints: Mapping[str, str] | None = None
) -> None:
    """Raise (``checked_prompt``) unless every prompt field of ``component`` holds its variables."""
    for name, needed in variables.items():
        checked_prompt(getattr(component, name), name, needed, (hints or {}).get(name, ""))


def prompt_fields(component: Any, variables: Mapping[str, Iterable[str]]) -> dict[str, Any]:
    """``_get_prompts``: the prompt fields by name."""
    return {name: getattr(component, name) for name in variables}


def update_prompt_fields(
    component: Any,
    prompts: Mapping[str, Any],
    variables: Mapping[str, Iterable[str]],
    hints: Mapping[str, str] | None = None,
) -> None:
    """``_update_prompts``: every known prompt of ``prompts`` checked first, then all set (one
    bad prompt changes nothing); names that are not prompt fields are ignored, as PromptMixin
    does. Only prompt templates are taken here (PromptMixin's contract), not strings."""
    for name, prompt in prompts.items():
        if name in variables and not isinstance(prompt, BasePromptTemplate):
            raise TypeError(f"{name} must be a prompt template, got {type(prompt).__name__}")
    known = {
        name: checked_prompt(prompt, name, variables[name], (hints or {}).get(name, ""))
        for name, prompt in prompts.items()
        if name in variables
    }
    for name, prompt in known.items():
        setattr(component, name, prompt)


# A prompt setting: any LlamaIndex prompt template, serialised with its subclass's fields and
# read back from that data (or from a plain template string).
PromptSetting = Annotated[SerializeAsAny[BasePromptTemplate], BeforeValidator(prompt_from_data)]
# A string-template prompt setting (``PromptTemplate``), read back the same way.
TemplateSetting = Annotated[PromptTemplate, BeforeValidator(prompt_from_data)]


class RefusesUnknownSettings(BaseModel):
    """Mixed into the pack's components that stand on LlamaIndex's pydantic bases (embedding
    models, judges, node parsers, postprocessors): a keyword that is not a setting raises a
    ``ValidationError`` (a ``ValueError``) naming it ("bogus_option: Extra inputs are not
    permitted"), where those bases drop it without a word, so a misspelt setting never
    silently does nothing. :class:`Configured` (retrievers, query engines) does the same."""

    model_config = ConfigDict(extra="forbid")


class Configured(BaseComponent):
    """A pydantic component with JSON ``to_dict``/``from_dict`` and :meth:`with_settings`."""

    model_config = ConfigDict(
        arbitrary_types_allowed=True, validate_assignment=True, extra="forbid"
    )

    def __setattr__(self, name: str, value: Any) -> None:
        # pydantic keeps a value its model validators refused: put the old one back
        if name not in type(self).model_fields:
            super().__setattr__(name, value)
            return
        old = self.__dict__.get(name)
        try:
            super().__setattr__(name, value)
        except Exception:
            self.__dict__[name] = old
            raise

    def to_dict(self, **kwargs: Any) -> dict[str, Any]:
        """The settings as JSON data, with ``class_name`` (no live objects)."""
        data = self.model_dump(mode="json", **kwargs)
        data["class_name"] = self.class_name()
        return data

    @classmethod
    def from_dict(cls: type[ConfiguredT], data: dict[str, Any], **kwargs: Any) -> ConfiguredT:
        """A component with the :meth:`to_dict` settings ``data`` and the live objects
        ``kwargs`` (the ``__init__`` arguments that are not settings; they win over ``data``).

        Raises:
            ValueError: ``data`` describes another class, or a setting is invalid or unknown.
        """
        return cls(**{**check_class_name(cls, data), **kwargs})

    def with_settings(self: ConfiguredT, **changes: Any) -> ConfiguredT:
        """A copy with ``changes`` applied (validated) that shares this component's live
        objects (nodes, legs, open Milvus stores, models); this one is left as it is.

        Raises:
            ValueError: an unknown setting (the message lists them), or an invalid value.
        """
        allowed = setting_names(type(self))
        unknown = sorted(set(changes) - set(allowed))
        if unknown:
            raise ValueError(
                f"{type(self).__name__} has no settings {unknown}; settings: {sorted(allowed)}"
            )
        clone = copy.copy(self)
        for name, value in changes.items():
            setattr(clone, name, value)
        return clone


__all__ = [
    "RefusesUnknownSettings",
    "Configured",
    "check_prompts",
    "checked_prompt",
    "prompt_fields",
    "update_prompt_fields",
    "PromptSetting",
    "TemplateSetting",
    "aclose_all",
    "check_class_name",
    "close_all",
    "merge_config",
    "prompt_from_data",
    "setting_names",
    "settings_model",
]
