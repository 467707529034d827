"""What a Milvus row can hold, checked before anything is stored.

Milvus refuses a text longer than its VARCHAR field (65,535 bytes in UTF-8 by default) only
when the rows are inserted, after every node was embedded: minutes lost on a large ingest and
an error that names neither the node nor the document. Metadata fares worse: some values are
refused deep inside pymilvus (an integer beyond 64 bits), others come back changed (a set, a
tuple, ``inf``, a datetime) or not at all (a key holding a lone surrogate).

:func:`check_storable_nodes` finds such a node first, with a ``ValueError`` that names it. Metadata
is checked deny by default: only values that come back from Milvus exactly as they went in are
accepted (the allowlist `_STORABLE_METADATA`); anything else is refused with the node, the key and the
value's type. A metadata key Milvus refuses a row for is refused by name too: ``$meta`` (its
dynamic field) and a field a collection function fills (``sparse_embedding`` of a full-text
collection).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_ext_advrag.layout import document_id_of
from llama_index_ext_advrag.text import has_lone_surrogates

logger = logging.getLogger(__name__)

# MilvusVectorStore's default max_length of the text field; Milvus counts UTF-8 bytes.
MAX_TEXT_BYTES = 65_535
# Milvus JSON numbers are 64-bit: a larger integer is refused by pymilvus or comes back rounded.
MIN_METADATA_INT = -(2**63)
MAX_METADATA_INT = 2**63 - 1
_STORABLE_METADATA = (
    "str (no lone surrogate), int within 64 bits, finite float, bool, None, and lists and "
    "dicts with str keys of these"
)
_HINTS = {
    "tuple": "use a list (a tuple comes back as a list)",
    "set": "use a sorted list (a set comes back as a list, or not at all)",
    "frozenset": "use a sorted list",
    "bytes": "decode it to str, or store it base64-encoded",
    "bytearray": "decode it to str, or store it base64-encoded",
    "datetime": "store value.isoformat() (a str)",
    "date": "store value.isoformat() (a str)",
    "time": "store value.isoformat() (a str)",
    "Decimal": "store str(value) or float(value)",
}
# Milvus' own name for the dynamic field that holds the metadata of every row.
DYNAMIC_FIELD = "$meta"


def _describe(node: BaseNode) -> str:
    document = document_id_of(node)
    return f"node {node.node_id!r}" + (f" of document {document!r}" if document else "")


def _path(keys: tuple[Any, ...]) -> str:
    return "metadata" + "".join(f"[{key!r}]" for key in keys)


def _unstorable_metadata(value: Any, keys: tuple[Any, ...] = ()) -> str | None:
    """Why metadata ``value`` would not come back from Milvus exactly, ``None`` when it would.

    Deny by default: exact ``str``, ``int`` (within 64 bits), ``float`` (finite), ``bool`` and
    ``None``, and ``list``/``dict`` (``str`` keys) of them; subclasses (a ``str`` enum, numpy
    scalars) are refused too, since they come back as the plain type.

    >>> _unstorable_metadata({"year": 2023, "tags": ["a", "b"]}) is None
    True
    >>> _unstorable_metadata({"big": 2**70}).split(";")[0]
    "metadata['big'] is an int of 71 bits"
    """
    where = _path(keys)
    kind = type(value)
    if value is None or kind is bool:
        return None
    if kind is str:
        if has_lone_surrogates(value):
            return f"{where} is a str holding a lone surrogate: replace it (U+FFFD) or drop it"
        return None
    if kind is int:
        if MIN_METADATA_INT <= value <= MAX_METADATA_INT:
            return None
        return (
            f"{where} is an int of {value.bit_length()} bits; Milvus holds 64-bit integers "
            "(-2**63 to 2**63-1): store it as a str"
        )
    if kind is float:
        if math.isfinite(value):
            return None
        return f"{where} is the float {value!r}, which JSON cannot hold: store None or a str"
    if kind is list:
        for index, item in enumerate(value):
            problem = _unstorable_metadata(item, (*keys, index))
            if problem:
                return problem
        return None
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f"{where} has the key {key!r} of type {type(key).__name__}: keys must be str"
            if has_lone_surrogates(key):
                return f"{where} has the key {key!r}, which holds a lone surrogate"
            problem = _unstorable_metadata(item, (*keys, key))
            if problem:
                return problem
        return None
    hint = _HINTS.get(kind.__name__, "convert it to one of these first")
    return f"{where} is of type {kind.__module__}.{kind.__qualname__}: {hint}"


def check_storable_nodes(
    nodes: Iterable[BaseNode],
    max_text_bytes: int = MAX_TEXT_BYTES,
    reserved_keys: Iterable[str] = (DYNAMIC_FIELD,),
) -> None:
    """Raise before embedding when a node cannot be stored in a Milvus collection.

    Args:
        nodes: the nodes to store.
        max_text_bytes: the text field's length in UTF-8 bytes.
        reserved_keys: names no metadata key may take (``$meta``;
            :class:`~.vector_store.CheckedMilvusVectorStore` adds its collection's
            function output fields).

    Raises:
        ValueError: A node's text is longer than ``max_text_bytes`` UTF-8 bytes, or cannot be
            encoded (a lone surrogate), or its metadata holds something Milvus would refuse,
            change or lose (see :func:`_unstorable_metadata`), or a key in ``reserved_keys``;
            the message names the node, its document, the key, the value's type and what is
            allowed.
    """
    reserved = set(reserved_keys)
    for node in nodes:
        text = node.get_content(metadata_mode=MetadataMode.NONE)
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise ValueError(
                f"{_describe(node)} holds a lone surrogate at character {error.start}, which "
                "Milvus cannot store; parse the document with the pack's parsers (they replace "
                "it with U+FFFD) or clean the text"
            ) from error
        if size > max_text_bytes:
            raise ValueError(
                f"{_describe(node)} holds {size:,} bytes of text; a Milvus text field holds at "
                f"most {max_text_bytes:,}: cut it first (the pack's parsers cut sentences longer "
                "than max_sentence_chars)"
            )
        clashes = sorted(key for key in node.metadata if key in reserved)
        if clashes:
            raise ValueError(
                f"{_describe(node)} has the metadata key {clashes[0]!r}, which Milvus keeps "
                f"for itself (reserved: {', '.join(sorted(reserved))}): rename the key"
            )
        problem = _unstorable_metadata(node.metadata)
        if problem is not None:
            raise ValueError(
                f"{_describe(node)} has metadata Milvus cannot store as it is: {problem}. "
                f"Allowed: {_STORABLE_METADATA}"
            )


__all__ = [
    "DYNAMIC_FIELD",
    "MAX_METADATA_INT",
    "MAX_TEXT_BYTES",
    "MIN_METADATA_INT",
    "check_storable_nodes",
]
