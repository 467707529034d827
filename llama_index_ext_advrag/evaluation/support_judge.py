"""A support judge that a small local LLM can afford: it continues the generation's own chat.

Its prompt is the generation prompt itself (the same chat messages: the answer prompt with the
context and the question), then the answer as the assistant's turn, then one user turn asking
whether one sentence of that answer is supported by the context; yes or no is read from the
first generated token's log-probabilities (the pack's LLM-judge pattern, see
:mod:`~llama_index_ext_advrag.judges.llm`), or parsed from the reply when the LLM returns none.

Because the judge's prompt begins with exactly the tokens the server has just evaluated for the
generation, a server that keeps its last prompt (llama.cpp's, and llama-cpp-python's server,
which reuse the longest common prefix of the previous prompt in the same slot) evaluates only
the judge's own few tokens: the context is not read again. Judge each answer's sentences right
after generating it. ``FaithfulnessEvaluator`` instead sends a new prompt holding the whole
context for every sentence.

A judge call that fails, times out or answers neither yes nor no gives ``supported=None`` with
the reason recorded; the judge never raises for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate

from llama_index_ext_advrag.judges.llm import (
    first_token_alternatives,
    one_token_copy,
    parse_yes_no,
    yes_probability,
)
from llama_index_ext_advrag.plan import StepTimeoutError, arun_within, plain_timeout, run_within

logger = logging.getLogger(__name__)

DEFAULT_SUPPORT_QUESTION = PromptTemplate(
    "Check one sentence of your answer against the context above, and only the context.\n"
    "Sentence: {sentence}\n"
    "Is everything this sentence states supported by the context? "
    "Reply with one word: yes or no."
)
DEFAULT_THRESHOLD = 0.5
DEFAULT_TOP_LOGPROBS = 5


@dataclass(frozen=True)
class SupportVerdict:
    """One sentence judged: ``supported`` is ``None`` when the judge could not tell."""

    supported: bool | None
    p_yes: float | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"supported": self.supported, "p_yes": self.p_yes, "reason": self.reason}


def generation_messages(
    llm: Any, prompt: BasePromptTemplate, **prompt_args: Any
) -> list[ChatMessage]:
    """The chat messages ``llm.predict(prompt, **prompt_args)`` sends to a chat model: the
    prompt's messages, after the LLM's ``system_prompt`` when it has one."""
    messages = list(prompt.format_messages(llm=llm, **prompt_args))
    system = getattr(llm, "system_prompt", None)
    if system:
        messages = [ChatMessage(role=MessageRole.SYSTEM, content=system), *messages]
    return messages


def judge_messages(
    messages: Sequence[ChatMessage], answer: str, question: str
) -> list[ChatMessage]:
    """The generation's messages, the answer as the assistant's turn, then the judge's
    question: the prompt begins with the generation prompt's tokens."""
    return [
        *messages,
        ChatMessage(role=MessageRole.ASSISTANT, content=answer),
        ChatMessage(role=MessageRole.USER, content=question),
    ]


def verdict_from_response(response: Any, threshold: float = DEFAULT_THRESHOLD) -> SupportVerdict:
    """Yes/no from the first token's log-probabilities, else from the reply's text.

    >>> from llama_index.core.base.llms.types import ChatResponse, ChatMessage
    >>> verdict_from_response(ChatResponse(message=ChatMessage(content="No."))).supported
    False
    """
    if not isinstance(response, ChatResponse):
        return SupportVerdict(None, None, f"unexpected response type {type(response).__name__}")
    alternatives = first_token_alternatives(response)
    if alternatives:
        found = yes_probability(alternatives)
        if found is not None:
            return SupportVerdict(found[0] >= threshold, round(found[0], 6), "logprobs")
    reply = str(response.message.content or "").strip()
    if not reply:
        return SupportVerdict(None, None, "empty reply")
    verdict = parse_yes_no(reply)
    if verdict is None:
        return SupportVerdict(None, None, f"unparsable reply: {reply[:80]!r}")
    return SupportVerdict(verdict, None, f"parsed reply: {reply[:80]!r}")


