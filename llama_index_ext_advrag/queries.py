"""Queries every stage can encode, and the query helpers several components share.

A query with a lone surrogate (``"\\ud800"``) fails far from its cause: a Hugging Face
embedding model raises a ``TypeError`` from its tokenizer (and core retries it for seconds),
hashing and Milvus raise ``UnicodeEncodeError``, and a hybrid retriever whose dense leg failed
answers from BM25 alone. Each retriever of the pack passes its query through
:func:`clean_query_bundle` first: the surrogates become U+FFFD, with a warning.

:func:`query_text` is the query a postprocessor requires; :func:`distinctive_terms` is the
keyword rewrite CRAG and Self-RAG use without an LLM, and :func:`choose_rewrite` the one rule
both follow to pick a rewritten query (the LLM's, else the keywords, else the original).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag.text import clean_value, has_lone_surrogates
from llama_index_ext_advrag.text.words import ChineseMode, WordTokenizer

logger = logging.getLogger(__name__)

_KEYWORDS = WordTokenizer(stem=False, chinese_mode=ChineseMode.ACCURATE, chinese_characters=False)


def check_query_type(query: Any, component: str) -> None:
    """Refuse a query that is neither a ``str`` nor a ``QueryBundle`` holding one (core would
    fail later with an ``AttributeError`` naming neither).

    >>> check_query_type(b"kettle", "demo")
    Traceback (most recent call last):
    ...
    TypeError: demo takes a query as str or QueryBundle, got bytes (b'kettle'): decode it first
    """
    text = query.query_str if isinstance(query, QueryBundle) else query
    if isinstance(text, str):
        return
    what = "QueryBundle with a query_str of type " if isinstance(query, QueryBundle) else ""
    hint = ": decode it first" if isinstance(text, (bytes, bytearray)) else ""
    raise TypeError(
        f"{component} takes a query as str or QueryBundle, got {what}{type(text).__name__} "
        f"({str(text)[:60]}){hint}"
    )


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


def query_text(query_bundle: QueryBundle | None) -> str:
    """The query string of ``query_bundle``; a postprocessor that grades needs one.

    Raises:
        ValueError: ``query_bundle`` is ``None``.
    """
    if query_bundle is None:
        raise ValueError("a query is required: pass query_bundle or query_str")
    return query_bundle.query_str


def distinctive_terms(query: str) -> str:
    """The query's content words (stop words dropped, order kept, no repeats): the rewrite
    used without an LLM.

    >>> distinctive_terms("What is the incubation period of the virus?")
    'what incubation period virus'
    """
    terms = list(dict.fromkeys(_KEYWORDS.tokenize(query)))
    return " ".join(terms) if terms else query


def rewrite_avoid(tried: Sequence[str]) -> str:
    """The ``{avoid}`` value of a rewrite prompt: one ``Not: query`` line per query tried."""
    return "".join(f"Not: {query}\n" for query in tried)


def read_rewrite(reply: str) -> str:
    """An LLM's rewritten query: the reply's first non-empty line, without surrounding quotes.

    >>> read_rewrite('\n "incubation period of SARS-CoV-2"\nbecause ...')
    'incubation period of SARS-CoV-2'
    """
    for line in reply.splitlines():
        line = line.strip().strip("\"'`")
        if line:
            return line
    return ""


def choose_rewrite(
    query: str, tried: Sequence[str], llm_rewrite: str | None = None
) -> tuple[str, str] | None:
    """The rewritten query and how it was made: the LLM's rewrite (``"llm"``), else the
    query's distinctive terms (``"keywords"``), else the query itself (``"original"``): the
    first of them that is not empty and not in ``tried``; ``None`` when all were tried.

    >>> choose_rewrite("What is the incubation period?", ["What is the incubation period?"])
    ('what incubation period', 'keywords')
    >>> choose_rewrite("period", ["period"], llm_rewrite="period") is None
    True
    """
    for candidate, method in (
        (llm_rewrite, "llm"),
        (distinctive_terms(query), "keywords"),
        (query, "original"),
    ):
        if candidate and candidate not in tried:
            return candidate, method
    return None


__all__ = [
    "check_query_type",
    "choose_rewrite",
    "clean_query_bundle",
    "distinctive_terms",
    "embedding_strings",
    "query_text",
    "read_rewrite",
    "rewrite_avoid",
]
