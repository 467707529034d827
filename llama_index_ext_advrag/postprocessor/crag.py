"""Corrective RAG (CRAG): grade every retrieved node, then keep, refine, or retrieve again.

As in the paper (Yan et al., 2024), a relevance judge grades each node and two thresholds give
the action: **Correct** when some node scores at least ``upper``, **Incorrect** when every node
scores below ``lower``, **Ambiguous** otherwise.

- Correct: the confident nodes (>= ``upper``) are kept, and by default the doubtful ones
  (>= ``lower``) too (``keep_doubtful_when_correct``), then refined.
- Incorrect: every node is dropped and the corrective retrieval runs.
- Ambiguous: the nodes at or above ``lower`` (and those the judge could not grade) are kept and
  the corrective retrieval runs too; both are merged and de-duplicated.

CRAG's first duty is to keep the answer, so two rules guard the paper's: ``upper`` and
``lower`` default to the judge's own calibrated thresholds (``judge.default_upper`` /
``default_lower``; explicit values win), and CRAG never drops everything: when fewer than
``min_kept`` nodes survive (grading and correction together), the best-graded retrieved nodes
are kept back, unless the judge is confidently sure they are irrelevant (score below
``min_kept_floor``); they are traced ``"kept_by": "min_kept"``. Within the retrieved set the
judge's ranking counts too: a node below ``upper`` that is graded more than ``keep_within``
log-odds below the best-graded node is dropped even at or above ``lower`` (default: the
judge's ``default_keep_within``; ``None``: thresholds only). The default judge is
:func:`~llama_index_ext_advrag.judges.offline.offline_judge` (the cross-encoder for English,
e5 for Chinese).

Corrective retrieval rewrites the query (with the LLM when there is one, otherwise into the
query's distinctive terms), retrieves with the retriever the user supplies, and grades the new
nodes against the original query; a round that finds a confident node ends it, ``max_rounds``
bounds it, and an optional ``web_search`` callable is the last resort. Knowledge refinement
cuts every kept node into strips, grades them and keeps the relevant strips in reading order
(:mod:`~llama_index_ext_advrag.postprocessor.crag_refine`).

The decision logic is one generator that yields I/O requests (grade, rewrite, retrieve, search)
to the pack's request runner (:mod:`llama_index_ext_advrag.plan`); the sync and async methods
only execute them. A judge that fails anywhere degrades to the nodes as retrieved, with the
failure in the trace; a failing retriever, rewrite or web search is recorded and skipped. The
judge, the corrective retriever and the web search are bounded in time (``judge_timeout``,
``retrieve_timeout``, ``web_search_timeout``): a step that times out returns the nodes as
retrieved, with the step in the trace; a rewrite that times out falls back to keywords.
``judge_timeout`` bounds the judge's calls of one CRAG call together (the retrieved nodes, each
corrective round's nodes and the refinement's strips are graded in separate calls). Every returned node carries ``metadata[TRACE_KEY]["crag"]``: its
grade, source, the action, the rewritten queries, what refinement dropped, and the grades of
the dropped nodes. The same decisions are emitted as instrumentation events
(:mod:`llama_index_ext_advrag.events`) inside a span per call.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType, PromptMixin, PromptMixinType
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_ext_advrag.configuration import (
    RefusesUnknownSettings,
    TemplateSetting,
    check_prompts,
    prompt_fields,
    update_prompt_fields,
)
from llama_index_ext_advrag.events import (
    CRAGActionEvent,
    CRAGResultEvent,
    CRAGRoundEvent,
    KeptNodeRecord,
    NodeGradeRecord,
)
from llama_index_ext_advrag.judges.base import (
    MAX_KEEP_WITHIN,
    BaseRelevanceJudge,
    Grade,
    node_texts,
)
from llama_index_ext_advrag.models import resolve_llm
from llama_index_ext_advrag.plan import Failed, Judge, Retrieve, adrive, drive
from llama_index_ext_advrag.postprocessor.crag_io import (
    REWRITE_PROMPT_VARIABLES,
    CRAGExecutor,
    WebSearch,
    _Rewrite,
    _WebSearch,
)
from llama_index_ext_advrag.postprocessor.crag_refine import (
    DEFAULT_STRIP_TOKENS,
    join_strips,
    select_strips,
    split_strips,
)
from llama_index_ext_advrag.queries import distinctive_terms, query_text
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TRACE_COMPONENT = "crag"
# Never return fewer nodes than this (the best graded are kept back); see the module docstring.
# The rewrite prompt's variables: {query} needed, {avoid} (the queries already tried) optional.
_PROMPTS = {"rewrite_prompt": REWRITE_PROMPT_VARIABLES}
_PROMPT_HINTS = {"rewrite_prompt": "(and may use {avoid}, the queries already tried)"}
DEFAULT_MIN_KEPT = 1
DEFAULT_MIN_KEPT_FLOOR = 0.0
DEFAULT_MAX_ROUNDS = 1
LOG_ODDS_EPSILON = 1e-9
DEFAULT_REWRITE_TIMEOUT = 120.0
# Bounds for steps that may hang; generous enough for an LLM judge on a small local model
# grading a batch (about 5 s per pair at 4 in flight) and a web search over a slow link.
DEFAULT_JUDGE_TIMEOUT = 300.0
DEFAULT_RETRIEVE_TIMEOUT = 60.0
DEFAULT_WEB_SEARCH_TIMEOUT = 60.0
MAX_TIMEOUT = 3600.0
DEFAULT_REWRITE_PROMPT = PromptTemplate(
    "Rewrite the question below as a short web-search query made of its key terms, in the "
    "question's language. Reply with the query only.\n"
    "{avoid}Question: {query}\nQuery:"
)


class CRAGAction(str, Enum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    AMBIGUOUS = "ambiguous"


def decide_action(scores: Sequence[float | None], upper: float, lower: float) -> CRAGAction | None:
    """The paper's rule: Correct if any score >= ``upper``; Incorrect if every score is known
    and < ``lower``; Ambiguous otherwise; ``None`` when there is no known score.

    >>> decide_action([0.2, 0.7], 0.7, 0.3), decide_action([0.2, 0.29], 0.7, 0.3)
    (<CRAGAction.CORRECT: 'correct'>, <CRAGAction.INCORRECT: 'incorrect'>)
    """
    known = [s for s in scores if s is not None]
    if not known:
        return None
    if any(s >= upper for s in known):
        return CRAGAction.CORRECT
    if len(known) == len(scores) and all(s < lower for s in known):
        return CRAGAction.INCORRECT
    return CRAGAction.AMBIGUOUS


def log_odds(score: float) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to [1e-9, 1 - 1e-9] (finite for 0 and 1).

    >>> log_odds(0.5), round(log_odds(0.9), 3), round(log_odds(1.0), 1)
    (0.0, 2.197, 20.7)
    """
    clipped = min(max(score, LOG_ODDS_EPSILON), 1.0 - LOG_ODDS_EPSILON)
    return math.log(clipped / (1.0 - clipped))