class PrefixSupportJudge:
    """Judges an answer's sentence in the generation's own chat (one short call per sentence).

    Args:
        llm: a LlamaIndex chat LLM (an ``OpenAILike`` on a llama.cpp server, say); its
            log-probabilities are asked for on each call (``logprobs=True``, ``top_logprobs``),
            with one output token.
        question: the judge's user turn, a template with ``{sentence}``.
        threshold: ``P(yes) / (P(yes) + P(no))`` at or above which a sentence is supported.
        timeout: seconds one judgement may take; a slower one is unjudged.
        top_logprobs: alternatives asked for on the first token.

    Raises:
        ValueError: ``question`` lacks ``{sentence}``, ``threshold`` is outside (0, 1),
            ``timeout`` is not > 0 or ``top_logprobs`` is outside 1..20.

    Example:
        >>> judge = PrefixSupportJudge(llm)  # doctest: +SKIP
        >>> messages = generation_messages(llm, qa_prompt, context_str=ctx, query_str=q)  # doctest: +SKIP
        >>> judge.judge(messages, answer, "It is 3.5 bar.").supported  # doctest: +SKIP
    """

    def __init__(
        self,
        llm: Any,
        *,
        question: BasePromptTemplate | str = DEFAULT_SUPPORT_QUESTION,
        threshold: float = DEFAULT_THRESHOLD,
        timeout: float = 120.0,
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
    ) -> None:
        template = PromptTemplate(question) if isinstance(question, str) else question
        if "sentence" not in template.template_vars:
            raise ValueError(
                f"the judge question needs a {{sentence}} variable, got {template.template_vars}"
            )
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
        if not timeout > 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout!r}")
        if not 1 <= top_logprobs <= 20:
            raise ValueError(f"top_logprobs must be in 1..20, got {top_logprobs!r}")
        self.llm = llm
        # one output token: an LLM's own max_tokens (OpenAI's) overrides a per-call argument
        self._judge_llm = one_token_copy(llm)
        self.question = template
        self.threshold = float(threshold)
        self.timeout = float(timeout)
        self.top_logprobs = int(top_logprobs)

    @classmethod
    def class_name(cls) -> str:
        return "PrefixSupportJudge"

    def identity(self) -> dict[str, Any]:
        """What decides the verdicts (for cache keys)."""
        return {
            "judge": self.class_name(),
            "question": str(getattr(self.question, "template", self.question)),
            "threshold": self.threshold,
        }

    def _messages(
        self, messages: Sequence[ChatMessage], answer: str, sentence: str
    ) -> list[ChatMessage]:
        return judge_messages(messages, answer, self.question.format(sentence=sentence))

    def _kwargs(self) -> dict[str, Any]:
        return {"logprobs": True, "top_logprobs": self.top_logprobs, "max_tokens": 1}

    def judge(self, messages: Sequence[ChatMessage], answer: str, sentence: str) -> SupportVerdict:
        """Whether ``sentence`` of ``answer`` is supported by the context in ``messages``."""
        prompt = self._messages(messages, answer, sentence)
        try:
            response = run_within(
                lambda: self._judge_llm.chat(prompt, **self._kwargs()),
                self.timeout,
                "the support judge",
                thread=True,
                error=plain_timeout,
            )
        except Exception as exc:  # an LLM failure is an unjudged sentence, never a crash
            logger.warning("support judgement failed: %r", exc)
            return SupportVerdict(None, None, f"LLM error: {exc!r}"[:200])
        return verdict_from_response(response, self.threshold)

    async def ajudge(
        self, messages: Sequence[ChatMessage], answer: str, sentence: str
    ) -> SupportVerdict:
        """Async :meth:`judge`."""
        prompt = self._messages(messages, answer, sentence)
        try:
            response = await arun_within(
                lambda: self._judge_llm.achat(prompt, **self._kwargs()), self.timeout
            )
        except StepTimeoutError:
            return SupportVerdict(None, None, f"timeout after {self.timeout:g} s")
        except Exception as exc:  # an LLM failure is an unjudged sentence, never a crash
            logger.warning("support judgement failed: %r", exc)
            return SupportVerdict(None, None, f"LLM error: {exc!r}"[:200])
        return verdict_from_response(response, self.threshold)


__all__ = [
    "DEFAULT_SUPPORT_QUESTION",
    "PrefixSupportJudge",
    "SupportVerdict",
    "generation_messages",
    "judge_messages",
    "verdict_from_response",
]
