"""RecursiveIndexNodeRetriever pinned exactly (found by mutation testing, issue #39): answer
ids, the topic builder's defaults and descriptions, the trace of answers and their sources, a
pointer to a single node (sync and async), the query a sub-retriever receives, and the
component named in a cleaned query's warning."""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.retrievers import RecursiveIndexNodeRetriever
from llama_index_ext_advrag.retrievers.recursive import answer_id
from llama_index_ext_advrag.trace import TRACE_KEY


class ListRetriever(BaseRetriever):
    """Returns fixed results; records the queries it was asked."""

    def __init__(self, results: list[NodeWithScore]) -> None:
        self.results, self.queries = results, []
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        return list(self.results)


class Engine(BaseQueryEngine):
    def __init__(self, response: Any) -> None:
        self.response = response
        super().__init__(callback_manager=None)

    def _get_prompt_modules(self) -> dict:
        return {}

    def _query(self, query_bundle: QueryBundle) -> Any:
        return self.response

    async def _aquery(self, query_bundle: QueryBundle) -> Any:
        return self.response


def pointer(node_id: str, target: str, score: float = 1.0) -> NodeWithScore:
    node = IndexNode(text=f"pointer to {target}", index_id=target, id_=node_id)
    return NodeWithScore(node=node, score=score)


def route(result: NodeWithScore) -> dict:
    return result.node.metadata[TRACE_KEY]["recursive"]


def retrieve(retriever: RecursiveIndexNodeRetriever, query: str, use_async: bool) -> list:
    if use_async:
        return asyncio.run(retriever.aretrieve(query))
    return retriever.retrieve(query)


def test_answer_id_is_the_target_and_16_hex_digits_of_the_query() -> None:
    digest = hashlib.sha1(b"qe\x00what?").hexdigest()[:16]
    assert answer_id("qe", "what?") == f"qe::answer::{digest}"


def test_from_topics_retrieves_three_per_topic_and_uses_the_descriptions() -> None:
    texts = [f"Firmware note number {i}." for i in range(5)]
    router = RecursiveIndexNodeRetriever.from_topics(
        {"firmware": texts},
        {"firmware": "Everything about firmware"},
        embed_model=HashEmbedding(dim=8),
    )
    topic = router.retriever_dict["topic::firmware"]
    assert len(topic.retrieve("firmware")) == 3
    (hit,) = router.retriever_dict["root"].retrieve("firmware")
    assert hit.node.get_content() == "Everything about firmware"


def test_an_answer_and_its_sources_are_traced_as_the_engines() -> None:
    source = NodeWithScore(node=TextNode(text="source", id_="src"), score=0.4)
    router = RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={"root": ListRetriever([pointer("p", "qe")])},
        query_engine_dict={"qe": Engine(Response(response="42", source_nodes=[source]))},
    )
    answer, src = router.retrieve("q")
    assert route(answer) == {
        "route": ["root", "qe"],
        "depth": 1,
        "kind": "query_engine",
        "answer": True,
        "engine": {},
    }
    assert route(src) == {
        "route": ["root", "qe"],
        "depth": 1,
        "kind": "query_engine",
        "source_of": "qe",
    }


@pytest.mark.parametrize("use_async", [False, True])
def test_a_pointer_to_a_node_keeps_the_pointers_score(use_async: bool) -> None:
    router = RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={"root": ListRetriever([pointer("p", "n", score=0.8)])},
        node_dict={"n": TextNode(text="the node", id_="n")},
    )
    (hit,) = retrieve(router, "q", use_async)
    assert (hit.node.node_id, hit.node.get_content(), hit.score) == ("n", "the node", 0.8)


@pytest.mark.parametrize("use_async", [False, True])
def test_a_sub_retriever_gets_the_query(use_async: bool) -> None:
    sub = ListRetriever([NodeWithScore(node=TextNode(text="s", id_="s"), score=0.5)])
    router = RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={"root": ListRetriever([pointer("p", "sub")]), "sub": sub},
    )
    retrieve(router, "where is it?", use_async)
    assert sub.queries == ["where is it?"]


def test_a_cleaned_query_is_warned_naming_the_retriever(caplog: pytest.LogCaptureFixture) -> None:
    router = RecursiveIndexNodeRetriever(root_id="root", retriever_dict={"root": ListRetriever([])})
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.queries"):
        router.retrieve("bad \ud800")
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("RecursiveIndexNodeRetriever: the query holds 1 lone surrogate")


def test_an_unfollowed_pointer_becomes_a_text_node_with_all_its_fields() -> None:
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo

    from llama_index_ext_advrag.retrievers.recursive import pointer_as_text

    node = IndexNode(
        text="to x",
        index_id="x",
        id_="p",
        metadata={"topic": "x", "secret": 1},
        excluded_llm_metadata_keys=["secret"],
        excluded_embed_metadata_keys=["topic"],
        relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id="doc")},
    )
    plain = pointer_as_text(node)
    assert type(plain) is TextNode and (plain.node_id, plain.text) == ("p", "to x")
    assert plain.metadata == {"topic": "x", "secret": 1}
    assert plain.excluded_llm_metadata_keys == ["secret"]
    assert plain.excluded_embed_metadata_keys == ["topic"]
    assert plain.relationships[NodeRelationship.SOURCE].node_id == "doc"


