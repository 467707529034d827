"""The Milvus BM25 leg against a scripted Milvus client (unit tier): the exact search it sends,
the scores and traces it returns, sync and async, and how the lexical leg is chosen (kills the
mutants of retrievers/milvus_bm25.py that the Milvus Lite tests in test_milvus_bm25.py cannot
reach in the unit-tier mutation run)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from llama_index.core.schema import TextNode
from llama_index.vector_stores.milvus import MilvusVectorStore
from pymilvus import FunctionType

from llama_index_ext_advrag import TRACE_KEY
from llama_index_ext_advrag.milvus.full_text import TERMS_FIELD, FullTextAnalyzer
from llama_index_ext_advrag.retrievers import JiebaBM25Retriever, MilvusBM25Retriever
from llama_index_ext_advrag.retrievers.milvus_bm25 import (
    BACKEND_BM25S,
    BACKEND_MILVUS,
    LexicalChoice,
    choose_lexical_leg,
    search_data,
    vector_store_of,
)
from llama_index_ext_advrag.text.words import WordTokenizer

LITE = "milvus_lite-3.2.2"


class ScriptedClient:
    """``get_server_version``, ``describe_collection`` and ``search`` of a MilvusClient."""

    def __init__(self, version: str = LITE, bm25: bool = True, source: str = TERMS_FIELD):
        self.version, self.bm25, self.source = version, bm25, source
        self.searches: list[dict[str, Any]] = []

    def get_server_version(self) -> str:
        return self.version

    def describe_collection(self, name: str) -> dict[str, Any]:
        functions = [
            {
                "type": FunctionType.BM25,
                "input_field_names": [self.source],
                "output_field_names": ["sparse"],
            }
        ]
        return {"fields": [{"name": self.source}], "functions": functions if self.bm25 else []}

    def search(self, **kwargs: Any) -> str:
        self.searches.append(kwargs)
        return "found"


class AsyncClient:
    def __init__(self, client: ScriptedClient) -> None:
        self.client = client

    async def search(self, **kwargs: Any) -> str:
        return self.client.search(**kwargs)


class ScriptedStore(MilvusVectorStore):
    """A MilvusVectorStore (for the isinstance check) whose client is scripted."""

    @property
    def client(self) -> Any:
        return self.__dict__["_scripted"]

    @property
    def aclient(self) -> Any:
        return AsyncClient(self.__dict__["_scripted"])

    def _parse_from_milvus_results(self, found: Any) -> tuple[list, list, list]:
        assert found == "found"
        nodes = [TextNode(text="first", id_="a"), TextNode(text="second", id_="b")]
        return nodes, [-2.5, -1.0], ["a", "b"]  # Milvus Lite reports BM25 negated


def store_with(client: ScriptedClient, output_fields: list[str] | None = None) -> ScriptedStore:
    store = ScriptedStore.model_construct(collection_name="docs", output_fields=output_fields or [])
    store.__dict__["_scripted"] = client
    return store


class Index:
    def __init__(self, store: Any) -> None:
        self.vector_store = store


MODES = ["sync", "async"]


def retrieve(retriever: Any, query: str, mode: str) -> list:
    if mode == "async":
        return asyncio.run(retriever.aretrieve(query))
    return retriever.retrieve(query)


@pytest.mark.parametrize("mode", MODES)
def test_the_search_sent_and_the_results_returned(mode: str) -> None:
    client = ScriptedClient()
    retriever = MilvusBM25Retriever(store_with(client), similarity_top_k=7)
    assert MilvusBM25Retriever.class_name() == "MilvusBM25Retriever"
    results = retrieve(retriever, "Pumps running", mode)
    assert client.searches == [
        {
            "collection_name": "docs",
            "data": [" ".join(WordTokenizer().tokenize("Pumps running"))],
            "anns_field": "sparse",
            "limit": 7,
            "output_fields": ["*"],
            "search_params": {"metric_type": "BM25", "params": {"drop_ratio_search": 0.0}},
        }
    ]
    assert [(r.node.node_id, r.score) for r in results] == [("a", 2.5), ("b", 1.0)]
    assert [r.node.metadata[TRACE_KEY]["bm25"] for r in results] == [
        {"rank": 1, "score": 2.5, "backend": "milvus"},
        {"rank": 2, "score": 1.0, "backend": "milvus"},
    ]


@pytest.mark.parametrize("mode", MODES)
def test_the_stores_output_fields_and_milvus_own_analyzer(mode: str) -> None:
    client = ScriptedClient(source="text")  # a collection analysed by Milvus: query as typed
    retriever = MilvusBM25Retriever(store_with(client, ["title", "year"]))
    assert retriever.support.analyzer is FullTextAnalyzer.STANDARD
    retrieve(retriever, "  Pumps running ", mode)
    [search] = client.searches
    assert search["data"] == ["Pumps running"] and search["output_fields"] == ["title", "year"]
    assert search["limit"] == 10 and search["anns_field"] == "sparse"


@pytest.mark.parametrize("mode", MODES)
def test_a_query_without_terms_sends_nothing(mode: str) -> None:
    client = ScriptedClient()
    assert retrieve(MilvusBM25Retriever(store_with(client)), "the of ,", mode) == []
    assert client.searches == []


def test_search_data_by_analyzer() -> None:
    tokenizer = WordTokenizer()
    assert search_data(" 带薪年假 days ", FullTextAnalyzer.PACK, tokenizer) == " ".join(
        tokenizer.tokenize(" 带薪年假 days ")
    )
    assert search_data(" 带薪年假 days ", FullTextAnalyzer.JIEBA, tokenizer) == "带薪年假 days"
    assert search_data(" x ", None, tokenizer) == "x"


def test_a_collection_without_full_text_is_refused_by_name() -> None:
    with pytest.raises(ValueError) as error:
        MilvusBM25Retriever(store_with(ScriptedClient(bm25=False)))
    assert str(error.value) == (
        "vector store 'docs' cannot serve full-text search: Milvus Lite 3.2.2 has full-text "
        "search, but collection 'docs' has no BM25 function (open it with full_text=... when "
        "creating it); use JiebaBM25Retriever(nodes) instead"
    )
    with pytest.raises(ValueError, match="Milvus server 2.3.21 has no full-text search"):
        MilvusBM25Retriever(store_with(ScriptedClient(version="v2.3.21")))


NODES = [TextNode(text="pump pressure", id_="n1"), TextNode(text="valve", id_="n2")]


def test_choosing_the_lexical_leg() -> None:
    leg, choice = choose_lexical_leg(Index(store_with(ScriptedClient())))
    assert isinstance(leg, MilvusBM25Retriever) and choice == LexicalChoice(
        BACKEND_MILVUS,
        "Milvus Lite 3.2.2 has full-text search; collection 'docs' has a BM25 function "
        "(advrag_terms -> sparse)",
    )
    assert choice.to_dict() == {"backend": "milvus", "reason": choice.reason}
    leg, choice = choose_lexical_leg(Index(store_with(ScriptedClient(bm25=False))), NODES)
    assert isinstance(leg, JiebaBM25Retriever) and choice.backend == BACKEND_BM25S
    assert choice.reason.endswith(
        "has no BM25 function (open it with full_text=... when creating it)"
    )
    leg, choice = choose_lexical_leg(object(), NODES)
    assert isinstance(leg, JiebaBM25Retriever)
    assert choice == LexicalChoice("bm25s", "the vector store is NoneType, not Milvus")
    with pytest.raises(ValueError) as error:
        choose_lexical_leg(Index(store_with(ScriptedClient(version="v2.3.21"))))
    assert str(error.value) == (
        "give nodes or bm25_retriever for the BM25 leg, got neither, and the vector store has "
        "no full-text search (Milvus server 2.3.21 has no full-text search (needs >= 2.5.0))"
    )


def test_vector_store_of() -> None:
    store = store_with(ScriptedClient())
    assert vector_store_of(Index(store)) is store and vector_store_of(object()) is None


class EmptyStore(ScriptedStore):
    def _parse_from_milvus_results(self, found: Any) -> tuple[list, list, list]:
        return [], [], []


@pytest.mark.parametrize("mode", MODES)
def test_no_row_found_is_logged_with_the_query(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    logger = "llama_index_ext_advrag.retrievers.milvus_bm25"
    empty = EmptyStore.model_construct(collection_name="docs", output_fields=[])
    empty.__dict__["_scripted"] = ScriptedClient()
    with caplog.at_level(logging.DEBUG, logger=logger):
        assert retrieve(MilvusBM25Retriever(empty), "valve", mode) == []
        assert caplog.messages == ["Milvus BM25 found no row sharing a term with 'valve'"]
        caplog.clear()
        assert retrieve(MilvusBM25Retriever(store_with(ScriptedClient())), "valve", mode)
        assert caplog.messages == []


@pytest.mark.parametrize("mode", MODES)
def test_a_query_with_lone_surrogates_is_cleaned_naming_the_retriever(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = ScriptedClient(source="text")
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.queries"):
        retrieve(MilvusBM25Retriever(store_with(client)), "pump \ud800", mode)
    assert client.searches[0]["data"] == ["pump \ufffd"]
    assert caplog.messages[0].startswith("MilvusBM25Retriever: the query holds 1 lone surrogate")


def test_the_deprecated_as_dict_names_its_replacement() -> None:
    choice = LexicalChoice("bm25s", "no sparse field")
    with pytest.warns(DeprecationWarning) as warned:
        assert choice.as_dict() == {"backend": "bm25s", "reason": "no sparse field"}
    assert str(warned[0].message) == (
        "LexicalChoice.as_dict() is deprecated and will be removed in the next release: "
        "use to_dict()"
    )
