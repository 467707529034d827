"""Named aggregations in the pandas guard: the keyword and the message (found by mutation
testing)."""

from __future__ import annotations

from llama_index_ext_advrag.query_engine.pandas_check import check_pandas_code, refusal_reason

NAMED = 'keyword {} of agg() must be a named aggregation ("column", "<listed aggregation>")'


def test_named_aggregation_keyword_may_not_start_with_an_underscore() -> None:
    check_pandas_code("df.groupby('a').agg(total=('b', 'sum'))")
    assert refusal_reason("df.groupby('a').agg(_total=('b', 'sum'))") == NAMED.format("'_total'")


def test_named_aggregation_refusal_says_what_is_allowed() -> None:
    assert refusal_reason("df.agg(total=('a', 'nope'))") == NAMED.format("'total'")
    assert refusal_reason("df.agg(total=('a',))") == NAMED.format("'total'")
