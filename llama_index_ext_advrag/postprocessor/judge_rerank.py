"""Rerank retrieved nodes with a relevance judge and keep the best ``top_n``.

Core's ``SentenceTransformerRerank`` downloads its model at run time; with the packaged
cross-encoder (``judges`` extra) this one runs offline, and any judge (embedding, LLM,
language-routed) can rerank the same way. A node whose grade is unknown keeps its place after
the graded ones, in retrieval order. A failing judge leaves the retrieval order (cut to
``top_n``) with the failure recorded. The order is also emitted as a
:class:`~llama_index_ext_advrag.events.JudgeRerankEvent` inside a span per call.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptMixin, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.events import JudgeRerankEvent, RerankRecord
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade, node_texts
from llama_index_ext_advrag.plan import Failed, aattempt, attempt
from llama_index_ext_advrag.queries import query_text
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

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


class JudgeRerankPostprocessor(BaseNodePostprocessor, PromptMixin, RefusesUnknownSettings):
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

    def _get_prompt_modules(self) -> PromptMixinType:
        """The judge's prompts (an LLM judge's) under ``judge:``."""
        return {"judge": self.judge}

    def _finish(
        self, nodes: list[NodeWithScore], grades: list[Grade] | Failed
    ) -> list[NodeWithScore]:
        if isinstance(grades, Failed):
            logger.warning(
                "judge %s failed; keeping the retrieval order: %r",
                self.judge.name,
                grades.exception,
            )
            order = list(range(len(nodes)))
        else:
            order = rerank_order(grades)
        results: list[NodeWithScore] = []
        ranks: list[RerankRecord] = []
        for rank, index in enumerate(order[: self.top_n]):
            result = copy_node_with_score(nodes[index])
            if not isinstance(grades, Failed) and grades[index].score is not None:
                result.score = grades[index].score
            entry: RerankRecord = {
                "node_id": result.node.node_id,
                "score": result.score,
                "retrieval_rank": index,
                "rank": rank,
            }
            if isinstance(grades, Failed):
                entry["error"] = grades.error
            else:
                entry["grade"] = grades[index].to_dict()
            record = {key: value for key, value in entry.items() if key not in ("node_id", "score")}
            add_trace(result.node, TRACE_COMPONENT, record)
            results.append(result)
            ranks.append(entry)
        error = grades.error if isinstance(grades, Failed) else None
        dispatcher.event(JudgeRerankEvent(order=ranks, error=error))
        return results

    @dispatcher.span
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        query, texts = query_text(query_bundle), node_texts(nodes)
        return self._finish(nodes, attempt("judge", lambda: self.judge.judge(query, texts), None))

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Async :meth:`postprocess_nodes` (the judge's ``ajudge``)."""
        if not nodes:
            return []
        query, texts = query_text(query_bundle), node_texts(nodes)
        grades = await aattempt("judge", lambda: self.judge.ajudge(query, texts), None)
        return self._finish(nodes, grades)


__all__ = ["JudgeRerankPostprocessor", "node_texts", "rerank_order"]
