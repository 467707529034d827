"""SafePandasQueryEngine: answers, refusal as a normal outcome (one retry), no LLM, traces,
drop-in arguments, and no logging or import side effects."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from advrag_testing import ScriptedLLM
from llama_index.core import Settings
from llama_index.core.llms import MockLLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag import SafePandasQueryEngine
from llama_index_ext_advrag.tables.pandas_engine import (
    MAX_TRACED_VALUE_CHARS,
    Attempt,
    extract_code,
    should_retry,
    write_attempt,
)
from llama_index_ext_advrag.tables.pandas_sandbox import (
    SandboxLimits,
    SandboxResult,
    sandbox_barrier,
)
from llama_index_ext_advrag.trace import TRACE_KEY

LIMITS = SandboxLimits(timeout_seconds=60, cpu_seconds=3, memory_mb=256)
# what every run's trace says of the sandbox: the kernel barrier applied, how the child started
SANDBOX = {"path": "forked"} | (
    {"barrier": sandbox_barrier()} if sandbox_barrier() != "none" else {"barrier": "none"}
)
GOOD = "```python\nlen(df[df['Age'] > 60])\n```"
BAD = "```python\ndf.to_csv('out.csv')\n```"
FAILING = "```python\ndf['Missing'].sum()\n```"


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]})


def engine(df: pd.DataFrame, llm, **kwargs) -> SafePandasQueryEngine:
    return SafePandasQueryEngine(df, llm=llm, name="people", limits=LIMITS, **kwargs)


def pandas_trace(response) -> dict:
    return response.metadata[TRACE_KEY]["pandas"]


def test_answers_with_the_computed_value(df: pd.DataFrame) -> None:
    llm = ScriptedLLM([GOOD])
    response = engine(df, llm).query("How many are older than 60?")
    assert str(response) == "2"
    trace = pandas_trace(response)
    assert trace["outcome"] == "answered" and trace["value"] == 2 and trace["table"] == "people"
    assert trace["attempts"] == [
        {"code": "len(df[df['Age'] > 60])", "run": {"ok": True, "kind": "int", **SANDBOX}}
    ]
    assert response.metadata["pandas_instruction_str"] == GOOD
    assert response.metadata["raw_pandas_output"] == "2"
    assert len(llm.prompts) == 1 and "Ann" in llm.prompts[0]


def test_refused_then_corrected_code_answers(df: pd.DataFrame) -> None:
    llm = ScriptedLLM([BAD, GOOD])
    response = engine(df, llm).query("How many are older than 60?")
    assert str(response) == "2"
    attempts = pandas_trace(response)["attempts"]
    assert attempts[0]["refused"] == "method 'to_csv' is not allowed"
    assert "run" in attempts[1] and len(llm.prompts) == 2
    retry = llm.prompts[1]
    assert "df.to_csv('out.csv')" in retry and "refused: method 'to_csv' is not allowed" in retry


def test_refused_twice_answers_with_the_description(df: pd.DataFrame) -> None:
    llm = ScriptedLLM([BAD])
    response = engine(df, llm, description="People: Name and Age").query("q")
    assert len(llm.prompts) == 2  # exactly one retry
    assert str(response) == (
        "No answer was computed from table 'people' (the generated code was refused).\n"
        "People: Name and Age"
    )
    trace = pandas_trace(response)
    assert trace["outcome"] == "refused" and trace["reason"] == "the generated code was refused"
    assert [a["refused"] for a in trace["attempts"]] == ["method 'to_csv' is not allowed"] * 2
    assert [a["code"] for a in trace["attempts"]] == ["df.to_csv('out.csv')"] * 2


def test_an_error_is_retried_once_with_the_error(df: pd.DataFrame) -> None:
    llm = ScriptedLLM([FAILING, GOOD])
    response = engine(df, llm).query("q")
    assert str(response) == "2" and "KeyError" in llm.prompts[1]
    assert pandas_trace(response)["attempts"][0]["run"]["ok"] is False


def test_failing_twice_answers_with_the_description(df: pd.DataFrame) -> None:
    llm = ScriptedLLM([FAILING])
    response = engine(df, llm).query("q")
    assert str(response).startswith("No answer was computed from table 'people' (the generated")
    assert pandas_trace(response)["outcome"] == "failed" and len(llm.prompts) == 2


@pytest.mark.parametrize("retries", [0, 2, 3])
def test_max_retries_bounds_the_llm_calls(df: pd.DataFrame, retries: int) -> None:
    llm = ScriptedLLM([BAD])
    response = engine(df, llm, max_retries=retries).query("q")
    assert len(llm.prompts) == retries + 1
    assert len(pandas_trace(response)["attempts"]) == retries + 1


def test_prose_instead_of_code_is_refused_and_retried(df: pd.DataFrame) -> None:
    llm = ScriptedLLM(["I cannot answer that, sorry.", GOOD])
    response = engine(df, llm).query("q")
    assert pandas_trace(response)["attempts"][0]["refused"].startswith("not valid Python")
    assert str(response) == "2"


# --- the pure retry decision ---------------------------------------------------------------


def attempt(refused: str | None = None, result: SandboxResult | None = None) -> Attempt:
    return Attempt("out", "code", refused, result)


def test_should_retry_decisions() -> None:
    ok = SandboxResult(True, text="1", value=1)
    error = SandboxResult(False, error="KeyError: 'x'")
    limit = SandboxResult(False, error="timeout", limit="timeout")
    assert should_retry([attempt(refused="r")], 1) is True
    assert should_retry([attempt(result=error)], 1) is True
    assert should_retry([attempt(result=ok)], 1) is False
    assert should_retry([attempt(result=limit)], 1) is False  # the same bomb would hit it again
    assert should_retry([attempt(refused="r")] * 2, 1) is False
    assert should_retry([attempt(refused="r")] * 2, 2) is True
    assert should_retry([attempt(refused="r")], 0) is False


def test_attempt_reasons_and_records() -> None:
    assert attempt(refused="x").reason == "refused: x"
    assert attempt(result=SandboxResult(False, error="E")).reason == "failed: E"
    assert attempt(result=SandboxResult(True)).reason is None
    assert attempt(result=SandboxResult(True)).answered
    long_code = Attempt("o", "x" * 5000, "r").to_dict()["code"]
    assert len(long_code) == 2000


def test_write_attempt_extracts_and_checks() -> None:
    assert write_attempt(GOOD) == Attempt(GOOD, "len(df[df['Age'] > 60])", None)
    assert write_attempt(BAD).refused == "method 'to_csv' is not allowed"
    assert extract_code("Here:\n```py\nlen(df)\n```\nDone") == "len(df)"
    assert extract_code("`len(df)`") == "len(df)"


# --- limits hit: no retry --------------------------------------------------------------------


def test_a_memory_bomb_is_not_retried(df: pd.DataFrame) -> None:
    llm = ScriptedLLM(["```python\ndf['Name'] * 1000000000000000\n```"])
    response = engine(df, llm).query("q")
    assert len(llm.prompts) == 1
    trace = pandas_trace(response)
    assert trace["outcome"] == "failed" and trace["attempts"][0]["run"]["limit"] == "memory"


# --- no LLM ----------------------------------------------------------------------------------


def test_no_llm_answers_with_the_description(df, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", None)
    response = SafePandasQueryEngine(df, name="people", description="People table").query("q")
    assert str(response) == (
        "No answer was computed from table 'people' (no LLM to write pandas code).\nPeople table"
    )
    assert pandas_trace(response) == {
        "table": "people", "outcome": "no_llm", "attempts": [],
        "reason": "no LLM to write pandas code",
    }  # fmt: skip


def test_mock_llm_counts_as_no_llm(df, monkeypatch) -> None:
    monkeypatch.setattr(Settings, "_llm", None)
    Settings.llm = None  # core installs its MockLLM
    try:
        for llm in (None, MockLLM()):
            response = SafePandasQueryEngine(df, llm=llm, name="people").query("q")
            trace = pandas_trace(response)
            assert trace["outcome"] == "no_llm" and trace["attempts"] == []
            assert "not valid Python" not in json.dumps(response.metadata)
            assert "no LLM" in str(response)
    finally:
        monkeypatch.setattr(Settings, "_llm", None)


# --- sync and async --------------------------------------------------------------------------


async def test_sync_and_async_give_the_same_response(df: pd.DataFrame) -> None:
    sync = engine(df, ScriptedLLM([BAD, GOOD])).query(QueryBundle("q"))
    asynchronous = await engine(df, ScriptedLLM([BAD, GOOD])).aquery(QueryBundle("q"))
    assert str(sync) == str(asynchronous) == "2"
    assert sync.metadata == asynchronous.metadata


async def test_async_refusal_path(df: pd.DataFrame) -> None:
    response = await engine(df, ScriptedLLM([BAD])).aquery("q")
    assert pandas_trace(response)["outcome"] == "refused"


# --- drop-in arguments -----------------------------------------------------------------------


def test_synthesize_response_uses_the_llm(df: pd.DataFrame) -> None:
    llm = ScriptedLLM([GOOD, "Two people are older than 60."])
    response = engine(df, llm, synthesize_response=True).query("How many are over 60?")
    assert str(response) == "Two people are older than 60."
    assert "Result: 2" in llm.prompts[1]


def test_prompts_can_be_read_and_replaced(df: pd.DataFrame) -> None:
    qe = engine(df, ScriptedLLM([GOOD]))
    assert set(qe.get_prompts()) == {"pandas_prompt", "retry_prompt", "response_synthesis_prompt"}
    qe.update_prompts({"pandas_prompt": PromptTemplate("T {df_str} {query_str} {instruction_str}")})
    qe.query("hello")
    assert qe.get_prompts()["pandas_prompt"].get_template().startswith("T ")


def test_custom_instruction_and_output_kwargs(df: pd.DataFrame) -> None:
    llm = ScriptedLLM(["```python\ndf['Name'].str.cat(sep=' and ')\n```"])
    qe = engine(df, llm, instruction_str="ONLY PANDAS", output_kwargs={"max_colwidth": 5})
    qe.query("q")
    assert "ONLY PANDAS" in llm.prompts[0]
    assert qe.limits.display["display.max_colwidth"] == 5


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [({"head": 0}, "head"), ({"max_retries": 4}, "max_retries"), ({"max_retries": -1}, "max_retries"),
     ({"instruction_parser": object()}, "instruction_parser")],
)  # fmt: skip
def test_invalid_arguments_name_the_value(df, kwargs, named) -> None:
    with pytest.raises(ValueError, match=named):
        SafePandasQueryEngine(df, **kwargs)


def test_input_frame_is_not_modified(df: pd.DataFrame) -> None:
    before = df.copy()
    engine(df, ScriptedLLM(["```python\ndf['Age'] = 0\n```"])).query("q")
    pd.testing.assert_frame_equal(df, before)


# --- no side effects of importing or using the route -------------------------------------------

SIDE_EFFECTS = """
import logging, sys, warnings
warnings.simplefilter("default")
sys.path[:0] = [{root!r}, {tests!r}]
import pandas as pd
from advrag_testing import ScriptedLLM
from llama_index_ext_advrag import SafePandasQueryEngine
before = list(logging.getLogger().handlers)
options = pd.get_option("display.max_rows")
engine = SafePandasQueryEngine(pd.DataFrame({{"a": [1, 2]}}), llm=ScriptedLLM(["df['a'].sum()"]))
answer = str(engine.query("total?"))
assert answer == "3", answer
assert logging.getLogger().handlers == before, logging.getLogger().handlers
assert not logging.getLogger().handlers
assert pd.get_option("display.max_rows") == options
assert "llama_index.experimental" not in sys.modules
import llama_index_ext_advrag
assert llama_index_ext_advrag.__file__.startswith({root!r})
print("clean")
"""


def test_using_the_route_adds_no_root_handler_and_imports_no_experimental(tmp_path) -> None:
    here = Path(__file__).resolve()
    script = SIDE_EFFECTS.format(root=str(here.parents[2]), tests=str(here.parents[1]))
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "clean"
    assert "deprecat" not in done.stderr.lower()


# --- cells and answers the child's reply must carry whole --------------------------------

LINE_BREAKS = ["\u0085", "\u2028", "\u2029"]


@pytest.fixture
def products() -> pd.DataFrame:
    names = [f"kettle{b}steel" for b in LINE_BREAKS] + ["toaster"]
    return pd.DataFrame({"product": names, "units": [3, 7, 9, 12]})


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    "code", ['df["product"].tolist()', 'df[df["units"] > 6]', 'df["product"].str.cat(sep="|")']
)
def test_cells_holding_unicode_line_breaks_are_answered(
    mode: str, code: str, products: pd.DataFrame
) -> None:
    """U+0085, U+2028, U+2029 in cells: the child's one-line JSON answer is not split on them."""
    table = SafePandasQueryEngine(
        products, llm=ScriptedLLM([f"```python\n{code}\n```"]), name="shop", limits=LIMITS
    )
    if mode == "sync":
        response = table.query("Which products?")
    else:
        response = asyncio.run(table.aquery("Which products?"))
    trace = pandas_trace(response)
    assert trace["outcome"] == "answered", trace
    expected = eval(code, {"df": products})  # the trusted code above, run by plain pandas
    if isinstance(expected, pd.DataFrame):
        assert trace["value"]["data"] == expected.values.tolist()
        assert "toaster" in str(response) and "kettle" in str(response)
    else:
        assert trace["value"] == expected and str(response) == str(expected)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_an_answer_over_the_output_cap_is_a_clear_error(mode: str) -> None:
    """A 5 MB cell as the answer: the error names the cap (not "no answer"), no retry."""
    big = pd.DataFrame({"note": ["x" * 5_000_000], "n": [1]})
    llm = ScriptedLLM(["```python\ndf['note'].iloc[0]\n```"])
    table = SafePandasQueryEngine(big, llm=llm, name="notes", limits=LIMITS)
    response = table.query("q") if mode == "sync" else asyncio.run(table.aquery("q"))
    trace = pandas_trace(response)
    assert trace["outcome"] == "failed" and len(trace["attempts"]) == 1  # a limit: no retry
    run = trace["attempts"][0]["run"]
    assert run["limit"] == "output" and "cap of 4,000,000 bytes" in run["error"], run
    assert "no answer" not in run["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_large_value_is_not_kept_whole_in_the_trace(mode: str) -> None:
    """A 2.6 MB answer: the text is cut to max_chars, the trace keeps no value over its bound."""
    big = pd.DataFrame({"note": ["y" * 2_600_000], "n": [1]})
    llm = ScriptedLLM(["```python\ndf['note'].iloc[0]\n```"])
    table = SafePandasQueryEngine(big, llm=llm, name="notes", limits=LIMITS)
    response = table.query("q") if mode == "sync" else asyncio.run(table.aquery("q"))
    trace = pandas_trace(response)
    assert trace["outcome"] == "answered" and trace["value"] is None
    assert "2,600,002 characters" in trace["value_omitted"]
    assert str(response) == "y" * LIMITS.max_chars + " ..."
    assert len(json.dumps(trace)) < 2 * MAX_TRACED_VALUE_CHARS


def test_a_value_at_the_trace_bound_is_kept() -> None:
    from llama_index_ext_advrag.tables.pandas_engine import traced_value

    at_bound = "z" * (MAX_TRACED_VALUE_CHARS - 2)  # its JSON adds the two quotes
    assert traced_value(at_bound) == {"value": at_bound}
    over = traced_value(at_bound + "z")
    assert (
        over["value"] is None
        and f"{MAX_TRACED_VALUE_CHARS + 1:,} characters" in over["value_omitted"]
    )
