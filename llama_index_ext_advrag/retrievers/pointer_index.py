"""The pointer layer of recursive routing: topic pointer texts and the root index over pointers.

The root is a small index over short :class:`IndexNode` pointers (and any ordinary nodes beside
them): dense, fused with BM25 over the same texts, since a year or a sheet name in a pointer is
exact-word evidence that embeddings of short texts blur. Over tables,
:class:`NamedPointerRetriever` goes first: a question that names a table is sent to that table
alone, without a search.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import BaseNode, IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.configuration import aclose_all, close_all
from llama_index_ext_advrag.events import TableRouteEvent
from llama_index_ext_advrag.models import resolve_embed_model
from llama_index_ext_advrag.tables.workbooks import tables_named_in
from llama_index_ext_advrag.trace import add_trace, copy_node_with_score, get_trace

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)

TOPIC_POINTER_CHARS = 300
DEFAULT_ROOT_WEIGHTS = (0.5, 1.0)  # dense, BM25 over pointer texts
TOPIC_PREFIX = "topic::"
NAMED_ROUTE_COMPONENT = "named_route"
NAMED_SCORE = 1.0


def topic_pointer_text(topic: str, nodes: Sequence[BaseNode]) -> str:
    """``"<topic>: <its first sentences>"``, about 300 characters."""
    from llama_index_ext_advrag.text import split_sentences

    opening = []
    length = 0
    for node in nodes[:3]:
        for sentence in split_sentences(node.get_content()):
            if length >= TOPIC_POINTER_CHARS:
                break
            opening.append(sentence.text)
            length += len(sentence.text)
    return f"{topic}: {' '.join(opening)}"[: TOPIC_POINTER_CHARS + len(topic) + 2]


def topic_pointers(
    topics: Mapping[str, Sequence[BaseNode | str] | BaseRetriever],
    descriptions: Mapping[str, str] | None = None,
    topic_top_k: int = 3,
    embed_model: Any = None,
) -> tuple[list[IndexNode], dict[str, BaseRetriever]]:
    """One vector index per text topic (or a ready retriever) and one pointer per topic, keyed
    ``topic::<name>``; the pointer text is ``descriptions[topic]`` or the topic name and its
    first sentences.

    Raises:
        ValueError: ``topics`` is empty, or a retriever topic has no description.
    """
    from llama_index.core import VectorStoreIndex

    if not topics:
        raise ValueError("topics must hold at least one topic, got none")
    pointers, retrievers = [], {}
    for topic, content in topics.items():
        target = f"{TOPIC_PREFIX}{topic}"
        description = (descriptions or {}).get(topic)
        if isinstance(content, BaseRetriever):
            if description is None:
                raise ValueError(f"topic {topic!r} is a retriever: give descriptions[{topic!r}]")
            retrievers[target] = content
        else:
            nodes = [TextNode(text=c) if isinstance(c, str) else c for c in content]
            index = VectorStoreIndex(nodes=nodes, embed_model=resolve_embed_model(embed_model))
            retrievers[target] = index.as_retriever(similarity_top_k=topic_top_k)
            description = description or topic_pointer_text(topic, nodes)
        pointers.append(
            IndexNode(text=description, index_id=target, id_=target, metadata={"topic": topic})  # type: ignore[call-arg]
        )
    return pointers, retrievers


def build_root_retriever(
    nodes: Sequence[BaseNode],
    embed_model: Any = None,
    similarity_top_k: int = 2,
    lexical: bool = True,
    vector_store: Any = None,
    weights: Sequence[float] = DEFAULT_ROOT_WEIGHTS,
) -> BaseRetriever:
    """A vector index over ``nodes`` (in memory, or in ``vector_store``), fused with BM25 over
    the same nodes when ``lexical`` (pointer texts are short: exact words such as a year or a
    sheet name matter)."""
    from llama_index.core import StorageContext, VectorStoreIndex

    from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever
    from llama_index_ext_advrag.retrievers.hybrid import HybridFusionRetriever

    storage = StorageContext.from_defaults(vector_store=vector_store) if vector_store else None
    index = VectorStoreIndex(
        nodes=list(nodes), embed_model=resolve_embed_model(embed_model), storage_context=storage
    )
    if not lexical:
        return index.as_retriever(similarity_top_k=similarity_top_k)
    dense = index.as_retriever()
    # Score fusion over (up to 100 of) all pointers, not RRF: among a handful of pointers a
    # decisive BM25 gap (a year, a sheet name) is information that ranks alone would flatten.
    # BM25 weighs more: min-max stretches the dense leg's tiny spread over short pointers
    # (0.55-0.57 cosine on the billionaires sheets) into a full [0, 1] of noise.
    return HybridFusionRetriever(
        [dense, JiebaBM25Retriever(nodes)],
        mode="score",
        weights=list(weights),
        similarity_top_k=similarity_top_k,
        leg_top_k=max(similarity_top_k, min(len(nodes), 100)),
        leg_names=["dense", "bm25"],
    )


class NamedPointerRetriever(BaseRetriever):
    """Send a question that names pointers (tables, by name) to those pointers alone; search
    with ``search`` otherwise.

    Each returned pointer is a copy whose trace, ``metadata["advrag_trace"]["named_route"]``,
    says how it was chosen: ``{"decision": "named", "names": [...]}`` (score 1.0) or
    ``{"decision": "search"}``. Names are matched by
    :func:`~llama_index_ext_advrag.tables.workbooks.tables_named_in`.

    Args:
        search: the root retriever used when the question names no pointer.
        named: name -> pointer (e.g. a sheet name -> its table pointer).

    Raises:
        ValueError: ``named`` is empty.
    """

    def __init__(
        self,
        search: BaseRetriever,
        named: Mapping[str, IndexNode],
        callback_manager: CallbackManager | None = None,
    ) -> None:
        if not named:
            raise ValueError("named must hold at least one name -> pointer, got none")
        self.search = search
        self.named = dict(named)
        super().__init__(callback_manager=callback_manager)

    def _named(self, query: str) -> list[NodeWithScore] | None:
        names = tables_named_in(query, list(self.named))
        if not names:
            return None
        logger.info("question names %s: routed there without a search", names)
        results = []
        for name in names:
            result = copy_node_with_score(NodeWithScore(node=self.named[name], score=NAMED_SCORE))
            add_trace(result.node, NAMED_ROUTE_COMPONENT, {"decision": "named", "names": names})
            results.append(result)
        return results

    @staticmethod
    def _searched(results: Sequence[NodeWithScore]) -> list[NodeWithScore]:
        copies = [copy_node_with_score(result) for result in results]
        for copy in copies:
            add_trace(copy.node, NAMED_ROUTE_COMPONENT, {"decision": "search"})
        return copies

    @staticmethod
    def _report(query: str, results: list[NodeWithScore]) -> list[NodeWithScore]:
        """Emit the route the results took (every result carries the same decision)."""
        record = get_trace(results[0].node, NAMED_ROUTE_COMPONENT) if results else None
        record = record or {"decision": "search"}
        dispatcher.event(
            TableRouteEvent(
                query=query,
                decision=record["decision"],
                names=list(record.get("names", [])),
                node_ids=[result.node.node_id for result in results],
            )
        )
        return results

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        named = self._named(query_bundle.query_str)
        if named is None:
            named = self._searched(self.search.retrieve(query_bundle))
        return self._report(query_bundle.query_str, named)

    @dispatcher.span
    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        named = self._named(query_bundle.query_str)
        if named is None:
            named = self._searched(await self.search.aretrieve(query_bundle))
        return self._report(query_bundle.query_str, named)

    def close(self) -> None:
        """Close ``search`` when it can be closed (the recursive retriever closes its root)."""
        close_all([self.search])

    async def aclose(self) -> None:
        await aclose_all([self.search])


__all__ = [
    "DEFAULT_ROOT_WEIGHTS",
    "NAMED_ROUTE_COMPONENT",
    "NamedPointerRetriever",
    "build_root_retriever",
    "topic_pointer_text",
    "topic_pointers",
]
