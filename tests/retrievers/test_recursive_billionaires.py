"""The billionaires workbook through the pandas route: counting and aggregation questions.

With a scripted LLM (the code a capable model writes) the answers must equal pandas' own; with
the real tiny local model the answers are whatever it manages, and the assertion is that
everything that ran was accepted by the allowlist first."""

from __future__ import annotations

import logging

import pytest
from advrag_testing import ScriptedLLM

from llama_index_ext_advrag.retrievers import RecursiveIndexNodeRetriever
from llama_index_ext_advrag.retrievers.recursive import clean_frame
from llama_index_ext_advrag.tables.pandas_check import refusal_reason
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


@pytest.mark.dataset
def test_scripted_llm_answers_match_pandas(shared_datasets, embed_model) -> None:
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
        assert results[0].node.metadata[TRACE_KEY]["pandas"]["outcome"] == "answered"


@pytest.mark.local_llm
@pytest.mark.dataset
async def test_tiny_local_model_runs_nothing_unsafe(
    shared_datasets, embed_model, local_llm
) -> None:
    # summarize=False: the sheets are described without the LLM (the local model's summaries are
    # tested in test_two_layer.py); every LLM call here is a request for pandas code.
    retriever = RecursiveIndexNodeRetriever.from_excel(
        shared_datasets / WORKBOOK,
        llm=local_llm,
        embed_model=embed_model,
        similarity_top_k=1,
        summarize=False,
    )
    answered = 0
    for question in QUESTIONS:
        results = await retriever.aretrieve(question)
        assert results, question
        pandas = results[0].node.metadata[TRACE_KEY]["pandas"]
        logger.info("%s -> %r (%s)", question, results[0].node.get_content()[:80], pandas)
        # the model was asked for code (not the no-LLM description) and the outcome is recorded
        assert pandas["attempts"], question
        assert pandas["outcome"] in {"answered", "refused", "failed"}, question
        for attempt in pandas["attempts"]:  # whatever it wrote, only accepted code ran
            assert ("run" in attempt) == (refusal_reason(attempt["code"]) is None)
        if pandas["outcome"] == "answered":
            assert "run" in pandas["attempts"][-1], question
            answered += 1
    logger.info("local model: %d/%d answered", answered, len(QUESTIONS))
