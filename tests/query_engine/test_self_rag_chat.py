"""Self-RAG's ISREL threshold, the passages it generates from, its system prompt to chat
models and its critique from log-probabilities. With ``generation_passages="retrieved"`` the
generation sends what always-retrieve RAG sends: LlamaIndex's ``DEFAULT_TEXT_QA_PROMPT`` as one
message, or with ``QA_SYSTEM_PROMPT`` the chat prompt its query engines send."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    LLMMetadata,
    LogProb,
    MessageRole,
)
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.prompts.chat_prompts import CHAT_TEXT_QA_PROMPT
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.query_engine import self_rag_critique as critique

FX = TextNode(text="The FX-40 syncs every 15 minutes by default.", id_="fx")
WEAK = TextNode(text="Weak: the FX series has ports.", id_="weak")
CAT = TextNode(text="Cats purr when they are content.", id_="cat")
QUESTION = "How often does the FX-40 sync?"
SCORES = {"The": 0.9, "Wea": 0.2, "Cat": 0.05}  # by the text's first three characters


class ListRetriever(BaseRetriever):
    def __init__(self, nodes: Sequence[TextNode]) -> None:
        super().__init__()
        self.nodes = list(nodes)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=n, score=1.0) for n in self.nodes]


class PrefixJudge(BaseRelevanceJudge):
    """Scores from ``SCORES``; the label against the default decision threshold (0.5)."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(SCORES[t[:3]]) for t in texts]


def reply(prompt: str) -> str:
    if prompt.endswith("Support:"):
        return "fully"
    if prompt.endswith("Rating:"):
        return "5"
    if prompt.endswith("Answer: "):
        return "Every 15 minutes."
    return "FX-40 sync"


class ScriptedChatLLM(ScriptedLLM):
    """A chat model: every ``chat`` call's messages are kept; the reply is ``reply`` of the
    last message, with first-token log-probabilities for the support question."""

    _chats: list[list[ChatMessage]] = PrivateAttr(default_factory=list)
    _kwargs: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted-chat", is_chat_model=True)

    @property
    def chats(self) -> list[list[ChatMessage]]:
        return self._chats

    @property
    def call_kwargs(self) -> list[dict[str, Any]]:
        return self._kwargs

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        self._chats.append(list(messages))
        self._kwargs.append(kwargs)
        text = reply(str(messages[-1].content))
        logprobs = None
        if text == "fully":
            logprobs = [[LogProb(token="partially", logprob=math.log(0.6), bytes=[]),
                         LogProb(token="fully", logprob=math.log(0.4), bytes=[])]]  # fmt: skip
        return ChatResponse(
            message=ChatMessage(role=MessageRole.ASSISTANT, content=text), logprobs=logprobs
        )

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return self.chat(messages, **kwargs)


def ask(qe: SelfRAGQueryEngine, use_async: bool) -> Any:
    return asyncio.run(qe.aquery(QUESTION)) if use_async else qe.query(QUESTION)


def build(llm: Any, nodes: Sequence[TextNode], **kwargs: Any) -> SelfRAGQueryEngine:
    kwargs.setdefault("generation_mode", "joint")
    kwargs.setdefault("max_passages", 5)
    return SelfRAGQueryEngine(retriever=ListRetriever(nodes), llm=llm, judge=PrefixJudge(),
                              **kwargs)  # fmt: skip


def trace_of(response: Any) -> dict[str, Any]:
    return response.metadata[TRACE_KEY]["self_rag"]


# ----- the ISREL threshold -----


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(
    ("threshold", "kept"),
    [(None, [True, False, False]), (0.2, [True, True, False]), (0.21, [True, False, False]),
     (0.05, [True, True, True]), (0.0, [True, True, True])],
)  # fmt: skip
def test_isrel_threshold_decides_which_passages_pass_inclusive(
    threshold: float | None, kept: list[bool], use_async: bool
) -> None:
    llm = ScriptedLLM(reply)
    trace = trace_of(ask(build(llm, [FX, WEAK, CAT], isrel_threshold=threshold), use_async))
    assert [g["kept"] for g in trace["iterations"][0]["isrel"]] == kept
    assert trace["isrel_threshold"] == threshold
    [generation] = [p for p in llm.prompts if p.endswith("Answer: ")]
    for node, passed in zip([FX, WEAK, CAT], kept, strict=True):
        assert (node.text in generation) is passed


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize(("threshold", "refused"), [(0.2, False), (0.2001, True), (None, True)])
def test_isrel_threshold_is_the_refusal_bar_of_the_scores_decision(
    threshold: float | None, refused: bool, use_async: bool
) -> None:
    llm = ScriptedLLM(reply)
    response = ask(build(llm, [WEAK, CAT], isrel_threshold=threshold), use_async)
    trace = trace_of(response)
    assert (trace["answer_kind"] == "insufficient_evidence") is refused
    assert (llm.prompts == []) is refused
    assert trace["retrieve"]["passed"] == (0 if refused else 1)


