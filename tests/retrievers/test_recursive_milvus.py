"""Table pointers (IndexNodes) stored in Milvus still route to their pandas engines."""

from __future__ import annotations

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM

from llama_index_ext_advrag.milvus import open_vector_store
from llama_index_ext_advrag.retrievers import RecursiveIndexNodeRetriever
from llama_index_ext_advrag.trace import TRACE_KEY


@pytest.mark.usefixtures("drop_after")
async def test_pointers_in_milvus_route_to_tables(milvus_uri, collection_name) -> None:
    frames = {
        "people": pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]}),
        "fruit": pd.DataFrame({"Fruit": ["apple", "pear"], "Price": [1.5, 2.0]}),
    }
    llm = ScriptedLLM(["```python\nlen(df[df['Age'] > 60])\n```"])
    store = open_vector_store(milvus_uri, collection_name, dim=64, overwrite=True)
    retriever = RecursiveIndexNodeRetriever.from_dataframes(
        frames,
        llm=llm,
        summaries={"people": "People with their names and ages", "fruit": "Fruit prices"},
        embed_model=HashEmbedding(dim=64),
        vector_store=store,
        similarity_top_k=1,
        lexical=False,
    )
    for results in (retriever.retrieve("people ages"), await retriever.aretrieve("people ages")):
        assert [r.node.get_content() for r in results] == ["2"]
        trace = results[0].node.metadata[TRACE_KEY]["recursive"]
        assert trace["route"] == ["root", "table::people"]
