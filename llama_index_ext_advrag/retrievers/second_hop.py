"""A second retrieval hop without an LLM: hop-1 passages expand the question.

Multi-hop questions ("The director of film X was born where?", "Were A and B of the same
nationality?") need a *bridge* passage that does not look like the question. Hop 1 is the
wrapped retriever's result; from each of its top ``seed_count`` passages a hop-2 query is made
of the question plus the passage's title, leading sentence or entity cues
(:class:`~._hops.HopCue`), and the wrapped retriever is asked again for ``hop2_top_k`` results
per query. All legs are fused with weighted reciprocal rank fusion (:func:`~.fusion.fuse_rrf`)
and merged so that hop 1's order is kept and its top ``keep_hop1_top`` are never pushed out: a
hop-2 node only enters between hop-1 nodes it outscores (:func:`~._hops.merge_hops`). No node
is returned twice.

With a question generator (core's ``LLMQuestionGenerator``, built from ``llm=`` when given),
the question is also decomposed into sub-questions, each searched and fused the same way.

The hop-2 query embeddings are computed in one batch when the wrapped retriever's embedding
model is known (``embed_model=``, or the retriever's own) and handed to the retriever in the
``QueryBundle``; in async the hop-2 searches run concurrently (at most ``max_concurrency`` at a
time). A failing hop-2 search or question generator leaves hop 1 (and the other legs) as
returned, with the failure in the trace; only a failing hop 1 raises.

Every returned node records under ``metadata["advrag_trace"]["second_hop"]`` its hop, hop-1
rank, whether it was pinned, its fused score and rank per leg, and every leg's query, hits and
error; each call opens a span and emits a :class:`~llama_index_ext_advrag.events.SecondHopEvent`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.question_gen.types import BaseQuestionGenerator
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.tools.types import ToolMetadata

from llama_index_ext_advrag.events import SecondHopEvent
from llama_index_ext_advrag.queries import clean_query_bundle
from llama_index_ext_advrag.retrievers._config import ConfiguredRetriever, aclose_all, close_all
from llama_index_ext_advrag.retrievers._hop_calls import (
    LegOutcome,
    aembed_queries,
    bounded_gather,
    embed_queries,
    find_embed_model,
)
from llama_index_ext_advrag.retrievers._hops import (
    HopCue,
    HopQuery,
    hop_queries,
    merge_hops,
    non_increasing,
    without,
)
from llama_index_ext_advrag.retrievers.fusion import DEFAULT_RRF_K, fuse_rrf, language_factor
from llama_index_ext_advrag.retrievers.hybrid import leg_hits, with_top_k
from llama_index_ext_advrag.text.words import cjk_share
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "second_hop"
HOP1 = "hop1"
# The one "tool" the question generator is told about: the wrapped retriever.
SEARCH_TOOL = ToolMetadata(
    name="search", description="Searches the document collection for passages."
)
# Defaults chosen on HotpotQA (52 questions) + SQuAD 2.0 (200) at k = 3, 5, 8: the largest
# summed HotpotQA gain (coverage + support recall) among the settings never below the plain
# retriever on SQuAD; ranking hop 2 among new nodes with only hop 1's top 1 pinned lost 17 SQuAD
# questions at k = 3 (benchmarks/results/bench_second_hop_grid.txt, docs/retrievers_second_hop.md).
DEFAULT_SEED_COUNT = 3
DEFAULT_HOP2_TOP_K = 3
DEFAULT_KEEP_HOP1_TOP = 3
DEFAULT_HOP2_WEIGHT = 1.0
DEFAULT_CUE = HopCue.ENTITIES
DEFAULT_HOP2_NEW_ONLY = True


class SecondHopRetriever(ConfiguredRetriever):
    """Wrap any retriever with an LLM-free second hop (and, optionally, sub-questions).

    Args:
        retriever: the wrapped retriever (the pack's or core's); asked once for hop 1 as
            configured, then once per hop-2 query as a copy fetching ``hop2_top_k``.
        seed_count: hop-1 passages that make a hop-2 query (0: no second hop).
        cue: what a seed adds to the question: ``"leading_sentence"``, ``"title"``,
            ``"entities"`` or ``"title_and_entities"`` (:class:`~._hops.HopCue`).
        hop2_top_k: results fetched per hop-2 query (and per sub-question).
        keep_hop1_top: hop 1's first results that stay first, in hop-1 order, whatever hop 2
            finds (the documented rank below which hop 2 may push hop-1 nodes down).
        similarity_top_k: results returned; ``None``: as many as hop 1 returned (equal k).
        hop2_weight: RRF weight of each hop-2 leg and sub-question leg (hop 1 weighs 1).
        hop2_new_only: rank each hop-2 leg among the nodes hop 1 did not return, so a
            hop-2 leg's first new node counts as its rank 1 (hop-1 nodes get no hop-2 votes).
        language_gate: when the embedding model reads English only (bge-small-en, MiniLM:
            :func:`~llama_index_ext_advrag.embeddings.language.is_english_only`), scale the
            hop-2 weight by ``1 -`` the question's CJK share, so a Chinese question gets no
            second hop (skipped, in the trace). Off: hop 2 runs whatever the language.
        rrf_k: the RRF constant. max_cue_tokens: a leading sentence is cut to this many
            tokens. max_cues: entity cues a seed adds at most.
        max_concurrency: hop-2 searches running at once in async.
        embed_model: the model hop-2 queries are embedded with in one batch (default: the
            wrapped retriever's own, when it exposes one; ``None`` found: the retriever
            embeds each query itself).
        question_generator: decomposes the question into sub-questions (e.g. core's
            ``LLMQuestionGenerator``); ``llm``: builds ``LLMQuestionGenerator`` from it.
        max_sub_questions: sub-questions searched at most.

    ``to_dict()`` holds the settings; ``from_dict(data, retriever=...)`` takes the live objects
    back. :meth:`close` closes the wrapped retriever when it can be closed.

    Raises:
        ValueError: a bound broken (``seed_count`` < 0, ``hop2_top_k`` < 1, ...) or an unknown
            ``cue`` (the message names the value).

    Example:
        >>> from llama_index.core.schema import TextNode
        >>> from llama_index_ext_advrag.retrievers import JiebaBM25Retriever
        >>> nodes = [TextNode(text=t, id_=str(i)) for i, t in enumerate([
        ...     "Ed Wood is a 1994 film directed by Tim Burton.",
        ...     "Tim Burton was born in Burbank, California.",
        ...     "Burbank hosts many film studios."])]
        >>> hop = SecondHopRetriever(JiebaBM25Retriever(nodes, similarity_top_k=1),
        ...                          seed_count=1, hop2_top_k=2, similarity_top_k=2)
        >>> [n.node.node_id for n in hop.retrieve("Where was the director of Ed Wood born?")]
        ['0', '1']
    """

    seed_count: int = Field(
        default=DEFAULT_SEED_COUNT, ge=0, le=50, description="Hop-1 passages that seed hop 2."
    )
    cue: HopCue = Field(default=DEFAULT_CUE, description="What a seed adds.")
    hop2_top_k: int = Field(
        default=DEFAULT_HOP2_TOP_K, ge=1, le=1_000, description="Results per hop-2 query."
    )
    keep_hop1_top: int = Field(
        default=DEFAULT_KEEP_HOP1_TOP,
        ge=0,
        le=10_000,
        description="Hop 1's first results never pushed out or reordered by hop 2.",
    )
    similarity_top_k: int | None = Field(
        default=None, ge=1, le=10_000, description="Results returned; None = hop 1's count."
    )
    hop2_weight: float = Field(
        default=DEFAULT_HOP2_WEIGHT,
        gt=0.0,
        le=100.0,
        description="RRF weight of each hop-2 and sub-question leg (hop 1 weighs 1).",
    )
    hop2_new_only: bool = Field(
        default=DEFAULT_HOP2_NEW_ONLY,
        description="Rank each hop-2 leg among the nodes hop 1 did not return (hop 2 then "
        "votes only for new evidence); False: hop-2 votes also lift hop-1 nodes.",
    )
    language_gate: bool = Field(
        default=True,
        description="Scale hop 2 by 1 - the question's CJK share when the embedding model "
        "reads English only (no second hop for a Chinese question).",
    )
    rrf_k: int = Field(default=DEFAULT_RRF_K, ge=0, le=100_000, description="RRF constant k.")
    max_cue_tokens: int = Field(
        default=48, ge=1, le=512, description="A leading sentence is cut to this many tokens."
    )
    max_cues: int = Field(default=6, ge=1, le=100, description="Entity cues per seed at most.")
    max_concurrency: int = Field(
        default=4, ge=1, le=64, description="Hop-2 searches at once (async)."
    )
    max_sub_questions: int = Field(
        default=4, ge=1, le=20, description="Sub-questions searched at most (with a generator)."
    )

    _retriever: BaseRetriever = PrivateAttr()
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    _question_generator: BaseQuestionGenerator | None = PrivateAttr(default=None)
    _english_only: bool = PrivateAttr(default=False)

    def __init__(
        self,
        retriever: BaseRetriever,
        embed_model: BaseEmbedding | None = None,
        question_generator: BaseQuestionGenerator | None = None,
        llm: Any = None,
        **settings: Any,
    ) -> None:
        if not isinstance(retriever, BaseRetriever):
            raise ValueError(
                f"retriever must be a LlamaIndex BaseRetriever, got {type(retriever).__name__}"
            )
        super().__init__(**settings)
        self._retriever = retriever
        self._embed_model = embed_model or find_embed_model(retriever)
        if self._embed_model is not None:
            from llama_index_ext_advrag.embeddings.language import is_english_only

            self._english_only = is_english_only(self._embed_model)
        if question_generator is None and llm is not None:
            from llama_index.core.question_gen import LLMQuestionGenerator

            question_generator = LLMQuestionGenerator.from_defaults(llm=llm)
        self._question_generator = question_generator

    @classmethod
    def class_name(cls) -> str:
        return "SecondHopRetriever"

    @property
    def retriever(self) -> BaseRetriever:
        """The wrapped retriever."""
        return self._retriever

    @property
    def question_generator(self) -> BaseQuestionGenerator | None:
        return self._question_generator

    def close(self) -> None:
        close_all([self._retriever])

    async def aclose(self) -> None:
        await aclose_all([self._retriever])

    def _hop2_retriever(self) -> BaseRetriever:
        """The retriever set to fetch ``hop2_top_k`` (a shallow copy, made per call)."""
        return with_top_k(self._retriever, self.hop2_top_k)

    # --- pure steps shared by sync and async -------------------------------------------------

    def language_factor(self, question: str) -> float:
        """The factor of the hop-2 weight for ``question``: ``1 - its CJK share`` when
        ``language_gate`` is on and the embedding model reads English only (a Chinese question
        gets no second hop: its hop-2 queries would be noise to the model), else 1."""
        if not (self.language_gate and self._english_only):
            return 1.0
        return language_factor(cjk_share(question), 0.0, floor=0.0)

    def _plan(
        self, question: str, hop1: Sequence[NodeWithScore], sub_questions: Sequence[str]
    ) -> tuple[list[HopQuery], list[dict[str, str]]]:
        if self.language_factor(question) == 0.0:
            reason = "a CJK question and an English-only embedding model (language_gate)"
            return [], [{"seed": "all", "reason": reason}]
        seeds = [r.node for r in hop1[: self.seed_count]]
        queries, skipped = hop_queries(
            question, seeds, self.cue, self.max_cue_tokens, self.max_cues
        )
        asked = {question.strip(), *(q.query for q in queries)}
        for number, sub in enumerate(sub_questions[: self.max_sub_questions], start=1):
            text = sub.strip()
            if not text or text in asked:
                skipped.append({"seed": f"sub:{number}", "reason": "empty or repeated"})
                continue
            asked.add(text)
            queries.append(HopQuery(f"sub:{number}", "", "", text))
        return queries, skipped

    def _bundles(
        self, queries: Sequence[HopQuery], embeddings: list[Embedding] | None
    ) -> list[QueryBundle]:
        vectors: Sequence[Embedding | None] = embeddings or [None] * len(queries)
        return [
            QueryBundle(query_str=q.query, embedding=vector)
            for q, vector in zip(queries, vectors, strict=True)
        ]

    def _result(
        self,
        question: str,
        hop1: list[NodeWithScore],
        queries: Sequence[HopQuery],
        outcomes: Sequence[LegOutcome],
        skipped: list[dict[str, Any]],
        failures: list[dict[str, str]],
    ) -> list[NodeWithScore]:
        legs: list[list[NodeWithScore]] = [hop1]
        records: list[dict[str, Any]] = [
            {"leg": HOP1, "query": question, "hits": len(hop1), "error": None}
        ]
        for query, outcome in zip(queries, outcomes, strict=True):
            record: dict[str, Any] = {"leg": query.leg, "query": query.query, "seed": query.seed_id}
            if isinstance(outcome, BaseException):
                logger.warning("second hop %s failed (%r); hop 1 kept", query.leg, outcome)
                record.update(hits=0, error=f"error: {outcome!r}")
                legs.append([])
            else:
                record.update(hits=len(outcome), error=None)
                legs.append(list(outcome))
            records.append(record)
        weight = self.hop2_weight * self.language_factor(question)
        weights = (1.0,) + (weight,) * (len(legs) - 1)
        hop1_ids = [r.node.node_id for r in hop1]
        hits = [leg_hits(leg) for leg in legs]
        if self.hop2_new_only:
            hits = [hits[0], *(without(leg, hop1_ids) for leg in hits[1:])]
        fused = fuse_rrf(hits, weights=weights, k=self.rrf_k)
        limit = self.similarity_top_k or len(dict.fromkeys(hop1_ids))
        merged = merge_hops(hop1_ids, fused, self.keep_hop1_top, limit)
        return self._build(question, merged, legs, records, skipped, failures, hop1_ids)

    def _build(
        self,
        question: str,
        merged: Sequence[Any],
        legs: Sequence[Sequence[NodeWithScore]],
        records: list[dict[str, Any]],
        skipped: list[dict[str, Any]],
        failures: list[dict[str, str]],
        hop1_ids: Sequence[str],
    ) -> list[NodeWithScore]:
        first: dict[str, NodeWithScore] = {}
        for leg in legs:
            for result in leg:
                first.setdefault(result.node.node_id, result)
        hop1_rank = {node_id: rank for rank, node_id in reversed(list(enumerate(hop1_ids, 1)))}
        pinned = set(list(dict.fromkeys(hop1_ids))[: self.keep_hop1_top])
        scores = non_increasing([hit.score for hit in merged])
        nodes, returned = [], []
        for hit, score in zip(merged, scores, strict=True):
            result = copy_node_with_score(first[hit.node_id])
            result.score = score
            rank = hop1_rank.get(hit.node_id)
            summary = {
                "node_id": hit.node_id,
                "hop": 1 if rank is not None else 2,
                "hop1_rank": rank,
                "pinned": hit.node_id in pinned,
                "fused_score": hit.score,
            }
            ranks = [
                {"leg": record["leg"], "rank": leg_rank}
                for record, leg_rank in zip(records, hit.ranks, strict=True)
                if leg_rank is not None
            ]
            trace = {**summary, "ranks": ranks, "legs": records, "searches": len(records)}
            if skipped:
                trace["skipped"] = list(skipped)
            if failures:
                trace["failures"] = list(failures)
            add_trace(result.node, TRACE_COMPONENT, trace)
            nodes.append(result)
            returned.append(summary)
        dispatcher.event(
            SecondHopEvent(
                query=question,
                legs=records,
                skipped=[*skipped, *failures],
                returned=returned,
                searches=len(records),
            )
        )
        return nodes

    # --- sync ----------------------------------------------------------------------------

    def _sub_questions(
        self, query_bundle: QueryBundle, failures: list[dict[str, str]]
    ) -> list[str]:
        if self._question_generator is None:
            return []
        try:
            subs = self._question_generator.generate([SEARCH_TOOL], query_bundle)
        except Exception as exc:  # an LLM that answers nonsense is normal: keep the hops
            logger.warning("question generator failed (%r); no sub-questions", exc)
            failures.append({"seed": "sub-questions", "reason": f"error: {exc!r}"})
            return []
        return [s.sub_question for s in subs]

    def _embeddings(
        self, queries: Sequence[HopQuery], failures: list[dict[str, str]]
    ) -> list[Embedding] | None:
        if self._embed_model is None or not queries:
            return None
        try:
            return embed_queries(self._embed_model, [q.query for q in queries])
        except Exception as exc:
            logger.warning("hop-2 query embedding failed (%r); the retriever embeds", exc)
            failures.append({"seed": "embedding", "reason": f"error: {exc!r}"})
            return None

    @dispatcher.span
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        hop1 = list(self._retriever.retrieve(query_bundle))
        failures: list[dict[str, str]] = []
        subs = self._sub_questions(query_bundle, failures)
        queries, skipped = self._plan(query_bundle.query_str, hop1, subs)
        bundles = self._bundles(queries, self._embeddings(queries, failures))
        hop2 = self._hop2_retriever() if queries else self._retriever
        outcomes: list[LegOutcome] = []
        for bundle in bundles:
            try:
                outcomes.append(list(hop2.retrieve(bundle)))
            except Exception as exc:
                outcomes.append(exc)
        return self._result(query_bundle.query_str, hop1, queries, outcomes, skipped, failures)

    # --- async: the same steps, hop-2 searches concurrent ----------------------------------

    async def _asub_questions(
        self, query_bundle: QueryBundle, failures: list[dict[str, str]]
    ) -> list[str]:
        if self._question_generator is None:
            return []
        try:
            subs = await self._question_generator.agenerate([SEARCH_TOOL], query_bundle)
        except Exception as exc:
            logger.warning("question generator failed (%r); no sub-questions", exc)
            failures.append({"seed": "sub-questions", "reason": f"error: {exc!r}"})
            return []
        return [s.sub_question for s in subs]

    async def _aembeddings(
        self, queries: Sequence[HopQuery], failures: list[dict[str, str]]
    ) -> list[Embedding] | None:
        if self._embed_model is None or not queries:
            return None
        try:
            return await aembed_queries(self._embed_model, [q.query for q in queries])
        except Exception as exc:
            logger.warning("hop-2 query embedding failed (%r); the retriever embeds", exc)
            failures.append({"seed": "embedding", "reason": f"error: {exc!r}"})
            return None

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        failures: list[dict[str, str]] = []
        hop1_task = self._retriever.aretrieve(query_bundle)
        hop1, subs = await asyncio.gather(hop1_task, self._asub_questions(query_bundle, failures))
        hop1 = list(hop1)
        queries, skipped = self._plan(query_bundle.query_str, hop1, subs)
        bundles = self._bundles(queries, await self._aembeddings(queries, failures))
        hop2 = self._hop2_retriever() if queries else self._retriever
        outcomes = await bounded_gather(
            [partial(hop2.aretrieve, bundle) for bundle in bundles], self.max_concurrency
        )
        return self._result(query_bundle.query_str, hop1, queries, outcomes, skipped, failures)


__all__ = [
    "DEFAULT_HOP2_TOP_K",
    "DEFAULT_KEEP_HOP1_TOP",
    "DEFAULT_SEED_COUNT",
    "HopCue",
    "SecondHopRetriever",
    "aembed_queries",
    "bounded_gather",
    "embed_queries",
    "find_embed_model",
]
