"""Judge rerank's record of what it did, exactly (kills the mutants of
postprocessor/judge_rerank.py that test_judge_rerank.py leaves): the trace and the event per
returned node (retrieval rank, rank, grade or error, score), the warning naming the judge and
its failure, an unknown grade keeping the retrieval score, the class name and prompt modules."""

from __future__ import annotations

import logging

from advrag_testing import instrumented
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.events import JudgeRerankEvent
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.postprocessor import JudgeRerankPostprocessor


class Scripted(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [Grade.unknown(self.name, "?") if "?" in t else self.grade(0.9) for t in texts]


class Broken(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("boom")


def nodes(*texts: str) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=0.25) for i, t in enumerate(texts)
    ]


def test_the_trace_and_event_of_a_rerank() -> None:
    post = JudgeRerankPostprocessor(judge=Scripted(name="s"), top_n=2)
    with instrumented() as (events, _):
        result = post.postprocess_nodes(nodes("what?", "pump"), query_str="q")
    assert [(r.node.node_id, r.score) for r in result] == [("n1", 0.9), ("n0", 0.25)]
    first = result[0].node.metadata[TRACE_KEY]["judge_rerank"]
    assert (first["retrieval_rank"], first["rank"]) == (1, 0)
    assert first["grade"]["score"] == 0.9 and "error" not in first
    unknown = result[1].node.metadata[TRACE_KEY]["judge_rerank"]
    assert (unknown["retrieval_rank"], unknown["rank"], unknown["grade"]["score"]) == (0, 1, None)
    [event] = [e for e in events if isinstance(e, JudgeRerankEvent)]
    assert event.error is None
    assert [(o["node_id"], o["score"], o["retrieval_rank"], o["rank"]) for o in event.order] == [
        ("n1", 0.9, 1, 0),
        ("n0", 0.25, 0, 1),
    ]


def test_a_failed_judge_is_named_and_recorded(caplog) -> None:
    post = JudgeRerankPostprocessor(judge=Broken(name="broken"), top_n=1)
    with caplog.at_level(logging.WARNING), instrumented() as (events, _):
        [result] = post.postprocess_nodes(nodes("a", "b"), query_str="q")
    assert "judge broken failed; keeping the retrieval order: RuntimeError('boom')" in (
        caplog.messages
    )
    record = result.node.metadata[TRACE_KEY]["judge_rerank"]
    assert record == {"retrieval_rank": 0, "rank": 0, "error": "judge failed: RuntimeError('boom')"}
    [event] = [e for e in events if isinstance(e, JudgeRerankEvent)]
    assert event.error == "judge failed: RuntimeError('boom')"
    assert event.order == [{"node_id": "n0", "score": 0.25, **record}]


def test_class_name_and_prompt_modules() -> None:
    judge = Scripted(name="s")
    post = JudgeRerankPostprocessor(judge=judge)
    assert JudgeRerankPostprocessor.class_name() == "JudgeRerankPostprocessor"
    assert post._get_prompt_modules() == {"judge": judge}
