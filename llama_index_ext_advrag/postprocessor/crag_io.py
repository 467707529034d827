"""CRAG's I/O: its own requests and :class:`CRAGExecutor`, which answers every request of the
decision generator, sync or async, each bounded by its timeout (the shared requests, ``Judge``
and ``Retrieve``, and the bounded execution come from :mod:`llama_index_ext_advrag.plan`).

The rewrite falls back to the query's distinctive terms, then to the query itself; a web search
returns strings or nodes; a retriever without native async runs in a worker thread in the
async path (a daemon one, :func:`~llama_index_ext_advrag.plan.in_daemon_thread`), so that its
timeout can fire instead of blocking the event loop.
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag.judges.base import BaseRelevanceJudge
from llama_index_ext_advrag.plan import (
    Call,
    Failed,
    Judge,
    Retrieve,
    StepTimeoutError,
    adrive,
    arun_call,
    as_failed,
    drive,
    in_daemon_thread,
    llm_completion,
    run_call,
)
from llama_index_ext_advrag.queries import choose_rewrite, read_rewrite, rewrite_avoid

# CRAG's log messages ("CRAG Judge failed: ...") come from the postprocessor's logger.
logger = logging.getLogger("llama_index_ext_advrag.postprocessor.crag")

WebSearch = Callable[[str], Sequence[Any]]
REWRITE_PROMPT_VARIABLES = frozenset({"query"})


@dataclass(frozen=True)
class _Rewrite:
    query: str
    tried: tuple[str, ...]


@dataclass(frozen=True)
class _WebSearch:
    query: str


# A request's name in log messages and in the trace ("CRAG Judge failed", "judge failed: ...").
STEP_NAMES: dict[type, tuple[str, str]] = {
    Judge: ("Judge", "judge"),
    Retrieve: ("Retrieve", "retrieve"),
    _WebSearch: ("WebSearch", "websearch"),
}

Rewritten = tuple[str, str, str | None]


def fallback_rewrite(request: _Rewrite, note: str | None = None) -> Rewritten | None:
    """The keyword (or original) query not tried yet; ``note`` says why the LLM's was not used."""
    chosen = choose_rewrite(request.query, request.tried)
    return None if chosen is None else (*chosen, note)


def accept_rewrite(request: _Rewrite, reply: Any) -> Rewritten | None:
    """The LLM's rewrite (its first line, unquoted), or the fallback with the reason."""
    rewritten = read_rewrite(str(getattr(reply, "text", "") or ""))
    chosen = choose_rewrite(request.query, request.tried, rewritten)
    if chosen is None or chosen[1] == "llm":
        return None if chosen is None else (*chosen, None)
    why = "empty LLM reply" if not rewritten else f"LLM repeated a tried query {rewritten!r}"
    return (*chosen, why[:200])


def web_results_as_nodes(results: Sequence[Any]) -> list[NodeWithScore]:
    """Web results as nodes: strings become text nodes marked as web results."""
    nodes = []
    for item in results or []:
        if isinstance(item, NodeWithScore):
            nodes.append(item)
        elif isinstance(item, str):
            node_id = "web-" + hashlib.sha1(item.encode("utf-8")).hexdigest()[:16]
            node = TextNode(text=item, id_=node_id, metadata={"source": "web_search"})
            nodes.append(NodeWithScore(node=node))
        else:
            raise TypeError(
                f"web_search returned a {type(item).__name__}; allowed: str, NodeWithScore"
            )
    return nodes


def search_web(web_search: WebSearch | None, query: str) -> list[NodeWithScore]:
    """The sync web search; an async ``web_search`` is refused (only the async path awaits)."""
    assert web_search is not None
    found = web_search(query)
    if inspect.isawaitable(found):
        if inspect.iscoroutine(found):
            found.close()
        raise TypeError(
            "web_search is async and cannot run in sync postprocessing: use "
            "apostprocess_nodes (an async query engine) or pass a sync callable"
        )
    return web_results_as_nodes(found)


async def asearch_web(web_search: WebSearch | None, query: str) -> list[NodeWithScore]:
    """The async web search: awaited when async, in a worker thread when sync."""
    assert web_search is not None
    if inspect.iscoroutinefunction(web_search):
        return web_results_as_nodes(await web_search(query))
    return web_results_as_nodes(await in_daemon_thread(lambda: web_search(query)))


async def aretrieve_off_loop(retriever: BaseRetriever | None, query: str) -> list[NodeWithScore]:
    """``retriever.aretrieve``; a retriever without native async (core's default
    ``_aretrieve`` runs the blocking ``_retrieve`` on the event loop) runs in a worker thread."""
    assert retriever is not None
    if type(retriever)._aretrieve is BaseRetriever._aretrieve:
        return await in_daemon_thread(lambda: retriever.retrieve(query))
    return await retriever.aretrieve(query)


