"""SafePandasQueryEngine: the logs, prompt updates, display bounds, trace sizes and arguments
that the behaviour tests did not pin (mutation testing, issue 39)."""

from __future__ import annotations

import asyncio
import logging

import pandas as pd
import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.callbacks import CallbackManager
from llama_index.core.prompts import PromptTemplate

from llama_index_ext_advrag import SafePandasQueryEngine
from llama_index_ext_advrag.tables.pandas_engine import (
    MAX_TRACED_VALUE_CHARS,
    render_frame,
    traced_value,
)
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits
from llama_index_ext_advrag.trace import TRACE_KEY

LIMITS = SandboxLimits(timeout_seconds=60, cpu_seconds=3, memory_mb=256)
GOOD = "```python\nlen(df[df['Age'] > 60])\n```"
LOGGER = "llama_index_ext_advrag.tables.pandas_engine"


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]})


def run(engine: SafePandasQueryEngine, query: str, mode: str):
    return engine.query(query) if mode == "sync" else asyncio.run(engine.aquery(query))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_refusal_is_logged_as_a_warning_with_the_code_cut(df, caplog, mode) -> None:
    code = "df.to_csv('" + "o" * 300 + "')"
    llm = ScriptedLLM([f"```python\n{code}\n```", GOOD])
    engine = SafePandasQueryEngine(df, llm=llm, name="people", limits=LIMITS)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(engine, "q", mode)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert warnings[0].getMessage() == (
        "table 'people': refused generated pandas code (method 'to_csv' is not allowed): "
        f"{code[:200]!r}"
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failure_is_logged_at_info_with_its_reason(df, caplog, mode) -> None:
    llm = ScriptedLLM(["```python\ndf['Missing'].sum()\n```", GOOD])
    engine = SafePandasQueryEngine(df, llm=llm, name="people", limits=LIMITS)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(engine, "q", mode)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(messages) == 1 and all(r.levelno == logging.INFO for r in caplog.records)
    assert messages[0].startswith("table 'people': generated pandas code failed: failed: ")
    assert "KeyError" in messages[0]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_verbose_logs_the_code_and_its_output_cut(df, caplog, mode) -> None:
    frame = pd.DataFrame({"note": ["w" * 800]})
    llm = ScriptedLLM(["```python\ndf['note'].iloc[0]\n```"])
    engine = SafePandasQueryEngine(frame, llm=llm, name="n", limits=LIMITS, verbose=True)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        run(engine, "q", mode)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages == [f"table 'n': code \"df['note'].iloc[0]\" -> {'w' * 500!r}"]


def test_a_refused_attempt_is_logged_verbosely_without_output(df, caplog) -> None:
    llm = ScriptedLLM(["```python\ndf.to_csv('x')\n```"])
    engine = SafePandasQueryEngine(
        df, llm=llm, name="p", limits=LIMITS, verbose=True, max_retries=0
    )
    with caplog.at_level(logging.INFO, logger=LOGGER):
        engine.query("q")
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.INFO] == [
        "table 'p': code \"df.to_csv('x')\" -> None"
    ]


def test_not_verbose_logs_nothing_for_an_answer(df, caplog) -> None:
    engine = SafePandasQueryEngine(df, llm=ScriptedLLM([GOOD]), name="p", limits=LIMITS)
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        engine.query("q")
    assert [r for r in caplog.records if r.name == LOGGER] == []


