"""JudgeRerankPostprocessor: order, top_n, unknown grades last, failures, async."""

from __future__ import annotations

import copy

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.postprocessor import JudgeRerankPostprocessor


class WordJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        grades = []
        for text in texts:
            if "?" in text:
                grades.append(Grade.unknown(self.name, "cannot tell"))
            else:
                grades.append(self.grade(sum(w in text for w in query.split()) / 3))
        return grades


class BrokenJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("boom")


def make(*texts: str) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.1 * i)
        for i, t in enumerate(texts)
    ]


def test_rerank_orders_by_grade_with_unknown_last_and_cuts_top_n() -> None:
    given = make("red", "what?", "red green blue", "red green", "none")
    before = copy.deepcopy(given)
    result = JudgeRerankPostprocessor(judge=WordJudge(), top_n=4).postprocess_nodes(
        given, query_str="red green blue"
    )
    assert [n.node.get_content() for n in result] == ["red green blue", "red green", "red", "none"]
    assert result[0].score == pytest.approx(1.0)
    trace = result[1].node.metadata[TRACE_KEY]["judge_rerank"]
    assert trace["retrieval_rank"] == 3 and trace["rank"] == 1
    assert [n.model_dump() for n in given] == [n.model_dump() for n in before]
    everything = JudgeRerankPostprocessor(judge=WordJudge(), top_n=10).postprocess_nodes(
        given, query_str="red green blue"
    )
    assert everything[-1].node.get_content() == "what?"


def test_failing_judge_keeps_retrieval_order() -> None:
    result = JudgeRerankPostprocessor(judge=BrokenJudge(), top_n=2).postprocess_nodes(
        make("a", "b", "c"), query_str="q"
    )
    assert [n.node.node_id for n in result] == ["n0", "n1"]
    assert "boom" in result[0].node.metadata[TRACE_KEY]["judge_rerank"]["error"]


async def test_async_equals_sync() -> None:
    post = JudgeRerankPostprocessor(judge=WordJudge(), top_n=3)
    given = make("red", "blue red", "x")
    sync = post.postprocess_nodes(given, query_str="red blue")
    asynchronous = await post.apostprocess_nodes(given, query_str="red blue")
    assert [n.model_dump() for n in sync] == [n.model_dump() for n in asynchronous]


def test_validation_and_empty_input() -> None:
    with pytest.raises(ValueError):
        JudgeRerankPostprocessor(judge=WordJudge(), top_n=0)
    assert JudgeRerankPostprocessor(judge=WordJudge()).postprocess_nodes([], query_str="q") == []
    with pytest.raises(ValueError, match="query"):
        JudgeRerankPostprocessor(judge=WordJudge()).postprocess_nodes(make("a"))
