"""The configuration pattern's helpers, rule by rule, on a toy component: settings names and
the deprecated settings model, config= merging and its warning, class names, closing, prompts
from data and their checks, validated assignment, to_dict/from_dict and with_settings."""

from __future__ import annotations

import asyncio
import inspect
import warnings
from typing import Any

import pytest
from llama_index.core.bridge.pydantic import BaseModel, Field, ValidationError
from llama_index.core.llms import ChatMessage
from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate, PromptType

from llama_index_ext_advrag import configuration
from llama_index_ext_advrag.configuration import (
    Configured,
    aclose_all,
    check_class_name,
    check_prompts,
    checked_prompt,
    close_all,
    merge_config,
    prompt_fields,
    prompt_from_data,
    setting_names,
    settings_model,
    update_prompt_fields,
)


class Toy(Configured):
    size: int = Field(default=3, ge=1, description="A bounded setting.")
    label: str = Field(default="x", description="A text setting.")
    live: Any = Field(default=None, exclude=True, description="A live object.")

    @classmethod
    def class_name(cls) -> str:
        return "Toy"


# --- settings and the deprecated settings model -------------------------------------------------


def test_setting_names_leave_out_excluded_fields() -> None:
    assert setting_names(Toy) == ["size", "label"]


def test_settings_model_is_made_once_and_shared_by_a_subclass_with_the_same_settings() -> None:
    class Part(Configured):  # a class of its own: no other test made its model
        size: int = Field(default=3, ge=1, description="A bounded setting.")
        label: str = Field(default="x", description="A text setting.")
        live: Any = Field(default=None, exclude=True, description="A live object.")

    class Alias(Part):
        pass

    class Wider(Part):
        extra: int = 1

    model = settings_model(Part, name="PartSettings")
    assert model.__name__ == "PartSettings"
    assert settings_model(Part) is model
    assert settings_model(Alias) is model
    assert settings_model(Wider) is not model
    assert list(model.model_fields) == ["size", "label"]
    assert model.__doc__ == "Deprecated: the settings of Part, which are now its fields."
    assert model(size=5).size == 5
    with pytest.raises(ValidationError):
        model(size=0)  # the field's bound comes along
    with pytest.raises(ValidationError, match="bogus"):
        model(bogus=1)  # unknown settings are refused
    assert settings_model(Wider).__name__ == "WiderConfig"
    assert list(settings_model(Wider).model_fields) == ["size", "label", "extra"]


class Opaque:
    """A class pydantic knows no schema for."""


def test_a_settings_model_holds_arbitrary_types() -> None:
    class Holder(Configured):
        thing: Opaque | None = Field(default=None, description="An arbitrary type.")

    model = settings_model(Holder)
    marker = Opaque()
    assert model(thing=marker).thing is marker


# --- config= --------------------------------------------------------------------------------------


def _third(config: Any) -> dict:
    return merge_config(Toy, config, {"label": "given"})


def _second(config: Any) -> dict:
    return _third(config)


def _first(config: Any) -> dict:
    return _second(config)  # stacklevel 4 points here: the caller of the component


def test_merge_config_warns_at_the_callers_line_and_lets_settings_win() -> None:
    assert merge_config(Toy, None, {"size": 2}) == {"size": 2}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        merged = _first({"size": 5, "label": "config", "class_name": "Toy"})
    assert merged == {"size": 5, "label": "given"}
    [warning] = caught
    assert warning.category is DeprecationWarning
    assert str(warning.message) == (
        "Toy(config=...) is deprecated: pass the settings as keyword arguments "
        "(or use from_dict / with_settings)"
    )
    # stacklevel 4: the line that called the component (_first's); mutmut's trampoline (its
    # x_<name>__mutmut_orig copies) puts two frames of its own in between: _third's line then
    caller = _third if hasattr(configuration, "x_merge_config__mutmut_orig") else _first
    assert warning.lineno == inspect.getsourcelines(caller)[1] + 1
    assert warning.filename == __file__


