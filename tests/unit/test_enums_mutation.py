"""parse_enum applies the caller's normalisation to strings and names the extra accepted
input in its error. Kills the mutants of _enums.py no selected test noticed (mutation
testing, issue #39)."""

from __future__ import annotations

from enum import Enum

import pytest

from llama_index_ext_advrag._enums import allowed_values, parse_enum

pytestmark = pytest.mark.unit


class Mode(str, Enum):
    FIXED = "fixed"
    AUTO = "auto"


def test_strings_are_normalised_before_the_lookup() -> None:
    assert parse_enum(Mode, "AUTO", "mode", normalise=str.lower) is Mode.AUTO
    assert parse_enum(Mode, Mode.FIXED, "mode", normalise=str.lower) is Mode.FIXED


def test_the_error_names_the_extra_accepted_input() -> None:
    with pytest.raises(ValueError) as raised:
        parse_enum(Mode, "fast", "mode", also="None")
    assert str(raised.value) == "mode='fast' is not one of: fixed, auto, or None"


def test_without_an_extra_input_the_error_lists_the_values_alone() -> None:
    with pytest.raises(ValueError) as raised:
        parse_enum(Mode, "fast", "mode")
    assert str(raised.value) == "mode='fast' is not one of: fixed, auto"
    assert allowed_values(Mode) == "fixed, auto"
