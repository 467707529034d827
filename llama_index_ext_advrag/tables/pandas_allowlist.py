"""What LLM-written pandas code may use: every name, method, property, keyword and literal size.

Deny by default: :mod:`.pandas_check` accepts a program only if everything in it is listed here.
The lists hold what analysts write over one table (filtering, sorting, grouping, the usual
aggregations, string and date accessors); everything else is refused, so a name missing here
costs a retry, never a hole. Method names are checked without knowing the object's type, so a
name is listed only if it is pure on every object the code can reach (DataFrame, Series, Index,
GroupBy, Rolling, the ``.str``/``.dt`` accessors, numpy arrays and scalars, Python ``str``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CallSpec:
    """How a function or method may be called: at most ``positional`` positional arguments and
    only the ``keywords`` listed."""

    positional: int = 0
    keywords: frozenset[str] = frozenset()


def _names(text: str) -> list[str]:
    """Space-separated names, so the long lists below stay readable."""
    return text.split()


def _spec(positional: int, keywords: str = "") -> CallSpec:
    return CallSpec(positional, frozenset(_names(keywords)))


# --- limits -----------------------------------------------------------------------------------

MAX_CODE_CHARS = 10_000
MAX_STATEMENTS = 20
MAX_NODES = 3_000
MAX_DEPTH = 100  # syntax tree depth: the check recurses, so no RecursionError can escape
MAX_STRING_CHARS = 500
MAX_COLLECTION_ITEMS = 1_000
MAX_ABS_INT = 10**15  # money and counts fit; the sandbox's memory limit is the backstop
MAX_EXPONENT = 10  # x ** 2, x ** 0.5; never 10 ** 10 ** 10

# --- aggregations: the only strings agg/aggregate/apply/transform/aggfunc may name -------------

AGGREGATIONS = frozenset(
    _names(
        "sum mean median min max count size nunique std var sem prod first last any all idxmax "
        "idxmin mode skew kurt cumsum cumprod cummax cummin rank abs round describe"
    )
)
DISPATCH_METHODS = frozenset({"agg", "aggregate", "apply", "transform"})
DISPATCH_KEYWORDS = frozenset({"func", "aggfunc"})

# --- methods (called on any reachable object) --------------------------------------------------

_REDUCE = "axis skipna numeric_only min_count ddof dropna"
METHODS: dict[str, CallSpec] = {
    # reductions and aggregations
    **{name: _spec(0, _REDUCE) for name in _names("sum mean median min max std var sem prod")},
    **{name: _spec(0, _REDUCE) for name in _names("count nunique any all skew kurt")},
    **{name: _spec(0, _REDUCE) for name in _names("idxmax idxmin argmax argmin")},
    **{name: _spec(0, _REDUCE) for name in _names("cumsum cumprod cummax cummin")},
    "mode": _spec(0, "dropna numeric_only"),
    "quantile": _spec(1, "q numeric_only interpolation"),
    "describe": _spec(0, "include exclude percentiles"),
    "corr": _spec(1, "method numeric_only min_periods"),
    "round": _spec(1, "decimals"),
    "abs": _spec(0),
    "size": _spec(0),
    "first": _spec(0, "numeric_only"),
    "last": _spec(0, "numeric_only"),
    "agg": _spec(1, "func axis"),
    "aggregate": _spec(1, "func axis"),
    "apply": _spec(1, "func axis"),
    "transform": _spec(1, "func axis"),
    "value_counts": _spec(0, "normalize sort ascending dropna bins subset"),
    "unique": _spec(0),
    "rank": _spec(0, "method ascending pct na_option axis"),
    "diff": _spec(1, "periods axis"),
    "pct_change": _spec(1, "periods"),
    "shift": _spec(1, "periods fill_value axis"),
    "clip": _spec(2, "lower upper"),
    # selection, ordering and shape
    "head": _spec(1, "n"),
    "tail": _spec(1, "n"),
    "nlargest": _spec(2, "n columns keep"),
    "nsmallest": _spec(2, "n columns keep"),
    "sort_values": _spec(1, "by ascending na_position ignore_index"),
    "sort_index": _spec(0, "ascending axis"),
    "reset_index": _spec(0, "drop name"),
    "set_index": _spec(1, "keys drop"),
    "rename": _spec(1, "columns index axis"),
    "filter": _spec(1, "items like regex axis"),
    "drop": _spec(1, "labels columns index axis errors"),
    "drop_duplicates": _spec(1, "subset keep ignore_index"),
    "duplicated": _spec(1, "subset keep"),
    "dropna": _spec(0, "subset how axis thresh"),
    "fillna": _spec(1, "value"),
    "isna": _spec(0),
    "isnull": _spec(0),
    "notna": _spec(0),
    "notnull": _spec(0),
    "isin": _spec(1, "values"),
    "between": _spec(2, "left right inclusive"),
    "where": _spec(2, "cond other"),
    "mask": _spec(2, "cond other"),
    "select_dtypes": _spec(0, "include exclude"),
    "astype": _spec(1, "dtype errors"),
    "replace": _spec(2, "to_replace value regex"),
    "map": _spec(1, "arg na_action"),
    "get": _spec(2, "key default"),
    "get_group": _spec(1, "name"),
    "nth": _spec(1, "n"),
    "cumcount": _spec(0, "ascending"),
    "groupby": _spec(1, "by level as_index sort dropna observed"),
    "pivot_table": _spec(0, "values index columns aggfunc fill_value margins dropna observed"),
    "pivot": _spec(0, "index columns values"),
    "melt": _spec(0, "id_vars value_vars var_name value_name"),
    "stack": _spec(0),
    "unstack": _spec(1, "level fill_value"),
    "explode": _spec(1, "column ignore_index"),
    "rolling": _spec(1, "window min_periods center"),
    "expanding": _spec(0, "min_periods"),
    "transpose": _spec(0),
    "copy": _spec(0),
    "equals": _spec(1),
    "keys": _spec(0),
    "item": _spec(0),
    # conversions to plain data (no path, buffer or writer arguments)
    "tolist": _spec(0),
    "to_list": _spec(0),
    "to_numpy": _spec(0),
    "to_frame": _spec(1, "name"),
    "to_dict": _spec(1, "orient"),
    # .str accessor and Python str
    "contains": _spec(1, "pat case na regex"),
    "startswith": _spec(1, "pat na"),
    "endswith": _spec(1, "pat na"),
    "match": _spec(1, "pat case na"),
    "fullmatch": _spec(1, "pat case na"),
    "lower": _spec(0),
    "upper": _spec(0),
    "title": _spec(0),
    "capitalize": _spec(0),
    "casefold": _spec(0),
    "strip": _spec(1, "to_strip"),
    "lstrip": _spec(1, "to_strip"),
    "rstrip": _spec(1, "to_strip"),
    "split": _spec(1, "pat n expand regex"),
    "rsplit": _spec(1, "pat n expand"),
    "slice": _spec(3, "start stop step"),
    "extract": _spec(1, "pat expand"),
    "findall": _spec(1, "pat"),
    "find": _spec(1, "sub"),
    "len": _spec(0),
    "join": _spec(1, "sep"),
    "cat": _spec(0, "sep na_rep"),
    "isdigit": _spec(0),
    "isnumeric": _spec(0),
    "isalpha": _spec(0),
    "isspace": _spec(0),
    # .dt accessor and timestamps
    "strftime": _spec(1, "date_format"),
    "month_name": _spec(0),
    "day_name": _spec(0),
    "normalize": _spec(0),
    "date": _spec(0),
}
METHODS["count"] = _spec(1, _REDUCE + " pat")  # Series.str.count(pat) and str.count(sub)
METHODS["replace"] = _spec(2, "to_replace value regex pat repl n case")  # also .str.replace

# Attributes read without a call (also allowed as the object of a subscript: df.loc[...]).
PROPERTIES = frozenset(
    _names(
        "shape columns index values dtypes dtype size empty ndim T name str dt loc iloc at iat "
        "is_unique hasnans is_monotonic_increasing is_monotonic_decreasing ngroups groups "
        "year month day hour minute second dayofweek day_of_week weekday quarter dayofyear "
        "day_of_year date days"
    )
)

# --- module functions and constants ----------------------------------------------------------

PANDAS_FUNCTIONS: dict[str, CallSpec] = {
    "to_numeric": _spec(1, "errors downcast"),
    "to_datetime": _spec(1, "errors format dayfirst yearfirst"),
    "to_timedelta": _spec(1, "unit errors"),
    "isna": _spec(1),
    "notna": _spec(1),
    "isnull": _spec(1),
    "notnull": _spec(1),
    "cut": _spec(2, "bins labels right include_lowest"),
    "qcut": _spec(2, "q labels"),
    "Series": _spec(1, "data index name dtype"),
    "DataFrame": _spec(1, "data index columns"),
    "Timestamp": _spec(1),
    "Timedelta": _spec(1, "unit"),
    "crosstab": _spec(2, "values aggfunc normalize margins"),
    "unique": _spec(1),
}
PANDAS_CONSTANTS = frozenset({"NA", "NaT"})

NUMPY_FUNCTIONS: dict[str, CallSpec] = {
    **{
        name: _spec(1, "axis")
        for name in _names(
            "mean median sum max min std var prod nanmean nanmedian nansum nanmax nanmin "
            "argmax argmin cumsum count_nonzero"
        )
    },
    **{name: _spec(1) for name in _names("abs sqrt log log10 log2 exp floor ceil isnan isfinite")},
    "round": _spec(2, "decimals"),
    "where": _spec(3),
    "unique": _spec(1),
    "sort": _spec(1),
    "diff": _spec(1),
    "clip": _spec(3),
    "maximum": _spec(2),
    "minimum": _spec(2),
    "percentile": _spec(2, "q axis"),
    "quantile": _spec(2, "q axis"),
    "average": _spec(1, "weights axis"),
    "corrcoef": _spec(2),
}
NUMPY_CONSTANTS = frozenset({"nan", "inf", "pi"})

# --- Python builtins --------------------------------------------------------------------------

BUILTIN_FUNCTIONS: dict[str, CallSpec] = {
    "len": _spec(1),
    "round": _spec(2, "ndigits"),
    "int": _spec(1),
    "float": _spec(1),
    "str": _spec(1),
    "bool": _spec(1),
    "abs": _spec(1),
    "min": _spec(8),
    "max": _spec(8),
    "sum": _spec(1),
    "sorted": _spec(1, "reverse"),
    "list": _spec(1),
    "tuple": _spec(1),
    "set": _spec(1),
}
# Builtins that may also appear as values (``.astype(float)``, ``.map(str)``): plain types.
BUILTIN_TYPES = frozenset({"int", "float", "str", "bool"})

DATAFRAME_NAME = "df"
MODULE_NAMES = {
    "pd": (PANDAS_FUNCTIONS, PANDAS_CONSTANTS),
    "np": (NUMPY_FUNCTIONS, NUMPY_CONSTANTS),
}
RESERVED_NAMES = frozenset({"pd", "np", *BUILTIN_FUNCTIONS})

__all__ = [
    "AGGREGATIONS",
    "BUILTIN_FUNCTIONS",
    "BUILTIN_TYPES",
    "DATAFRAME_NAME",
    "DISPATCH_KEYWORDS",
    "DISPATCH_METHODS",
    "MAX_ABS_INT",
    "MAX_CODE_CHARS",
    "MAX_COLLECTION_ITEMS",
    "MAX_DEPTH",
    "MAX_EXPONENT",
    "MAX_NODES",
    "MAX_STATEMENTS",
    "MAX_STRING_CHARS",
    "METHODS",
    "MODULE_NAMES",
    "NUMPY_CONSTANTS",
    "NUMPY_FUNCTIONS",
    "PANDAS_CONSTANTS",
    "PANDAS_FUNCTIONS",
    "PROPERTIES",
    "RESERVED_NAMES",
    "CallSpec",
]
