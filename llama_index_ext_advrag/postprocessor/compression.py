"""Query-aware extractive compression of the retrieved passages to a token budget.

The passages are cut into sentences (the pack's segmenter: Chinese, Japanese, English), each
sentence is scored against the query and the best ones, each with its neighbours, are kept
until the context reaches ``max_context_tokens``. No LLM is needed: the score combines, as
z-scores, any relevance judge of the pack (cross-encoder, ColBERT, e5, LLM), the cosine of the
query and sentence vectors (stored sentence units read from the index, or embedded), and a
prior for the passage's retrieval rank. Every passage keeps its place and its kept sentences
their reading order; each kept span is recorded with its character offsets under
``advrag_trace["compression"]`` and in a
:class:`~llama_index_ext_advrag.events.ContextCompressionEvent`.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.events import ContextCompressionEvent
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade, node_texts
from llama_index_ext_advrag.layout import NodeLayout, deterministic_node_id
from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.plan import Call, adrive, arun_call, as_failed, drive, run_call
from llama_index_ext_advrag.postprocessor._compression import (
    PASSAGE_SEPARATOR,
    Candidate,
    Selection,
    candidates_of,
    combine_scores,
    cut_passages,
    passage_order,
    select_within_budget,
)
from llama_index_ext_advrag.postprocessor._neighbours import StoreBackedPostprocessor
from llama_index_ext_advrag.queries import query_text
from llama_index_ext_advrag.similarity import cosine_to_query
from llama_index_ext_advrag.text import Sentence, count_tokens
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "compression"
DEFAULT_MAX_CONTEXT_TOKENS = 600
# Picked on SQuAD 2.0 (first 5 articles) and reported on the other sets:
# benchmarks/results/compression_squad2_sweep.txt, docs/compression.md.
DEFAULT_NEIGHBOURS = 1
DEFAULT_RANK_WEIGHT = 0.5
DEFAULT_SPAN_SEPARATOR = " … "

Vector = Sequence[float]


def sentence_unit_ids(nodes: Sequence[NodeWithScore], layout: NodeLayout) -> list[str]:
    """Ids of the one-sentence units inside each passage's ``sentence_span``, as the pack's
    sentence-unit parser names them (``window_size=1``); passages without the span give none."""
    ids: list[str] = []
    for hit in nodes:
        location = layout.locate(hit.node)
        if location is not None:
            ids.extend(
                deterministic_node_id(location.doc_id, layout.id_unit, i, i + 1)
                for i in range(location.first, location.last)
            )
    return list(dict.fromkeys(ids))


def match_vectors(
    nodes: Sequence[NodeWithScore],
    candidates: Sequence[Candidate],
    units: Sequence[Any],
) -> list[Vector | None]:
    """The stored vector of each candidate sentence: a unit with the same text, or the
    passage's own vector when the passage is that one sentence; ``None`` when there is none."""
    by_text: dict[str, Vector] = {}
    for unit in units:
        if getattr(unit, "embedding", None) is not None:
            by_text.setdefault(unit.get_content(MetadataMode.NONE).strip(), unit.embedding)
    sizes: dict[int, int] = {}
    for candidate in candidates:
        sizes[candidate.passage] = sizes.get(candidate.passage, 0) + 1
    vectors: list[Vector | None] = []
    for candidate in candidates:
        vector = by_text.get(candidate.text.strip())
        own = nodes[candidate.passage].node.embedding
        if vector is None and own is not None and sizes[candidate.passage] == 1:
            vector = own
        vectors.append(vector)
    return vectors


