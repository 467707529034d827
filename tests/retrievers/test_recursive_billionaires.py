"""The billionaires workbook through the pandas route: counting and aggregation questions.

With a scripted LLM (the code a capable model writes) the answers must equal pandas' own; with
the real tiny local model the answers are whatever it manages, and the assertion is that
everything that ran passed the guard."""

from __future__ import annotations

import ast
import logging

import pytest
from advrag_testing import ScriptedLLM

from llama_index_ext_advrag.retrievers import RecursiveIndexNodeRetriever
from llama_index_ext_advrag.retrievers.recursive import check_pandas_code, clean_frame
from llama_index_ext_advrag.trace import TRACE_KEY

logger = logging.getLogger(__name__)

WORKBOOK = "seed_scenarios/world_top10_billionaires.xlsx"
# question -> (sheet, code a capable model would write, pandas truth as a function of the sheet)
QUESTIONS = {
    "How many of the 2023 top ten billionaires are from the United States?": (
        "2023年10大首富",
        "len(df[df['Nationality'] == 'United States'])",
        lambda df: len(df[df["Nationality"] == "United States"]),
    ),
    "What is the average age of the 2019 top ten billionaires?": (
        "2019年10大首富",
        "df['Age'].mean()",
        lambda df: df["Age"].mean(),
    ),
    "How many of the 2021 top ten billionaires are older than 80?": (
        "2021年10大首富",
        "(df['Age'] > 80).sum()",
        lambda df: (df["Age"] > 80).sum(),
    ),
    "What is the total net worth in billions of the 2022 top ten?": (
        "2022年10大首富",
        "df['Net_Worth'].str.replace('$', '').str.replace(' billion', '').astype(float).sum()",
        lambda df: (
            df["Net_Worth"].str.replace("$", "").str.replace(" billion", "").astype(float).sum()
        ),
    ),
}


def scripted(prompt: str) -> str:
    for question, (_, code, _) in QUESTIONS.items():
        if question in prompt:
            return f"```python\n{code}\n```"
    return "A table of the ten richest people of one year."


@pytest.fixture
def executions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from llama_index.experimental import exec_utils

    seen: list[str] = []
    for name in ("safe_exec", "safe_eval"):
        original = getattr(exec_utils, name)

        def spy(source, *args, _original=original, **kwargs):
            seen.append(source)
            return _original(source, *args, **kwargs)

        monkeypatch.setattr(exec_utils, name, spy)
    return seen


@pytest.mark.dataset
def test_scripted_llm_answers_match_pandas(shared_datasets, embed_model, executions) -> None:
    import pandas as pd

    path = shared_datasets / WORKBOOK
    frames = {name: clean_frame(f) for name, f in pd.read_excel(path, sheet_name=None).items()}
    retriever = RecursiveIndexNodeRetriever.from_excel(
        path, llm=ScriptedLLM(scripted), embed_model=embed_model, similarity_top_k=1
    )
    for question, (sheet, _, truth) in QUESTIONS.items():
        results = retriever.retrieve(question)
        trace = results[0].node.metadata[TRACE_KEY]["recursive"]
        assert trace["route"] == ["root", f"table::{sheet}"], question
        expected = truth(frames[sheet])
        assert float(results[0].node.get_content()) == pytest.approx(float(expected)), question
    assert_ran_exactly([code for _, code, _ in QUESTIONS.values()], executions)


@pytest.mark.local_llm
@pytest.mark.dataset
async def test_tiny_local_model_runs_nothing_unsafe(
    shared_datasets, embed_model, local_llm, executions
) -> None:
    retriever = RecursiveIndexNodeRetriever.from_excel(
        shared_datasets / WORKBOOK, llm=local_llm, embed_model=embed_model, similarity_top_k=1
    )
    accepted: list[str] = []
    for question in QUESTIONS:
        results = await retriever.aretrieve(question)
        assert results, question
        answer = results[0].node.get_content()
        engine = results[0].node.metadata[TRACE_KEY]["recursive"].get("engine", {})
        logger.info(
            "%s -> %r (code %r, refused %r)",
            question,
            answer[:80],
            engine.get("pandas_code"),
            engine.get("pandas_refused"),
        )
        # the model was asked for code and the guard judged it (not the no-LLM description)
        assert "pandas_skipped" not in engine and "pandas_refused" in engine, question
        if engine["pandas_refused"] is None:
            check_pandas_code(engine["pandas_code"])
            accepted.append(engine["pandas_code"])
            assert not answer.startswith("Refused to run"), question
        else:
            assert answer.startswith("Refused to run the generated pandas code"), question
    # Only accepted code reached the evaluator, and each accepted code did reach it: its
    # statements ran in order, up to the first that raised.
    assert_ran_exactly(accepted, executions)
    assert all(check_pandas_code(source) is None for source in executions)
    logger.info(
        "local model: %d/%d answers from code that passed the guard", len(accepted), len(QUESTIONS)
    )


def assert_ran_exactly(accepted: list[str], executions: list[str]) -> None:
    """``executions`` is, code by code, a non-empty prefix of each accepted code's statements."""
    position = 0
    for code in accepted:
        statements = [ast.unparse(statement) for statement in ast.parse(code).body]
        ran = 0
        while (
            ran < len(statements)
            and position + ran < len(executions)
            and executions[position + ran] == statements[ran]
        ):
            ran += 1
        assert ran >= 1, f"accepted code never reached the evaluator: {code!r}"
        position += ran
    assert position == len(executions), f"code ran that was not accepted: {executions[position:]}"


def test_assert_ran_exactly_notices_missing_and_extra_runs() -> None:
    assert_ran_exactly(["a = 1\nb = 2", "df.x"], ["a = 1", "b = 2", "df.x"])
    assert_ran_exactly(["a = 1\nb = 2"], ["a = 1"])  # the first statement raised
    assert_ran_exactly([], [])
    with pytest.raises(AssertionError, match="never reached"):
        assert_ran_exactly(["df.x"], [])
    with pytest.raises(AssertionError, match="not accepted"):
        assert_ran_exactly([], ["__import__('os')"])
