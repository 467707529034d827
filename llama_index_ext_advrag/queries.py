"""Queries every stage can encode: lone surrogates replaced before a model or Milvus sees them.

A query with a lone surrogate (``"\\ud800"``) fails far from its cause: a Hugging Face
embedding model raises a ``TypeError`` from its tokenizer (and core retries it for seconds),
hashing and Milvus raise ``UnicodeEncodeError``, and a hybrid retriever whose dense leg failed
answers from BM25 alone. Each retriever of the pack passes its query through
:func:`clean_query_bundle` first: the surrogates become U+FFFD, with a warning.
"""

from __future__ import annotations

import logging

from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag.text import clean_value, has_lone_surrogates

logger = logging.getLogger(__name__)


def clean_query_bundle(query_bundle: QueryBundle, component: str) -> QueryBundle:
    """``query_bundle``, or a copy whose query and embedding strings have their lone
    surrogates replaced with U+FFFD (logged as a warning naming ``component``).

    >>> clean_query_bundle(QueryBundle("ok"), "demo").query_str
    'ok'
    >>> clean_query_bundle(QueryBundle("bad \\ud800"), "demo").query_str
    'bad \\ufffd'
    """
    strings = [query_bundle.query_str, *(query_bundle.custom_embedding_strs or [])]
    if not any(isinstance(s, str) and has_lone_surrogates(s) for s in strings):
        return query_bundle
    query_str, count = clean_value(query_bundle.query_str)
    embedding_strs, more = clean_value(query_bundle.custom_embedding_strs)
    logger.warning(
        "%s: the query holds %d lone surrogate code points, which no model or store can "
        "encode; replaced with U+FFFD",
        component,
        count + more,
    )
    return QueryBundle(
        query_str=query_str,
        image_path=query_bundle.image_path,
        custom_embedding_strs=embedding_strs,
        embedding=query_bundle.embedding,
    )


def embedding_strings(query_bundle: QueryBundle, component: str) -> list[str]:
    """The strings to embed for ``query_bundle``.

    Raises:
        ValueError: the query is empty and has no embedding strings: there is nothing to embed
            (core's embedding aggregation would fail with "No embeddings to aggregate").
    """
    strings = query_bundle.embedding_strs
    if not strings:
        raise ValueError(
            f"{component}: the query is empty ({query_bundle.query_str!r}) and has no "
            "embedding: nothing to search for"
        )
    return strings


__all__ = ["clean_query_bundle", "embedding_strings"]