def within_margin(
    scores: Sequence[float | None], upper: float, keep_within: float | None
) -> list[bool]:
    """Which nodes the margin rule lets through: unknown ones, those at or above ``upper``, and
    those at most ``keep_within`` log-odds below the best known score (all when ``None``).

    >>> within_margin([0.99, 0.7, 0.04, None], 0.995, 4.0)
    [True, True, False, True]
    """
    known = [s for s in scores if s is not None]
    if keep_within is None or not known:
        return [True] * len(scores)
    floor = log_odds(max(known)) - keep_within
    return [s is None or s >= upper or log_odds(s) >= floor for s in scores]


def keep_retrieved(
    scores: Sequence[float | None],
    action: CRAGAction,
    upper: float,
    lower: float,
    keep_doubtful_when_correct: bool = False,
    keep_within: float | None = None,
) -> list[bool]:
    """Which retrieved nodes the action keeps (an unknown score counts as doubtful); with
    ``keep_within``, a node below ``upper`` must also be within that many log-odds of the
    best-graded node (:func:`within_margin`)."""
    if action is CRAGAction.INCORRECT:
        return [False] * len(scores)
    if action is CRAGAction.CORRECT and not keep_doubtful_when_correct:
        return [s is not None and s >= upper for s in scores]
    margin = within_margin(scores, upper, keep_within)
    return [(s is None or s >= lower) and m for s, m in zip(scores, margin, strict=True)]


