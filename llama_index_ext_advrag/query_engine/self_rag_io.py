"""The I/O side of :class:`~llama_index_ext_advrag.query_engine.self_rag.SelfRAGQueryEngine`.

The engine's plan is a generator that yields the request runner's requests
(:mod:`llama_index_ext_advrag.plan`: :class:`Completions`, :class:`Judge`, :class:`Retrieve`) and
receives their results; :class:`SelfRAGExecutor` answers them, in order (sync) or natively async
with a bound on concurrent LLM calls. An LLM call that raises gives a
:class:`Failed` in place of its completion (the plan reads it as an unparsable reply); a judge
that raises gives one :class:`Failed` for the batch (every passage unknown, kept). A retriever
or postprocessor that raises is a configuration fault and propagates. An LLM call that gives no
answer within ``llm_timeout`` seconds is a :class:`Failed` too.

:class:`Trace` times every step (wall-clock seconds around the yield) and counts LLM calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, Generator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.response.schema import (
    AsyncStreamingResponse,
    Response,
    StreamingResponse,
)
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_index_ext_advrag.events import SelfRAGAnswerEvent
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.judges.llm import LLMRelevanceJudge, one_token_copy
from llama_index_ext_advrag.models import resolve_llm
from llama_index_ext_advrag.plan import (
    Completions,
    Failed,
    Judge,
    Retrieve,
    aattempt,
    adrive,
    arun_call,
    attempt,
    drive,
    llm_completion,
    run_call,
)
from llama_index_ext_advrag.trace import TRACE_KEY, add_trace, copy_node_with_score, with_record

if TYPE_CHECKING:
    from llama_index_ext_advrag.query_engine.self_rag_critique import Critique

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_MAX_CONCURRENCY = 4
# a label read from the first token: one output token, its top alternatives
LOGPROB_KWARGS = {"logprobs": True, "top_logprobs": 5, "max_tokens": 1}
TRACE_COMPONENT = "self_rag"


class Trace:
    """The engine's record of one query: decisions plus one entry per I/O step."""

    def __init__(self, header: dict[str, Any]) -> None:
        self.record: dict[str, Any] = {**header, "steps": [], "defaults": []}
        self.iteration = 0  # the retrieval round the next steps belong to (0: before any)
        self._started = time.perf_counter()

    def step(self, name: str, request: Any, calls: int | None = None) -> Generator[Any, Any, Any]:
        """Yield ``request`` and record its name, duration and LLM calls; return its result."""
        started = time.perf_counter()
        result = yield request
        seconds = round(time.perf_counter() - started, 6)
        entry: dict[str, Any] = {"step": name, "iteration": self.iteration, "seconds": seconds}
        if isinstance(request, Completions):
            entry["llm_calls"] = len(request.prompts)
            entry["failed_calls"] = sum(isinstance(r, Failed) for r in result)
        elif isinstance(request, Judge):
            entry["judged_texts"] = len(request.texts) if calls is None else calls
        self.record["steps"].append(entry)
        return result

    def note_default(self, what: str, critique: Critique) -> None:
        """Remember a critique that fell back to its documented default."""
        if critique.method == "default":
            self.record["defaults"].append({"critique": what, "reason": critique.reason})

    def finish(self, judge_uses_llm: bool = False) -> dict[str, Any]:
        steps = self.record["steps"]
        engine_calls = sum(s.get("llm_calls", 0) for s in steps)
        judged = sum(s.get("judged_texts", 0) for s in steps)
        self.record["llm_calls"] = engine_calls + (judged if judge_uses_llm else 0)
        self.record["engine_llm_calls"] = engine_calls
        self.record["judged_texts"] = judged
        self.record["judge_uses_llm"] = judge_uses_llm
        self.record["seconds"] = round(time.perf_counter() - self._started, 6)
        return self.record


@dataclass
class Passage:
    """A relevant passage: the retrieved node, its text, its ISREL grade, its retrieval round."""

    node: NodeWithScore
    text: str
    grade: Grade
    iteration: int


