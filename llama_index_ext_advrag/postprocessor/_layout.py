"""Where a node sits in its document: document id, sentence span, section, neighbour ids.

The pack's parsers write ``document_id`` + ``sentence_span`` metadata and deterministic ids, so
the ids of a node's neighbours can be computed instead of walked; nodes without that metadata
are ordered by their ``PREVIOUS``/``NEXT`` relationships.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from llama_index.core.schema import BaseNode, NodeRelationship
from pydantic import BaseModel, Field

from llama_index_ext_advrag.node_parser._nodes import (
    CHAR_SPAN_KEY,
    DOCUMENT_ID_KEY,
    SECTION_TITLE_KEY,
    SENTENCE_SPAN_KEY,
    deterministic_node_id,
)

# The unit tag the sliding-window parser puts in the ids of window nodes (``window_size=1``
# gives one sentence per node). A mismatch is detected per hit (see ``ids_are_computable``).
DEFAULT_ID_UNIT = "window"
CHAIN_PREFIX = "chain:"


class Location(NamedTuple):
    """A node's place: document, sentence span ``[first, last)``, section title."""

    doc_id: str
    first: int
    last: int
    section: str | None = None

    @property
    def width(self) -> int:
        return self.last - self.first


class NodeLayout(BaseModel):
    """How a node says where it sits and how its neighbours are named.

    The defaults match :class:`~llama_index_ext_advrag.node_parser.AdaptiveSlidingWindowNodeParser`
    (``document_id``, ``sentence_span``, ``section_title`` metadata and ids derived from the
    document id and the span). Neighbour ids are computed for tiled nodes (each node's span
    follows the previous one's, as with ``window_size == stride``); other layouts are walked.
    """

    document_id_key: str = Field(
        default=DOCUMENT_ID_KEY, description="Metadata key of the document id."
    )
    span_key: str = Field(default=SENTENCE_SPAN_KEY, description="Metadata key of [first, last).")
    section_key: str = Field(default=SECTION_TITLE_KEY, description="Metadata key of the section.")
    char_span_key: str = Field(default=CHAR_SPAN_KEY, description="Metadata key of char offsets.")
    id_unit: str = Field(default=DEFAULT_ID_UNIT, description="Unit tag inside deterministic ids.")

    def locate(self, node: BaseNode) -> Location | None:
        """The node's location from its metadata, or ``None`` when the metadata is missing."""
        metadata = node.metadata
        doc_id, span = metadata.get(self.document_id_key), metadata.get(self.span_key)
        if doc_id is None or not isinstance(span, (list, tuple)) or len(span) != 2:
            return None
        first, last = span
        if not (isinstance(first, int) and isinstance(last, int)) or last <= first:
            return None
        section = metadata.get(self.section_key)
        return Location(str(doc_id), first, last, section if isinstance(section, str) else None)

    def neighbour_id(self, location: Location, steps: int) -> str | None:
        """Id of the node ``steps`` nodes away (negative = before), assuming tiled spans."""
        first = location.first + steps * location.width
        if first < 0:
            return None
        return deterministic_node_id(location.doc_id, self.id_unit, first, first + location.width)


def relation_id(node: BaseNode, relation: NodeRelationship) -> str | None:
    """The id behind a PREVIOUS/NEXT relationship, or ``None``."""
    info = node.relationships.get(relation)
    return getattr(info, "node_id", None) if info is not None else None


def ids_are_computable(node: BaseNode, location: Location, layout: NodeLayout) -> bool:
    """Whether computed neighbour ids agree with the node's own relationships (when it has any)."""
    for relation, steps in ((NodeRelationship.NEXT, 1), (NodeRelationship.PREVIOUS, -1)):
        known = relation_id(node, relation)
        if known is not None:
            return known == layout.neighbour_id(location, steps)
    return True


def locate_all(nodes: Iterable[BaseNode], layout: NodeLayout) -> dict[str, Location]:
    """Locations of ``nodes``; nodes without position metadata get chain coordinates.

    Position-less nodes are ordered by following ``NEXT`` links among themselves: each chain
    becomes a pseudo document ``chain:<head id>`` with positions 0, 1, 2, ... so that
    overlapping expansions still merge and keep reading order.
    """
    by_id = {node.node_id: node for node in nodes}
    locations: dict[str, Location] = {}
    loose: dict[str, BaseNode] = {}
    for node_id, node in by_id.items():
        location = layout.locate(node)
        if location is None:
            loose[node_id] = node
        else:
            locations[node_id] = location
    heads = [i for i, n in loose.items() if relation_id(n, NodeRelationship.PREVIOUS) not in loose]
    for head in [*heads, *loose]:  # nodes in a (malformed) cycle start their own chain
        current: str | None = head
        position = 0
        while current is not None and current in loose and current not in locations:
            locations[current] = Location(f"{CHAIN_PREFIX}{head}", position, position + 1)
            current = relation_id(loose[current], NodeRelationship.NEXT)
            position += 1
    return locations


__all__ = [
    "CHAIN_PREFIX",
    "Location",
    "NodeLayout",
    "ids_are_computable",
    "locate_all",
    "relation_id",
]
