"""Self-RAG's decisions as pure functions: prompts, reply parsing, critique scores, selection.

Self-RAG (Asai et al., 2023) trains a model to emit reflection tokens; here a general LLM is
*prompted* for each of them and its reply (or, when the LLM returns them, the log-probabilities
of its first token) is turned into a number. Each critique term is normalised as in the paper:

- ``ISREL`` in [0, 1]: the relevance judge's calibrated score of the passage (the mean over the
  passages of a candidate generated from several). A grade the judge could not give (unknown)
  keeps the passage and counts :data:`UNKNOWN_ISREL` (0.5).
- ``ISSUP`` in [0, 1]: fully supported = 1, partially = 0.5, no support = 0; with
  log-probabilities ``P(fully) + 0.5 * P(partially)`` over the three labels' probability mass.
  An unparsable reply counts as no support (0, :data:`UNPARSABLE_ISSUP`), the cautious default:
  an answer nobody vouched for is not shown as supported.
- ``ISUSE`` in [-1, 1]: the 1-5 rating mapped by the paper's weights ``(-1, -0.5, 0, 0.5, 1)``,
  i.e. ``(rating - 3) / 2``; with log-probabilities the expectation over the five digits. An
  unparsable reply counts as 3, i.e. 0 (:data:`UNPARSABLE_ISUSE`).

A candidate scores ``w_rel * ISREL + w_sup * ISSUP + w_use * ISUSE`` (paper defaults 1, 1, 0.5).

The retrieve decision is ``P(yes) >= threshold`` (yes = retrieve) when the LLM returns
log-probabilities (the paper's default threshold 0.2 favours retrieving), the parsed yes/no
reply otherwise; an unparsable reply retrieves (:data:`UNPARSABLE_RETRIEVE`), the safe side.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from llama_index.core.base.llms.types import CompletionResponse
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.chat_prompts import TEXT_QA_SYSTEM_PROMPT

from llama_index_ext_advrag.judges.llm import first_token_alternatives, parse_yes_no
from llama_index_ext_advrag.judges.llm import yes_probability as yes_no_probability
from llama_index_ext_advrag.models import DEFAULT_CJK_THRESHOLD
from llama_index_ext_advrag.text.sentences import split_sentences
from llama_index_ext_advrag.text.words import cjk_share

DEFAULT_RETRIEVE_THRESHOLD = 0.2
DEFAULT_WEIGHTS = (1.0, 1.0, 0.5)
UNKNOWN_ISREL = 0.5
UNPARSABLE_ISSUP = 0.0
UNPARSABLE_ISUSE = 0.0
UNPARSABLE_RETRIEVE = True
SUPPORT_VALUES = {"fully": 1.0, "partially": 0.5, "no": 0.0}
USEFULNESS_VALUES = {str(rating): (rating - 3) / 2 for rating in range(1, 6)}

DEFAULT_RETRIEVE_PROMPT = PromptTemplate(
    "Decide whether answering the question needs looking up documents.\n"
    "Reply yes for questions about specific facts, names, numbers, rules or procedures, for "
    "anything time-sensitive, and for anything about the document collection{corpus}.\n"
    "Reply no for arithmetic, common sense or general knowledge, and open-ended creative "
    "writing.\n"
    "Question: {query}\n"
    "Does it need documents? Reply with one word: yes or no.\n"
    "Answer:"
)
DEFAULT_DIRECT_PROMPT = PromptTemplate(
    "Answer the question concisely, in the question's language.\nQuestion: {query}\nAnswer:"
)
# The generation prompt's text: LlamaIndex's question-answering prompt (the one its query engines
# and always-retrieve RAG answer with), over the relevant passages. ISSUP and ISUSE continue it
# word for word, so an LLM server that keeps its previous prompt's prefix (llama.cpp) evaluates
# only the critique's own tokens.
GENERATE_TEXT = (
    "Context information is below.\n"
    "---------------------\n"
    "{passages}\n"
    "---------------------\n"
    "Given the context information and not prior knowledge, answer the query.\n"
    "Query: {query}\n"
    "Answer: "
)
DEFAULT_GENERATE_PROMPT = PromptTemplate(GENERATE_TEXT)
# LlamaIndex's system message of its chat question-answering prompt (``CHAT_TEXT_QA_PROMPT``,
# what its response synthesizers send a chat model), read from LlamaIndex: with it, the
# generation sends a chat model the messages of LlamaIndex's query engines. Without it (the
# default) a chat model receives one user message, as ``DEFAULT_TEXT_QA_PROMPT`` sends it (the
# pack's answer benchmark).
QA_SYSTEM_PROMPT: str = str(TEXT_QA_SYSTEM_PROMPT.content)
DEFAULT_SUPPORT_PROMPT = PromptTemplate(
    GENERATE_TEXT + "{answer}\n\n"
    "Is the answer above supported by the passages? Reply with one word: fully, partially, or "
    "no.\n"
    "Support:"
)
DEFAULT_USEFULNESS_PROMPT = PromptTemplate(
    GENERATE_TEXT + "{answer}\n\n"
    "Rate how useful the answer above is to the question, from 1 (useless) to 5 (complete and "
    "helpful). Reply with one digit.\n"
    "Rating:"
)
DEFAULT_REWRITE_PROMPT = PromptTemplate(
    "Rewrite the question as a short search query of its key terms, in the question's "
    "language. Reply with the query only.\n"
    "{avoid}Question: {query}\nQuery:"
)
PROMPT_VARIABLES = {
    "retrieve_prompt": {"query", "corpus"},
    "direct_prompt": {"query"},
    "generate_prompt": {"query", "passages"},
    "support_prompt": {"query", "passages", "answer"},
    "usefulness_prompt": {"query", "answer"},
    "rewrite_prompt": {"query", "avoid"},
}
DEFAULT_INSUFFICIENT_ANSWER = "The retrieved evidence is insufficient to answer this question."
# the refusal in the question's language: Chinese when the question counts as Chinese (the
# pack's one rule, ``models.DEFAULT_CJK_THRESHOLD`` of its letters CJK)
DEFAULT_INSUFFICIENT_ANSWER_ZH = "检索到的证据不足以回答这个问题。"


def insufficient_answer_for(query: str, configured: str | None = None) -> str:
    """``configured`` when given, else the default refusal in ``query``'s language.

    >>> insufficient_answer_for("色林错每年接待多少名游客？")
    '检索到的证据不足以回答这个问题。'
    >>> insufficient_answer_for("How many visitors?"), insufficient_answer_for("游客?", "No.")
    ('The retrieved evidence is insufficient to answer this question.', 'No.')
    """
    if configured is not None:
        return configured
    if cjk_share(query) >= DEFAULT_CJK_THRESHOLD:
        return DEFAULT_INSUFFICIENT_ANSWER_ZH
    return DEFAULT_INSUFFICIENT_ANSWER


EXTRACTIVE_LABEL = "[extractive] "

# Negatives first: "not fully" is no, "不支持" contains "支持".
_SUPPORT_WORD = re.compile(
    r"不支持|没有|无支持|部分|完全|全部|"
    r"\b(?:not|no|none|unsupported|partial(?:ly)?|part|full(?:y)?|yes|supported)\b",
    re.IGNORECASE,
)
_SUPPORT_LABEL = {
    "不支持": "no", "没有": "no", "无支持": "no", "not": "no", "no": "no", "none": "no",
    "unsupported": "no", "部分": "partially", "partial": "partially", "partially": "partially",
    "part": "partially", "完全": "fully", "全部": "fully", "full": "fully", "fully": "fully",
    "yes": "fully", "supported": "fully",
}  # fmt: skip
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_RATING = re.compile(r"[1-5]")
_TOKEN_PREFIX = {"full": "fully", "part": "partially", "no": "no", "not": "no"}


class RetrieveDecision(str, Enum):
    """How the engine decides whether to use retrieval."""

    LLM = "llm"  # the paper's question to the LLM, before retrieving (one call)
    SCORES = "scores"  # retrieve first (no LLM); use retrieval iff a passage passes ISREL


class WithoutEvidence(str, Enum):
    """What ``RetrieveDecision.SCORES`` answers when no retrieved passage passes ISREL."""

    REFUSE = "refuse"  # the insufficient-evidence answer, no LLM call
    DIRECT = "direct"  # the paper's no-retrieval branch: the LLM answers from its own knowledge


class GenerationPassages(str, Enum):
    """Which passages of a retrieval the candidates are generated from."""

    RELEVANT = "relevant"  # those that pass ISREL (the paper's filter)
    RETRIEVED = "retrieved"  # all of them once one passes ISREL: always-retrieve's context


class GenerationMode(str, Enum):
    """How candidates are generated from the relevant passages of one retrieval."""

    PER_PASSAGE = "per_passage"  # one candidate per passage, as the paper (more LLM calls)
    JOINT = "joint"  # one candidate over all relevant passages (cheaper)


@dataclass(frozen=True)
class Critique:
    """One critique (retrieve decision, ISSUP or ISUSE): the value used and how it was read.

    ``method`` is ``logprobs``, ``parsed``, ``default`` (unparsable or failed: ``value`` is the
    documented default), ``forced`` or ``no_llm``; ``label`` the verdict read (``None`` when
    defaulted); ``reply`` the first characters of the reply.
    """

    value: float
    method: str
    label: str | None = None
    reply: str | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        record = {"value": self.value, "method": self.method, "label": self.label}
        if self.reply is not None:
            record["reply"] = self.reply
        if self.reason is not None:
            record["reason"] = self.reason
        return record


@dataclass
class Candidate:
    """One generated answer with the passages it was generated from and its critiques."""

    answer: str
    passages: list[int]  # indices into the engine's list of relevant passages
    isrel: float
    issup: Critique | None = None
    isuse: Critique | None = None
    score: float | None = None
    iteration: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def reply_text(response: Any) -> str:
    """The text of a completion, ``""`` for anything else (a failure, ``None``)."""
    if isinstance(response, CompletionResponse):
        return (response.text or "").strip()
    return ""


def _excerpt(reply: str) -> str:
    return reply[:120]


def label_distribution(
    alternatives: Sequence[tuple[str, float]], read: Callable[[str], str | None]
) -> dict[str, float] | None:
    """Probabilities of the labels ``read`` finds among first-token ``(token, logprob)``
    alternatives, normalised over the labels found; ``None`` when none is found.

    >>> label_distribution([("4", math.log(0.6)), ("5", math.log(0.2)), ("x", -1.0)],
    ...                    lambda t: t if t in "12345" else None)
    {'4': 0.75, '5': 0.25}
    """
    mass: dict[str, float] = {}
    for token, logprob in alternatives:
        label = read(token.strip().lower())
        if label is not None and math.isfinite(logprob):
            mass[label] = mass.get(label, 0.0) + math.exp(logprob)
    total = sum(mass.values())
    if total <= 0.0:
        return None
    return {label: probability / total for label, probability in mass.items()}


def _support_token(token: str) -> str | None:
    for prefix, label in _TOKEN_PREFIX.items():
        if token.startswith(prefix):
            return label
    return parse_support(token)


def _rating_token(token: str) -> str | None:
    return token if token in USEFULNESS_VALUES else None


def parse_support(reply: str) -> str | None:
    """``fully`` / ``partially`` / ``no`` from the first support word of ``reply`` (English or
    Chinese), ``None`` when there is none.

    >>> parse_support("Partially."), parse_support("It is not fully supported"), parse_support("完全支持")
    ('partially', 'no', 'fully')
    """
    match = _SUPPORT_WORD.search(reply or "")
    return None if match is None else _SUPPORT_LABEL[match.group().lower()]


def parse_rating(reply: str) -> int | None:
    """The first number of ``reply`` when it is a rating 1-5, else ``None``: a reply whose
    first number is out of range ("10 out of 5", an injected "grade this 10") is unread,
    not read from a later digit.

    >>> parse_rating("Rating: 4/5"), parse_rating("10"), parse_rating("10 out of 5"), parse_rating("great")
    (4, None, None, None)
    """
    match = _NUMBER.search(reply or "")
    if match is None or _RATING.fullmatch(match.group()) is None:
        return None
    return int(match.group())


def read_retrieve(response: Any, threshold: float) -> Critique:
    """The retrieve decision: ``value`` 1.0 = retrieve. Log-probabilities: ``P(yes) >=
    threshold``; otherwise the parsed yes/no; unparsable: retrieve."""
    reply = reply_text(response)
    alternatives = (
        first_token_alternatives(response) if isinstance(response, CompletionResponse) else None
    )
    found = yes_no_probability(alternatives) if alternatives else None
    if found is not None:
        retrieve = found[0] >= threshold
        return Critique(
            1.0 if retrieve else 0.0,
            "logprobs",
            "yes" if retrieve else "no",
            _excerpt(reply),
            reason=f"P(yes)={found[0]:.4f}",
        )
    verdict = parse_yes_no(reply)
    if verdict is None:
        return Critique(
            1.0 if UNPARSABLE_RETRIEVE else 0.0,
            "default",
            reply=_excerpt(reply),
            reason=why_unread(response, reply),
        )
    return Critique(1.0 if verdict else 0.0, "parsed", "yes" if verdict else "no", _excerpt(reply))


def _read_label(
    response: Any,
    read_token: Callable[[str], str | None],
    parse: Callable[[str], str | None],
    values: dict[str, float],
    default: float,
) -> Critique:
    """A labelled critique: the expectation of ``values`` under the first token's label
    probabilities when there are log-probabilities, else the parsed label, else ``default``."""
    reply = reply_text(response)
    alternatives = (
        first_token_alternatives(response) if isinstance(response, CompletionResponse) else None
    )
    probabilities = label_distribution(alternatives, read_token) if alternatives else None
    if probabilities is not None:
        value = sum(values[label] * p for label, p in probabilities.items())
        label = max(probabilities, key=lambda name: probabilities[name])
        return Critique(value, "logprobs", label, _excerpt(reply))
    parsed = parse(reply)
    if parsed is None:
        return Critique(
            default, "default", reply=_excerpt(reply), reason=why_unread(response, reply)
        )
    return Critique(values[parsed], "parsed", parsed, _excerpt(reply))


def read_support(response: Any) -> Critique:
    """ISSUP in [0, 1] (see the module docstring)."""
    return _read_label(response, _support_token, parse_support, SUPPORT_VALUES, UNPARSABLE_ISSUP)


def read_usefulness(response: Any) -> Critique:
    """ISUSE in [-1, 1] (see the module docstring)."""

    def parse(reply: str) -> str | None:
        rating = parse_rating(reply)
        return None if rating is None else str(rating)

    return _read_label(response, _rating_token, parse, USEFULNESS_VALUES, UNPARSABLE_ISUSE)


def why_unread(response: Any, reply: str) -> str:
    """Why a completion was not read: its error, "empty reply" or "unparsable reply"."""
    if not isinstance(response, CompletionResponse):
        return str(getattr(response, "error", None) or f"no completion ({type(response).__name__})")
    return "empty reply" if not reply else "unparsable reply"


def candidate_score(
    isrel: float, issup: float, isuse: float, weights: Sequence[float] = DEFAULT_WEIGHTS
) -> float:
    """``w_rel * ISREL + w_sup * ISSUP + w_use * ISUSE``.

    >>> candidate_score(0.8, 0.5, 0.5)
    1.55
    """
    w_rel, w_sup, w_use = weights
    return w_rel * isrel + w_sup * issup + w_use * isuse


def best_candidate(candidates: Sequence[Candidate], min_support: float) -> int | None:
    """Index of the highest-scoring candidate whose ISSUP is at least ``min_support``; ties go
    to the earlier candidate; ``None`` when none qualifies."""
    best: int | None = None
    for index, candidate in enumerate(candidates):
        support = candidate.issup.value if candidate.issup is not None else UNPARSABLE_ISSUP
        if support < min_support or candidate.score is None:
            continue
        if best is None or candidate.score > (candidates[best].score or 0.0):
            best = index
    return best


def passes_isrel(label_relevant: bool, score: float | None, threshold: float | None) -> bool:
    """Whether a graded passage passes ISREL: the judge's label (``label_relevant``: not
    irrelevant) when ``threshold`` is ``None``, else its score ``>= threshold``; a passage the
    judge could not score (``None``) passes.

    >>> passes_isrel(False, 0.12, None), passes_isrel(False, 0.12, 0.1), passes_isrel(True, 0.05, 0.1)
    (False, True, False)
    """
    if threshold is None:
        return label_relevant
    return score is None or score >= threshold


def isrel_value(score: float | None) -> float:
    """A passage's ISREL term: the judge's score, :data:`UNKNOWN_ISREL` when unknown."""
    return UNKNOWN_ISREL if score is None else score


def format_passages(texts: Sequence[str], max_chars: int) -> str:
    """Passages for a prompt, each cut to ``max_chars`` characters, joined by blank lines: the
    context always-retrieve RAG gives the LLM, so with every passage kept both prompts are
    the same."""
    return "\n\n".join(text[:max_chars] for text in texts)


def sentence_pool(texts: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(passage, position, sentence)`` for every non-heading sentence of ``texts``, cut by
    the pack's sentence splitter."""
    pool = []
    for passage, text in enumerate(texts):
        for position, sentence in enumerate(split_sentences(text)):
            if not sentence.is_heading and sentence.text.strip():
                pool.append((passage, position, sentence.text.strip()))
    return pool


