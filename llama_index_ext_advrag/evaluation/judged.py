"""The compare pipelines that grade passages: judge rerank, CRAG and Self-RAG.

They share one relevance judge per run (:meth:`BuildContext.relevance_judge`): the one the caller gave, or
the offline language-routed judge: the packaged English cross-encoder for English pairs and a
calibrated multilingual-e5 cosine for Chinese pairs (``judges`` and ``multilingual`` extras).
No LLM is needed for judge rerank and CRAG (CRAG rewrites a query into its distinctive terms
without one). Self-RAG generates its own answer, so it runs only in an answer-level comparison
(``advrag compare --answers``); its ``retrieve`` is the retrieval it starts from, so its
context-level rows describe that retrieval.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_ext_advrag.evaluation.compose import BuildContext, ComposedPipeline

logger = logging.getLogger(__name__)

SELF_RAG_MAX_RETRIEVALS = 2
# passages reach the generation uncut, as always-retrieve's context does (windows can be long)
SELF_RAG_PASSAGE_CHARS = 1_000_000


class SelfRAGPipeline:
    """Self-RAG (:class:`~llama_index_ext_advrag.query_engine.SelfRAGQueryEngine`) over a
    composed pipeline's retrieval at k: ``answer`` runs the engine and returns its answer and
    the passages it kept; ``retrieve`` is the retrieval it starts from."""

    generates = True

    def __init__(self, name: str, base: ComposedPipeline, context: BuildContext) -> None:
        if context.llm is None:
            raise ValueError(f"pipeline {name!r} generates its answer and needs an LLM")
        self.name = name
        self.spec = base.spec
        self._base = base
        self._context = context
        self._engines: dict[int, Any] = {}
        judge = type(context.judge).__name__ if context.judge is not None else "offline-routed"
        # what the answer cache keys name besides the retrieval spec
        self.settings = (
            f"judge={judge}, joint, retrieve decision by ISREL, refuse without evidence, "
            f"critique continues the generation prompt, {SELF_RAG_MAX_RETRIEVALS} retrievals, "
            f"passages uncut, generation from the retrieved passages, critique by logprobs"
        )

    def retrieve(self, query: QueryBundle, k: int) -> list[NodeWithScore]:
        return self._base.retrieve(query, k)

    def warm(self, query: QueryBundle, k: int) -> None:
        self._base.warm(query, k)

    def _engine(self, k: int) -> Any:
        if k not in self._engines:
            from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine

            self._engines[k] = SelfRAGQueryEngine(
                retriever=_PipelineRetriever(self._base, k),
                llm=self._context.llm,
                judge=self._context.relevance_judge(),
                generation_mode="joint",
                retrieve_decision="scores",
                without_evidence="refuse",
                max_retrievals=SELF_RAG_MAX_RETRIEVALS,
                max_passages=k,
                max_passage_chars=SELF_RAG_PASSAGE_CHARS,
                # picked on the Self-RAG pilot's tuning set (Qwen2.5-Coder-1.5B): once a
                # passage passes ISREL the generation reads always-retrieve's context, and the
                # critique is read from first-token log-probabilities
                generation_passages="retrieved",
                critique_logprobs=True,
            )
        return self._engines[k]

    def answer(self, query: QueryBundle, k: int) -> tuple[str, list[NodeWithScore]]:
        """The engine's answer to ``query`` and the passages it answered from."""
        response = self._engine(k).query(query.query_str)
        return str(response), list(response.source_nodes)

    @staticmethod
    def refused(answer: str, question: str) -> bool:
        """Whether ``answer`` is the engine's refusal (its insufficient-evidence answer, in the
        question's language): the answer evaluation judges no sentence of it.

        >>> SelfRAGPipeline.refused("检索到的证据不足以回答这个问题。", "游客有多少？")
        True
        >>> SelfRAGPipeline.refused("The evidence is insufficient.", "How many?")
        False
        """
        from llama_index_ext_advrag.query_engine.self_rag_critique import insufficient_answer_for

        return answer.strip() == insufficient_answer_for(question)

    def close(self) -> None:
        self._base.close()


class _PipelineRetriever(BaseRetriever):
    """A composed pipeline at a fixed k as a LlamaIndex retriever."""

    def __init__(self, pipeline: ComposedPipeline, k: int) -> None:
        super().__init__()
        self._pipeline = pipeline
        self._k = k

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._pipeline.retrieve(query_bundle, self._k)


__all__ = ["SelfRAGPipeline"]
