"""The deny-by-default check: decision logic at every limit, allowlist membership, and a
property test over random syntax trees."""

from __future__ import annotations

import ast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from llama_index_ext_advrag.tables import pandas_allowlist as allow
from llama_index_ext_advrag.tables.pandas_check import (
    UnsafeCodeError,
    check_pandas_code,
    refusal_reason,
)

ACCEPTED = [
    "len(df[df['Age'] > 60])",
    "df.groupby('City')['Age'].agg(['sum', 'mean'])",
    "df.groupby('City').agg(total=('Age', 'sum'), n=('Name', 'count'))",
    "df.agg({'Age': ['min', 'max'], 'Name': 'count'})",
    "df.pivot_table(index='City', values='Age', aggfunc='mean')",
    "df['Age'].apply('abs')",
    "df.sort_values('Age', ascending=False).iloc[0]['Name']",
    "x = df['Net'].str.replace('$', '').astype(float)\nround(x.sum(), 1)",
    "df.loc[df['Age'].idxmax(), 'Name']",
    "(df['Age'] > 60) & (df['City'] == 'Oslo')",
    "~df['Name'].isin(['Ann'])",
    "df['Age'] ** 2 + df['Age'] ** 0.5",
    "np.where(df['Age'] > 60, 'old', 'young')",
    "pd.to_numeric(df['Age'], errors='coerce').mean()",
    "df['Date'].dt.year.value_counts()",
    "df.nlargest(3, 'Age')[['Name', 'Age']]",
    "df['Age'].astype(float).map(str)",
    "df.shape[0] if len(df) else None",
    "np.nan",
    "df.iloc[1:3, 0:2]",
]


@pytest.mark.parametrize("code", ACCEPTED)
def test_analyst_code_is_accepted(code: str) -> None:
    check_pandas_code(code)
    assert refusal_reason(code) is None


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        ('df.agg("to_"+"csv", 0, "out.csv")', "at most 1 positional"),
        ('df.agg("to_"+"csv")', "literal aggregation name"),
        ("df.agg('to_csv')", "listed aggregation, got 'to_csv'"),
        ("df.agg(['sum', 'eval'])", "literal aggregation name"),
        ("df.agg({'Age': 'query'})", "literal aggregation name"),
        ("df.agg(x=('Age', 'to_csv'))", "named aggregation"),
        ("df.pivot_table(values='Age', aggfunc='to_csv')", "listed aggregation"),
        ("np.ones((100000, 100000))", "np.ones() is not allowed"),
        ("pd.set_eng_float_format(3)", "pd.set_eng_float_format() is not allowed"),
        ("df.to_string('out.txt')", "method 'to_string' is not allowed"),
        ("df.head(10, 20)", "head() takes at most 1 positional"),
        ("df.sort_values('Age', key=abs)", "keyword 'key' is not allowed for sort_values()"),
        ("df.sum", "method 'sum' must be called"),
        ("pd", "module 'pd' may only be used"),
        ("pd.read_csv", "pd.read_csv is not an allowed constant"),
        ("len", "builtin 'len' may only be called"),
        ("open('x')", "calling 'open' is not allowed"),
        ("df.__class__", "attribute '__class__' is not allowed"),
        ("x = 1\nx()", "calling 'x' is not allowed"),
        ("y", "name 'y' is not allowed"),
        ("pd = 1", "assigning the name 'pd'"),
        ("_x = 1", "assigning the name '_x'"),
        ("a, b = 1, 2", "one plain name"),
        ("df['a'] = 1", "one plain name"),
        ("import os", "Import statements are not allowed"),
        ("lambda: 0", "Lambda is not allowed"),
        ("[x for x in df]", "ListComp is not allowed"),
        ("f'{df}'", "JoinedStr is not allowed"),
        ("(x := 1)", "NamedExpr is not allowed"),
        ("'a' * 3", "repeating a sequence"),
        ("list(df['Name']) * 3", "repeating a sequence"),
        ("'%s' % df", "'%' string formatting"),
        ("2 ** 11", "'**' needs a literal exponent"),
        ("2 ** df['Age']", "'**' needs a literal exponent"),
        ("(2 ** 10) ** 10", "'**' of a '**'"),
        ("1 << 3", "operator LShift"),
        ("df @ df", "operator MatMult"),
        ("b'x'", "bytes literals"),
        ("...", "ellipsis literals"),
        ("df[", "not valid Python"),
        ("", "no code"),
        ("df.head(**{'n': 1})", "'**' unpacking"),
        ("df.head(*[1])", "Starred is not allowed"),
        ("{**{}}", "'**' unpacking"),
        ("df(1)", "calling 'df' is not allowed"),
        ("df['Age']()", "calling a Subscript"),
    ],
)
def test_refusals_name_the_reason(code: str, reason: str) -> None:
    with pytest.raises(UnsafeCodeError) as refused:
        check_pandas_code(code)
    assert reason in refused.value.reason
    assert refused.value.code == code
    assert refusal_reason(code) == refused.value.reason


# --- limits, exactly at and one past the bound ---------------------------------------------