def test_no_llm_is_logged_at_info(df, caplog, monkeypatch) -> None:
    from llama_index.core import Settings

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", None)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        SafePandasQueryEngine(df, name="people").query("q")
    assert [(r.levelno, r.getMessage()) for r in caplog.records if r.name == LOGGER] == [
        (
            logging.INFO,
            "table 'people': no LLM to write pandas code; answering with its description",
        )
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_every_prompt_can_be_replaced_and_is_used(df, mode) -> None:
    llm = ScriptedLLM(["```python\ndf.to_csv('x')\n```", GOOD, "phrased"])
    engine = SafePandasQueryEngine(df, llm=llm, limits=LIMITS, synthesize_response=True)
    engine.update_prompts(
        {
            "retry_prompt": PromptTemplate("RETRY {code} {reason} {query_str}"),
            "response_synthesis_prompt": PromptTemplate(
                "PHRASE {query_str} | {pandas_instructions} | {pandas_output}"
            ),
        }
    )
    response = run(engine, "how many?", mode)
    assert str(response) == "phrased"
    assert llm.prompts[1] == (
        "RETRY df.to_csv('x') refused: method 'to_csv' is not allowed how many?"
    )
    assert llm.prompts[2] == "PHRASE how many? | len(df[df['Age'] > 60]) | 2"
    prompts = engine.get_prompts()
    assert prompts["retry_prompt"].get_template().startswith("RETRY ")
    assert prompts["response_synthesis_prompt"].get_template().startswith("PHRASE ")


def test_no_synthesis_after_a_failure(df) -> None:
    llm = ScriptedLLM(["```python\ndf.to_csv('x')\n```"])
    engine = SafePandasQueryEngine(
        df, llm=llm, limits=LIMITS, synthesize_response=True, max_retries=0
    )
    response = engine.query("q")
    assert len(llm.prompts) == 1 and response.metadata[TRACE_KEY]["pandas"]["outcome"] == "refused"


def test_class_name_and_prompt_modules(df) -> None:
    engine = SafePandasQueryEngine(df, llm=ScriptedLLM([GOOD]), limits=LIMITS)
    assert engine.class_name() == "SafePandasQueryEngine"
    assert engine._get_prompt_modules() == {}


def test_the_given_callback_manager_is_kept(df) -> None:
    manager = CallbackManager([])
    engine = SafePandasQueryEngine(df, llm=ScriptedLLM([GOOD]), callback_manager=manager)
    assert engine.callback_manager is manager
    assert isinstance(SafePandasQueryEngine(df).callback_manager, CallbackManager)


def test_output_kwargs_keep_the_given_limits(df) -> None:
    limits = SandboxLimits(cpu_seconds=7, display={"display.max_rows": 3})
    engine = SafePandasQueryEngine(df, limits=limits, output_kwargs={"max_colwidth": 9})
    assert engine.limits.cpu_seconds == 7
    assert engine.limits.display == {"display.max_rows": 3, "display.max_colwidth": 9}
    default = SafePandasQueryEngine(df, output_kwargs={"max_colwidth": 9}).limits
    assert default.display == {**SandboxLimits().display, "display.max_colwidth": 9}


def test_the_description_defaults_to_the_first_head_rows() -> None:
    frame = pd.DataFrame({"n": list(range(10))})
    engine = SafePandasQueryEngine(frame, head=2)
    assert engine.description == render_frame(frame, 2) == str(frame.head(2))
    assert SafePandasQueryEngine(frame, head=2, description="D").description == "D"


def test_the_prompt_shows_head_rows(df) -> None:
    llm = ScriptedLLM([GOOD])
    SafePandasQueryEngine(df, llm=llm, head=1, limits=LIMITS).query("q")
    assert "Ann" in llm.prompts[0] and "Bo" not in llm.prompts[0]


def test_the_instruction_parser_error_says_why(df) -> None:
    with pytest.raises(ValueError) as error:
        SafePandasQueryEngine(df, instruction_parser=object())
    assert str(error.value) == (
        "instruction_parser is not supported: SafePandasQueryEngine runs code only "
        "through its allowlist and sandbox"
    )


def test_render_frame_bounds_columns() -> None:
    wide = pd.DataFrame({f"c{i}": [i] for i in range(51)})
    assert "..." in render_frame(wide, 5)
    assert "..." not in render_frame(wide.iloc[:, :50], 5)


def test_traced_value_counts_characters_not_escapes() -> None:
    letters = "é" * (MAX_TRACED_VALUE_CHARS - 2)  # escaped as \u00e9 it would be six times longer
    assert traced_value(letters) == {"value": letters}
    over = traced_value(letters + "é")
    assert over == {
        "value": None,
        "value_omitted": (
            f"the value's JSON is {MAX_TRACED_VALUE_CHARS + 1:,} characters, over the trace's "
            f"bound of {MAX_TRACED_VALUE_CHARS:,} (MAX_TRACED_VALUE_CHARS)"
        ),
    }


def test_traced_value_measures_values_json_cannot_hold() -> None:
    stamp = pd.Timestamp("2024-01-02")
    assert traced_value(stamp) == {"value": stamp}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_fallback_keeps_the_llm_output_and_no_pandas_output(df, mode) -> None:
    bad = "```python\ndf.to_csv('x')\n```"
    engine = SafePandasQueryEngine(df, llm=ScriptedLLM([bad]), limits=LIMITS, max_retries=0)
    metadata = run(engine, "q", mode).metadata
    assert metadata["pandas_instruction_str"] == bad and metadata["raw_pandas_output"] == ""
    assert set(metadata) == {"pandas_instruction_str", "raw_pandas_output", TRACE_KEY}


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_sandbox_runs_with_the_engine_limits(df, mode) -> None:
    limits = SandboxLimits(timeout_seconds=60, cpu_seconds=3, memory_mb=256, max_chars=100)
    llm = ScriptedLLM(["```python\ndf['Note'].iloc[0]\n```"])
    frame = df.assign(Note="n" * 150)
    engine = SafePandasQueryEngine(frame, llm=llm, limits=limits)
    assert str(run(engine, "q", mode)) == "n" * 100 + " ..."


def test_prompts_given_to_the_constructor_are_used(df) -> None:
    prompts = {
        "pandas_prompt": PromptTemplate("P {df_str} {query_str} {instruction_str}"),
        "retry_prompt": PromptTemplate("R {code} {reason}"),
        "response_synthesis_prompt": PromptTemplate("S {pandas_output}"),
    }
    engine = SafePandasQueryEngine(df, **prompts)
    assert {key: p.get_template() for key, p in engine.get_prompts().items()} == {
        key: p.get_template() for key, p in prompts.items()
    }


def test_the_last_fenced_block_is_the_code() -> None:
    from llama_index_ext_advrag.tables.pandas_engine import extract_code

    assert extract_code("```python\nlen(df)\n```\nor\n```python\ndf.shape[0]\n```") == "df.shape[0]"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failure_falls_back_naming_the_failure(df, mode) -> None:
    llm = ScriptedLLM(["```python\ndf['Missing'].sum()\n```"])
    engine = SafePandasQueryEngine(df, llm=llm, name="p", limits=LIMITS, max_retries=0)
    response = run(engine, "q", mode)
    assert str(response).startswith(
        "No answer was computed from table 'p' (the generated code failed)"
    )
    assert response.metadata[TRACE_KEY]["pandas"]["reason"] == "the generated code failed"


def test_no_llm_fallback_has_no_llm_output(df, monkeypatch) -> None:
    from llama_index.core import Settings

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", None)
    metadata = SafePandasQueryEngine(df, name="p").query("q").metadata
    assert metadata["pandas_instruction_str"] == "" and metadata["raw_pandas_output"] == ""


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_query_with_lone_surrogates_is_cleaned_naming_the_engine(df, caplog, mode) -> None:
    engine = SafePandasQueryEngine(df, llm=ScriptedLLM([GOOD]), limits=LIMITS)
    with caplog.at_level(logging.WARNING):
        run(engine, "bad \ud800", mode)
    assert any(
        r.getMessage().startswith("SafePandasQueryEngine: the query holds 1 lone")
        for r in caplog.records
    )
