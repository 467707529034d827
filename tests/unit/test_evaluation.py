"""Answer coverage: normalisation and the every-part rule."""

from __future__ import annotations

from llama_index_ext_advrag.evaluation import answer_covered, normalize_for_match


def test_normalize_folds_case_and_whitespace() -> None:
    assert normalize_for_match("  Hello\n\tWORLD ") == "hello world"
    assert normalize_for_match("黑神话\n悟空") == "黑神话悟空"


def test_answer_covered_requires_every_part() -> None:
    context = "The pump runs at 3.5 bar.\nIt stops at\n 40 °C."
    assert answer_covered(context, ["3.5 BAR", "40 °C"])
    assert not answer_covered(context, ["3.5 bar", "45 °C"])
    assert answer_covered(context, ["3.5 bar", "45 °C"], require_all=False)
    assert not answer_covered(context, [])
