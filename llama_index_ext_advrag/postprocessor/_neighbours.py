"""Where a node sits in its document, and one batched fetch of its neighbours from the store.

The neighbour postprocessors need, for each retrieved hit, the nodes before and after it. Core
LlamaIndex walks ``PREVIOUS``/``NEXT`` relationships one node per round trip. Here the ids of a
whole range are computed at once from the node's position when the pack's parsers wrote it
(``document_id`` + ``sentence_span`` metadata and deterministic ids), so a call costs one batched
query however many hits and hops it needs. Nodes without that metadata (core parsers, custom
ids) fall back to walking relationships, still batched across all hits: one query per hop.

Both a LlamaIndex ``MilvusVectorStore`` (Lite or server, via
:func:`llama_index_ext_advrag.milvus.fetch_nodes`) and any LlamaIndex docstore can hold the nodes.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import BaseNode, NodeRelationship, TextNode

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.layout import (
    ANNOTATION_KEYS,
    Location,
    NodeLayout,
    ids_are_computable,
    relation_id,
)
from llama_index_ext_advrag.plan import Call, adrive, arun_call, drive, run_call

logger = logging.getLogger(__name__)


# --- the batched fetch --------------------------------------------------------------------------


@dataclass(frozen=True)
class NeighbourRequest:
    """Up to ``before`` nodes before and ``after`` nodes after ``anchor``."""

    anchor: BaseNode
    before: int
    after: int


@dataclass
class Neighbourhood:
    """What the store holds around one anchor, nearest first on each side."""

    anchor: BaseNode
    before: list[BaseNode] = field(default_factory=list)
    after: list[BaseNode] = field(default_factory=list)

    @property
    def nodes(self) -> list[BaseNode]:
        """All nodes in reading order."""
        return [*reversed(self.before), self.anchor, *self.after]

    @property
    def anchor_index(self) -> int:
        return len(self.before)


@dataclass
class FetchResult:
    neighbourhoods: list[Neighbourhood]
    round_trips: int
    fetched: int


class _Side:
    """One direction of one request: computed ids, or a walk along relationships."""

    __slots__ = ("computed", "frontier", "limit", "nodes", "relation")

    def __init__(self, limit: int, relation: NodeRelationship, computed: list[str] | None) -> None:
        self.limit = limit
        self.relation = relation
        self.computed = computed
        self.nodes: list[BaseNode] = []
        self.frontier: str | None = None

    def pending(self) -> list[str]:
        if self.computed is not None:
            return self.computed
        if self.frontier is not None and len(self.nodes) < self.limit:
            return [self.frontier]
        return []

    def receive(self, found: Mapping[str, BaseNode]) -> None:
        if self.computed is not None:
            for node_id in self.computed:
                if node_id not in found:
                    break  # an edge of the document (or a hole): stop on this side
                self.nodes.append(found[node_id])
            self.computed = []
            return
        node = found.get(self.frontier) if self.frontier is not None else None
        self.frontier = None
        if node is not None:
            self.nodes.append(node)
            if len(self.nodes) < self.limit:
                self.frontier = relation_id(node, self.relation)


class FetchPlan:
    """Which ids to fetch, round after round; pure bookkeeping, the store does the I/O.

    Hits with computable ids need one round; walked hits need one round per hop, shared by all.
    """

    def __init__(
        self,
        requests: Sequence[NeighbourRequest],
        layout: NodeLayout,
        with_embeddings: bool,
        known: Mapping[str, BaseNode] | None = None,
    ) -> None:
        self._requests = list(requests)
        self._found: dict[str, BaseNode] = {}
        self._requested: set[str] = set()
        self._sides: list[tuple[_Side, _Side]] = []
        self._anchor_ids: list[str] = []
        for request in self._requests:
            anchor = request.anchor
            location = layout.locate(anchor)
            if location is not None and ids_are_computable(anchor, location, layout):
                before = _computed_ids(layout, location, range(-1, -request.before - 1, -1))
                after = _computed_ids(layout, location, range(1, request.after + 1))
                sides = (
                    _Side(request.before, NodeRelationship.PREVIOUS, before),
                    _Side(request.after, NodeRelationship.NEXT, after),
                )
            else:
                sides = (
                    _Side(request.before, NodeRelationship.PREVIOUS, None),
                    _Side(request.after, NodeRelationship.NEXT, None),
                )
                for side in sides:
                    if side.limit > 0:
                        side.frontier = relation_id(anchor, side.relation)
            self._sides.append(sides)
            needs_vector = with_embeddings and anchor.embedding is None
            self._anchor_ids.append(anchor.node_id if needs_vector else "")
        if known:  # nodes an earlier fetch brought: never asked for again
            self.receive(list(known), known)

    @property
    def walks(self) -> bool:
        """Whether some hit is walked along relationships (its neighbours' ids are unknown)."""
        return any(side.computed is None for sides in self._sides for side in sides)

    def pending(self) -> list[str]:
        """Ids to fetch in the next round (empty when done)."""
        wanted = [i for i in self._anchor_ids if i]
        for before, after in self._sides:
            wanted += before.pending() + after.pending()
        return [i for i in dict.fromkeys(wanted) if i not in self._requested]

    def receive(self, requested: Sequence[str], found: Mapping[str, BaseNode]) -> None:
        """Record one round: the ids asked for and the nodes the store had among them."""
        self._requested.update(requested)
        self._found.update(found)
        for sides in self._sides:
            for side in sides:
                # Advance as far as already-fetched nodes allow (hits whose ranges overlap).
                while side.pending() and all(i in self._requested for i in side.pending()):
                    side.receive(self._found)

    def result(self) -> list[Neighbourhood]:
        return [
            Neighbourhood(
                anchor=self._found.get(request.anchor.node_id, request.anchor),
                before=before.nodes,
                after=after.nodes,
            )
            for request, (before, after) in zip(self._requests, self._sides, strict=True)
        ]


def _computed_ids(layout: NodeLayout, location: Location, steps: Iterable[int]) -> list[str]:
    ids = []
    for step in steps:
        node_id = layout.neighbour_id(location, step)
        if node_id is None:
            break
        ids.append(node_id)
    return ids


class NeighbourStore(ABC):
    """Batched node lookups by id, with the neighbour bookkeeping shared by sync and async."""

    def __init__(self, layout: NodeLayout | None = None) -> None:
        self.layout = layout or NodeLayout()

    @abstractmethod
    def get_nodes(self, node_ids: Sequence[str], with_embeddings: bool) -> dict[str, BaseNode]:
        """The stored nodes among ``node_ids`` (missing ids are left out), one batched query."""

    @abstractmethod
    async def aget_nodes(
        self, node_ids: Sequence[str], with_embeddings: bool
    ) -> dict[str, BaseNode]:
        """Async :meth:`get_nodes`."""

    def get_units(self, node_ids: Sequence[str]) -> dict[str, BaseNode]:
        """Like :meth:`get_nodes` with vectors, but a store may return light nodes: text,
        vector and the layout's metadata only (no relationships)."""
        return self.get_nodes(node_ids, True)

    async def aget_units(self, node_ids: Sequence[str]) -> dict[str, BaseNode]:
        return await self.aget_nodes(node_ids, True)

    def fetching(
        self,
        requests: Sequence[NeighbourRequest],
        with_embeddings: bool = False,
        light: bool = False,
        known: Mapping[str, BaseNode] | None = None,
        anchor_vectors: bool = True,
    ) -> Generator[Call, Any, FetchResult]:
        """Neighbourhoods of all requests, as a plan (:mod:`~llama_index_ext_advrag.plan`) that
        yields one batched lookup per round trip; ``light`` allows light nodes (vectors implied)
        when no hit needs walking; ``known`` nodes (from an earlier fetch) are not fetched again;
        with ``anchor_vectors=False`` a hit without a vector is not fetched again for it."""
        plan = FetchPlan(
            requests, self.layout, (with_embeddings or light) and anchor_vectors, known
        )
        light = light and not plan.walks
        round_trips = fetched = 0
        while ids := plan.pending():
            if light:
                found = yield Call(partial(self.get_units, ids), partial(self.aget_units, ids))
            else:
                found = yield Call(
                    partial(self.get_nodes, ids, with_embeddings),
                    partial(self.aget_nodes, ids, with_embeddings),
                )
            round_trips, fetched = round_trips + 1, fetched + len(found)
            plan.receive(ids, found)
        return FetchResult(plan.result(), round_trips, fetched)

    def fetch(self, requests: Sequence[NeighbourRequest], **options: Any) -> FetchResult:
        """Run :meth:`fetching` (same options) with the sync lookups."""
        return drive(self.fetching(requests, **options), run_call)

    async def afetch(self, requests: Sequence[NeighbourRequest], **options: Any) -> FetchResult:
        """Run :meth:`fetching` (same options) with the async lookups."""
        return await adrive(self.fetching(requests, **options), arun_call)


class MilvusNeighbourStore(NeighbourStore):
    """Nodes in a LlamaIndex ``MilvusVectorStore``; stored vectors come back with the nodes.

    Light units skip the node JSON (``_node_content``), whose parsing costs more than the query:
    the layout's metadata is stored as flat fields by ``MilvusVectorStore`` and read directly.
    """

    def __init__(self, vector_store: Any, layout: NodeLayout | None = None) -> None:
        super().__init__(layout)
        self.vector_store = vector_store

    def get_nodes(self, node_ids: Sequence[str], with_embeddings: bool) -> dict[str, BaseNode]:
        from llama_index_ext_advrag.milvus import fetch_nodes

        return fetch_nodes(self.vector_store, list(node_ids), with_embeddings=with_embeddings)

    async def aget_nodes(
        self, node_ids: Sequence[str], with_embeddings: bool
    ) -> dict[str, BaseNode]:
        from llama_index_ext_advrag.milvus import afetch_nodes

        if getattr(self.vector_store, "aclient", None) is not None:
            return await afetch_nodes(self.vector_store, list(node_ids), with_embeddings)
        # A store built with use_async_client=False: run the sync client off the event loop.
        return await asyncio.to_thread(self.get_nodes, node_ids, with_embeddings)

    def _unit_fields(self) -> tuple[list[str], list[str]]:
        layout, store = self.layout, self.vector_store
        metadata = [
            layout.document_id_key,
            layout.span_key,
            layout.section_key,
            layout.char_span_key,
            *ANNOTATION_KEYS,
        ]
        return [store.text_key, store.embedding_field, *metadata], metadata

    def _rows_to_units(self, rows: Mapping[Any, dict[str, Any]]) -> dict[str, BaseNode]:
        """Rows to light ``TextNode``s: text, vector, the layout's metadata, char offsets."""
        _, metadata_keys = self._unit_fields()
        text_key, vector_key = self.vector_store.text_key, self.vector_store.embedding_field
        units: dict[str, BaseNode] = {}
        for key, row in rows.items():
            metadata = {k: row[k] for k in metadata_keys if k in row}
            span = metadata.get(self.layout.char_span_key)
            start, end = (
                span if isinstance(span, (list, tuple)) and len(span) == 2 else (None, None)
            )
            units[str(key)] = TextNode(
                id_=str(key),
                text=row.get(text_key) or "",
                metadata=metadata,
                embedding=row.get(vector_key),
                start_char_idx=start,
                end_char_idx=end,
            )
        return units

    def get_units(self, node_ids: Sequence[str]) -> dict[str, BaseNode]:
        from llama_index_ext_advrag.milvus.nodes import fetch_rows

        store = self.vector_store
        rows = fetch_rows(store.client, store.collection_name, node_ids, self._unit_fields()[0])
        return self._rows_to_units(rows)

    async def aget_units(self, node_ids: Sequence[str]) -> dict[str, BaseNode]:
        from llama_index_ext_advrag.milvus.nodes import afetch_rows

        store = self.vector_store
        if getattr(store, "aclient", None) is None:
            return await asyncio.to_thread(self.get_units, node_ids)
        fields = self._unit_fields()[0]
        rows = await afetch_rows(store.aclient, store.collection_name, node_ids, fields)
        return self._rows_to_units(rows)


class DocstoreNeighbourStore(NeighbourStore):
    """Nodes in a LlamaIndex docstore; vectors only when the docstore kept them."""

    def __init__(self, docstore: Any, layout: NodeLayout | None = None) -> None:
        super().__init__(layout)
        self.docstore = docstore

    def get_nodes(self, node_ids: Sequence[str], with_embeddings: bool) -> dict[str, BaseNode]:
        nodes = self.docstore.get_nodes(list(node_ids), raise_error=False)
        return {node.node_id: node for node in nodes}

    async def aget_nodes(
        self, node_ids: Sequence[str], with_embeddings: bool
    ) -> dict[str, BaseNode]:
        nodes = await self.docstore.aget_nodes(list(node_ids), raise_error=False)
        return {node.node_id: node for node in nodes}


def build_neighbour_store(
    vector_store: Any, docstore: Any, layout: NodeLayout | None = None
) -> NeighbourStore:
    """The store for exactly one of ``vector_store`` (a ``MilvusVectorStore``) or ``docstore``.

    Raises:
        ValueError: both or neither are given, or either is of the wrong type.
    """
    if (vector_store is None) == (docstore is None):
        raise ValueError(
            "pass exactly one of vector_store= (a MilvusVectorStore) or docstore= (a LlamaIndex "
            f"docstore); got vector_store={type(vector_store).__name__}, "
            f"docstore={type(docstore).__name__}"
        )
    if docstore is not None:
        from llama_index.core.storage.docstore.types import BaseDocumentStore

        if not isinstance(docstore, BaseDocumentStore):
            raise ValueError(
                f"docstore must be a LlamaIndex BaseDocumentStore, got {type(docstore).__name__}"
            )
        return DocstoreNeighbourStore(docstore, layout)
    from llama_index.vector_stores.milvus import MilvusVectorStore

    if not isinstance(vector_store, MilvusVectorStore):
        raise ValueError(
            f"vector_store must be a MilvusVectorStore, got {type(vector_store).__name__}"
        )
    return MilvusNeighbourStore(vector_store, layout)


class StoreBackedPostprocessor(BaseNodePostprocessor, RefusesUnknownSettings):
    """A postprocessor that reads neighbours from a Milvus vector store or a docstore.

    Both are live objects (private attributes set from the ``vector_store=`` / ``docstore=``
    arguments), so ``to_dict()`` holds the settings only and ``from_dict(data,
    docstore=...)`` takes the store back. Subclasses call ``super().__init__(vector_store,
    docstore, **data)`` and then :meth:`_open_store`.
    """

    _vector_store: Any = PrivateAttr(default=None)
    _docstore: Any = PrivateAttr(default=None)

    def __init__(self, vector_store: Any = None, docstore: Any = None, **data: Any) -> None:
        super().__init__(**data)
        self._vector_store = vector_store
        self._docstore = docstore

    @property
    def vector_store(self) -> Any:
        """The ``MilvusVectorStore`` holding the nodes (``None`` with a docstore)."""
        return self._vector_store

    @property
    def docstore(self) -> Any:
        """The LlamaIndex docstore holding the nodes (``None`` with a vector store)."""
        return self._docstore

    @property
    def has_store(self) -> bool:
        return self._vector_store is not None or self._docstore is not None

    def _open_store(self, layout: NodeLayout) -> NeighbourStore:
        """The neighbour store over the given store (see :func:`build_neighbour_store`)."""
        return build_neighbour_store(self._vector_store, self._docstore, layout)


__all__ = [
    "DocstoreNeighbourStore",
    "FetchPlan",
    "FetchResult",
    "MilvusNeighbourStore",
    "NeighbourRequest",
    "NeighbourStore",
    "Neighbourhood",
    "StoreBackedPostprocessor",
    "build_neighbour_store",
]