@dataclass
class Outcome:
    """What a plan decided: the answer (or a prompt to stream), its kind, the passages it
    rests on, and the trace."""

    kind: str
    answer: str | None
    passages: list[Passage]
    trace: Trace
    stream_prompt: str | None = None


Plan = Generator[Any, Any, Outcome]


class SelfRAGExecutor:
    """Answer a plan's requests with a retriever, postprocessors, an LLM and a judge."""

    def __init__(
        self,
        retriever: BaseRetriever,
        postprocessors: Sequence[BaseNodePostprocessor],
        llm: LLM | None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        llm_timeout: float | None = None,
    ) -> None:
        self.retriever = retriever
        self.postprocessors = list(postprocessors)
        self.llm = resolve_llm(llm)
        self.max_concurrency = max_concurrency
        self.llm_timeout = llm_timeout
        self.judge: BaseRelevanceJudge | None = None
        self._one_token_llm: Any = None

    @property
    def judge_uses_llm(self) -> bool:
        """Whether each judged text is an LLM call (the LLM judge)."""
        return isinstance(self.judge, LLMRelevanceJudge)

    # ----- sync -----

    def run(self, plan: Plan, judge: BaseRelevanceJudge) -> Outcome:
        self.judge = judge
        return drive(plan, self._execute)

    def _execute(self, request: Any) -> Any:
        if isinstance(request, Completions):
            return [self._complete(prompt, request) for prompt in request.prompts]
        if isinstance(request, Judge):
            if not request.texts:
                return []
            judge = self.judge
            assert judge is not None
            return _judged(
                attempt("judge", lambda: judge.judge(request.query, request.texts), None)
            )
        if isinstance(request, Retrieve):
            bundle = QueryBundle(request.query)
            nodes = self.retriever.retrieve(bundle)
            for post in self.postprocessors:
                nodes = post.postprocess_nodes(nodes, query_bundle=bundle)
            return list(nodes)
        raise TypeError(f"unknown request {type(request).__name__}")

    def _call(self, prompt: str, request: Completions) -> Any:
        """The bounded call for one prompt of ``request`` (a one-token call with
        log-probabilities when it asks for them)."""
        assert self.llm is not None
        if not request.logprobs:
            return llm_completion(self.llm, prompt, self.llm_timeout, request.system)
        if self._one_token_llm is None:
            self._one_token_llm = one_token_copy(self.llm)
        return llm_completion(
            self._one_token_llm, prompt, self.llm_timeout, request.system, LOGPROB_KWARGS
        )

    def _complete(self, prompt: str, request: Completions) -> Any:
        try:
            return run_call(self._call(prompt, request))
        except Exception as exc:
            logger.warning("Self-RAG LLM call failed: %r", exc)
            return Failed(f"LLM error: {exc!r}"[:200])

    # ----- async -----

    async def arun(self, plan: Plan, judge: BaseRelevanceJudge) -> Outcome:
        self.judge = judge
        return await adrive(plan, self._aexecute)

    async def _aexecute(self, request: Any) -> Any:
        if isinstance(request, Completions):
            semaphore = asyncio.Semaphore(self.max_concurrency)

            async def one(prompt: str) -> Any:
                async with semaphore:
                    return await self._acomplete(prompt, request)

            return list(await asyncio.gather(*(one(p) for p in request.prompts)))
        if isinstance(request, Judge):
            if not request.texts:
                return []
            judge = self.judge
            assert judge is not None
            call = lambda: judge.ajudge(request.query, request.texts)  # noqa: E731
            return _judged(await aattempt("judge", call, None))
        if isinstance(request, Retrieve):
            bundle = QueryBundle(request.query)
            nodes = await self.retriever.aretrieve(bundle)
            for post in self.postprocessors:
                nodes = await post.apostprocess_nodes(nodes, query_bundle=bundle)
            return list(nodes)
        raise TypeError(f"unknown request {type(request).__name__}")

    async def _acomplete(self, prompt: str, request: Completions) -> Any:
        try:
            return await arun_call(self._call(prompt, request))
        except Exception as exc:
            logger.warning("Self-RAG LLM call failed: %r", exc)
            return Failed(f"LLM error: {exc!r}"[:200])

    # ----- responses -----

    def respond(self, streaming: bool, outcome: Outcome) -> Any:
        nodes = source_nodes(outcome.passages)
        if outcome.stream_prompt is not None:
            assert self.llm is not None
            self._note_stream(outcome.trace)
            stream = self.llm.stream_complete(outcome.stream_prompt)
            metadata = response_metadata(outcome, self.judge_uses_llm)
            return StreamingResponse(
                response_gen=_deltas(stream),
                source_nodes=nodes,
                metadata=metadata,
            )
        metadata = response_metadata(outcome, self.judge_uses_llm)
        if streaming:
            return StreamingResponse(
                response_gen=_one_chunk(outcome.answer or ""), source_nodes=nodes, metadata=metadata
            )
        return Response(response=outcome.answer, source_nodes=nodes, metadata=metadata)

    async def arespond(self, streaming: bool, outcome: Outcome) -> Any:
        nodes = source_nodes(outcome.passages)
        if outcome.stream_prompt is not None:
            assert self.llm is not None
            self._note_stream(outcome.trace)
            stream = await self.llm.astream_complete(outcome.stream_prompt)

            async def deltas() -> AsyncGenerator[str, None]:
                async for chunk in stream:
                    yield chunk.delta or ""

            return AsyncStreamingResponse(
                response_gen=deltas(),
                source_nodes=nodes,
                metadata=response_metadata(outcome, self.judge_uses_llm),
            )
        metadata = response_metadata(outcome, self.judge_uses_llm)
        if streaming:

            async def whole() -> AsyncGenerator[str, None]:
                yield outcome.answer or ""

            return AsyncStreamingResponse(
                response_gen=whole(), source_nodes=nodes, metadata=metadata
            )
        return Response(response=outcome.answer, source_nodes=nodes, metadata=metadata)

    @staticmethod
    def _note_stream(trace: Trace) -> None:
        # The streamed call happens while the caller reads: counted, not timed.
        trace.record["steps"].append({"step": "generate_direct", "llm_calls": 1, "streamed": True})


