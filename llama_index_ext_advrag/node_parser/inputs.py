"""What the parsers (and the two-layer builder) settle about a document before cutting it.

Two inputs would otherwise break a later stage without naming the document:

* lone surrogates in its text or metadata (:func:`clean_document`): core's hashing,
  tokenizers and Milvus cannot encode them; they are replaced, on a copy, with U+FFFD;
* a document id another document of the same parse already has (:func:`unique_document_ids`):
  node ids derived from the document id would be equal and the later document would
  overwrite the earlier one in a vector store; it gets an occurrence suffix (``"<id>#1"``).

Both are logged as warnings naming the document.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from llama_index.core.schema import BaseNode, MetadataMode

from llama_index_ext_advrag.text import clean_value

logger = logging.getLogger(__name__)

DUPLICATE_SEPARATOR = "#"


def unique_document_ids(documents: Sequence[BaseNode]) -> list[str]:
    """The id each document's nodes are derived from: its own id, or for a repeated id its
    ``"<id>#<occurrence>"`` (1 for the second document with that id), never one that another
    document of ``documents`` has. Each repeat is logged as a warning naming the id.

    >>> from llama_index.core.schema import TextNode
    >>> unique_document_ids([TextNode(id_="a"), TextNode(id_="b"), TextNode(id_="a")])
    ['a', 'b', 'a#1']
    """
    taken = {document.node_id for document in documents}
    seen: dict[str, int] = {}
    ids: list[str] = []
    for position, document in enumerate(documents):
        base = document.node_id
        occurrence = seen.get(base, 0)
        seen[base] = occurrence + 1
        if not occurrence:
            ids.append(base)
            continue
        candidate = f"{base}{DUPLICATE_SEPARATOR}{occurrence}"
        while candidate in taken:
            occurrence += 1
            candidate = f"{base}{DUPLICATE_SEPARATOR}{occurrence}"
        taken.add(candidate)
        ids.append(candidate)
        logger.warning(
            "document %d has the id %r of an earlier document of this parse; its nodes are "
            "derived from %r instead (same text: the same nodes twice; give documents unique "
            "ids to avoid this)",
            position,
            base,
            candidate,
        )
    return ids


def clean_document(document: BaseNode) -> BaseNode:
    """``document``, or a copy whose text and metadata have their lone surrogates replaced
    with U+FFFD (logged as a warning naming the document); the caller's object is untouched."""
    text = document.get_content(metadata_mode=MetadataMode.NONE)
    clean_text, in_text = clean_value(text)
    clean_metadata, in_metadata = clean_value(document.metadata)
    if not in_text and not in_metadata:
        return document
    logger.warning(
        "document %r holds %d lone surrogate code points (%d in its text, %d in its "
        "metadata), which cannot be encoded: replaced with U+FFFD",
        document.node_id,
        in_text + in_metadata,
        in_text,
        in_metadata,
    )
    copy = document.model_copy()
    copy.metadata = dict(clean_metadata)
    if in_text:
        copy.set_content(clean_text)
    return copy


__all__ = ["DUPLICATE_SEPARATOR", "clean_document", "unique_document_ids"]
