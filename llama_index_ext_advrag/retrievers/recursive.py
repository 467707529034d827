"""Recursive IndexNode routing: coarse pointers outside, fine retrievers and engines inside.

A top-level retriever returns ordinary nodes and short :class:`IndexNode` pointers ("this node
answers questions over the 2023 table"). A hit on a pointer hands the query to what it points
to (``index_id`` looked up in ``retriever_dict``, ``query_engine_dict`` or ``node_dict``, or
the pointer's own ``obj``): a sub-retriever's results are expanded in place, recursively; a
query engine contributes its answer as a node plus its source nodes. Unlike core's
``RecursiveRetriever`` this has a depth limit, cycle detection, native async (hops of one
level run concurrently) and keeps the engines' sources. Every returned node is a copy whose
``metadata["advrag_trace"]["recursive"]`` holds the route that produced it.

Builders: :meth:`~RecursiveIndexNodeRetriever.from_dataframes` / ``from_excel`` (one
:class:`~llama_index_ext_advrag.tables.SafePandasQueryEngine` per table: deny-by-default
code check, sandboxed execution; table loading in :mod:`llama_index_ext_advrag.tables.workbooks`)
and ``from_topics`` (one vector index per topic: :mod:`.pointer_index`). A query engine's own
trace records (``response.metadata[TRACE_KEY]``, e.g. the pandas engine's refused programs) are
copied into its answer node's trace. :func:`check_pandas_code`, :class:`UnsafeCodeError`,
:func:`clean_frame` and :func:`describe_frame` are re-exported here.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, ClassVar

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.bridge.pydantic import Field, PrivateAttr, model_validator
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.configuration import checked_prompt
from llama_index_ext_advrag.events import RecursiveHopEvent, RecursiveResultEvent
from llama_index_ext_advrag.queries import clean_query_bundle
from llama_index_ext_advrag.retrievers._config import (
    ConfiguredRetriever,
    aclose_all,
    close_all,
    settings_model,
)
from llama_index_ext_advrag.retrievers.pointer_index import (
    DEFAULT_ROOT_WEIGHTS,
    NAMED_ROUTE_COMPONENT,
    NamedPointerRetriever,
    build_root_retriever,
    topic_pointer_text,
    topic_pointers,
)
from llama_index_ext_advrag.tables.pandas_check import UnsafeCodeError, check_pandas_code
from llama_index_ext_advrag.tables.pandas_engine import SafePandasQueryEngine
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits
from llama_index_ext_advrag.tables.workbooks import (
    clean_frame,
    describe_frame,
    read_workbook,
    table_pointers,
)
from llama_index_ext_advrag.trace import TRACE_KEY, add_trace, copy_node_with_score, get_trace

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

DEFAULT_MAX_DEPTH = 3
DEFAULT_MAX_CONCURRENCY = 4
TRACE_COMPONENT = "recursive"
ROOT = "root"


class HopKind(str, Enum):
    """What an IndexNode led to."""

    RETRIEVER = "retriever"
    QUERY_ENGINE = "query_engine"
    NODE = "node"


@dataclass(frozen=True)
class Hop:
    """Follow ``pointer`` to ``target`` (an object of ``kind``) from the route ``path``."""

    pointer: NodeWithScore
    target_id: str
    kind: HopKind
    obj: Any
    path: tuple[str, ...]


@dataclass(frozen=True)
class Leaf:
    """A node to return as it is, with why it stopped here (``None``: an ordinary node)."""

    result: NodeWithScore
    path: tuple[str, ...]
    stopped: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def pointer_as_text(node: BaseNode) -> TextNode:
    """An unfollowed IndexNode as a TextNode (same id, text, metadata), so nothing downstream
    (core's retrieve post-processing) follows it after all."""
    if not isinstance(node, IndexNode):
        return node  # type: ignore[return-value]
    return TextNode(
        id_=node.node_id,
        text=node.get_content(),
        metadata=dict(node.metadata),
        excluded_llm_metadata_keys=list(node.excluded_llm_metadata_keys),
        excluded_embed_metadata_keys=list(node.excluded_embed_metadata_keys),
        relationships=dict(node.relationships),
    )


def answer_id(target_id: str, query: str) -> str:
    """A stable id for the answer of ``target_id`` to ``query``."""
    digest = hashlib.sha1(f"{target_id}\x00{query}".encode()).hexdigest()[:16]
    return f"{target_id}::answer::{digest}"


class RecursiveIndexNodeRetriever(ConfiguredRetriever):
    """Follow IndexNode hits into sub-retrievers and query engines, with depth and cycle limits.

    Args:
        root_id: the id in ``retriever_dict`` of the top-level retriever.
        retriever_dict: id -> retriever (the root and sub-retrievers).
        query_engine_dict: id -> query engine (e.g. a :class:`SafePandasQueryEngine`).
        node_dict: id -> node, for pointers to single nodes.
        max_depth: pointers followed in a row (1 = only the root's pointers). A pointer found
            deeper, or one leading back into the current route (a cycle), is returned as a
            plain text node with ``stopped`` in its trace.
        max_concurrency: hops run at once in async.
        include_sub_sources: also return the source nodes of a query engine's answer.

    The settings are fields; :meth:`to_dict` / ``from_dict(data, retriever_dict=...,
    query_engine_dict=..., node_dict=...)`` round-trip them (the dicts are live objects).

    Raises:
        ValueError: ``root_id`` missing from ``retriever_dict``, an id in two dicts, a bound out
            of range; at query time, a pointer whose ``index_id`` is known nowhere.

    Example:
        >>> from llama_index.core.embeddings import MockEmbedding
        >>> router = RecursiveIndexNodeRetriever.from_topics(
        ...     {"firmware": ["Firmware updates take about 12 minutes."],
        ...      "expenses": ["Receipts are needed from 25 euros."]},
        ...     embed_model=MockEmbedding(embed_dim=8), similarity_top_k=1)
        >>> hit = router.retrieve("How long does a firmware update take?")[0]
        >>> hit.node.text, hit.node.metadata["advrag_trace"]["recursive"]["route"]
        ('Firmware updates take about 12 minutes.', ['root', 'topic::firmware'])
        >>> tables = RecursiveIndexNodeRetriever.from_excel("tables.xlsx", llm=llm)  # doctest: +SKIP
    """

    root_id: str = Field(description="The id in retriever_dict of the top-level retriever.")
    max_depth: int = Field(
        default=DEFAULT_MAX_DEPTH, ge=1, le=20, description="Pointers followed in a row."
    )
    max_concurrency: int = Field(
        default=DEFAULT_MAX_CONCURRENCY, ge=1, le=64, description="Hops run at once in async."
    )
    include_sub_sources: bool = Field(
        default=True, description="Also return the source nodes of a query engine's answer."
    )
    top_k_setting: ClassVar[str | None] = None  # the number of results follows the routes

    _retriever_dict: dict[str, BaseRetriever] = PrivateAttr(default_factory=dict)
    _query_engine_dict: dict[str, BaseQueryEngine] = PrivateAttr(default_factory=dict)
    _node_dict: dict[str, BaseNode] = PrivateAttr(default_factory=dict)

    def __init__(
        self,
        root_id: str,
        retriever_dict: Mapping[str, BaseRetriever],
        query_engine_dict: Mapping[str, BaseQueryEngine] | None = None,
        node_dict: Mapping[str, BaseNode] | None = None,
        **settings: Any,
    ) -> None:
        super().__init__(root_id=root_id, **settings)
        dicts = (dict(retriever_dict), dict(query_engine_dict or {}), dict(node_dict or {}))
        for first in range(3):
            for second in range(first + 1, 3):
                shared = sorted(set(dicts[first]) & set(dicts[second]))
                if shared:
                    raise ValueError(f"ids {shared} appear in two of the routing dicts")
        self._retriever_dict, self._query_engine_dict, self._node_dict = dicts
        self._check_root()

    @model_validator(mode="after")
    def _check_on_write(self) -> RecursiveIndexNodeRetriever:
        if self.__pydantic_private__ is not None and self._retriever_dict:  # after __init__
            self._check_root()
        return self

    def _check_root(self) -> None:
        if self.root_id not in self._retriever_dict:
            raise ValueError(
                f"root_id {self.root_id!r} is not in retriever_dict {sorted(self._retriever_dict)}"
            )

    @classmethod
    def class_name(cls) -> str:
        return "RecursiveIndexNodeRetriever"

    @property
    def retriever_dict(self) -> dict[str, BaseRetriever]:
        """id -> retriever (the root and the sub-retrievers)."""
        return self._retriever_dict

    @property
    def query_engine_dict(self) -> dict[str, BaseQueryEngine]:
        """id -> query engine."""
        return self._query_engine_dict

    @property
    def node_dict(self) -> dict[str, BaseNode]:
        """id -> node."""
        return self._node_dict

    def close(self) -> None:
        """Close the retrievers and query engines that can be closed."""
        close_all([*self._retriever_dict.values(), *self._query_engine_dict.values()])

    async def aclose(self) -> None:
        await aclose_all([*self._retriever_dict.values(), *self._query_engine_dict.values()])

    # --- builders ------------------------------------------------------------------------------

    @classmethod
    def from_pointers(
        cls,
        pointers: Sequence[IndexNode],
        query_engine_dict: Mapping[str, BaseQueryEngine] | None = None,
        retriever_dict: Mapping[str, BaseRetriever] | None = None,
        extra_nodes: Sequence[BaseNode] = (),
        embed_model: Any = None,
        similarity_top_k: int = 2,
        lexical: bool = True,
        vector_store: Any = None,
        root_weights: Sequence[float] = DEFAULT_ROOT_WEIGHTS,
        **kwargs: Any,
    ) -> RecursiveIndexNodeRetriever:
        """Root = :func:`build_root_retriever` over ``pointers`` + ``extra_nodes``."""
        nodes = [*pointers, *extra_nodes]
        root = build_root_retriever(
            nodes, embed_model, similarity_top_k, lexical, vector_store, root_weights
        )
        return cls(
            root_id=ROOT,
            retriever_dict={ROOT: root, **(retriever_dict or {})},
            query_engine_dict=query_engine_dict,
            **kwargs,
        )

    @classmethod
    def from_dataframes(
        cls,
        frames: Mapping[str, Any],
        llm: LLM | None = None,
        summaries: Mapping[str, str] | None = None,
        summarize: bool = True,
        limits: SandboxLimits | None = None,
        timeout_seconds: float | None = None,
        summary_prompt: str | BasePromptTemplate | None = None,
        **kwargs: Any,
    ) -> RecursiveIndexNodeRetriever:
        """One :class:`SafePandasQueryEngine` per DataFrame, one pointer per table (see
        :func:`~llama_index_ext_advrag.tables.workbooks.table_pointers` for the pointer
        texts). A question that names a table (its sheet name) is sent to that table alone; any
        other question goes through the root search (see
        :class:`~.pointer_index.NamedPointerRetriever`; the answer's trace says which, under
        ``named_route``).
        ``limits`` bound the sandbox (``timeout_seconds`` is a shortcut for its wall-clock
        limit). ``summary_prompt`` (a template or string with the variable ``description``)
        replaces the prompt the LLM writes table summaries with. Other ``kwargs`` go to
        :meth:`from_pointers`.

        Raises:
            ValueError: ``frames`` is empty, or a limit is out of range.
        """
        if timeout_seconds is not None:
            base = (limits or SandboxLimits()).model_dump()
            limits = SandboxLimits(**{**base, "timeout_seconds": timeout_seconds})
        template = (
            None
            if summary_prompt is None
            else checked_prompt(summary_prompt, "summary_prompt", ("description",))
        )
        pointers, engines = table_pointers(frames, llm, summaries, summarize, limits, template)
        retriever = cls.from_pointers(pointers, query_engine_dict=engines, **kwargs)
        named = {str(p.metadata["table"]): p for p in pointers}
        root = retriever.retriever_dict[ROOT]
        retriever.retriever_dict[ROOT] = NamedPointerRetriever(root, named)
        return retriever

    @classmethod
    def from_excel(cls, path: str | Path, **kwargs: Any) -> RecursiveIndexNodeRetriever:
        """:meth:`from_dataframes` over every sheet of the workbook at ``path``.

        Raises:
            FileNotFoundError: no file at ``path``.
        """
        return cls.from_dataframes(read_workbook(path), **kwargs)

    @classmethod
    def from_topics(
        cls,
        topics: Mapping[str, Sequence[BaseNode | str] | BaseRetriever],
        descriptions: Mapping[str, str] | None = None,
        topic_top_k: int = 3,
        embed_model: Any = None,
        **kwargs: Any,
    ) -> RecursiveIndexNodeRetriever:
        """One vector index per text topic (or a ready retriever), one pointer per topic (see
        :func:`~.pointer_index.topic_pointers`). Other ``kwargs`` go to :meth:`from_pointers`.

        Raises:
            ValueError: ``topics`` is empty, or a retriever topic has no description.
        """
        pointers, retrievers = topic_pointers(topics, descriptions, topic_top_k, embed_model)
        return cls.from_pointers(
            pointers, retriever_dict=retrievers, embed_model=embed_model, **kwargs
        )

    # --- planning (pure) -----------------------------------------------------------------------

    def _resolve(self, pointer: IndexNode) -> tuple[HopKind, Any]:
        target = pointer.index_id
        if pointer.obj is not None:
            obj = pointer.obj
        elif target in self.retriever_dict:
            obj = self.retriever_dict[target]
        elif target in self.query_engine_dict:
            obj = self.query_engine_dict[target]
        elif target in self.node_dict:
            obj = self.node_dict[target]
        else:
            raise ValueError(
                f"IndexNode {pointer.node_id!r} points to index_id {target!r}, which is in no "
                "retriever_dict, query_engine_dict or node_dict and has no obj"
            )
        kinds = ((BaseRetriever, HopKind.RETRIEVER), (BaseQueryEngine, HopKind.QUERY_ENGINE))
        for kind_type, kind in kinds:
            if isinstance(obj, kind_type):
                return kind, obj
        if isinstance(obj, BaseNode):
            return HopKind.NODE, obj
        raise ValueError(f"index_id {target!r} leads to an unroutable {type(obj).__name__}")

    def _plan(self, results: Sequence[NodeWithScore], path: tuple[str, ...]) -> list[Hop | Leaf]:
        steps: list[Hop | Leaf] = []
        for result in results:
            node = result.node
            if not isinstance(node, IndexNode):
                steps.append(Leaf(result, path))
                continue
            target = node.index_id
            if target in path:
                logger.warning("cycle: %s leads back to %s on route %s", node.node_id, target, path)
                steps.append(Leaf(result, path, stopped="cycle", extra={"index_id": target}))
            elif len(path) > self.max_depth:
                steps.append(Leaf(result, path, stopped="max_depth", extra={"index_id": target}))
            else:
                kind, obj = self._resolve(node)
                steps.append(Hop(result, target, kind, obj, (*path, target)))
                dispatcher.event(
                    RecursiveHopEvent(
                        pointer_id=node.node_id,
                        target_id=target,
                        kind=kind.value,
                        path=[*path, target],
                    )
                )
        return steps

    def _leaf(self, leaf: Leaf) -> NodeWithScore:
        result = copy_node_with_score(leaf.result)
        result.node = pointer_as_text(result.node)
        record: dict[str, Any] = {"route": list(leaf.path), "depth": len(leaf.path) - 1}
        if leaf.stopped:
            record["stopped"] = leaf.stopped
        record.update(leaf.extra)
        add_trace(result.node, TRACE_COMPONENT, record)
        return result

    def _answer_nodes(self, hop: Hop, query: str, response: Any) -> list[Hop | Leaf]:
        metadata = dict(getattr(response, "metadata", None) or {})
        engine_trace = metadata.pop(TRACE_KEY, None)
        score = hop.pointer.score
        answer = TextNode(
            id_=answer_id(hop.target_id, query),
            text=str(response),
            metadata={"index_id": hop.target_id, "answer_to": query},
        )
        chosen = get_trace(hop.pointer.node, NAMED_ROUTE_COMPONENT)
        if chosen is not None:  # how the root chose the pointer that led here
            add_trace(answer, NAMED_ROUTE_COMPONENT, chosen)
        if isinstance(engine_trace, dict):
            for component, record in engine_trace.items():
                add_trace(answer, component, record)
        details = {"kind": HopKind.QUERY_ENGINE.value, "answer": True, "engine": metadata}
        steps: list[Hop | Leaf] = [
            Leaf(NodeWithScore(node=answer, score=score), hop.path, None, details)
        ]
        if self.include_sub_sources:
            for source in getattr(response, "source_nodes", None) or []:
                extra = {"kind": HopKind.QUERY_ENGINE.value, "source_of": hop.target_id}
                steps.append(Leaf(source, hop.path, None, extra))
        return steps

    def _hop_results(self, hop: Hop, query: str, outcome: Any) -> list[Hop | Leaf]:
        if hop.kind is HopKind.QUERY_ENGINE:
            return self._answer_nodes(hop, query, outcome)
        steps = self._plan(outcome, hop.path)
        for index, step in enumerate(steps):
            if isinstance(step, Leaf):
                extra = {"kind": hop.kind.value, "via": hop.pointer.node.node_id, **step.extra}
                steps[index] = Leaf(step.result, step.path, step.stopped, extra)
        return steps

    def _finish(self, leaves: list[Leaf]) -> list[NodeWithScore]:
        seen: set[str] = set()
        results = []
        for leaf in leaves:
            node_id = leaf.result.node.node_id
            if node_id not in seen:
                seen.add(node_id)
                results.append(self._leaf(leaf))
        dispatcher.event(
            RecursiveResultEvent(
                results=[
                    {"node_id": r.node.node_id, **get_trace(r.node, TRACE_COMPONENT)}
                    for r in results
                ]
            )
        )
        return results

    # --- I/O -----------------------------------------------------------------------------------

    def _hop(self, hop: Hop, query: QueryBundle) -> Any:
        if hop.kind is HopKind.RETRIEVER:
            return hop.obj.retrieve(query)
        if hop.kind is HopKind.QUERY_ENGINE:
            return hop.obj.query(query)
        return [NodeWithScore(node=hop.obj, score=hop.pointer.score)]

    async def _ahop(self, hop: Hop, query: QueryBundle, limit: asyncio.Semaphore) -> Any:
        async with limit:
            if hop.kind is HopKind.RETRIEVER:
                return await hop.obj.aretrieve(query)
            if hop.kind is HopKind.QUERY_ENGINE:
                return await hop.obj.aquery(query)
            return [NodeWithScore(node=hop.obj, score=hop.pointer.score)]

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        root = self.retriever_dict[self.root_id].retrieve(query_bundle)
        steps = self._plan(root, (self.root_id,))
        while any(isinstance(step, Hop) for step in steps):
            expanded: list[Hop | Leaf] = []
            for step in steps:
                if isinstance(step, Hop):
                    outcome = self._hop(step, query_bundle)
                    expanded.extend(self._hop_results(step, query_bundle.query_str, outcome))
                else:
                    expanded.append(step)
            steps = expanded
        return self._finish([step for step in steps if isinstance(step, Leaf)])

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        query_bundle = clean_query_bundle(query_bundle, self.class_name())
        limit = asyncio.Semaphore(self.max_concurrency)
        root = await self.retriever_dict[self.root_id].aretrieve(query_bundle)
        steps = self._plan(root, (self.root_id,))
        while any(isinstance(step, Hop) for step in steps):
            hops = [step for step in steps if isinstance(step, Hop)]
            outcomes = await asyncio.gather(*(self._ahop(h, query_bundle, limit) for h in hops))
            by_hop = dict(zip(map(id, hops), outcomes, strict=True))
            expanded: list[Hop | Leaf] = []
            for step in steps:
                if isinstance(step, Hop):
                    outcome = by_hop[id(step)]
                    expanded.extend(self._hop_results(step, query_bundle.query_str, outcome))
                else:
                    expanded.append(step)
            steps = expanded
        return self._finish([step for step in steps if isinstance(step, Leaf)])


# Deprecated: the settings of earlier versions' ``config`` attribute (now fields).
RecursiveConfig = settings_model(RecursiveIndexNodeRetriever, "RecursiveConfig")

__all__ = [
    "DEFAULT_ROOT_WEIGHTS",
    "HopKind",
    "NamedPointerRetriever",
    "RecursiveConfig",
    "RecursiveIndexNodeRetriever",
    "SafePandasQueryEngine",
    "UnsafeCodeError",
    "build_root_retriever",
    "check_pandas_code",
    "clean_frame",
    "describe_frame",
    "pointer_as_text",
    "topic_pointer_text",
]
