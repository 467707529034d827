"""The query helpers in exact words: cleaning a bundle keeps its image, embedding strings and
embedding, counts every surrogate, names the component; an empty query and a missing one are
refused in words; the keyword rewrite keeps a query it cannot shorten (kills the mutants of
queries.py)."""

from __future__ import annotations

import logging

import pytest
from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag.queries import (
    clean_query_bundle,
    distinctive_terms,
    embedding_strings,
    query_text,
)


def test_cleaning_keeps_everything_but_the_surrogates(caplog: pytest.LogCaptureFixture) -> None:
    bundle = QueryBundle(
        "pump \ud800",
        image_path="pump.png",
        custom_embedding_strs=["a \udc00", "b \ud800\ud800"],
        embedding=[0.5, 0.25],
    )
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.queries"):
        clean = clean_query_bundle(bundle, "Demo")
    assert clean.query_str == "pump \ufffd"
    assert clean.custom_embedding_strs == ["a \ufffd", "b \ufffd\ufffd"]
    assert (clean.image_path, clean.embedding) == ("pump.png", [0.5, 0.25])
    assert caplog.messages == [
        "Demo: the query holds 4 lone surrogate code points, which no model or store can "
        "encode; replaced with U+FFFD"
    ]
    assert bundle.query_str == "pump \ud800"  # the caller's bundle is not changed


def test_a_clean_bundle_is_returned_as_it_is(caplog: pytest.LogCaptureFixture) -> None:
    bundle = QueryBundle("pump", custom_embedding_strs=["a"])
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.queries"):
        assert clean_query_bundle(bundle, "Demo") is bundle
    assert caplog.records == []
    only_embedding = QueryBundle("pump", custom_embedding_strs=["x \ud800"])
    assert clean_query_bundle(only_embedding, "Demo").custom_embedding_strs == ["x \ufffd"]


def test_empty_and_missing_queries_are_refused_in_words() -> None:
    assert embedding_strings(QueryBundle("pump"), "Demo") == ["pump"]
    with pytest.raises(ValueError) as error:
        embedding_strings(QueryBundle(""), "Demo")
    assert str(error.value) == (
        "Demo: the query is empty ('') and has no embedding: nothing to search for"
    )
    assert query_text(QueryBundle("pump")) == "pump"
    with pytest.raises(ValueError) as error:
        query_text(None)
    assert str(error.value) == "a query is required: pass query_bundle or query_str"


def test_the_keyword_rewrite() -> None:
    assert distinctive_terms("the pump and the Pump pump") == "pump"
    assert distinctive_terms("what is it") == "what"
    assert distinctive_terms("the incubation period") == "incubation period"
    assert distinctive_terms("the of and") == "the of and"  # nothing left: the query itself


def test_a_query_bundle_holding_text_is_retrieved_and_one_holding_bytes_is_refused() -> None:
    """A retriever takes a QueryBundle of text (sync and async) and refuses one whose query_str
    is bytes, naming the bundle and the type (kills the query-type check's bundle mutants)."""
    import asyncio

    from llama_index.core.schema import TextNode

    from llama_index_ext_advrag.retrievers import JiebaBM25Retriever

    bm25 = JiebaBM25Retriever([TextNode(text="kettle boils water", id_="k")])
    assert [hit.node.node_id for hit in bm25.retrieve(QueryBundle("kettle"))] == ["k"]
    assert [hit.node.node_id for hit in bm25.retrieve("kettle")] == ["k"]
    hits = asyncio.run(bm25.aretrieve(QueryBundle("kettle")))
    assert [hit.node.node_id for hit in hits] == ["k"]
    refused = r"^JiebaBM25Retriever takes a query as str or QueryBundle, got QueryBundle with a "
    bad = QueryBundle("x")
    bad.query_str = b"kettle"  # type: ignore[assignment]
    with pytest.raises(TypeError, match=refused + r"query_str of type bytes \(b'kettle'\): decode"):
        bm25.retrieve(bad)
    with pytest.raises(TypeError, match=refused + r"query_str of type bytes"):
        asyncio.run(bm25.aretrieve(bad))
