"""What a Milvus row can hold, checked before anything is stored: the exact bounds (64-bit ints,
finite floats, 65,535 UTF-8 bytes of text) and the exact words of every refusal, which name the
node, its document, the key path, the value's type and what to do (kills the mutants of
milvus/limits.py; no Milvus needed)."""

from __future__ import annotations

import datetime
import decimal
import enum

import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.milvus import check_storable_nodes
from llama_index_ext_advrag.milvus.limits import (
    _STORABLE_METADATA,
    MAX_METADATA_INT,
    MAX_TEXT_BYTES,
    MIN_METADATA_INT,
    _unstorable_metadata,
)


@pytest.mark.parametrize(
    "value",
    [None, True, False, "", "text", 0, MAX_METADATA_INT, MIN_METADATA_INT, 1.5, -0.0, [], {}],
)
def test_values_that_come_back_unchanged_are_accepted(value: object) -> None:
    assert _unstorable_metadata(value) is None
    assert _unstorable_metadata({"k": [value, {"inner": value}]}) is None


def test_64_bit_bounds_are_exact() -> None:
    assert (MIN_METADATA_INT, MAX_METADATA_INT) == (-(2**63), 2**63 - 1)
    assert _unstorable_metadata(MAX_METADATA_INT + 1) == (
        "metadata is an int of 64 bits; Milvus holds 64-bit integers (-2**63 to 2**63-1): "
        "store it as a str"
    )
    assert _unstorable_metadata({"n": MIN_METADATA_INT - 1}) == (
        "metadata['n'] is an int of 64 bits; Milvus holds 64-bit integers (-2**63 to 2**63-1): "
        "store it as a str"
    )


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_floats_are_refused(value: float) -> None:
    assert _unstorable_metadata({"x": value}) == (
        f"metadata['x'] is the float {value!r}, which JSON cannot hold: store None or a str"
    )


def test_lone_surrogates_in_values_and_keys() -> None:
    assert _unstorable_metadata({"t": ["ok", "a\ud800"]}) == (
        "metadata['t'][1] is a str holding a lone surrogate: replace it (U+FFFD) or drop it"
    )
    assert _unstorable_metadata({"outer": {"k\udc00": 1}}) == (
        "metadata['outer'] has the key 'k\\udc00', which holds a lone surrogate"
    )


def test_keys_must_be_str_and_the_first_problem_is_named() -> None:
    assert _unstorable_metadata({"a": {1: "x"}}) == (
        "metadata['a'] has the key 1 of type int: keys must be str"
    )
    # the first unstorable item in order, not a later one
    assert _unstorable_metadata([1, (2,), {3}]) == (
        "metadata[1] is of type builtins.tuple: use a list (a tuple comes back as a list)"
    )
    assert _unstorable_metadata({"ok": 1, "bad": None, "worse": b"x"}) == (
        "metadata['worse'] is of type builtins.bytes: decode it to str, or store it base64-encoded"
    )


class Colour(str, enum.Enum):
    RED = "red"


class Count(int):
    pass


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ((1,), "builtins.tuple: use a list (a tuple comes back as a list)"),
        ({1}, "builtins.set: use a sorted list (a set comes back as a list, or not at all)"),
        (frozenset({1}), "builtins.frozenset: use a sorted list"),
        (b"x", "builtins.bytes: decode it to str, or store it base64-encoded"),
        (bytearray(b"x"), "builtins.bytearray: decode it to str, or store it base64-encoded"),
        (datetime.datetime(2024, 1, 2), "datetime.datetime: store value.isoformat() (a str)"),
        (datetime.date(2024, 1, 2), "datetime.date: store value.isoformat() (a str)"),
        (datetime.time(3, 4), "datetime.time: store value.isoformat() (a str)"),
        (decimal.Decimal("1.5"), "decimal.Decimal: store str(value) or float(value)"),
        (Colour.RED, f"{__name__}.Colour: convert it to one of these first"),
        (Count(3), f"{__name__}.Count: convert it to one of these first"),
    ],
)
def test_values_of_other_types_name_the_type_and_a_fix(value: object, expected: str) -> None:
    assert _unstorable_metadata({"v": value}) == f"metadata['v'] is of type {expected}"


def node(text: str = "fine", node_id: str = "n1", document: str | None = None, **metadata):
    relationships = {}
    if document is not None:
        relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=document)
    return TextNode(text=text, id_=node_id, metadata=metadata, relationships=relationships)


def test_text_size_is_counted_in_utf8_bytes_up_to_the_limit() -> None:
    assert MAX_TEXT_BYTES == 65_535
    check_storable_nodes([node("a" * MAX_TEXT_BYTES)])
    check_storable_nodes([node("é" * 5)], max_text_bytes=10)  # 10 bytes: fits exactly
    with pytest.raises(ValueError) as error:
        check_storable_nodes([node(), node("é" * 6, node_id="n2", document="d")], max_text_bytes=10)
    assert str(error.value) == (
        "node 'n2' of document 'd' holds 12 bytes of text; a Milvus text field holds at most "
        "10: cut it first (the pack's parsers cut sentences longer than max_sentence_chars)"
    )
    with pytest.raises(ValueError, match=r"holds 65,536 bytes of text; .* at most 65,535:"):
        check_storable_nodes([node("a" * (MAX_TEXT_BYTES + 1))])


def test_a_lone_surrogate_in_the_text_names_its_position() -> None:
    with pytest.raises(ValueError) as error:
        check_storable_nodes([node("ab\ud800c", document_id="doc-7")])
    assert str(error.value) == (
        "node 'n1' of document 'doc-7' holds a lone surrogate at character 2, which Milvus "
        "cannot store; parse the document with the pack's parsers (they replace it with "
        "U+FFFD) or clean the text"
    )
    assert isinstance(error.value.__cause__, UnicodeEncodeError)


def test_unstorable_metadata_names_the_node_the_key_and_what_is_allowed() -> None:
    with pytest.raises(ValueError) as error:
        check_storable_nodes([node(when=datetime.date(2024, 1, 2))])
    assert str(error.value) == (
        "node 'n1' has metadata Milvus cannot store as it is: metadata['when'] is of type "
        "datetime.date: store value.isoformat() (a str). Allowed: " + _STORABLE_METADATA
    )
    assert _STORABLE_METADATA == (
        "str (no lone surrogate), int within 64 bits, finite float, bool, None, and lists and "
        "dicts with str keys of these"
    )
    check_storable_nodes([node(year=2024, tags=["a"], score=0.5, flag=None)])