class ContextCompressionPostprocessor(StoreBackedPostprocessor, PromptMixin):
    """Keep the sentences of the retrieved passages that best answer the query, to a budget.

    Place it last, after any retriever and window postprocessor (the passages it reads are the
    ones handed to the LLM). The context it returns (passage texts joined by a blank line)
    holds at most ``max_context_tokens`` tokens (LlamaIndex's tokenizer); passages keep their
    order and nodes their ids, a passage with nothing kept is left out. When the passages
    already fit they are returned unchanged (``rank_passages`` still reorders them).

    Sentence scores, each signal z-scored over the candidate sentences and weighted:

    - ``judge``: any :class:`~llama_index_ext_advrag.judges.base.BaseRelevanceJudge`, one call
      for all sentences (its raw value: a cross-encoder's logit, a cosine, yes/no log-odds);
    - cosine of the query and each sentence: vectors of the index's sentence units when a
      ``vector_store`` / ``docstore`` holding them is given (the pack's sentence-unit parser,
      ``window_size=1``, in the same index: no sentence is embedded at query time), otherwise
      sentences embedded with ``embed_model`` (explicit > ``Settings`` > the offline default);
      the query vector is the retriever's when the query bundle carries one;
    - a prior for the passage's retrieval rank (``rank_weight``).

    With ``rank_passages=True`` the passages are also reordered by their best sentence's score
    (node score = that score), so one judge pass per sentence replaces a rerank and a
    compression (as the Provence pruner does).

    If the judge, the embedding model or the store fails, or the judge exceeds
    ``judge_timeout``, the passages are returned as retrieved and the error is recorded.

    Args:
        judge: a relevance judge (optional).
        embed_model: embeds the query and the sentences without a stored vector.
        vector_store: a ``MilvusVectorStore`` holding the sentence units (optional).
        docstore: or a LlamaIndex docstore holding them with their vectors.

    Raises:
        ValueError: no signal (neither a judge nor a positive ``cosine_weight``), or a store
            of the wrong type.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> text = "Paris is the capital of France. It has many museums. Cats sleep a lot."
        >>> compress = ContextCompressionPostprocessor(
        ...     embed_model=MockEmbedding(embed_dim=8), max_context_tokens=12, neighbours=0)
        >>> out = compress.postprocess_nodes([NodeWithScore(node=TextNode(text=text))], query_str="capital of France")
        >>> len(out), out[0].node.metadata["advrag_trace"]["compression"]["sentences"]
        (1, 3)
    """

    max_context_tokens: int = Field(
        default=DEFAULT_MAX_CONTEXT_TOKENS,
        ge=1,
        le=1_000_000,
        description="Tokens of the returned context (passages joined by a blank line) at most.",
    )
    neighbours: int = Field(
        default=DEFAULT_NEIGHBOURS,
        ge=0,
        le=10,
        description="Sentences kept either side of a chosen one, inside its passage, when "
        "they fit.",
    )
    judge_weight: float = Field(default=1.0, ge=0.0, le=100.0, description="Weight of the judge.")
    cosine_weight: float = Field(
        default=1.0, ge=0.0, le=100.0, description="Weight of the query-sentence cosine (0: off)."
    )
    rank_weight: float = Field(
        default=DEFAULT_RANK_WEIGHT,
        ge=0.0,
        le=100.0,
        description="Weight of the passage-rank prior (earlier passages score higher).",
    )
    rank_passages: bool = Field(
        default=False,
        description="Also reorder the passages by their best sentence (rerank + compress).",
    )
    span_separator: str = Field(
        default=DEFAULT_SPAN_SEPARATOR,
        max_length=20,
        description="Joins the non-adjacent kept spans of one passage.",
    )
    judge_timeout: float | None = Field(
        default=None, gt=0.0, description="Seconds the judge may take (None: no bound)."
    )

    _judge: BaseRelevanceJudge | None = PrivateAttr(default=None)
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)

    def __init__(
        self,
        judge: BaseRelevanceJudge | None = None,
        embed_model: BaseEmbedding | None = None,
        vector_store: Any = None,
        docstore: Any = None,
        **data: Any,
    ) -> None:
        super().__init__(vector_store, docstore, **data)
        self._judge = judge
        self._embed_model = embed_model
        if judge is None and self.cosine_weight == 0:
            raise ValueError(
                "no sentence score: pass a judge= or set cosine_weight > 0 "
                f"(got judge=None, cosine_weight={self.cosine_weight})"
            )
        if judge is not None and self.judge_weight == 0 and self.cosine_weight == 0:
            raise ValueError("judge_weight and cosine_weight are both 0: no sentence score")
        if self.has_store:
            self._open_store(NodeLayout())  # check the store's type now

    @classmethod
    def class_name(cls) -> str:
        return "ContextCompressionPostprocessor"

    @property
    def judge(self) -> BaseRelevanceJudge | None:
        """The relevance judge (a live object: pass it to ``from_dict``)."""
        return self._judge

    @property
    def embed_model(self) -> BaseEmbedding:
        if self._embed_model is None:
            self._embed_model = resolve_embed_model(None)
        return self._embed_model

    @property
    def scorer(self) -> str:
        """The signals combined, e.g. ``"judge+cosine+rank"``."""
        parts = [
            name
            for name, used in (
                ("judge", self._uses_judge),
                ("cosine", self._uses_cosine),
                ("rank", self.rank_weight > 0),
            )
            if used
        ]
        return "+".join(parts)

    @property
    def _uses_judge(self) -> bool:
        return self._judge is not None and self.judge_weight > 0

    @property
    def _uses_cosine(self) -> bool:
        return self.cosine_weight > 0

    def _get_prompts(self) -> PromptDictType:
        return {}

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        return None

    def _get_prompt_modules(self) -> PromptMixinType:
        """The judge's prompts (an LLM judge's) under ``judge:``."""
        return {"judge": self._judge} if self._judge is not None else {}

    # --- shared by sync and async -------------------------------------------------------------

    def _prepare(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> tuple[str, list[str], list[list[Sentence]], list[Candidate], int]:
        query = query_text(query_bundle)
        texts = node_texts(nodes)
        sentences = cut_passages(texts)
        before = count_tokens(PASSAGE_SEPARATOR.join(t for t in texts if t))
        return query, texts, sentences, candidates_of(sentences), before

    def _needs_scores(self, candidates: list[Candidate], before: int) -> bool:
        return bool(candidates) and (before > self.max_context_tokens or self.rank_passages)

    def _as_retrieved(
        self, nodes: list[NodeWithScore], query: str, before: int, error: str | None
    ) -> list[NodeWithScore]:
        """The passages unchanged (they fit, or scoring failed: ``error``), recorded."""
        if error is not None:
            logger.warning("context compression skipped; passages as retrieved: %s", error)
        results, records = [], []
        for rank, hit in enumerate(nodes):
            result = copy_node_with_score(hit)
            record: dict[str, Any] = {
                "retrieval_rank": rank,
                "compressed": False,
                "budget": self.max_context_tokens,
            }
            if error is not None:
                record["error"] = error
            add_trace(result.node, TRACE_COMPONENT, record)
            results.append(result)
            records.append({"node_id": hit.node.node_id, **record})
        dispatcher.event(
            ContextCompressionEvent(
                query=query,
                max_context_tokens=self.max_context_tokens,
                tokens_before=before,
                tokens_after=before,
                scorer=self.scorer,
                nodes=records,
                error=error,
            )
        )
        return results

    def _cosines(
        self, query_vector: Vector | None, vectors: list[Vector | None]
    ) -> list[float | None] | None:
        if not self._uses_cosine or query_vector is None:
            return None
        known = [i for i, v in enumerate(vectors) if v is not None]
        values: list[float | None] = [None] * len(vectors)
        rows = [vector for vector in vectors if vector is not None]
        for i, cosine in zip(known, cosine_to_query(query_vector, rows), strict=True):
            values[i] = cosine
        return values

    def _finish(
        self,
        nodes: list[NodeWithScore],
        prepared: tuple[str, list[str], list[list[Sentence]], list[Candidate], int],
        grades: list[Grade] | None,
        cosines: list[float | None] | None,
        vector_counts: dict[str, int],
    ) -> list[NodeWithScore]:
        query, texts, sentences, candidates, before = prepared
        judge_values = [g.raw if g.raw is not None else g.score for g in grades] if grades else None
        scores = combine_scores(
            candidates,
            judge_values,
            cosines,
            self.judge_weight,
            self.cosine_weight,
            self.rank_weight,
        )
        if before <= self.max_context_tokens:  # rank_passages only: keep every sentence
            selection = Selection(
                [set(range(len(s))) for s in sentences],
                before,
                list(texts),
                [[(s[0].start, s[-1].end)] if s else [] for s in sentences],
            )
        else:
            selection = select_within_budget(
                texts,
                sentences,
                candidates,
                scores,
                self.max_context_tokens,
                self.neighbours,
                self.span_separator,
            )
        order = (
            passage_order(candidates, scores, len(nodes))
            if self.rank_passages
            else list(range(len(nodes)))
        )
        best: dict[int, float] = {}
        for candidate, score in zip(candidates, scores, strict=True):
            best[candidate.passage] = max(best.get(candidate.passage, score), score)
        results: list[NodeWithScore] = []
        records: list[dict[str, Any]] = []
        dropped: list[str] = []
        for passage in order:
            hit = nodes[passage]
            if not selection.kept[passage]:
                dropped.append(hit.node.node_id)
                continue
            result = copy_node_with_score(hit)
            if isinstance(result.node, TextNode):
                result.node.set_content(selection.texts[passage])
            if self.rank_passages:
                result.score = best[passage]
            record: dict[str, Any] = {
                "retrieval_rank": passage,
                "rank": len(results),
                "compressed": True,
                "spans": [list(span) for span in selection.spans[passage]],
                "kept_sentences": len(selection.kept[passage]),
                "sentences": len(sentences[passage]),
                "budget": self.max_context_tokens,
                "scorer": self.scorer,
                "vectors": vector_counts,
            }
            add_trace(result.node, TRACE_COMPONENT, record)
            results.append(result)
            records.append({"node_id": hit.node.node_id, **record})
        dispatcher.event(
            ContextCompressionEvent(
                query=query,
                max_context_tokens=self.max_context_tokens,
                tokens_before=before,
                tokens_after=selection.tokens,
                scorer=self.scorer,
                nodes=records,
                dropped=dropped,
            )
        )
        return results

    # --- the plan: written once, its I/O (judge, store, embeddings) named in both flavours -----

    def _sentence_vectors(
        self, nodes: list[NodeWithScore], candidates: list[Candidate]
    ) -> Generator[Call, Any, tuple[list[Vector | None], dict[str, int]]]:
        units: list[Any] = []
        if self.has_store:
            store = self._open_store(NodeLayout())
            ids = sentence_unit_ids(nodes, store.layout)
            if ids:
                found = yield Call(lambda: store.get_units(ids), lambda: store.aget_units(ids))
                units = list(found.values())
        vectors = match_vectors(nodes, candidates, units)
        missing = [i for i, v in enumerate(vectors) if v is None]
        if missing:
            embed_model, texts = self.embed_model, [candidates[i].text for i in missing]
            embedded = yield Call(
                lambda: embed_model.get_text_embedding_batch(texts),
                lambda: embed_model.aget_text_embedding_batch(texts),
            )
            for i, vector in zip(missing, embedded, strict=True):
                vectors[i] = vector
        return vectors, {"stored": len(vectors) - len(missing), "embedded": len(missing)}

    def _signals(
        self, query_bundle: QueryBundle, nodes: list[NodeWithScore], candidates: list[Candidate]
    ) -> Generator[Call, Any, tuple[list[float | None] | None, dict[str, int]]]:
        if not self._uses_cosine:
            return None, {}
        vectors, counts = yield from self._sentence_vectors(nodes, candidates)
        query_vector = query_bundle.embedding
        if not query_vector:
            embed_model, text = self.embed_model, query_bundle.query_str
            query_vector = yield Call(
                lambda: embed_model.get_query_embedding(text),
                lambda: embed_model.aget_query_embedding(text),
            )
        return self._cosines(query_vector, vectors), counts

    def _compressing(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None
    ) -> Generator[Call, Any, list[NodeWithScore]]:
        """Judge the sentences (bounded by ``judge_timeout``), read or embed their vectors, then
        select; a failing judge or embedding returns the passages as retrieved."""
        if not nodes:
            return []
        prepared = self._prepare(nodes, query_bundle)
        query, _, _, candidates, before = prepared
        if not self._needs_scores(candidates, before):
            return self._as_retrieved(nodes, query, before, None) if candidates else []
        bundle = query_bundle or QueryBundle(query)
        grades: list[Grade] | None = None
        judge, texts = self._judge, [c.text for c in candidates]
        if judge is not None and self._uses_judge:
            try:
                grades = yield Call(
                    lambda: judge.judge(query, texts),
                    lambda: judge.ajudge(query, texts),
                    self.judge_timeout,
                    "the judge",
                )
            except Exception as exc:
                return self._as_retrieved(nodes, query, before, as_failed("judge", exc).error)
        try:
            signals = yield from self._signals(bundle, nodes, candidates)
        except Exception as exc:
            return self._as_retrieved(nodes, query, before, as_failed("embedding", exc).error)
        return self._finish(nodes, prepared, grades, *signals)

    @dispatcher.span
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        return drive(self._compressing(nodes, query_bundle), run_call)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Async :meth:`postprocess_nodes` (the judge's ``ajudge``, async embeddings/store)."""
        return await adrive(self._compressing(nodes, query_bundle), arun_call)


__all__ = [
    "DEFAULT_MAX_CONTEXT_TOKENS",
    "ContextCompressionPostprocessor",
    "match_vectors",
    "sentence_unit_ids",
]
