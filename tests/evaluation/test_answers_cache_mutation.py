"""Answer evaluation's cached parts and messages, sync and async: a cut answer stays cut and a
judgement keeps its P(yes) when read back from the cache, a dict-shaped server reply marks a cut
answer, a reply without content is an empty answer, the sync generation runs in a worker
thread, a timeout names the answer LLM, the prompt reads the retrieved context, the prefix judge
is asked about the sentence, a row keeps its verdicts, and the evaluator's settings errors are
exact (kills the mutants of evaluation/answers.py left after the refusal rows)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from evaluation.test_answers_judging_mutation import (
    A1,
    CONTEXT,
    Q1,
    SENTENCE,
    Completion,
    JudgingChat,
    judge,
    rows,
)
from llama_index.core.base.llms.types import ChatMessage, ChatResponse
from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_ext_advrag.evaluation.answers import AnswerEvaluator
from llama_index_ext_advrag.evaluation.support_judge import SupportVerdict

MODES = ["sync", "async"]


@pytest.mark.parametrize("mode", MODES)
def test_a_cut_answer_stays_cut_when_read_from_the_cache(mode: str, tmp_path: Path) -> None:
    first = rows(mode, AnswerEvaluator(JudgingChat(raw_reply=Completion("length")), tmp_path))
    again = rows(mode, AnswerEvaluator(JudgingChat(), tmp_path))  # the same key: cached
    assert (first.truncated, first.cached) == (True, False)
    assert (again.answer, again.truncated, again.cached) == (A1, True, True)


@pytest.mark.parametrize("mode", MODES)
def test_a_cached_prefix_judgement_keeps_its_p_yes(mode: str, tmp_path: Path) -> None:
    llm = JudgingChat()
    evaluator = AnswerEvaluator(llm, tmp_path, support_judge="prefix")
    judge(evaluator, mode, Q1, SENTENCE, CONTEXT, A1)
    again = judge(AnswerEvaluator(JudgingChat(), tmp_path, support_judge="prefix"), mode,
                  Q1, SENTENCE, CONTEXT, A1)  # fmt: skip
    assert (again.supported, again.p_yes) == (True, pytest.approx(0.8))


@pytest.mark.parametrize("mode", MODES)
def test_a_dict_shaped_server_reply_marks_a_cut_answer(mode: str, tmp_path: Path) -> None:
    def reply(reason: str) -> dict[str, Any]:
        return {"choices": [{"finish_reason": reason, "index": 0}]}

    cut = rows(mode, AnswerEvaluator(JudgingChat(raw_reply=reply("length")), tmp_path / "a"))
    whole = rows(mode, AnswerEvaluator(JudgingChat(raw_reply=reply("stop")), tmp_path / "b"))
    assert (cut.answer, cut.truncated, whole.truncated) == (A1, True, False)


class NoContent(JudgingChat):
    """A chat model whose answer message has no content at all."""

    def _reply(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return ChatResponse(message=ChatMessage(role="assistant", content=None))


@pytest.mark.parametrize("mode", MODES)
def test_a_reply_without_content_is_an_empty_answer(mode: str, tmp_path: Path) -> None:
    row = rows(mode, AnswerEvaluator(NoContent(), tmp_path))
    assert (row.answer, row.error) == ("", "EmptyAnswerError: the LLM returned an empty answer")


class ThreadChat(JudgingChat):
    """Records the thread each call ran in; sleeps ``delay`` seconds first (the async call
    without blocking its event loop)."""

    delay: float = 0.0
    _threads: list[threading.Thread] = PrivateAttr(default_factory=list)

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._threads.append(threading.current_thread())
        time.sleep(self.delay)
        return self._reply(messages, **kwargs)

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        await asyncio.sleep(self.delay)
        return self._reply(messages, **kwargs)


def test_the_sync_generation_runs_in_a_worker_thread(tmp_path: Path) -> None:
    llm = ThreadChat()
    row = rows("sync", AnswerEvaluator(llm, tmp_path))
    assert row.error is None and llm._threads[0] is not threading.main_thread()


@pytest.mark.parametrize("mode", MODES)
def test_a_generation_timeout_names_the_answer_llm(mode: str, tmp_path: Path) -> None:
    row = rows(mode, AnswerEvaluator(ThreadChat(delay=1.0), tmp_path, timeout=0.2))
    assert row.error == "TimeoutError: the answer LLM gave no answer within 0.2 s"


@pytest.mark.parametrize("mode", MODES)
def test_the_prompt_reads_the_retrieved_context_and_the_judge_the_sentence(
    mode: str, tmp_path: Path
) -> None:
    llm = JudgingChat()
    row = rows(mode, AnswerEvaluator(llm, tmp_path, support_judge="prefix"))
    generated = [messages for messages, kwargs in llm.log if not kwargs.get("logprobs")]
    assert CONTEXT in str(generated[0][-1].content)
    [asked] = llm.judgements()
    assert A1 in str(asked[-1].content) and "None" not in str(asked[-1].content)
    assert row.verdicts == (SupportVerdict(True, pytest.approx(0.8), "logprobs"),)


def test_the_prefix_judge_needs_a_chat_model_and_a_known_judge_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError) as error:
        AnswerEvaluator(ScriptedLLM(["x"]), tmp_path, support_judge="prefix")
    assert str(error.value) == (
        "support_judge='prefix' continues the generation's chat: it needs a chat model, and "
        "ScriptedLLM is not one; use 'faithfulness'"
    )
    with pytest.raises(ValueError) as error:
        AnswerEvaluator(ScriptedLLM(["x"]), tmp_path, support_judge="nli")
    assert str(error.value) == (
        "support_judge must be one of ('prefix', 'faithfulness') or a PrefixSupportJudge, got 'nli'"
    )
