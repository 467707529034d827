"""ConfiguredRetriever's own behaviour: verbose recursive retrieval, the deprecated config=
argument, and the query-type refusal naming the retriever (sync and async). Kills the mutants
of retrievers/_config.py that the retriever tests leave alive (mutation testing, issue #39)."""

from __future__ import annotations

import asyncio
import warnings

import pytest
from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.retrievers._config import ConfiguredRetriever

pytestmark = pytest.mark.unit


class Pointer(ConfiguredRetriever):
    """Returns one IndexNode pointing at a text node (core then retrieves from the object)."""

    similarity_top_k: int = Field(default=2, ge=1)

    @classmethod
    def class_name(cls) -> str:
        return "PointerRetriever"

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        target = TextNode(text="kettle note", id_="target")
        return [
            NodeWithScore(node=IndexNode(text="to target", index_id="t", obj=target), score=0.5)
        ]


def test_verbose_retrieval_prints_the_recursion_and_quiet_is_the_default(capsys) -> None:
    assert [n.node.node_id for n in Pointer().retrieve("kettle")] == ["target"]
    assert capsys.readouterr().out == ""
    assert [n.node.node_id for n in Pointer(verbose=True).retrieve("kettle")] == ["target"]
    assert "Retrieving from object TextNode with query kettle" in capsys.readouterr().out


def test_the_deprecated_config_argument_is_applied_and_names_the_retriever() -> None:
    with pytest.warns(DeprecationWarning, match=r"^Pointer\(config=\.\.\.\) is deprecated"):
        retriever = Pointer(config={"similarity_top_k": 7})
    assert retriever.similarity_top_k == 7
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Pointer(similarity_top_k=3).similarity_top_k == 3  # no config: no warning


def test_a_bytes_query_is_refused_naming_the_retriever_sync_and_async() -> None:
    with pytest.raises(
        TypeError, match=r"^PointerRetriever takes a query as str or QueryBundle, got bytes"
    ):
        Pointer().retrieve(b"kettle")  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"^PointerRetriever takes a query as str or QueryBundle, got bytes"
    ):
        asyncio.run(Pointer().aretrieve(b"kettle"))  # type: ignore[arg-type]


def test_a_text_query_is_retrieved_sync_and_async() -> None:
    assert [n.node.node_id for n in Pointer().retrieve("kettle")] == ["target"]
    assert [n.node.node_id for n in asyncio.run(Pointer().aretrieve("kettle"))] == ["target"]
