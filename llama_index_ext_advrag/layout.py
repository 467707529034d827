"""The node-layout contract: what the parsers write into a node and the other layers read back.

The pack's parsers give every node a ``document_id`` and a ``sentence_span`` (``[first, last)``
sentence indices) in its metadata and an id derived from the document id and that span, so the
ids of a node's neighbours can be computed instead of walked. ``UnitAnnotator`` adds a unit's
token count and cues at ingest. Every module that reads or writes these keys names them
through this module; nodes without the metadata are ordered by their ``PREVIOUS``/``NEXT``
relationships.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from llama_index.core.bridge.pydantic import BaseModel, Field
from llama_index.core.schema import BaseNode, NodeRelationship

# --- metadata keys ------------------------------------------------------------------------------

DOCUMENT_ID_KEY = "document_id"
SENTENCE_SPAN_KEY = "sentence_span"
CHAR_SPAN_KEY = "char_span"
SECTION_TITLE_KEY = "section_title"
# Positional bookkeeping that helps code, not the embedding model or the LLM.
BOOKKEEPING_KEYS = (DOCUMENT_ID_KEY, SENTENCE_SPAN_KEY, CHAR_SPAN_KEY)
# Sentence-unit nodes keep their window and their own sentence under these keys (the names
# core's ``SentenceWindowNodeParser`` and ``MetadataReplacementPostProcessor`` use).
WINDOW_KEY = "window"
ORIGINAL_TEXT_KEY = "original_text"
# Written at ingest by ``UnitAnnotator``, read by the drift-aware window.
UNIT_TOKENS_KEY = "unit_tokens"
UNIT_CUES_KEY = "unit_cues"
ANNOTATION_KEYS = (UNIT_TOKENS_KEY, UNIT_CUES_KEY)

# --- deterministic ids --------------------------------------------------------------------------

# A fixed namespace, so the same document and span give the same id in every process.
NODE_ID_NAMESPACE = uuid.UUID("5d1f7a52-3c4b-4e0a-9a55-8f6a2b1c0d7e")
_NAMESPACE_BYTES = NODE_ID_NAMESPACE.bytes
# The unit tag the sliding-window parser puts in the ids of window nodes (``window_size=1``
# gives one sentence per node). A mismatch is detected per hit (see ``ids_are_computable``).
DEFAULT_ID_UNIT = "window"
# Pseudo document ids of nodes ordered by their relationships (no position metadata).
CHAIN_PREFIX = "chain:"


def deterministic_node_id(document_id: str, *parts: object) -> str:
    """A UUID derived from the document id and the node's position (span, level, centre), so
    re-ingesting the same document produces the same ids and a vector store upserts them.

    >>> deterministic_node_id("doc", 0, 3) == deterministic_node_id("doc", 0, 3)
    True
    """
    return DocumentNodeIds(document_id)(*parts)


class DocumentNodeIds:
    """``deterministic_node_id`` for the nodes of one document: the hash of the namespace and the
    document id is computed once and copied for each node.

    >>> DocumentNodeIds("doc")(0, 3) == deterministic_node_id("doc", 0, 3)
    True
    """

    __slots__ = ("_prefix",)

    def __init__(self, document_id: str) -> None:
        self._prefix = hashlib.sha1(_NAMESPACE_BYTES + document_id.encode("utf-8"))

    def __call__(self, *parts: object) -> str:
        # uuid.uuid5 of "\x1f".join([document_id, *parts]) spelled out (same value): building
        # UUID objects cost a sixth of the parse time
        sha = self._prefix.copy()
        sha.update("".join(["\x1f" + str(part) for part in parts]).encode("utf-8"))
        digest = bytearray(sha.digest()[:16])
        digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
        digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
        h = digest.hex()
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# --- ingest-time annotations --------------------------------------------------------------------


def document_id_of(node: BaseNode) -> str | None:
    """The id of the document a node was cut from: its source relationship, else the
    ``document_id`` metadata the pack's parsers write (``None`` when it has neither)."""
    return node.ref_doc_id or node.metadata.get(DOCUMENT_ID_KEY)


def stored_tokens(metadata: Mapping[str, Any]) -> int | None:
    """The annotated token count, or ``None`` when absent or malformed."""
    value = metadata.get(UNIT_TOKENS_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def stored_cues(metadata: Mapping[str, Any]) -> frozenset[str] | None:
    """The annotated cues, or ``None`` when absent or malformed."""
    value = metadata.get(UNIT_CUES_KEY)
    if isinstance(value, (list, tuple)) and all(isinstance(cue, str) for cue in value):
        return frozenset(value)
    return None


# --- where a node sits --------------------------------------------------------------------------


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
    "document_id_of",
    "ANNOTATION_KEYS",
    "BOOKKEEPING_KEYS",
    "CHAIN_PREFIX",
    "CHAR_SPAN_KEY",
    "DEFAULT_ID_UNIT",
    "DOCUMENT_ID_KEY",
    "NODE_ID_NAMESPACE",
    "ORIGINAL_TEXT_KEY",
    "SECTION_TITLE_KEY",
    "SENTENCE_SPAN_KEY",
    "UNIT_CUES_KEY",
    "UNIT_TOKENS_KEY",
    "WINDOW_KEY",
    "DocumentNodeIds",
    "Location",
    "NodeLayout",
    "deterministic_node_id",
    "ids_are_computable",
    "locate_all",
    "relation_id",
    "stored_cues",
    "stored_tokens",
]