def test_merge_config_takes_only_the_settings_set_in_a_model() -> None:
    model = settings_model(Toy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert merge_config(Toy, model(size=7), {}) == {"size": 7}
        with pytest.raises(TypeError) as caught:
            merge_config(Toy, ["size", 7], {})
    assert str(caught.value) == "config must be a settings model or a dict, got list"


# --- class names, closing -------------------------------------------------------------------------


def test_check_class_name() -> None:
    data = {"size": 2, "class_name": "Toy"}
    assert check_class_name(Toy, data) == {"size": 2}
    assert data == {"size": 2, "class_name": "Toy"}  # the caller's data is left alone
    assert check_class_name(Toy, {"size": 2}) == {"size": 2}
    with pytest.raises(ValueError) as caught:
        check_class_name(Toy, {"class_name": "Other"})
    assert str(caught.value) == "data describes a 'Other', not a 'Toy'; use Other.from_dict"


class Closable:
    def __init__(self, log: list[str], name: str, has_aclose: bool = False) -> None:
        self.log, self.name = log, name
        if has_aclose:
            self.aclose = self._aclose

    def close(self) -> None:
        self.log.append(f"close {self.name}")

    async def _aclose(self) -> None:
        self.log.append(f"aclose {self.name}")


class NotCallable:
    close = 3
    aclose = "no"


def test_close_all_and_aclose_all() -> None:
    log: list[str] = []
    close_all([Closable(log, "a"), NotCallable(), object(), Closable(log, "b")])
    assert log == ["close a", "close b"]
    log.clear()
    objects = [Closable(log, "a", has_aclose=True), Closable(log, "b"), NotCallable()]
    asyncio.run(aclose_all(objects))
    assert log == ["aclose a", "close b"]


# --- prompts --------------------------------------------------------------------------------------


def test_prompt_from_data_reads_templates_back() -> None:
    assert prompt_from_data("Q: {query_str}").template == "Q: {query_str}"
    template = PromptTemplate("As is {x}")
    assert prompt_from_data(template) is template
    assert prompt_from_data(None) is None
    plain = prompt_from_data(
        {"template": "Hi {name} {x}", "kwargs": {"x": "1"}, "template_var_mappings": {"n": "name"},
         "metadata": {"prompt_type": "summary"}}
    )  # fmt: skip
    assert isinstance(plain, PromptTemplate)
    assert plain.template == "Hi {name} {x}"
    assert plain.kwargs == {"x": "1"}
    assert plain.template_var_mappings == {"n": "name"}
    assert plain.metadata["prompt_type"] == PromptType.SUMMARY
    bare = prompt_from_data({"template": "T", "metadata": None})
    assert bare.metadata["prompt_type"] == PromptType.CUSTOM
    chat = ChatPromptTemplate(message_templates=[ChatMessage(role="user", content="Q {q}")])
    data = chat.model_dump()
    data["metadata"] = {"prompt_type": "summary"}
    data["kwargs"] = {"q": "fixed"}
    back = prompt_from_data(data)
    assert isinstance(back, ChatPromptTemplate)
    assert back.message_templates[0].content == "Q {q}"
    assert back.metadata["prompt_type"] == PromptType.SUMMARY
    assert back.kwargs == {"q": "fixed"}
    with pytest.raises(ValueError) as caught:
        prompt_from_data({"b": 1, "a": 2})
    assert str(caught.value) == "a prompt needs a 'template' or 'message_templates', got ['a', 'b']"


def test_checked_prompt() -> None:
    assert checked_prompt("{a} {b}", "p", ["a"]).template == "{a} {b}"
    with pytest.raises(TypeError) as caught:
        checked_prompt(3, "qa_prompt", [])  # type: ignore[arg-type]
    assert str(caught.value) == "qa_prompt must be a prompt template or a string, got int"
    with pytest.raises(ValueError) as caught:
        checked_prompt("{a}", "qa_prompt", ["c", "a", "b"])
    assert str(caught.value) == (
        "qa_prompt lacks the variables ['b', 'c']; it needs ['a', 'b', 'c']"
    )
    with pytest.raises(ValueError) as caught:
        checked_prompt("{a}", "qa_prompt", ["b"], hint="(optional: {c})")
    assert str(caught.value).endswith("it needs ['b'] (optional: {c})")


class Prompted(BaseModel):
    first: Any = PromptTemplate("{a}")
    second: Any = PromptTemplate("{b}")


VARIABLES = {"first": ["a"], "second": ["b"]}


def test_check_prompts_and_prompt_fields() -> None:
    component = Prompted()
    check_prompts(component, VARIABLES)
    assert prompt_fields(component, VARIABLES) == {
        "first": component.first,
        "second": component.second,
    }
    component.second = PromptTemplate("{z}")
    with pytest.raises(ValueError) as caught:
        check_prompts(component, VARIABLES, hints={"second": "(hint)"})
    assert str(caught.value) == "second lacks the variables ['b']; it needs ['b'] (hint)"
    with pytest.raises(ValueError) as caught:
        check_prompts(component, VARIABLES, hints={"first": "(not this one)"})
    assert str(caught.value) == "second lacks the variables ['b']; it needs ['b']"


def test_update_prompt_fields_checks_everything_before_setting_anything() -> None:
    component = Prompted()
    new_first = PromptTemplate("new {a}")
    update_prompt_fields(component, {"first": new_first, "unknown": "ignored"}, VARIABLES)
    assert component.first is new_first
    with pytest.raises(TypeError) as caught:
        update_prompt_fields(component, {"second": "{b}"}, VARIABLES)
    assert str(caught.value) == "second must be a prompt template, got str"
    before = (component.first, component.second)
    with pytest.raises(ValueError) as caught:
        update_prompt_fields(
            component,
            {"first": PromptTemplate("{a}!"), "second": PromptTemplate("{z}")},
            VARIABLES,
            hints={"second": "(hint)"},
        )
    assert str(caught.value).endswith("(hint)")
    assert (component.first, component.second) == before  # one bad prompt changes nothing
    with pytest.raises(ValueError) as caught:
        update_prompt_fields(component, {"first": PromptTemplate("{z}")}, VARIABLES)
    assert str(caught.value) == "first lacks the variables ['a']; it needs ['a']"


# --- Configured -----------------------------------------------------------------------------------


def test_a_refused_assignment_keeps_the_old_value() -> None:
    toy = Toy(size=4)
    with pytest.raises(ValidationError):
        toy.size = 0
    assert toy.size == 4
    toy.size = 6
    assert toy.size == 6
    with pytest.raises(ValueError):
        toy.bogus = 1  # not a field: pydantic refuses it as before


def test_to_dict_is_json_data() -> None:
    class Tagged(Configured):
        tags: tuple[str, ...] = Field(default=("a", "b"), description="A tuple setting.")

        @classmethod
        def class_name(cls) -> str:
            return "Tagged"

    assert Tagged().to_dict() == {"tags": ["a", "b"], "class_name": "Tagged"}  # a list


def test_to_dict_from_dict_and_with_settings() -> None:
    marker = object()
    toy = Toy(size=4, label="y", live=marker)
    assert toy.to_dict() == {"size": 4, "label": "y", "class_name": "Toy"}
    assert toy.to_dict(exclude={"label"}) == {"size": 4, "class_name": "Toy"}
    back = Toy.from_dict({"size": 5, "label": "z", "class_name": "Toy"}, label="w", live=marker)
    assert (back.size, back.label, back.live) == (5, "w", marker)
    with pytest.raises(ValueError, match="not a 'Toy'"):
        Toy.from_dict({"class_name": "Other"})
    clone = toy.with_settings(size=9)
    assert (clone.size, clone.label, clone.live) == (9, "y", marker)
    assert toy.size == 4
    with pytest.raises(ValueError) as caught:
        toy.with_settings(zeta=1, alpha=2, size=2)
    assert str(caught.value) == (
        "Toy has no settings ['alpha', 'zeta']; settings: ['label', 'size']"
    )
    with pytest.raises(ValidationError):
        toy.with_settings(size=0)