def test_an_unscored_passage_passes_any_threshold() -> None:
    assert critique.passes_isrel(False, None, 0.9)
    assert not critique.passes_isrel(True, 0.1, 0.9)
    assert critique.passes_isrel(True, 0.1, None)


@pytest.mark.parametrize(("field", "value"), [("isrel_threshold", 1.5),
                                              ("isrel_threshold", -0.1),
                                              ("system_prompt", "")])  # fmt: skip
def test_bad_threshold_or_system_prompt_is_refused_by_name(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        build(ScriptedLLM(reply), [FX], **{field: value})


# ----- the system prompt -----


@pytest.mark.parametrize("use_async", [False, True])
def test_generation_sends_llamaindex_chat_qa_messages_with_the_system_prompt(
    use_async: bool,
) -> None:
    """With every passage kept and ``QA_SYSTEM_PROMPT``, the generation's messages are
    LlamaIndex's chat question-answering prompt over always-retrieve's context; the critique
    starts with the same system message and the generation's user text."""
    llm = ScriptedChatLLM()
    qe = build(llm, [FX, WEAK], isrel_threshold=0.1, system_prompt=critique.QA_SYSTEM_PROMPT)
    response = ask(qe, use_async)
    expected = CHAT_TEXT_QA_PROMPT.format_messages(
        context_str=f"{FX.text}\n\n{WEAK.text}", query_str=QUESTION
    )
    generation = llm.chats[0]
    assert [(m.role, m.content) for m in generation] == [(m.role, m.content) for m in expected]
    critiques = llm.chats[1:]
    assert len(critiques) == 2
    for messages in critiques:
        assert messages[0].content == critique.QA_SYSTEM_PROMPT
        assert str(messages[1].content).startswith(str(generation[1].content) + "Every 15")
    assert str(response) == "Every 15 minutes."
    assert trace_of(response)["system_prompt"] is True


@pytest.mark.parametrize("use_async", [False, True])
def test_chat_replies_keep_their_logprobs(use_async: bool) -> None:
    llm = ScriptedChatLLM()
    qe = build(llm, [FX], system_prompt="Be brief.")
    trace = trace_of(ask(qe, use_async))
    [candidate] = trace["iterations"][0]["candidates"]
    assert candidate["issup"]["method"] == "logprobs"
    assert candidate["issup"]["value"] == pytest.approx(0.4 + 0.5 * 0.6)


@pytest.mark.parametrize("use_async", [False, True])
def test_without_system_prompt_a_chat_model_gets_the_bare_prompt(use_async: bool) -> None:
    llm = ScriptedChatLLM()
    ask(build(llm, [FX]), use_async)
    assert llm.chats == [] and len(llm.prompts) == 3  # complete(): generation, ISSUP, ISUSE


@pytest.mark.parametrize("use_async", [False, True])
def test_a_completion_model_ignores_the_system_prompt(use_async: bool) -> None:
    llm = ScriptedLLM(reply)
    ask(build(llm, [FX], system_prompt="SYSTEM-TEXT"), use_async)
    assert len(llm.prompts) == 3 and not any("SYSTEM-TEXT" in p for p in llm.prompts)


# ----- the passages generated from -----


@pytest.mark.parametrize("use_async", [False, True])
def test_retrieved_passages_are_generated_from_once_one_passes(use_async: bool) -> None:
    llm = ScriptedChatLLM()
    qe = build(llm, [WEAK, FX, CAT], generation_passages="retrieved",
               system_prompt=critique.QA_SYSTEM_PROMPT)  # fmt: skip
    response = ask(qe, use_async)
    trace = trace_of(response)
    assert [g["kept"] for g in trace["iterations"][0]["isrel"]] == [False, True, False]
    expected = CHAT_TEXT_QA_PROMPT.format_messages(
        context_str=f"{WEAK.text}\n\n{FX.text}\n\n{CAT.text}", query_str=QUESTION
    )
    assert [m.content for m in llm.chats[0]] == [m.content for m in expected]
    assert trace["iterations"][0]["relevant"] == ["weak", "fx", "cat"]
    assert [n.node.node_id for n in response.source_nodes] == ["weak", "fx", "cat"]
    assert trace["generation_passages"] == "retrieved"
    # the candidate's ISREL is the mean over the passages it was generated from
    [candidate] = trace["iterations"][0]["candidates"]
    assert candidate["isrel"] == pytest.approx((0.2 + 0.9 + 0.05) / 3)


@pytest.mark.parametrize("use_async", [False, True])
def test_retrieved_passages_still_refuse_when_none_passes(use_async: bool) -> None:
    llm = ScriptedChatLLM()
    qe = build(llm, [WEAK, CAT], generation_passages="retrieved")
    trace = trace_of(ask(qe, use_async))
    assert trace["answer_kind"] == "insufficient_evidence" and llm.chats == llm.prompts == []


@pytest.mark.parametrize("use_async", [False, True])
def test_relevant_passages_are_the_default(use_async: bool) -> None:
    llm = ScriptedLLM(reply)
    qe = build(llm, [WEAK, FX, CAT])
    assert qe.generation_passages is critique.GenerationPassages.RELEVANT
    trace = trace_of(ask(qe, use_async))
    [generation] = [p for p in llm.prompts if p.endswith("Answer: ")]
    assert FX.text in generation and WEAK.text not in generation and CAT.text not in generation
    assert trace["iterations"][0]["relevant"] == ["fx"]


def test_unknown_generation_passages_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="generation_passages"):
        build(ScriptedLLM(reply), [FX], generation_passages="all")