def test_a_pointer_to_nowhere_is_named() -> None:
    router = RecursiveIndexNodeRetriever(
        root_id="root", retriever_dict={"root": ListRetriever([pointer("p", "gone")])}
    )
    with pytest.raises(ValueError) as raised:
        router.retrieve("q")
    assert str(raised.value) == (
        "IndexNode 'p' points to index_id 'gone', which is in no retriever_dict, "
        "query_engine_dict or node_dict and has no obj"
    )


def test_a_node_reached_twice_is_returned_once_and_the_result_event_has_its_route() -> None:
    from advrag_testing import instrumented

    from llama_index_ext_advrag.events import RecursiveResultEvent

    same = NodeWithScore(node=TextNode(text="same", id_="same"), score=0.5)
    router = RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={
            "root": ListRetriever([same, pointer("p", "sub")]),
            "sub": ListRetriever([same]),
        },
    )
    with instrumented() as (events, _):
        results = router.retrieve("q")
    assert [r.node.node_id for r in results] == ["same"]
    (event,) = [e for e in events if isinstance(e, RecursiveResultEvent)]
    assert event.results == [{"node_id": "same", "route": ["root"], "depth": 0}]


def frames() -> dict:
    import pandas as pd

    return {"prices": pd.DataFrame({"fruit": ["apple", "pear"], "price": [1.0, 2.0]})}


def test_from_dataframes_passes_the_limits_the_timeout_and_the_settings() -> None:
    from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits

    built = RecursiveIndexNodeRetriever.from_dataframes(
        frames(),
        summarize=False,
        limits=SandboxLimits(max_chars=500),
        timeout_seconds=7.5,
        embed_model=HashEmbedding(dim=8),
        max_depth=2,
    )
    limits = built.query_engine_dict["table::prices"].limits
    assert (limits.timeout_seconds, limits.max_chars) == (7.5, 500)
    assert built.max_depth == 2
    given = RecursiveIndexNodeRetriever.from_dataframes(
        frames(),
        summarize=False,
        limits=SandboxLimits(max_chars=400),
        embed_model=HashEmbedding(dim=8),
    )
    assert given.query_engine_dict["table::prices"].limits.max_chars == 400
    default = RecursiveIndexNodeRetriever.from_dataframes(
        frames(), summarize=False, timeout_seconds=9.0, embed_model=HashEmbedding(dim=8)
    )
    assert default.query_engine_dict["table::prices"].limits.max_chars == SandboxLimits().max_chars


def test_a_summary_prompt_without_its_variable_is_named() -> None:
    with pytest.raises(ValueError, match="^summary_prompt lacks the variables"):
        RecursiveIndexNodeRetriever.from_dataframes(frames(), summary_prompt="no variable here")


def test_from_pointers_uses_the_given_store_and_weights() -> None:
    from llama_index.core.vector_stores import SimpleVectorStore

    store = SimpleVectorStore()
    pointers = [IndexNode(text="pointer to the apple price table", index_id="a", id_="pa")]
    built = RecursiveIndexNodeRetriever.from_pointers(
        pointers,
        retriever_dict={"a": ListRetriever([])},
        embed_model=HashEmbedding(dim=8),
        vector_store=store,
        root_weights=(0.25, 0.75),
        max_concurrency=2,
    )
    assert list(store.data.embedding_dict) == ["pa"]
    assert list(built.retriever_dict["root"].weights) == [0.25, 0.75]
    assert built.max_concurrency == 2


def test_a_cycle_is_warned_and_traced_with_its_target(caplog: pytest.LogCaptureFixture) -> None:
    router = RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={
            "root": ListRetriever([pointer("p", "sub")]),
            "sub": ListRetriever([pointer("back", "root")]),
        },
    )
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.retrievers.recursive"):
        (stopped,) = router.retrieve("q")
    assert caplog.messages == ["cycle: back leads back to root on route ('root', 'sub')"]
    assert route(stopped) == {
        "route": ["root", "sub"],
        "depth": 1,
        "stopped": "cycle",
        "kind": "retriever",
        "via": "p",
        "index_id": "root",
    }


def via_node_dict(inner: IndexNode) -> RecursiveIndexNodeRetriever:
    """A root pointing at a node_dict entry that is itself a pointer (core's retrieve never
    resolves it: the node comes from the dict, not from a retriever)."""
    return RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={"root": ListRetriever([pointer("p", "n")])},
        node_dict={"n": inner},
    )


def test_a_pointer_from_the_node_dict_carrying_its_retriever_is_followed() -> None:
    inline = ListRetriever([NodeWithScore(node=TextNode(text="in", id_="in"), score=0.5)])
    router = via_node_dict(IndexNode(text="to inline", index_id="inline", id_="n", obj=inline))
    (hit,) = router.retrieve("q")
    assert hit.node.node_id == "in" and route(hit)["route"] == ["root", "n", "inline"]


def test_an_unroutable_obj_is_named_with_its_type() -> None:
    router = via_node_dict(IndexNode(text="to x", index_id="x", id_="n", obj=42))
    with pytest.raises(ValueError, match="^index_id 'x' leads to an unroutable int$"):
        router.retrieve("q")