def keep_corrective(scores: Sequence[float | None], lower: float) -> list[bool]:
    """Corrective and web results are kept at or above ``lower`` (unknown: kept)."""
    return [s is None or s >= lower for s in scores]


def keep_back(
    scores: Sequence[float | None], kept: Sequence[bool], min_kept: int, floor: float
) -> list[int]:
    """Indices of dropped nodes to keep back so that ``min_kept`` are kept: the best scores
    first (ties in input order), none scoring below ``floor``.

    >>> keep_back([0.2, 0.05, 0.3], [False, False, False], 1, 0.0)
    [2]
    >>> keep_back([0.2, 0.05, 0.9], [False, False, True], 2, 0.1), keep_back([0.05], [False], 1, 0.1)
    ([0], [])
    """
    missing = min_kept - sum(kept)
    if missing <= 0:
        return []
    order = sorted(
        (i for i, (s, k) in enumerate(zip(scores, kept, strict=True)) if not k and s is not None),
        key=lambda i: -(scores[i] or 0.0),
    )
    return [i for i in order if (scores[i] or 0.0) >= floor][:missing]


def dedupe_key(text: str) -> str:
    return " ".join(text.split()).casefold()


@dataclass
class _Candidate:
    node: NodeWithScore
    source: str
    grade: Grade
    text: str
    refinement: dict[str, Any] | None = None
    kept_by: str = "grade"
    dropped_by: str = "grade"  # "margin": at or above lower, too far below the best grade


Plan = Generator[Any, Any, list[NodeWithScore]]


def _timeout_field(default: float, what: str) -> Any:
    return Field(
        default=default,
        gt=0,
        le=MAX_TIMEOUT,
        description=f"Seconds {what} may take (None: wait); a slower one returns the nodes as "
        "retrieved, the step named in the trace.",
    )


