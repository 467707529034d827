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

from llama_index_ext_advrag.embeddings.language import is_english_only, model_name_of
from llama_index_ext_advrag.events import CjkScorerRecord, ContextCompressionEvent
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade, node_texts
from llama_index_ext_advrag.judges.routed import pair_language
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
    substitute,
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
# Picked on RGB zh (benchmarks/results/compression_rgb_zh.txt): without a judge and with an
# English-only embedding model, Chinese/Japanese pairs are scored by multilingual-e5.
CJK_EXTRA_HINT = "pip install 'llama-index-ext-advrag[multilingual]'"

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
      a language-routed judge's values (e.g. ``offline_judge()``: the cross-encoder for English
      pairs, multilingual-e5 for Chinese ones) are z-scored per judge (``Grade.judge``);
    - cosine of the query and each sentence: vectors of the index's sentence units when a
      ``vector_store`` / ``docstore`` holding them is given (the pack's sentence-unit parser,
      ``window_size=1``, in the same index: no sentence is embedded at query time), otherwise
      sentences embedded with ``embed_model`` (explicit > ``Settings`` > the offline default);
      the query vector is the retriever's when the query bundle carries one;
    - a prior for the passage's retrieval rank (``rank_weight``).

    Without a judge, when the embedding model reads English only (bge-small-en, MiniLM:
    :func:`~llama_index_ext_advrag.embeddings.language.is_english_only`), the Chinese and
    Japanese query-sentence pairs (the routed judge's rule,
    :func:`~llama_index_ext_advrag.judges.routed.pair_language`) are scored by the
    multilingual-e5 judge in place of the cosine (``cjk_judge``; ``multilingual`` extra, else
    the cosine with one warning), z-scored apart from the English pairs' cosines. Which scorer
    graded those pairs, and why, is in the trace and the event (``cjk``).

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
        cjk_judge: ``True`` (default: :func:`~llama_index_ext_advrag.judges.offline.
            multilingual_e5_judge`, built when first needed), a judge to use instead (e.g. one
            behind a cache), or ``False`` / ``None``: the cosine for every pair.

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
    cjk_judge: bool = Field(
        default=True,
        description="Without a judge and with an English-only embedding model, score Chinese "
        "and Japanese pairs with the multilingual-e5 judge instead of the cosine.",
    )

    _judge: BaseRelevanceJudge | None = PrivateAttr(default=None)
    _embed_model: BaseEmbedding | None = PrivateAttr(default=None)
    _cjk_judge: BaseRelevanceJudge | None = PrivateAttr(default=None)
    _cjk_missing: str | None = PrivateAttr(default=None)

    def __init__(
        self,
        judge: BaseRelevanceJudge | None = None,
        embed_model: BaseEmbedding | None = None,
        vector_store: Any = None,
        docstore: Any = None,
        **data: Any,
    ) -> None:
        cjk_judge = data.get("cjk_judge", True)
        if isinstance(cjk_judge, BaseRelevanceJudge) or cjk_judge is None:
            data["cjk_judge"] = cjk_judge is not None
        super().__init__(vector_store, docstore, **data)
        self._judge = judge
        self._embed_model = embed_model
        if isinstance(cjk_judge, BaseRelevanceJudge):
            self._cjk_judge = cjk_judge
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

    def _cjk_plan(
        self, query: str, candidates: list[Candidate]
    ) -> tuple[list[int], CjkScorerRecord | None]:
        """The candidates whose pairs the CJK judge scores, and the decision's record (``None``
        when no pair is Chinese or Japanese, or a judge was given: it scores every pair)."""
        if self._judge is not None:
            return [], None
        cjk = [i for i, c in enumerate(candidates) if pair_language(query, c.text) == "zh"]
        if not cjk:
            return [], None
        record = CjkScorerRecord(pairs=len(cjk), scorer="cosine", reason="cjk_judge is off")
        if not self.cjk_judge:
            return [], record
        model = model_name_of(self.embed_model) or type(self.embed_model).__name__
        if not is_english_only(self.embed_model):
            return [], {
                **record,
                "reason": f"the embedding model {model!r} is not known to be English-only",
            }
        if self._cjk_missing is not None:
            return [], {**record, "reason": self._cjk_missing}
        if self._cjk_judge is None:
            from llama_index_ext_advrag.judges.offline import multilingual_e5_judge

            self._cjk_judge = multilingual_e5_judge()
        reason = f"the embedding model {model!r} reads English only"
        return cjk, {**record, "scorer": self._cjk_judge.name, "reason": reason}

    def _cjk_unavailable(self, record: CjkScorerRecord, exc: ImportError) -> CjkScorerRecord:
        """Remember (and warn once) that the CJK judge's extra is missing: the cosine it is."""
        self._cjk_missing = f"the multilingual extra is missing ({CJK_EXTRA_HINT}): {exc}"
        logger.warning("context compression scores Chinese pairs by cosine: %s", self._cjk_missing)
        return {**record, "scorer": "cosine", "reason": self._cjk_missing}

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
        cosine_groups: list[str] | None = None,
        cjk: CjkScorerRecord | None = None,
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
            [g.judge for g in grades] if grades else None,  # a routed judge: z-scored per judge
            cosine_groups,  # Chinese pairs scored by the CJK judge: z-scored apart
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
            if cjk is not None:
                record["cjk"] = cjk
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
                cjk=cjk,
            )
        )
        return results

    # --- the plan: written once, its I/O (judge, store, embeddings) named in both flavours -----

    def _sentence_vectors(
        self, nodes: list[NodeWithScore], candidates: list[Candidate], skip: set[int]
    ) -> Generator[Call, Any, tuple[list[Vector | None], dict[str, int]]]:
        """The vector of each candidate not in ``skip`` (stored, else embedded)."""
        units: list[Any] = []
        if self.has_store:
            store = self._open_store(NodeLayout())
            ids = sentence_unit_ids(nodes, store.layout)
            if ids:
                found = yield Call(lambda: store.get_units(ids), lambda: store.aget_units(ids))
                units = list(found.values())
        vectors = match_vectors(nodes, candidates, units)
        missing = [i for i, v in enumerate(vectors) if v is None and i not in skip]
        if missing:
            embed_model, texts = self.embed_model, [candidates[i].text for i in missing]
            embedded = yield Call(
                lambda: embed_model.get_text_embedding_batch(texts),
                lambda: embed_model.aget_text_embedding_batch(texts),
            )
            for i, vector in zip(missing, embedded, strict=True):
                vectors[i] = vector
        stored = len(vectors) - len(missing) - len(skip)
        return vectors, {"stored": stored, "embedded": len(missing)}

    def _signals(
        self,
        query_bundle: QueryBundle,
        nodes: list[NodeWithScore],
        candidates: list[Candidate],
        skip: set[int],
    ) -> Generator[Call, Any, tuple[list[float | None] | None, dict[str, int]]]:
        if not self._uses_cosine:
            return None, {}
        if len(skip) == len(candidates):  # every pair scored by the CJK judge
            return [None] * len(candidates), {"stored": 0, "embedded": 0}
        vectors, counts = yield from self._sentence_vectors(nodes, candidates, skip)
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
            cjk, cjk_record = self._cjk_plan(query, candidates)
        except Exception as exc:  # the embedding model could not be resolved
            return self._as_retrieved(nodes, query, before, as_failed("embedding", exc).error)
        cjk_values: list[float | None] = []
        if cjk and self._cjk_judge is not None and cjk_record is not None:
            cjk_judge, cjk_texts = self._cjk_judge, [texts[i] for i in cjk]
            try:
                cjk_grades = yield Call(
                    lambda: cjk_judge.judge(query, cjk_texts),
                    lambda: cjk_judge.ajudge(query, cjk_texts),
                    self.judge_timeout,
                    "the CJK judge",
                )
                cjk_values = [g.raw if g.raw is not None else g.score for g in cjk_grades]
            except ImportError as exc:
                cjk, cjk_record = [], self._cjk_unavailable(cjk_record, exc)
            except Exception as exc:
                return self._as_retrieved(nodes, query, before, as_failed("judge", exc).error)
        try:
            cosines, counts = yield from self._signals(bundle, nodes, candidates, set(cjk))
        except Exception as exc:
            return self._as_retrieved(nodes, query, before, as_failed("embedding", exc).error)
        groups: list[str] | None = None
        if cjk and cosines is not None and cjk_record is not None:
            cosines, groups = substitute(cosines, cjk, cjk_values, cjk_record["scorer"])
        return self._finish(nodes, prepared, grades, cosines, counts, groups, cjk_record)

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