def extractive_answer(
    pool: Sequence[tuple[int, int, str]], scores: Sequence[float | None], count: int
) -> tuple[str, list[int]]:
    """The ``count`` best-scored sentences (unknown scores last), in reading order, joined;
    and the indices chosen. Sentences are verbatim from the passages, so fully supported.

    >>> extractive_answer([(0, 0, "A."), (0, 1, "B."), (1, 0, "C.")], [0.2, 0.9, 0.5], 2)
    ('B. C.', [1, 2])
    """
    order = sorted(range(len(pool)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), i))
    chosen = sorted(order[:count], key=lambda i: (pool[i][0], pool[i][1]))
    return " ".join(pool[i][2] for i in chosen), chosen


__all__ = [
    "DEFAULT_INSUFFICIENT_ANSWER",
    "DEFAULT_INSUFFICIENT_ANSWER_ZH",
    "DEFAULT_RETRIEVE_THRESHOLD",
    "DEFAULT_WEIGHTS",
    "EXTRACTIVE_LABEL",
    "PROMPT_VARIABLES",
    "SUPPORT_VALUES",
    "UNKNOWN_ISREL",
    "UNPARSABLE_ISSUP",
    "UNPARSABLE_ISUSE",
    "UNPARSABLE_RETRIEVE",
    "USEFULNESS_VALUES",
    "Candidate",
    "Critique",
    "GENERATE_TEXT",
    "GenerationMode",
    "GenerationPassages",
    "RetrieveDecision",
    "WithoutEvidence",
    "best_candidate",
    "candidate_score",
    "extractive_answer",
    "format_passages",
    "isrel_value",
    "passes_isrel",
    "QA_SYSTEM_PROMPT",
    "label_distribution",
    "parse_rating",
    "parse_support",
    "read_retrieve",
    "read_support",
    "read_usefulness",
    "sentence_pool",
    "insufficient_answer_for",
]
