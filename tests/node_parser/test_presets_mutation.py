"""preset_values' error for an unknown preset: it names the argument and every accepted
value, None included. Kills the mutants of node_parser/presets.py no selected test noticed
(mutation testing, issue #39)."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.node_parser.presets import DocumentPreset, preset_values

pytestmark = pytest.mark.unit


def test_an_unknown_preset_is_refused_naming_the_choices_and_none() -> None:
    with pytest.raises(ValueError) as raised:
        preset_values("novel")
    assert str(raised.value) == (
        "preset='novel' is not one of: general, technical, legal, qa, article, or None"
    )


def test_a_preset_is_a_copy_of_its_values() -> None:
    values = preset_values("qa")
    assert values["max_window_tokens"] == 192 and values["keep_questions_with_answers"] is True
    values["max_window_tokens"] = 1
    assert preset_values(DocumentPreset.QA)["max_window_tokens"] == 192