class CRAGPostprocessor(BaseNodePostprocessor, PromptMixin, RefusesUnknownSettings):
    """Corrective RAG between retrieval and generation (see the module docstring).

    Args:
        judge: the relevance judge; ``None`` (default) builds
            :func:`~llama_index_ext_advrag.judges.offline.offline_judge` (cross-encoder for
            English, e5 for Chinese; its models load on the first grade).
        upper, lower: action thresholds on the judge's score (``lower <= upper``); ``None``
            (default) takes the judge's ``default_upper`` / ``default_lower``. Fit them for a
            judge with :func:`~llama_index_ext_advrag.judges.calibration.calibrate_judge_thresholds`.
        keep_doubtful_when_correct: in Correct, also keep nodes in ``[lower, upper)`` (default).
        keep_within: a retrieved node below ``upper`` graded more than this many log-odds below
            the best-graded retrieved node is dropped; not given: the judge's
            ``default_keep_within``; ``None``: no margin (the thresholds alone decide).
        min_kept: never return fewer nodes than this when the retrieval had them: the
            best-graded dropped retrieved nodes are kept back (0: the paper's rule, which may
            return nothing).
        min_kept_floor: a node scoring below it is not kept back by ``min_kept`` (the judge is
            confident it is irrelevant).
        refine: cut kept nodes into strips and keep the relevant ones.
        strip_tokens: tokens per strip at most (sentence groups).
        strip_threshold: score a strip needs (``None``: ``lower``).
        strip_token_budget: tokens of strips kept over all nodes (``None``: no budget).
        max_rounds: corrective retrieval rounds at most (0: none).
        corrective_retriever: the retriever for corrective retrieval (``None``: none).
        web_search: last resort, ``query -> list of str or NodeWithScore`` (sync or async).
        llm: rewrites the query; ``None`` resolves it late, none / ``MockLLM`` = keyword rewrite.
        rewrite_timeout: seconds the LLM rewrite may take (``None``: wait); a slower, failing
            or unusable rewrite falls back to keywords, recorded as ``rewrite_fallback``.
        judge_timeout, retrieve_timeout, web_search_timeout: seconds all judge calls of one
            CRAG call together, one corrective retrieval, the web search may take (``None``:
            wait); a slower step returns the nodes as retrieved with ``timed_out`` (the step)
            in the trace.
        rewrite_prompt: the LLM rewrite's template (``{query}``, optional ``{avoid}``); also
            settable with ``update_prompts({"rewrite_prompt": ...})``.

    Raises:
        ValueError: ``lower > upper`` (both named, explicit or the judge's); a rewrite prompt
            without ``{query}``.

    Example:
        >>> from llama_index.core.schema import NodeWithScore, TextNode
        >>> from llama_index_ext_advrag.judges import BaseRelevanceJudge
        >>> class KeywordJudge(BaseRelevanceJudge):  # a toy judge; use CrossEncoderRelevanceJudge()
        ...     def _judge(self, query, texts):
        ...         words = set(query.lower().split())
        ...         return [self.grade(float(bool(words & set(t.lower().split())))) for t in texts]
        >>> hits = [NodeWithScore(node=TextNode(text=t), score=0.5) for t in ["Cats sleep.", "Paris is sunny."]]
        >>> crag = CRAGPostprocessor(judge=KeywordJudge(), upper=0.6, lower=0.3, refine=False)
        >>> kept = crag.postprocess_nodes(hits, query_str="paris weather")
        >>> [n.node.text for n in kept], kept[0].node.metadata["advrag_trace"]["crag"]["action"]
        (['Paris is sunny.'], 'correct')
        >>> CRAGPostprocessor(judge=KeywordJudge(default_upper=0.8, default_lower=0.2)).upper
        0.8
    """

    upper: float = Field(
        ge=0.0, le=1.0, description="Correct at or above it (default: the judge's default_upper)."
    )
    lower: float = Field(
        ge=0.0, le=1.0, description="Dropped below it (default: the judge's default_lower)."
    )
    keep_doubtful_when_correct: bool = Field(default=True)
    keep_within: float | None = Field(
        default=None,
        gt=0.0,
        le=MAX_KEEP_WITHIN,
        description="Log-odds margin to the best-graded retrieved node (None: no margin; not "
        "given: the judge's default_keep_within).",
    )
    min_kept: int = Field(
        default=DEFAULT_MIN_KEPT,
        ge=0,
        le=100,
        description="Nodes always returned (the best graded) when the retrieval had them.",
    )
    min_kept_floor: float = Field(
        default=DEFAULT_MIN_KEPT_FLOOR,
        ge=0.0,
        le=1.0,
        description="A node scoring below it is never kept back by min_kept.",
    )
    refine: bool = Field(default=True)
    strip_tokens: int = Field(default=DEFAULT_STRIP_TOKENS, ge=1)
    strip_threshold: float | None = Field(default=None, ge=0.0, le=1.0)
    strip_token_budget: int | None = Field(default=None, ge=1)
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=0, le=10)
    rewrite_prompt: TemplateSetting = Field(default=DEFAULT_REWRITE_PROMPT)
    rewrite_timeout: float | None = Field(
        default=DEFAULT_REWRITE_TIMEOUT,
        gt=0,
        description="Seconds the LLM rewrite may take; a slower one falls back to keywords.",
    )
    judge_timeout: float | None = _timeout_field(
        DEFAULT_JUDGE_TIMEOUT, "the judge calls of one CRAG call (together)"
    )
    retrieve_timeout: float | None = _timeout_field(
        DEFAULT_RETRIEVE_TIMEOUT, "one corrective retrieval"
    )
    web_search_timeout: float | None = _timeout_field(DEFAULT_WEB_SEARCH_TIMEOUT, "the web search")

    _judge: BaseRelevanceJudge = PrivateAttr()
    _retriever: BaseRetriever | None = PrivateAttr(default=None)
    _web_search: WebSearch | None = PrivateAttr(default=None)
    _llm: LLM | None = PrivateAttr(default=None)

    def __init__(
        self,
        judge: BaseRelevanceJudge | None = None,
        corrective_retriever: BaseRetriever | None = None,
        web_search: WebSearch | None = None,
        llm: LLM | None = None,
        **data: Any,
    ) -> None:
        if judge is None:
            from llama_index_ext_advrag.judges.offline import offline_judge

            judge = offline_judge()
        if not isinstance(judge, BaseRelevanceJudge):
            raise TypeError(
                f"judge must be a BaseRelevanceJudge (or None for the offline judge), got "
                f"{type(judge).__name__}"
            )
        for bound, default in (("upper", judge.default_upper), ("lower", judge.default_lower)):
            if data.get(bound) is None:
                data[bound] = default
        if "keep_within" not in data:  # given, even as None, it wins over the judge's
            data["keep_within"] = judge.default_keep_within
        super().__init__(**data)
        if self.lower > self.upper:
            raise ValueError(f"lower ({self.lower}) must not exceed upper ({self.upper})")
        check_prompts(self, _PROMPTS, _PROMPT_HINTS)
        self._judge = judge
        self._retriever = corrective_retriever
        self._web_search = web_search
        self._llm = llm

    @classmethod
    def class_name(cls) -> str:
        return "CRAGPostprocessor"

    @property
    def judge(self) -> BaseRelevanceJudge:
        """The relevance judge (a live object: pass it to ``from_dict``)."""
        return self._judge

    # ----- prompts (PromptMixin) -----

    def _get_prompts(self) -> PromptDictType:
        return prompt_fields(self, _PROMPTS)

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        update_prompt_fields(self, prompts_dict, _PROMPTS, _PROMPT_HINTS)

    def _get_prompt_modules(self) -> PromptMixinType:
        """The judge's prompts (an LLM judge's) under ``judge:``."""
        return {"judge": self.judge}

    # ----- the decision logic (shared by sync and async) -----

    def _plan(self, query: str, nodes: list[NodeWithScore]) -> Plan:
        texts = node_texts(nodes)
        grades = yield Judge(query, texts)
        if isinstance(grades, Failed):
            return self._as_retrieved(query, nodes, grades, first=True)
        scores = [g.score for g in grades]
        action = decide_action(scores, self.upper, self.lower)
        if action is None:
            return self._as_retrieved(query, nodes, Failed("every grade is unknown"), first=True)
        dispatcher.event(
            CRAGActionEvent(
                query=query,
                action=action.value,
                grades=[_graded_entry(n, g) for n, g in zip(nodes, grades, strict=True)],
            )
        )
        # keep_retrieved(..., keep_within) is the thresholds' verdict and the margin's together;
        # they are taken apart here to trace which one dropped a node.
        by_thresholds = keep_retrieved(
            scores, action, self.upper, self.lower, self.keep_doubtful_when_correct
        )
        by_margin = within_margin(scores, self.upper, self.keep_within)
        keep = [t and m for t, m in zip(by_thresholds, by_margin, strict=True)]
        candidates = [
            _Candidate(n, "retrieved", g, t) for n, g, t in zip(nodes, grades, texts, strict=True)
        ]
        for candidate, threshold_kept, margin_kept in zip(
            candidates, by_thresholds, by_margin, strict=True
        ):
            if threshold_kept and not margin_kept:
                candidate.dropped_by = "margin"
        kept = [c for c, k in zip(candidates, keep, strict=True) if k]
        dropped = [c for c, k in zip(candidates, keep, strict=True) if not k]
        decision: dict[str, Any] = {"action": action.value, "rounds": []}
        if action is not CRAGAction.CORRECT:
            failure = yield from self._correct(query, candidates, kept, dropped, decision["rounds"])
            if failure is not None:
                return self._as_retrieved(query, nodes, failure)
        self._keep_back(kept, dropped)
        refined_away: list[_Candidate] = []
        if self.refine and kept:
            failure = yield from self._refine(query, kept, refined_away)
            if failure is not None:
                return self._as_retrieved(query, nodes, failure)
        decision["dropped"] = [
            {
                "node_id": c.node.node.node_id,
                "source": c.source,
                "grade": c.grade.to_dict(),
                "why": c.dropped_by if why == "grade" else why,
            }
            for why, group in (("grade", dropped), ("refinement", refined_away))
            for c in group
        ]
        logger.debug("CRAG %s: kept %d, dropped %d", action.value, len(kept), len(dropped))
        if not kept:
            # No node is left to carry the trace: say so where the caller can see it.
            logger.warning(
                "CRAG (%s) returns no nodes: all %d retrieved nodes graded below the thresholds "
                "and corrective retrieval kept none (rounds: %s)",
                action.value,
                len(nodes),
                decision["rounds"],
            )
        return self._build(kept, decision)

    def _correct(
        self,
        query: str,
        seen_candidates: list[_Candidate],
        kept: list[_Candidate],
        dropped: list[_Candidate],
        rounds: list[dict[str, Any]],
    ) -> Generator[Any, Any, Failed | None]:
        """Corrective rounds, then the web search; appends to ``kept``/``dropped``/``rounds``."""
        seen = {c.node.node.node_id for c in seen_candidates}
        seen |= {dedupe_key(c.text) for c in seen_candidates}
        tried: list[str] = []
        confident = False
        for _ in range(self.max_rounds if self._retriever is not None else 0):
            rewrite = yield _Rewrite(query, tuple(tried))
            if rewrite is None:
                break
            rewritten, method, note = rewrite
            tried.append(rewritten)
            hits = yield Retrieve(rewritten)
            record: dict[str, Any] = {"query": rewritten, "rewrite": method}
            if note is not None:
                record["rewrite_fallback"] = note
            rounds.append(record)
            failure, confident = yield from self._grade_new(
                query, hits, "corrective", seen, kept, dropped, record
            )
            dispatcher.event(CRAGRoundEvent(round=dict(record)))
            if failure is not None:
                return failure
            if confident:
                break
        if not confident and self._web_search is not None:
            search_query = tried[0] if tried else distinctive_terms(query)
            results = yield _WebSearch(search_query)
            record = {"query": search_query, "source": "web_search"}
            rounds.append(record)
            failure, _ = yield from self._grade_new(
                query, results, "web_search", seen, kept, dropped, record
            )
            dispatcher.event(CRAGRoundEvent(round=dict(record)))
            if failure is not None:
                return failure
        return None

    def _grade_new(
        self,
        query: str,
        hits: list[NodeWithScore] | Failed,
        source: str,
        seen: set[str],
        kept: list[_Candidate],
        dropped: list[_Candidate],
        record: dict[str, Any],
    ) -> Generator[Any, Any, tuple[Failed | None, bool]]:
        """Grade a round's new results; a failed round is recorded and skipped, a timed-out
        one (or a failing judge) ends CRAG with the nodes as retrieved."""
        if isinstance(hits, Failed):
            record["error"] = hits.error
            return (hits if hits.timed_out else None), False
        fresh = []
        for hit in hits:
            text = node_texts([hit])[0]
            keys = {hit.node.node_id, dedupe_key(text)}
            if not keys & seen:
                seen |= keys
                fresh.append((hit, text))
        record.update(retrieved=len(hits), new=len(fresh), kept=0)
        if not fresh:
            return None, False
        grades = yield Judge(query, [text for _, text in fresh])
        if isinstance(grades, Failed):
            return grades, False
        scores = [g.score for g in grades]
        for (hit, text), grade, keep in zip(
            fresh, grades, keep_corrective(scores, self.lower), strict=True
        ):
            (kept if keep else dropped).append(_Candidate(hit, source, grade, text))
        record["kept"] = sum(keep_corrective(scores, self.lower))
        return None, any(s is not None and s >= self.upper for s in scores)

    def _keep_back(self, kept: list[_Candidate], dropped: list[_Candidate]) -> None:
        """Move the best-graded dropped retrieved nodes to ``kept`` up to ``min_kept``."""
        retrieved = [c for c in dropped if c.source == "retrieved"]
        back = keep_back(
            [c.grade.score for c in retrieved],
            [False] * len(retrieved),
            self.min_kept - len(kept),
            self.min_kept_floor,
        )
        for index in back:
            candidate = retrieved[index]
            candidate.kept_by = "min_kept"
            dropped.remove(candidate)
            kept.append(candidate)

    def _refine(
        self, query: str, kept: list[_Candidate], removed: list[_Candidate]
    ) -> Generator[Any, Any, Failed | None]:
        """Refine ``kept`` in place; nodes left without a strip (budget) move to ``removed``."""
        strips = [s for i, c in enumerate(kept) for s in split_strips(i, c.text, self.strip_tokens)]
        if not strips:
            return None
        grades = yield Judge(query, [s.text for s in strips])
        if isinstance(grades, Failed):
            return grades
        threshold = self.lower if self.strip_threshold is None else self.strip_threshold
        chosen = set(
            select_strips(strips, [g.score for g in grades], threshold, self.strip_token_budget)
        )
        for index, candidate in enumerate(kept):
            mine = [i for i, s in enumerate(strips) if s.passage == index]
            keep = [strips[i] for i in mine if i in chosen]
            candidate.refinement = {
                "strips": len(mine),
                "kept": [s.position for s in keep],
                "dropped": [
                    {"text": strips[i].text, "score": grades[i].score}
                    for i in mine
                    if i not in chosen
                ],
            }
            if len(keep) < len(mine):
                candidate.text = join_strips(candidate.text, keep)
        removed.extend(c for c in kept if c.refinement and not c.refinement["kept"])
        kept[:] = [c for c in kept if not c.refinement or c.refinement["kept"]]
        return None

    def _as_retrieved(
        self, query: str, nodes: list[NodeWithScore], failure: Failed, first: bool = False
    ) -> list[NodeWithScore]:
        """The nodes as retrieved, each traced with why (and the step that timed out)."""
        logger.warning("CRAG keeps the nodes as retrieved: %s", failure.error)
        record: dict[str, Any] = {"action": "keep_as_retrieved", "error": failure.error}
        if failure.timed_out:
            record["timed_out"] = failure.step
        if first:
            dispatcher.event(
                CRAGActionEvent(query=query, action="keep_as_retrieved", error=failure.error)
            )
        results = []
        for node in nodes:
            result = copy_node_with_score(node)
            add_trace(result.node, TRACE_COMPONENT, dict(record))
            results.append(result)
        dispatcher.event(
            CRAGResultEvent(
                action="keep_as_retrieved",
                kept=[_kept_entry(n, "retrieved") for n in results],
                error=failure.error,
                timed_out=record.get("timed_out"),
            )
        )
        return results

    def _build(self, kept: list[_Candidate], decision: dict[str, Any]) -> list[NodeWithScore]:
        order = sorted(
            range(len(kept)),
            key=lambda i: (kept[i].grade.score is None, -(kept[i].grade.score or 0), i),
        )
        results = []
        for index in order:
            candidate = kept[index]
            result = copy_node_with_score(candidate.node)
            if candidate.text != node_texts([candidate.node])[0]:
                result.node.set_content(candidate.text)
            if candidate.grade.score is not None:
                result.score = candidate.grade.score
            record = {
                "grade": candidate.grade.to_dict(),
                "source": candidate.source,
                "kept_by": candidate.kept_by,
                "refinement": candidate.refinement,
                **decision,
            }
            add_trace(result.node, TRACE_COMPONENT, record)
            results.append(result)
        dispatcher.event(
            CRAGResultEvent(
                action=decision["action"],
                kept=[_kept_entry(r, kept[i].source) for r, i in zip(results, order, strict=True)],
                dropped=decision["dropped"],
            )
        )
        return results

    # ----- I/O: the only part sync and async do differently -----

    def _resolved_llm(self) -> LLM | None:
        return resolve_llm(self._llm)  # None for no LLM and for core's MockLLM

    def _executor(self) -> CRAGExecutor:
        return CRAGExecutor(
            judge=self.judge,
            retriever=self._retriever,
            web_search=self._web_search,
            llm=self._resolved_llm,
            rewrite_prompt=self.rewrite_prompt,
            rewrite_timeout=self.rewrite_timeout,
            timeouts={
                Judge: self.judge_timeout,
                Retrieve: self.retrieve_timeout,
                _WebSearch: self.web_search_timeout,
            },
        )

    @dispatcher.span
    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not nodes:
            return []
        return drive(self._plan(query_text(query_bundle), list(nodes)), self._executor().execute)

    @dispatcher.span
    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        """Async :meth:`postprocess_nodes`: the same decisions, native async I/O."""
        if not nodes:
            return []
        plan = self._plan(query_text(query_bundle), list(nodes))
        return await adrive(plan, self._executor().aexecute)


def _kept_entry(node: NodeWithScore, source: str) -> KeptNodeRecord:
    return {"node_id": node.node.node_id, "source": source, "score": node.score}


def _graded_entry(node: NodeWithScore, grade: Grade) -> NodeGradeRecord:
    return {"node_id": node.node.node_id, **grade.to_dict()}


__all__ = [
    "CRAGAction",
    "CRAGPostprocessor",
    "decide_action",
    "distinctive_terms",
    "keep_back",
    "keep_corrective",
    "keep_retrieved",
    "log_odds",
    "within_margin",
]
