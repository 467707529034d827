"""Entity cues at their edges: two-character terms, stop words in capitals, dotted names, a
two-letter acronym opening a sentence, generic Chinese nouns (kills the mutants of text/cues.py
that test_cues.py leaves)."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag.text.cues import extract_cues


@pytest.mark.parametrize(
    ("text", "cues"),
    [
        ("the 5G network", {"5g"}),  # two characters are enough
        ("read THE manual", set()),  # a stop word in capitals is not an acronym
        ("asked the people Who came", set()),  # nor a capitalised one
        ("the WHO said so", {"who"}),  # unless it is one of the acronym exceptions
        ("uses node.js daily", {"node.js"}),  # a dotted name without digits or capitals
        ("EU rules apply.", {"eu"}),  # a two-letter acronym, even opening the sentence
        ("所以这个问题很重要", set()),  # a generic noun is no cue
    ],
)
def test_cue_edges(text: str, cues: set[str]) -> None:
    assert extract_cues(text) == frozenset(cues)
