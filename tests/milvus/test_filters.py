"""Filter expressions: escaping and validation (unit), and hostile values matching nothing on
real Milvus Lite and Milvus server collections."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymilvus import DataType

from llama_index_ext_advrag.milvus import eq_filter, in_filter
from llama_index_ext_advrag.milvus.filters import (
    _format_literal,
    _quote_string,
    validate_field_name,
)

# --- unit ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["id", "table_name", "_x", "Field2", "doc_id"])
def test_valid_field_names_pass(name: str) -> None:
    assert validate_field_name(name) == name


@pytest.mark.parametrize(
    "name",
    ["", "1abc", "a-b", "a b", "name == 'x'", "id or 1", "$meta", 'meta["k"]', "x\n", "and", "IN"],
)
def test_invalid_field_names_are_named_in_the_error(name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        validate_field_name(name)
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        eq_filter(name, "x")
    with pytest.raises(ValueError, match=re.escape(repr(name))):
        in_filter(name, ["x"])


@pytest.mark.parametrize("name", [None, 3])
def test_non_string_field_names_rejected(name: object) -> None:
    with pytest.raises(ValueError):
        validate_field_name(name)  # type: ignore[arg-type]


def test_quote_string_escapes_backslash_quote_and_line_breaks() -> None:
    assert _quote_string("plain") == '"plain"'
    assert _quote_string('say "hi"') == '"say \\"hi\\""'
    assert _quote_string("back\\slash") == '"back\\\\slash"'
    assert _quote_string("a\nb\rc\td") == '"a\\nb\\rc\\td"'
    assert _quote_string("it's") == '"it\'s"'
    assert _quote_string("trailing\\") == '"trailing\\\\"'
    assert _quote_string("中文 😀") == '"中文 😀"'


def test_eq_filter_keeps_sql_style_injection_inside_the_literal() -> None:
    assert (
        eq_filter("table_name", "2023' or id > 0 or name == '")
        == "table_name == \"2023' or id > 0 or name == '\""
    )
    assert eq_filter("name", 'x" or id != "') == 'name == "x\\" or id != \\""'


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (True, "true"),
        (False, "false"),
        (0, "0"),
        (-42, "-42"),
        (2**63 - 1, "9223372036854775807"),
        (1.5, "1.5"),
        (-2.0, "-2.0"),
        (1e20, "1e+20"),
        (np.int64(7), "7"),
        (np.float32(0.5), "0.5"),
        (np.bool_(True), "true"),
    ],
)
def test_scalar_literals(value: object, literal: str) -> None:
    assert _format_literal(value) == literal


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, float("nan"), float("inf")])
def test_out_of_range_numbers_rejected(value: object) -> None:
    with pytest.raises(ValueError, match=re.escape(repr(value))):
        _format_literal(value)


@pytest.mark.parametrize("value", [None, [1], {"a": 1}, b"bytes", object()])
def test_unsupported_types_rejected(value: object) -> None:
    # the message names the value, its type and what is allowed
    allowed = "expected str, int, float or bool"
    message = f"of type {type(value).__name__}: {allowed}"
    with pytest.raises(TypeError, match=re.escape(message)):
        _format_literal(value)


def test_int64_bounds_are_inclusive() -> None:
    assert _format_literal(-(2**63)) == str(-(2**63))
    assert _format_literal(2**63 - 1) == str(2**63 - 1)


def test_invalid_field_name_message_names_the_allowed_pattern() -> None:
    with pytest.raises(ValueError, match=re.escape("matching [A-Za-z_][A-Za-z0-9_]*")):
        validate_field_name("1x")


def test_in_filter_renders_lists() -> None:
    assert in_filter("id", ["a", 'b"c']) == 'id in ["a", "b\\"c"]'
    assert in_filter("n", [1, 2.5]) == "n in [1, 2.5]"
    assert in_filter("flag", [True]) == "flag in [true]"
    assert in_filter("id", (x for x in ["g1", "g2"])) == 'id in ["g1", "g2"]'


def test_in_filter_with_empty_list_is_an_empty_membership() -> None:
    assert in_filter("id", []) == "id in []"


@pytest.mark.parametrize(
    ("values", "kinds"),
    [(["a", 1], "number, string"), ([True, 1], "bool, number"), (["a", False], "bool, string")],
)
def test_in_filter_rejects_mixed_kinds_naming_them(values: list[object], kinds: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"mix {kinds}: {values!r}")):
        in_filter("field", values)


def test_in_filter_rejects_a_bare_string() -> None:
    with pytest.raises(ValueError, match="'abc'"):
        in_filter("id", "abc")


def _decode(literal: str) -> str:
    """Reference decoder of a double-quoted Milvus literal (the escapes both backends share)."""
    assert literal[0] == literal[-1] == '"'
    escapes = {"\\": "\\", '"': '"', "n": "\n", "r": "\r", "t": "\t"}
    out, body, i = [], literal[1:-1], 0
    while i < len(body):
        char = body[i]
        assert char != '"', "unescaped quote inside the literal"
        if char == "\\":
            out.append(escapes[body[i + 1]])
            i += 2
        else:
            out.append(char)
            i += 1
    return "".join(out)


@given(st.text())
def test_quote_string_round_trips_and_never_closes_early(text: str) -> None:
    literal = _quote_string(text)
    assert "\n" not in literal and "\r" not in literal
    assert _decode(literal) == text


# --- Milvus Lite and server ------------------------------------------------------------------

LEGIT_NAMES = [
    "plain",
    'say "hi"',
    "it's",
    "back\\slash",
    "trailing\\",
    "line\nbreak",
    "cr\rtab\tend",
    "2023' or id > 0 or name == '",  # stored verbatim: it must match only itself
    "中文 😀",
]
HOSTILE_VALUES = [
    "2023' or id > 0 or name == '",
    'x" or id != "',
    'x\\" or id != \\"',
    'x\\\\" || id != "',
    '" or true or "',
    'plain" or name != "',
    "\\",
    '"',
    'a\n" or id != "',
    "plain\\",
]


def _make_collection(client, name: str) -> None:
    schema = client.create_schema(auto_id=False, enable_dynamic_field=True)
    schema.add_field("id", DataType.VARCHAR, max_length=64, is_primary=True)
    schema.add_field("name", DataType.VARCHAR, max_length=256)
    schema.add_field("n", DataType.INT64)
    schema.add_field("flag", DataType.BOOL)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=2)
    index_params = client.prepare_index_params()
    index_params.add_index("vec", index_type="FLAT", metric_type="L2")
    # Session consistency: this client's queries see its own inserts, so "zero rows matched"
    # cannot come from rows not visible yet (the fixture also counts them first).
    client.create_collection(
        name, schema=schema, index_params=index_params, consistency_level="Session"
    )
    rows = [
        {
            "id": f"r{i}",
            "name": value,
            "n": i,
            "flag": i % 2 == 0,
            "vec": [float(i), 1.0],
            "label": value,  # a dynamic (JSON) field
        }
        for i, value in enumerate(LEGIT_NAMES)
    ]
    client.insert(name, rows)


def _ids(client, name: str, expression: str) -> list[str]:
    rows = client.query(name, filter=expression, output_fields=["id"])
    return sorted(row["id"] for row in rows)


@pytest.fixture
def filtered(client, collection_name: str):
    _make_collection(client, collection_name)
    assert len(_ids(client, collection_name, 'id != ""')) == len(LEGIT_NAMES)
    return client, collection_name


def test_hostile_values_match_nothing(filtered) -> None:
    client, name = filtered
    # "name" is a VARCHAR field, "label" a dynamic JSON field, "id" the primary key
    for field in ("name", "label", "id"):
        stored = set(LEGIT_NAMES) if field != "id" else set()  # a stored value matches itself
        hostile = [value for value in HOSTILE_VALUES if value not in stored]
        for value in hostile:
            assert _ids(client, name, eq_filter(field, value)) == [], (field, value)
        assert _ids(client, name, in_filter(field, hostile)) == [], field


def test_legit_values_with_quotes_match_exactly_their_row(filtered) -> None:
    client, name = filtered
    for field in ("name", "label"):
        for i, value in enumerate(LEGIT_NAMES):
            assert _ids(client, name, eq_filter(field, value)) == [f"r{i}"], (field, value)
        some = [LEGIT_NAMES[1], LEGIT_NAMES[4], LEGIT_NAMES[7]]
        assert _ids(client, name, in_filter(field, some)) == ["r1", "r4", "r7"], field


def test_empty_in_list_and_scalar_literals(filtered) -> None:
    client, name = filtered
    assert _ids(client, name, in_filter("id", [])) == []
    assert _ids(client, name, in_filter("n", [])) == []
    assert _ids(client, name, in_filter("label", [])) == []
    assert _ids(client, name, eq_filter("n", 3)) == ["r3"]
    assert _ids(client, name, in_filter("n", [0, 2])) == ["r0", "r2"]
    assert _ids(client, name, eq_filter("flag", True)) == [
        f"r{i}" for i in range(len(LEGIT_NAMES)) if i % 2 == 0
    ]
