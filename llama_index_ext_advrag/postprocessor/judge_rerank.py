"""Rerank retrieved nodes with a relevance judge and keep the best ``top_n``.

Core's ``SentenceTransformerRerank`` downloads its model at run time; with the packaged
cross-encoder (``judges`` extra) this one runs offline, and any judge (embedding, LLM,
language-routed) can rerank the same way. A node whose grade is unknown keeps its place after
the graded ones, in retrieval order. A failing judge leaves the retrieval order (cut to
``top_n``) with the failure recorded.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle

from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)

TRACE_COMPONENT = "judge_rerank"


def rerank_order(grades: list[Grade]) -> list[int]:
    """Indices by descending score; unknown grades last, ties and unknowns in input order.

    >>> from llama_index_ext_advrag.judges.base import Grade
    >>> rerank_order([Grade.from_score(0.2, "j"), Grade.unknown("j", "x"), Grade.from_score(0.9, "j")])
    [2, 0, 1]
    """
    return sorted(
        range(len(grades)),
        key=lambda i: (grades[i].score is None, -(grades[i].score or 0.0), i),
    )


def node_texts(nodes: list[NodeWithScore]) -> list[str]:
    """What a judge reads for each node: its content without metadata."""
    return [hit.node.get_content(MetadataMode.NONE) for hit in nodes]


def query_text(query_bundle: QueryBundle | None) -> str:
    if query_bundle is None:
        raise ValueError("a query is required: pass query_bundle or query_str")
    return query_bundle.query_str


class JudgeRerankPostprocessor(BaseNodePostprocessor):
    """Sort nodes by a judge's score and keep ``top_n``; the node score becomes the grade.

    Args:
        judge: any :class:`~llama_index_ext_advrag.judges.base.BaseRelevanceJudge`.
        top_n: nodes returned at most.

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> from llama_index_ext_advrag.judges import BaseRelevanceJudge
        >>> class KeywordJudge(BaseRelevanceJudge):  # a toy judge; use CrossEncoderRelevanceJudge()
        ...     def _judge(self, query, texts):
        ...         words = set(query.lower().split())
        ...         return [self.grade(float(bool(words & set(t.lower().split())))) for t in texts]
        >>> hits = [NodeWithScore(node=TextNode(text=t), score=0.5) for t in ["Cats sleep.", "Paris is sunny."]]
        >>> top = JudgeRerankPostprocessor(judge=KeywordJudge(), top_n=1).postprocess_nodes(hits, query_str="paris")
        >>> [(n.node.text, n.score) for n in top]
        [('Paris is sunny.', 1.0)]
    """

    top_n: int = Field(default=5, ge=1, description="Nodes returned at most.")

    _judge: BaseRelevanceJudge = PrivateAttr()

    def __init__(self, judge: BaseRelevanceJudge, **data: Any) -> None:
        super().__init__(**data)
        self._judge = judge

    @classmethod
    def class_name(cls) -> str:
        return "JudgeRerankPostprocessor"

    @property
    def judge(self) -> BaseRelevanceJudge:
        """The relevance judge (a live object: pass it to ``from_dict``)."""
        return self._judge

    def _finish(
        self, nodes: list[NodeWithScore], grades: list[Grade] | None, error: str | None
    ) -> list[NodeWithScore]:
        order = rerank_order(grades) if grades is not None else list(range(len(nodes)))
        results = []
        for rank, index in enumerate(order[: self.top_n]):
            result = copy_node_with_score(nodes[index])
            record: dict[str, Any] = {"retrieval_rank": index, "rank": rank}
            if grades is not None:
                grade = grades[index]
                record["grade"] = grade.to_dict()
                if grade.score is not None:
                    result.score = grade.score
            else:
                record["error"] = error
            add_trace(result.node, TRACE_COMPONENT, record)
            results.append(result)
        return results

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        query = query_text(query_bundle)
        try:
            grades, error = self.judge.judge(query, node_texts(nodes)), None
        except Exception as exc:
            logger.warning("judge %s failed; keeping the retrieval order: %r", self.judge.name, exc)
            grades, error = None, f"judge failed: {exc!r}"
        return self._finish(nodes, grades, error)

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Async :meth:`postprocess_nodes` (the judge's ``ajudge``)."""
        if not nodes:
            return []
        query = query_text(query_bundle)
        try:
            grades, error = await self.judge.ajudge(query, node_texts(nodes)), None
        except Exception as exc:
            logger.warning("judge %s failed; keeping the retrieval order: %r", self.judge.name, exc)
            grades, error = None, f"judge failed: {exc!r}"
        return self._finish(nodes, grades, error)


__all__ = ["JudgeRerankPostprocessor", "node_texts", "rerank_order"]