def test_integer_literal_bound() -> None:
    check_pandas_code(f"df.head({allow.MAX_ABS_INT})")
    check_pandas_code(f"df.head(-{allow.MAX_ABS_INT})")
    assert "integer literal" in refusal_reason(f"df.head({allow.MAX_ABS_INT + 1})")


def test_string_literal_bound() -> None:
    check_pandas_code(repr("x" * allow.MAX_STRING_CHARS))
    assert "string literal" in refusal_reason(repr("x" * (allow.MAX_STRING_CHARS + 1)))


def test_collection_bound() -> None:
    items = ", ".join(["1"] * allow.MAX_COLLECTION_ITEMS)
    more = f"{items}, 1"
    for left, right in ("[]", "()", "{}"):
        check_pandas_code(f"{left}{items}{right}")
        assert "more than" in refusal_reason(f"{left}{more}{right}")
    pairs = ", ".join(f"{i}: 1" for i in range(allow.MAX_COLLECTION_ITEMS))
    check_pandas_code("{" + pairs + "}")
    assert "more than" in refusal_reason("{" + pairs + ", -1: 1}")


def test_exponent_bound() -> None:
    check_pandas_code(f"df['Age'] ** {allow.MAX_EXPONENT}")
    check_pandas_code(f"df['Age'] ** -{allow.MAX_EXPONENT}")
    assert "exponent" in refusal_reason(f"df['Age'] ** {allow.MAX_EXPONENT + 1}")
    assert "exponent" in refusal_reason(f"df['Age'] ** {allow.MAX_EXPONENT}.5")


def test_statement_bound() -> None:
    check_pandas_code("x = 1\n" * (allow.MAX_STATEMENTS - 1) + "x")
    assert "statements" in refusal_reason("x = 1\n" * allow.MAX_STATEMENTS + "x")


def test_code_length_bound() -> None:
    code = "df.head()" + " " * (allow.MAX_CODE_CHARS - len("df.head()"))
    check_pandas_code(code)
    assert "longer than" in refusal_reason(code + " ")