@dataclass
class CRAGExecutor:
    """Answers the requests of one CRAG call: grading, rewriting, retrieving, searching.

    A judge call, a retrieval or a web search that raises or outlives its timeout becomes a
    :class:`~llama_index_ext_advrag.plan.Failed` (logged); a rewrite that fails falls back to
    keywords. ``llm`` resolves the rewriting LLM when first needed (``None``: keywords).

    The judge's timeout bounds all its calls together (one CRAG call grades the retrieved
    nodes, each corrective round's nodes and the refinement's strips): each call gets what
    the earlier ones left of it, so a slow judge costs at most ``timeouts[Judge]`` per CRAG
    call, however many times it is called.
    """

    judge: BaseRelevanceJudge
    retriever: BaseRetriever | None
    web_search: WebSearch | None
    llm: Callable[[], LLM | None]
    rewrite_prompt: BasePromptTemplate
    rewrite_timeout: float | None
    timeouts: dict[type, float | None]
    judge_seconds: float = field(default=0.0, init=False)  # spent judging in this CRAG call

    def _judge_left(self) -> float | None:
        """Seconds left of the judge's timeout (``None``: unbounded)."""
        bound = self.timeouts[Judge]
        return None if bound is None else bound - self.judge_seconds

    def _judged(self, result: Any, started: float) -> Any:
        """Count the call's time against the judge's timeout; a timeout names the whole bound."""
        self.judge_seconds += time.monotonic() - started
        bound = self.timeouts[Judge]
        if isinstance(result, Failed) and result.timed_out and bound is not None:
            return as_failed("judge", StepTimeoutError("the judge", bound))
        return result

    def _prompt(self, request: _Rewrite) -> str:
        return self.rewrite_prompt.format(query=request.query, avoid=rewrite_avoid(request.tried))

    @staticmethod
    def _rewrite_failed(request: _Rewrite, exc: Exception) -> Rewritten | None:
        logger.warning("CRAG rewrite failed, using keywords: %r", exc)
        return fallback_rewrite(request, f"LLM error: {exc!r}"[:200])

    def _settled(self, request: Any, result: Any) -> Any:
        if isinstance(result, Failed):
            logger.warning("CRAG %s failed: %r", STEP_NAMES[type(request)][0], result.exception)
        return result

    def _answer(self, request: Any) -> Generator[Call, Any, Any]:
        """The answer to ``request``, as a plan whose one I/O call (if any) is named in both
        flavours; :meth:`execute` and :meth:`aexecute` run it."""
        if isinstance(request, _Rewrite):
            llm = self.llm()
            if llm is None:
                return fallback_rewrite(request)
            try:
                reply = yield llm_completion(llm, self._prompt(request), self.rewrite_timeout)
                return accept_rewrite(request, reply)
            except Exception as exc:
                return self._rewrite_failed(request, exc)
        query, started = request.query, time.monotonic()
        sync: Callable[[], Any]
        async_: Callable[[], Awaitable[Any]]
        if isinstance(request, Judge):
            judge, texts, timeout = self.judge, request.texts, self._judge_left()
            if timeout is not None and timeout <= 0:
                return self._settled(request, self._judged(_out_of_time(), started))
            sync, async_ = lambda: judge.judge(query, texts), lambda: judge.ajudge(query, texts)
        elif isinstance(request, Retrieve):
            retriever, timeout = self.retriever, self.timeouts[Retrieve]
            assert retriever is not None
            sync = lambda: retriever.retrieve(query)  # noqa: E731
            async_ = lambda: aretrieve_off_loop(retriever, query)  # noqa: E731
        else:
            web_search, timeout = self.web_search, self.timeouts[type(request)]
            sync = lambda: search_web(web_search, query)  # noqa: E731
            async_ = lambda: asearch_web(web_search, query)  # noqa: E731
        step = STEP_NAMES[type(request)][1]
        try:  # plan.attempt's rule: an exception or a timeout becomes a Failed
            result = yield Call(sync, async_, timeout, f"the {step}")
        except Exception as exc:
            result = as_failed(step, exc)
        if isinstance(request, Judge):
            result = self._judged(result, started)
        return self._settled(request, result)

    def execute(self, request: Any) -> Any:
        return drive(self._answer(request), run_call)

    async def aexecute(self, request: Any) -> Any:
        return await adrive(self._answer(request), arun_call)


def _out_of_time() -> Failed:
    """The judge's timeout was used up by its earlier calls in this CRAG call."""
    return Failed("judge timed out", timed_out=True, step="judge")


__all__ = [
    "CRAGExecutor",
    "STEP_NAMES",
    "WebSearch",
    "accept_rewrite",
    "aretrieve_off_loop",
    "asearch_web",
    "fallback_rewrite",
    "search_web",
    "web_results_as_nodes",
]
