"""What a Milvus row can hold, checked before anything is embedded.

Milvus refuses a text longer than its VARCHAR field (65,535 bytes in UTF-8 by default) only
when the rows are inserted, after every node was embedded: minutes lost on a large ingest and
an error that names neither the node nor the document. :func:`check_storable_nodes` finds such
a node (and metadata JSON cannot encode) first, with a ``ValueError`` that names it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from llama_index.core.schema import BaseNode, MetadataMode

logger = logging.getLogger(__name__)

# MilvusVectorStore's default max_length of the text field; Milvus counts UTF-8 bytes.
MAX_TEXT_BYTES = 65_535


def _describe(node: BaseNode) -> str:
    document = node.ref_doc_id or node.metadata.get("document_id")
    return f"node {node.node_id!r}" + (f" of document {document!r}" if document else "")


def check_storable_nodes(nodes: Iterable[BaseNode], max_text_bytes: int = MAX_TEXT_BYTES) -> None:
    """Raise before embedding when a node cannot be stored in a Milvus collection.

    Raises:
        ValueError: A node's text is longer than ``max_text_bytes`` UTF-8 bytes, or cannot be
            encoded (a lone surrogate), or its metadata cannot be written as JSON (a non-string key
            such as a tuple, a value such as a set); the message names the node, its document and
            what to change.
    """
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
        try:
            json.dumps(node.metadata, ensure_ascii=False)
        except (TypeError, ValueError) as error:
            raise ValueError(
                f"{_describe(node)} has metadata Milvus cannot store as JSON ({error}); use "
                "string keys and JSON values (str, int, float, bool, None, lists, dicts)"
            ) from error


__all__ = ["MAX_TEXT_BYTES", "check_storable_nodes"]