@pytest.mark.parametrize("use_async", [False, True])
def test_retrieved_passages_need_one_passing_on_every_retrieval(use_async: bool) -> None:
    """Past the first retrieval's decision (always_retrieve, or a re-retrieval), a retrieval
    none of whose passages passes is not generated from either."""
    llm = ScriptedLLM(reply)
    qe = build(llm, [WEAK, CAT], generation_passages="retrieved", always_retrieve=True,
               max_retrievals=2)  # fmt: skip
    trace = trace_of(ask(qe, use_async))
    assert not any(p.endswith("Answer: ") for p in llm.prompts)
    assert trace["answer_kind"] == "insufficient_evidence"
    assert all(it["relevant"] == [] for it in trace["iterations"])


# ----- the critique from log-probabilities -----


class TokenCappedLLM(ScriptedChatLLM):
    """A chat model with its own ``max_tokens`` (as OpenAI's clients, which let it override a
    per-call one)."""

    max_tokens: int = 64

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        return super().chat(messages, **{**kwargs, "own_max_tokens": self.max_tokens})


@pytest.mark.parametrize("use_async", [False, True])
def test_critique_logprobs_asks_one_token_with_alternatives(use_async: bool) -> None:
    llm = TokenCappedLLM()
    qe = build(llm, [FX], system_prompt="Be brief.", critique_logprobs=True)
    trace = trace_of(ask(qe, use_async))
    generation, support, usefulness = llm.call_kwargs
    assert generation == {"own_max_tokens": 64}  # the generation as before
    for kwargs in (support, usefulness):
        assert kwargs == {"logprobs": True, "top_logprobs": 5, "max_tokens": 1,
                          "own_max_tokens": 1}  # fmt: skip
    assert llm.max_tokens == 64  # the caller's LLM is left as it is
    assert trace["critique_logprobs"] is True
    [candidate] = trace["iterations"][0]["candidates"]
    assert candidate["issup"]["method"] == "logprobs"


@pytest.mark.parametrize("use_async", [False, True])
def test_critique_without_logprobs_sends_no_extra_arguments(use_async: bool) -> None:
    llm = TokenCappedLLM()
    ask(build(llm, [FX], system_prompt="Be brief."), use_async)
    assert llm.call_kwargs == [{"own_max_tokens": 64}] * 3


def test_one_token_copy_leaves_llms_without_max_tokens_alone() -> None:
    from llama_index_ext_advrag.judges.llm import one_token_copy

    plain = ScriptedLLM(reply)
    assert one_token_copy(plain) is plain
    capped = TokenCappedLLM()
    copy = one_token_copy(capped)
    assert copy is not capped and copy.max_tokens == 1 and capped.max_tokens == 64


@pytest.mark.parametrize("use_async", [False, True])
def test_retrieved_passages_send_default_text_qa_prompt_as_one_message(use_async: bool) -> None:
    """Without a system prompt the generation is what always-retrieve RAG with LlamaIndex's
    ``DEFAULT_TEXT_QA_PROMPT`` sends over all retrieved passages."""
    from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT

    llm = ScriptedChatLLM()
    ask(build(llm, [WEAK, FX, CAT], generation_passages="retrieved"), use_async)
    expected = DEFAULT_TEXT_QA_PROMPT.format(
        context_str=f"{WEAK.text}\n\n{FX.text}\n\n{CAT.text}", query_str=QUESTION
    )
    assert llm.prompts[0] == expected


@pytest.mark.parametrize("use_async", [False, True])
def test_critique_logprobs_reach_a_chat_model_without_a_system_prompt(use_async: bool) -> None:
    """A chat model's complete() drops log-probabilities: the one-token critique calls go
    through chat() as one user message; the generation stays a complete() call."""
    llm = ScriptedChatLLM(reply)
    trace = trace_of(ask(build(llm, [FX], critique_logprobs=True), use_async))
    assert llm.prompts[0].endswith("Answer: ")
    assert not any(p.endswith(("Support:", "Rating:")) for p in llm.prompts)
    assert [[m.role for m in chat] for chat in llm.chats[:2]] == [[MessageRole.USER]] * 2
    assert all(str(chat[-1].content).endswith(("Support:", "Rating:")) for chat in llm.chats)
    assert all(kwargs.get("logprobs") is True for kwargs in llm.call_kwargs)
    [candidate] = trace["iterations"][0]["candidates"]
    assert candidate["issup"]["method"] == "logprobs"