def source_nodes(passages: list[Passage]) -> list[NodeWithScore]:
    """Copies of the passages' nodes, scored by ISREL, each with its grade traced."""
    nodes = []
    for passage in passages:
        node = copy_node_with_score(passage.node)
        if passage.grade.score is not None:
            node.score = passage.grade.score
        record = {"isrel": passage.grade.to_dict(), "iteration": passage.iteration}
        add_trace(node.node, TRACE_COMPONENT, record)
        nodes.append(node)
    return nodes


def response_metadata(outcome: Outcome, judge_uses_llm: bool) -> dict[str, Any]:
    """The response metadata: the finished trace under ``TRACE_KEY`` (also emitted as a
    :class:`~llama_index_ext_advrag.events.SelfRAGAnswerEvent`)."""
    outcome.trace.record["answer_kind"] = outcome.kind
    record = outcome.trace.finish(judge_uses_llm)
    dispatcher.event(
        SelfRAGAnswerEvent(
            answer_kind=outcome.kind,
            stop_reason=record.get("stop_reason"),
            llm_calls=record["llm_calls"],
            iterations=len(record.get("iterations", [])),
        )
    )
    return {TRACE_KEY: with_record(None, TRACE_COMPONENT, record)}


def _judged(result: Any) -> Any:
    """The grades, or the judge's failure (logged; every passage is then unknown, kept)."""
    if isinstance(result, Failed):
        logger.warning("Self-RAG judge failed: %r", result.exception)
        return Failed(result.error[:200], result.timed_out, result.step)
    return result


def _one_chunk(text: str) -> Generator[str, None, None]:
    yield text


def _deltas(stream: Any) -> Generator[str, None, None]:
    for chunk in stream:
        yield chunk.delta or ""


__all__ = [
    "Completions",
    "Failed",
    "Judge",
    "Outcome",
    "Plan",
    "Retrieve",
    "SelfRAGExecutor",
    "Trace",
]
