"""The LLM judge and CRAG against the real local llama.cpp server (Gemma 3 270M, messy replies).

The tiny model is no judge; what is checked is that whatever it replies (yes, no, rambling,
nothing) becomes a known grade in [0, 1] or an unknown grade with its reason, never an
exception, with and without log-probabilities requested.
"""

from __future__ import annotations

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges import GradeLabel, LLMRelevanceJudge
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor

pytestmark = pytest.mark.local_llm

QUERY = "What is the capital of France?"
TEXTS = ["Paris is the capital of France.", "Bananas are yellow.", "", "巴黎是法国的首都。"]


def _check(grades: list) -> None:
    assert len(grades) == len(TEXTS)
    for grade in grades:
        if grade.known:
            assert 0.0 <= grade.score <= 1.0 and grade.label is not GradeLabel.UNKNOWN
        else:
            assert grade.label is GradeLabel.UNKNOWN and grade.reason


def test_real_server_replies_never_raise(local_llm) -> None:
    judge = LLMRelevanceJudge(llm=local_llm, timeout=120, max_concurrency=2)
    _check(judge.judge(QUERY, TEXTS))


def test_real_server_with_logprobs_requested(local_llm) -> None:
    llm = local_llm.model_copy(update={"logprobs": True, "top_logprobs": 5, "max_tokens": 1})
    _check(LLMRelevanceJudge(llm=llm, timeout=120).judge(QUERY, TEXTS))


async def test_real_server_async_and_crag_pipeline(local_llm) -> None:
    judge = LLMRelevanceJudge(llm=local_llm, timeout=120)
    _check(await judge.ajudge(QUERY, TEXTS))
    crag = CRAGPostprocessor(judge=judge, llm=local_llm, upper=0.9, lower=0.5, max_rounds=1)
    nodes = [NodeWithScore(node=TextNode(text=t, id_=f"n{i}")) for i, t in enumerate(TEXTS[:2])]
    result = await crag.apostprocess_nodes(nodes, query_str=QUERY)
    for node in result:
        assert "crag" in node.node.metadata[TRACE_KEY]