def test_depth_bound() -> None:
    nested = "df" + "['a']" * (allow.MAX_DEPTH // 2 - 2)
    check_pandas_code(nested)
    assert "nested" in refusal_reason("df" + "['a']" * allow.MAX_DEPTH)
    assert "nested" in refusal_reason("1" + " + 1" * 900)  # no RecursionError escapes


def test_node_bound() -> None:
    # one statement "a=[1,...]" with n items has n + 5 nodes (Assign, Name, Store, List, Load)
    statement = "a=[" + ",".join(["1"] * 795) + "]\n"
    statements = allow.MAX_NODES // 800
    check_pandas_code(statement * statements + "a")
    assert "syntax nodes" in refusal_reason(statement * (statements + 1) + "a")


def test_positional_bound_for_every_method() -> None:
    for name, spec in allow.METHODS.items():
        first = "'sum'" if name in allow.DISPATCH_METHODS else "1"
        args = ", ".join([first, *["1"] * (spec.positional - 1)][: spec.positional])
        check_pandas_code(f"df.{name}({args})")
        too_many = ", ".join(["1"] * (spec.positional + 1))
        if name not in allow.DISPATCH_METHODS:
            assert "positional" in refusal_reason(f"df.{name}({too_many})"), name


def test_only_listed_keywords_for_every_method() -> None:
    for name, spec in allow.METHODS.items():
        for keyword in spec.keywords - allow.DISPATCH_KEYWORDS:
            check_pandas_code(f"df.{name}({keyword}=1)")
        if name not in {"agg", "aggregate"}:
            assert "not allowed" in refusal_reason(f"df.{name}(path_or_buf=1)"), name


# --- allowlist membership ------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(allow.AGGREGATIONS))
def test_every_listed_aggregation_dispatches(name: str) -> None:
    for method in sorted(allow.DISPATCH_METHODS):
        check_pandas_code(f"df.{method}({name!r})")
        check_pandas_code(f"df.{method}(func={name!r})")


def test_dangerous_names_are_on_no_list() -> None:
    dangerous = {
        "eval", "query", "pipe", "to_csv", "to_pickle", "to_string", "to_json", "to_excel",
        "to_sql", "to_parquet", "to_html", "read_csv", "info", "style", "plot", "save", "load",
        "tofile", "dump", "format", "format_map", "set_option", "set_eng_float_format",
        "option_context", "memmap", "fromfile", "getattr", "setattr", "open", "exec", "compile",
        "vars", "globals", "locals", "type", "object", "range", "print", "__import__", "assign",
        "repeat", "ones", "zeros", "full", "arange", "concat", "sample", "reindex",
    }  # fmt: skip
    lists = [
        allow.METHODS, allow.PROPERTIES, allow.AGGREGATIONS, allow.PANDAS_FUNCTIONS,
        allow.NUMPY_FUNCTIONS, allow.BUILTIN_FUNCTIONS, allow.BUILTIN_TYPES,
        allow.PANDAS_CONSTANTS, allow.NUMPY_CONSTANTS,
    ]  # fmt: skip
    for listed in lists:
        assert not dangerous & set(listed)
    assert "empty" not in allow.NUMPY_FUNCTIONS  # df.empty is a property; np.empty allocates


def test_no_listed_name_starts_with_an_underscore() -> None:
    names = [*allow.METHODS, *allow.PROPERTIES, *allow.PANDAS_FUNCTIONS, *allow.NUMPY_FUNCTIONS]
    assert not [n for n in names if n.startswith("_")]


def test_module_functions_only_from_their_own_list() -> None:
    check_pandas_code("pd.to_numeric(df['Age'])")
    check_pandas_code("np.sqrt(df['Age'])")
    assert "np.to_numeric() is not allowed" in refusal_reason("np.to_numeric(df['Age'])")
    assert "pd.sqrt() is not allowed" in refusal_reason("pd.sqrt(df['Age'])")


# --- property test: random trees of allowed and disallowed node kinds ------------------------

# Allowed leaves and wrappers, each correct in any composition the grammar builds.
ALLOWED_LEAVES = ["df", "df['Age']", "1", "2.5", "'Oslo'", "None", "True", "np.nan"]
# (``*``, ``%`` and ``**`` are left out: whether they are allowed depends on their operands,
# which the limit tests above cover.)
ALLOWED_WRAPPERS = [
    "({0} + {1})", "({0} - {1})", "({0} / {1})", "({0} > {1})", "({0} == {1})",
    "({0} & {1})", "({0} | {1})", "(not {0})", "(-{0})", "(~{0})", "({0} if {1} else {0})",
    "[{0}, {1}]", "({0}, {1})", "{{{0}: {1}}}", "{0}[{1}]", "{0}.abs()", "{0}.head({1})",
    "{0}.isin([{1}])", "{0}.fillna({1})", "len({0})", "round({0}, 2)", "np.sqrt({0})",
    "{0}.shape", "{0}.loc[{1}]", "{0}.agg('sum')", "{0}.groupby({1}).mean()",
    "{0}.where({1}, {0})", "({0} and {1})", "{0}.iloc[{1}:{1}]", "({0} ** 2.0 + 1)",
]  # fmt: skip
DISALLOWED_LEAVES = [
    "open", "__import__('os')", "b'x'", "getattr", "eval('1')", "df.to_csv", "pd.io",
    "np.load", "x", "(y := 1)", "f'{df}'", "globals()", "10 ** 100", "'a' * 9", "...",
    "df.__class__", "lambda: 0", "[z for z in df]", "df.query('a')", "1 << 2",
]  # fmt: skip
DISALLOWED_WRAPPERS = [
    "getattr({0}, {1})", "{0}.to_csv({1})", "{0}.agg({1})", "{0}.eval({1})", "{0}.pipe({1})",
    "({0} ** {1} ** 99)", "({0} @ {1})", "({0} << {1})", "vars({0})", "{0}.__class__",
    "(lambda: {0})", "[{0} for _ in {1}]", "{0}.apply(lambda r: {1})", "{0}.head(n={1}, buf=1)",
    "{0}.format({1})", "{{**{0}}}", "print({0})", "({0} * 'a')",
]  # fmt: skip


@st.composite
def programs(draw: st.DrawFn, depth: int = 3) -> tuple[str, bool]:
    """(code, every part allowed?) built from the lists above."""
    if depth == 0 or draw(st.booleans()):
        if draw(st.integers(0, 9)) == 0:
            return f"({draw(st.sampled_from(DISALLOWED_LEAVES))})", False
        return f"({draw(st.sampled_from(ALLOWED_LEAVES))})", True
    left, left_ok = draw(programs(depth=depth - 1))
    right, right_ok = draw(programs(depth=depth - 1))
    if draw(st.integers(0, 9)) == 0:
        return f"({draw(st.sampled_from(DISALLOWED_WRAPPERS)).format(left, right)})", False
    wrapper = draw(st.sampled_from(ALLOWED_WRAPPERS))
    used_ok = left_ok and (right_ok or "{1}" not in wrapper)
    return f"({wrapper.format(left, right)})", used_ok


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(depth=4))
def test_accepted_exactly_when_every_node_is_allowed(program: tuple[str, bool]) -> None:
    code, all_allowed = program
    ast.parse(code)  # the grammar only builds valid Python
    assert (refusal_reason(code) is None) == all_allowed, code


def test_the_property_grammar_really_mixes_both_kinds() -> None:
    # every disallowed leaf and wrapper on its own is refused; every allowed one accepted
    for leaf in ALLOWED_LEAVES:
        assert refusal_reason(leaf) is None, leaf
    for leaf in DISALLOWED_LEAVES:
        assert refusal_reason(leaf) is not None, leaf
    for wrapper in ALLOWED_WRAPPERS:
        assert refusal_reason(wrapper.format("df", "1")) is None, wrapper
    for wrapper in DISALLOWED_WRAPPERS:
        assert refusal_reason(wrapper.format("df", "1")) is not None, wrapper
