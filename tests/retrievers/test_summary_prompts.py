"""Build-time LLM prompts are the caller's to replace: the two-layer unit summaries and the
table summaries of the recursive route take ``summary_prompt`` (a template or a string), and a
template without its variables is refused before anything is built."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Document
from llama_index.core.prompts import PromptTemplate

from llama_index_ext_advrag.retrievers import (
    RecursiveIndexNodeRetriever,
    TwoLayerMilvusRetriever,
)

FRAMES = {"sales": pd.DataFrame({"year": [2022, 2023], "revenue": [10, 12]})}
TABLE_SUMMARY = "Yearly revenue of the company, one row per year."
DOCS = [
    Document(text="# Pumps\n\nOpen the valve. Fill the housing with water.", id_="pump"),
    Document(text="# Kettles\n\nDescale the kettle monthly with vinegar.", id_="kettle"),
]


@pytest.mark.parametrize(
    "prompt",
    [
        "TABLE SUMMARY REQUEST\n{description}\nOne sentence:",
        PromptTemplate("TABLE SUMMARY REQUEST\n{description}\nOne sentence:"),
    ],
)
def test_the_table_summary_prompt_is_the_callers(prompt) -> None:
    llm = ScriptedLLM([TABLE_SUMMARY])
    retriever = RecursiveIndexNodeRetriever.from_dataframes(
        FRAMES, llm=llm, summary_prompt=prompt, embed_model=HashEmbedding(dim=64)
    )
    assert len(llm.prompts) == 1
    assert llm.prompts[0].startswith("TABLE SUMMARY REQUEST\nTable 'sales' (2 rows)")
    assert llm.prompts[0].endswith("One sentence:")
    hits = retriever.retrieve("What was the revenue in 2023?")
    assert hits, "the table route answered"


def test_the_default_table_summary_prompt_is_kept_without_one() -> None:
    llm = ScriptedLLM([TABLE_SUMMARY])
    RecursiveIndexNodeRetriever.from_dataframes(FRAMES, llm=llm, embed_model=HashEmbedding(dim=64))
    assert llm.prompts[0].startswith("Here is a table.\nTable 'sales'")


@pytest.mark.parametrize(
    ("prompt", "error", "words"),
    [
        ("Summarise this table.", ValueError, ["summary_prompt", "'description'"]),
        (42, TypeError, ["summary_prompt", "int"]),
    ],
)
def test_a_table_summary_prompt_without_its_variable_is_refused(prompt, error, words) -> None:
    llm = ScriptedLLM([TABLE_SUMMARY])
    with pytest.raises(error) as caught:
        RecursiveIndexNodeRetriever.from_dataframes(
            FRAMES, llm=llm, summary_prompt=prompt, embed_model=HashEmbedding(dim=64)
        )
    assert all(word in str(caught.value) for word in words), str(caught.value)
    assert llm.prompts == [], "refused before any LLM call"


@pytest.mark.milvus_lite
def test_the_two_layer_summary_prompt_is_the_callers(tmp_path: Path) -> None:
    llm = ScriptedLLM(["A unit about household appliances and how to maintain them."])
    retriever = TwoLayerMilvusRetriever.from_documents(
        DOCS, uri=str(tmp_path / "p.db"), embed_model=HashEmbedding(dim=64), llm=llm,
        summary_prompt="ROUTE CARD for the {kind} {name}:\n{content}\nCard:", route_top_k=1,
    )  # fmt: skip
    assert len(llm.prompts) == 2
    assert sorted(p.split(":\n")[0] for p in llm.prompts) == [
        "ROUTE CARD for the document Kettles",
        "ROUTE CARD for the document Pumps",
    ]
    assert all(p.endswith("Card:") for p in llm.prompts)
    assert retriever.retrieve("How do I descale a kettle?")


@pytest.mark.milvus_lite
def test_a_two_layer_summary_prompt_without_its_variables_is_refused_before_any_write(
    tmp_path: Path,
) -> None:
    llm = ScriptedLLM(["never asked"])
    path = tmp_path / "refused.db"
    with pytest.raises(ValueError, match=r"summary_prompt lacks the variables \['kind', 'name'\]"):
        TwoLayerMilvusRetriever.from_documents(
            DOCS, uri=str(path), embed_model=HashEmbedding(dim=64), llm=llm,
            summary_prompt="Summarise: {content}",
        )  # fmt: skip
    assert llm.prompts == []
    assert not path.exists(), "nothing was written"
