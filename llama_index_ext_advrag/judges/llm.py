"""An LLM relevance judge: yes/no log-probabilities when the LLM returns them, the reply otherwise.

The prompt asks for one word, yes or no. When the completion carries log-probabilities
(``CompletionResponse.logprobs``: OpenAI and OpenAI-compatible servers such as llama.cpp's, with
the LLM built with ``logprobs=True, top_logprobs=5``) the score is
``P(yes) / (P(yes) + P(no))`` over the first token's alternatives and ``raw`` is the log-odds.
Otherwise the reply is parsed (yes/no, 是/否, 相关/不相关) into a score of 1.0 or 0.0.

An LLM that fails, times out, answers nothing or answers neither yes nor no gives an unknown
grade with the reason recorded; the judge never raises for it. Without an LLM (none given,
none in ``Settings``, or core's ``MockLLM``) every grade is unknown.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import re
from collections.abc import Generator, Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, CompletionResponse
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.llms import LLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.prompts.mixin import PromptDictType

from llama_index_ext_advrag.configuration import (
    TemplateSetting,
    check_prompts,
    prompt_fields,
    update_prompt_fields,
)
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.models import resolve_llm
from llama_index_ext_advrag.plan import Call, StepTimeoutError, adrive, arun_call, drive, run_call

logger = logging.getLogger(__name__)

DEFAULT_RELEVANCE_PROMPT = PromptTemplate(
    "You grade whether a passage helps answer a question.\n"
    "Question: {query}\n"
    "Passage: {text}\n"
    "Does the passage contain information that answers the question? "
    "Reply with one word: yes or no.\n"
    "Answer:"
)
DEFAULT_TIMEOUT = 60.0
_PROMPTS = {"prompt": ("query", "text")}
DEFAULT_MAX_CONCURRENCY = 4
DEFAULT_MAX_PASSAGE_CHARS = 2000

_YES = frozenset({"yes", "y", "true", "relevant", "是", "是的", "相关", "对"})
_NO = frozenset({"no", "n", "false", "irrelevant", "否", "不", "不是", "不相关", "无关"})
# Chinese negatives first: 不相关 contains 相关.
_REPLY_WORD = re.compile(
    r"不相关|无关|不是|是的|相关|[是否不对]|\b(?:yes|no|true|false|irrelevant|relevant)\b",
    re.IGNORECASE,
)


def parse_yes_no(reply: str) -> bool | None:
    """The first yes/no word of ``reply`` (English or Chinese), ``None`` when there is none.

    >>> parse_yes_no("Yes, it does."), parse_yes_no("不相关。"), parse_yes_no("maybe")
    (True, False, None)
    """
    match = _REPLY_WORD.search(reply or "")
    if match is None:
        return None
    word = match.group().lower()
    return True if word in _YES else False if word in _NO else None


# The least probability a verdict missing from the returned alternatives is given.
ABSENT_FLOOR = 1e-6


def yes_probability(alternatives: Sequence[tuple[str, float]]) -> tuple[float, float] | None:
    """``(P(yes) / (P(yes) + P(no)), log-odds)`` from a token's ``(token, logprob)``
    alternatives, or ``None`` when neither a yes nor a no token is among them.

    When only one side is among the alternatives, the other's probability is not known, only
    bounded: it ranks below every listed token and shares the mass the list leaves. That bound
    (``min(smallest listed, 1 - listed total)``, at least ``ABSENT_FLOOR``) stands in for it, so
    a reply whose "no" fell outside the top 5 scores high but finite instead of a certain 1.0.

    >>> round(yes_probability([("Yes", math.log(0.6)), (" no", math.log(0.2)), ("x", -1.0)])[0], 6)
    0.75
    >>> round(yes_probability([("Yes", math.log(0.9)), ("Sure", math.log(0.05))])[0], 3)  # no "no"
    0.947
    """
    mass = {True: 0.0, False: 0.0}
    listed: list[float] = []
    for token, logprob in alternatives:
        if not math.isfinite(logprob):
            continue
        listed.append(math.exp(logprob))
        verdict = parse_yes_no(token.strip())
        if verdict is not None:
            mass[verdict] += math.exp(logprob)
    if mass[True] == 0.0 and mass[False] == 0.0:
        return None
    absent = max(min(min(listed), 1.0 - sum(listed)), ABSENT_FLOOR)
    yes = mass[True] or absent
    no = mass[False] or absent
    return yes / (yes + no), math.log(yes / no)


def one_token_copy(llm: Any) -> Any:
    """``llm`` limited to one output token when it has a ``max_tokens`` setting (a copy: the
    caller's LLM keeps its own). OpenAI's clients let their own ``max_tokens`` override a
    per-call one, so a one-token label call needs the copy."""
    if getattr(llm, "max_tokens", None) is None or not hasattr(llm, "model_copy"):
        return llm
    return llm.model_copy(update={"max_tokens": 1})


def first_token_alternatives(
    response: CompletionResponse | ChatResponse,
) -> list[tuple[str, float]] | None:
    """The first generated token's ``(token, logprob)`` alternatives, if the LLM returned any."""
    logprobs = getattr(response, "logprobs", None)
    if not logprobs:
        return None
    first = logprobs[0]
    return [(str(item.token), float(item.logprob)) for item in first] or None


class LLMRelevanceJudge(BaseRelevanceJudge):
    """Grade pairs with a prompted LLM (one call per pair).

    Args:
        llm: the LLM; ``None`` resolves it when first needed (``Settings.llm``, OpenAI when
            ``OPENAI_API_KEY`` is set); ``MockLLM`` or nothing = every grade unknown.
        prompt: a template with ``{query}`` and ``{text}`` (``get_prompts()`` key ``"prompt"``).
        timeout: seconds per call; a slower call gives an unknown grade.
        max_concurrency: calls in flight at once (threads in sync, tasks in async).
        max_passage_chars: the passage is cut to this many characters in the prompt.
        completion_kwargs: extra keyword arguments for ``llm.complete`` (``llm.chat`` for a
            chat model, whose log-probabilities ``complete`` would drop).

    Example:
        >>> llm = OpenAILike(api_base=url, model="qwen", logprobs=True, top_logprobs=5)  # doctest: +SKIP
        >>> LLMRelevanceJudge(llm=llm).judge("What causes COVID-19?", passages)  # doctest: +SKIP
    """

    name: str = Field(default="llm", min_length=1)
    prompt: TemplateSetting = Field(default=DEFAULT_RELEVANCE_PROMPT)
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    max_concurrency: int = Field(default=DEFAULT_MAX_CONCURRENCY, ge=1, le=64)
    max_passage_chars: int = Field(default=DEFAULT_MAX_PASSAGE_CHARS, ge=1)
    completion_kwargs: dict[str, Any] = Field(default_factory=dict)

    _llm: LLM | None = PrivateAttr(default=None)

    def __init__(self, llm: LLM | None = None, **data: Any) -> None:
        super().__init__(**data)
        check_prompts(self, _PROMPTS)
        self._llm = llm

    @classmethod
    def class_name(cls) -> str:
        return "LLMRelevanceJudge"

    def _get_prompts(self) -> PromptDictType:
        return prompt_fields(self, _PROMPTS)

    def _update_prompts(self, prompts_dict: PromptDictType) -> None:
        update_prompt_fields(self, prompts_dict, _PROMPTS)

    def _resolved_llm(self) -> LLM | None:
        return resolve_llm(self._llm)  # None for no LLM and for core's MockLLM

    def _format(self, query: str, text: str) -> str:
        return self.prompt.format(query=query, text=text[: self.max_passage_chars])

    @staticmethod
    def _messages(prompt: str) -> list[ChatMessage]:
        return [ChatMessage(role="user", content=prompt)]

    def _call(self, llm: LLM, prompt: str) -> Any:
        # Core's complete() on a chat model drops the log-probabilities: chat directly.
        if llm.metadata.is_chat_model:
            return llm.chat(self._messages(prompt), **self.completion_kwargs)
        return llm.complete(prompt, **self.completion_kwargs)

    async def _acall(self, llm: LLM, prompt: str) -> Any:
        if llm.metadata.is_chat_model:
            return await llm.achat(self._messages(prompt), **self.completion_kwargs)
        return await llm.acomplete(prompt, **self.completion_kwargs)

    def _grade_response(self, response: Any) -> Grade:
        """Turn one completion into a grade; anything unexpected is an unknown grade."""
        if isinstance(response, ChatResponse):
            reply = str(response.message.content or "").strip()
        elif isinstance(response, CompletionResponse):
            reply = (response.text or "").strip()
        else:
            return Grade.unknown(self.name, f"unexpected response type {type(response).__name__}")
        alternatives = first_token_alternatives(response)
        if alternatives:
            found = yes_probability(alternatives)
            if found is not None:
                return self.grade(found[0], raw=found[1], reason="logprobs")
        if not reply:
            return Grade.unknown(self.name, "empty reply")
        verdict = parse_yes_no(reply)
        if verdict is None:
            return Grade.unknown(self.name, f"unparsable reply: {reply[:80]!r}")
        return self.grade(1.0 if verdict else 0.0, reason=f"parsed reply: {reply[:80]!r}")

    def _grading(self, llm: LLM, prompt: str) -> Generator[Call, Any, Grade]:
        """One text's grade: one LLM call bounded by ``timeout`` (sync and async alike)."""
        try:
            response = yield Call(
                lambda: self._call(llm, prompt), lambda: self._acall(llm, prompt), self.timeout
            )
        except StepTimeoutError:  # the bound; the LLM's own TimeoutError is its error
            return Grade.unknown(self.name, f"timeout after {self.timeout:g} s")
        except Exception as exc:  # an LLM failure is an unknown grade, never a crash
            return self._failed(exc)
        return self._grade_response(response)

    def _failed(self, exc: BaseException) -> Grade:
        logger.warning("LLM judge call failed: %r", exc)
        return Grade.unknown(self.name, f"LLM error: {exc!r}"[:200])

    # The fan-out differs (a thread pool; a semaphore and gather), each text's plan does not.

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        llm = self._resolved_llm()
        if llm is None:
            return [Grade.unknown(self.name, "no LLM") for _ in texts]
        prompts = [self._format(query, text) for text in texts]
        with concurrent.futures.ThreadPoolExecutor(max_workers=self.max_concurrency) as pool:
            return list(pool.map(lambda p: drive(self._grading(llm, p), run_call), prompts))

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        llm = self._resolved_llm()
        if llm is None:
            return [Grade.unknown(self.name, "no LLM") for _ in texts]
        semaphore = asyncio.Semaphore(self.max_concurrency)

        async def one(prompt: str) -> Grade:
            async with semaphore:
                return await adrive(self._grading(llm, prompt), arun_call)

        return list(await asyncio.gather(*(one(self._format(query, t)) for t in texts)))


__all__ = [
    "DEFAULT_RELEVANCE_PROMPT",
    "LLMRelevanceJudge",
    "first_token_alternatives",
    "one_token_copy",
    "parse_yes_no",
    "yes_probability",
]
