"""The one configuration pattern, for every public class of the package ([tool.llamahub.
class_authors] in pyproject.toml): settings are pydantic fields readable as attributes,
``to_dict()`` is JSON data with ``class_name`` and no live object, and ``from_dict(data,
**live_objects)`` gives back a component of the same class with the same settings."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomllib
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core.llms import MockLLM
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

import llama_index_ext_advrag as pack
from llama_index_ext_advrag.configuration import Configured, prompt_from_data, setting_names

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = sorted(
    tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["llamahub"][
        "class_authors"
    ]
)
NODES = [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(["FX-40 syncs.", "潜伏期三天。"])]


class ListRetriever(BaseRetriever):
    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=node, score=1.0) for node in NODES]


class KeywordJudge(pack.BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[pack.Grade]:
        return [self.grade(1.0) for _ in texts]


def docstore() -> SimpleDocumentStore:
    store = SimpleDocumentStore()
    store.add_documents(NODES)
    return store


def frame() -> Any:
    import pandas as pd

    return pd.DataFrame({"city": ["Oslo"], "staff": [4]})


# class name -> (a component with at least one non-default setting, its live objects)
Case = Callable[[], tuple[Any, dict[str, Any]]]
CASES: dict[str, Case] = {
    "AdaptiveSlidingWindowNodeParser": lambda: (
        pack.AdaptiveSlidingWindowNodeParser(window_size=4, stride=2, embed_model=HashEmbedding()),
        {},
    ),
    "HierarchicalSentenceNodeParser": lambda: (
        pack.HierarchicalSentenceNodeParser(chunk_sizes=[300, 30]),
        {},
    ),
    "UnitAnnotator": lambda: (pack.UnitAnnotator(), {}),
    "JiebaBM25Retriever": lambda: (
        pack.JiebaBM25Retriever(NODES, similarity_top_k=3, k1=1.1),
        {"nodes": NODES},
    ),
    "HybridFusionRetriever": lambda: (
        pack.HybridFusionRetriever(
            [ListRetriever(), pack.JiebaBM25Retriever(NODES)],
            leg_names=["dense", "bm25"],
            english_only_legs=["dense"],
            mode="score",
        ),
        {"retrievers": [ListRetriever(), pack.JiebaBM25Retriever(NODES)]},
    ),
    "RecursiveIndexNodeRetriever": lambda: (
        pack.RecursiveIndexNodeRetriever("root", {"root": ListRetriever()}, max_depth=2),
        {"retriever_dict": {"root": ListRetriever()}},
    ),
    "SecondHopRetriever": lambda: (
        pack.SecondHopRetriever(ListRetriever(), cue="title", keep_hop1_top=2, hop2_weight=0.5),
        {"retriever": ListRetriever()},
    ),
    "SafePandasQueryEngine": lambda: (
        pack.SafePandasQueryEngine(frame(), llm=MockLLM(), name="sites", max_retries=2),
        {"df": frame()},
    ),
    "SelfRAGQueryEngine": lambda: (
        pack.SelfRAGQueryEngine(
            retriever=ListRetriever(), judge=KeywordJudge(), max_passages=2, llm=None
        ),
        {"retriever": ListRetriever(), "judge": KeywordJudge()},
    ),
    "PrevNextPostprocessor": lambda: (
        pack.PrevNextPostprocessor(docstore=docstore(), num_nodes=2, llm=ScriptedLLM(["x"])),
        {"docstore": docstore()},
    ),
    "DriftAwareWindowPostprocessor": lambda: (
        pack.DriftAwareWindowPostprocessor(
            docstore=docstore(), embed_model=HashEmbedding(), max_expand_steps=3
        ),
        {"docstore": docstore()},
    ),
    "ConsecutiveMergePostprocessor": lambda: (
        pack.ConsecutiveMergePostprocessor(docstore=docstore(), fill_gaps=True, max_gap=3),
        {"docstore": docstore()},
    ),
    "WindowReplacementPostprocessor": lambda: (
        pack.WindowReplacementPostprocessor(top_n=3, skip_covered=False),
        {},
    ),
    "CRAGPostprocessor": lambda: (
        pack.CRAGPostprocessor(
            judge=KeywordJudge(),
            upper=0.7,
            lower=0.2,
            corrective_retriever=ListRetriever(),
            judge_timeout=30.0,
            retrieve_timeout=None,
            web_search_timeout=5.0,
        ),
        {"judge": KeywordJudge()},
    ),
    "JudgeRerankPostprocessor": lambda: (
        pack.JudgeRerankPostprocessor(judge=KeywordJudge(), top_n=2),
        {"judge": KeywordJudge()},
    ),
    "ContextCompressionPostprocessor": lambda: (
        pack.ContextCompressionPostprocessor(
            judge=KeywordJudge(),
            embed_model=HashEmbedding(),
            docstore=docstore(),
            max_context_tokens=300,
            neighbours=2,
            rank_weight=0.25,
            rank_passages=True,
            judge_timeout=5.0,
        ),
        {"judge": KeywordJudge(), "embed_model": HashEmbedding(), "docstore": docstore()},
    ),
    "BaseRelevanceJudge": lambda: (
        pack.BaseRelevanceJudge(name="base", decision_threshold=0.4),
        {},
    ),
    "CrossEncoderRelevanceJudge": lambda: (
        pack.CrossEncoderRelevanceJudge(batch_size=4, scorer=lambda pairs: [0.0] * len(pairs)),
        {},
    ),
    "ColbertRelevanceJudge": lambda: (  # the model loads at first use, not here
        pack.ColbertRelevanceJudge(dimension=64, query_augmentation=False, num_threads=1),
        {},
    ),
    "EmbeddingRelevanceJudge": lambda: (
        pack.EmbeddingRelevanceJudge(embed_model=HashEmbedding(), decision_threshold=0.3),
        {"embed_model": HashEmbedding()},
    ),
    "LLMRelevanceJudge": lambda: (
        pack.LLMRelevanceJudge(llm=MockLLM(), max_concurrency=2),
        {"llm": MockLLM()},
    ),
    "LanguageRoutedJudge": lambda: (
        pack.LanguageRoutedJudge({"en": KeywordJudge()}, cjk_threshold=0.5),
        {"judges": {"en": KeywordJudge()}},
    ),
    "MultilingualE5Embedding": lambda: (pack.MultilingualE5Embedding(embed_batch_size=8), {}),
    "BgeSmallOnnxEmbedding": lambda: (  # the model loads at first use, not here
        pack.BgeSmallOnnxEmbedding(
            embed_batch_size=8, num_threads=None, graph_optimization="basic"
        ),
        {},
    ),
    "CachedEmbedding": lambda: (
        pack.CachedEmbedding(HashEmbedding(), cache_queries=False),
        {"inner": HashEmbedding()},
    ),
}
MILVUS = ("HierarchicalAutoMergingRetriever", "TwoLayerMilvusRetriever")
# Needs a collection with full-text search (Milvus Lite, or a server >= 2.5): its round trip
# is tested beside its other Lite-tier tests.
ELSEWHERE = {
    "MilvusBM25Retriever": "tests/retrievers/test_milvus_bm25.py::test_settings_round_trip"
}


def test_every_public_class_has_a_case() -> None:
    assert set(CASES) | set(MILVUS) | set(ELSEWHERE) == set(PUBLIC)
    root = Path(__file__).resolve().parents[2]
    for where in ELSEWHERE.values():
        path, _, test = where.partition("::")
        assert f"def {test}(" in (root / path).read_text(encoding="utf-8"), where


def check_round_trip(component: Any, live: dict[str, Any]) -> dict[str, Any]:
    cls = type(component)
    data = json.loads(json.dumps(component.to_dict()))  # plain JSON data
    assert data["class_name"] == cls.class_name()
    clone = cls.from_dict(data, **live)
    assert type(clone) is cls
    assert json.loads(json.dumps(clone.to_dict())) == data
    for name in set(data) - {"class_name"}:  # every setting is an attribute
        assert hasattr(component, name), name
    return data


@pytest.mark.parametrize("name", sorted(CASES))
def test_to_dict_from_dict_round_trip(name: str) -> None:
    component, live = CASES[name]()
    data = check_round_trip(component, live)
    live_names = {"llm", "embed_model", "judge", "judges", "docstore", "vector_store", "inner"}
    live_names |= {"nodes", "retrievers", "retriever", "retriever_dict", "df"}
    assert not live_names & set(data), "live objects are never serialised"


@pytest.mark.parametrize(
    "name", ["JiebaBM25Retriever", "HybridFusionRetriever", "CRAGPostprocessor"]
)
def test_a_changed_setting_survives_the_round_trip(name: str) -> None:
    component, live = CASES[name]()
    setting = {"JiebaBM25Retriever": "similarity_top_k", "HybridFusionRetriever": "k"}.get(
        name, "max_rounds"
    )
    setattr(component, setting, 7)  # settings are writable attributes
    again = type(component).from_dict(component.to_dict(), **live)
    assert getattr(again, setting) == 7


def test_crag_timeouts_and_prompts_survive_the_round_trip() -> None:
    from llama_index.core.prompts import PromptTemplate

    crag, live = CASES["CRAGPostprocessor"]()
    crag.update_prompts({"rewrite_prompt": PromptTemplate("Terms of {query}:")})
    data = json.loads(json.dumps(crag.to_dict()))
    assert (data["judge_timeout"], data["retrieve_timeout"], data["web_search_timeout"]) == (
        30.0,
        None,
        5.0,
    )
    again = pack.CRAGPostprocessor.from_dict(data, **live)
    assert again.judge is live["judge"]
    assert again.get_prompts()["rewrite_prompt"].template == "Terms of {query}:"
    with pytest.raises(ValueError, match="judge_timeout"):
        pack.CRAGPostprocessor.from_dict({**data, "judge_timeout": 0}, **live)
    with pytest.raises(ValueError, match="query"):
        pack.CRAGPostprocessor.from_dict({**data, "rewrite_prompt": "no variable"}, **live)


def test_self_rag_prompts_set_through_update_prompts_survive_the_round_trip() -> None:
    from llama_index.core.prompts import PromptTemplate

    engine, live = CASES["SelfRAGQueryEngine"]()
    engine.update_prompts({"rewrite_prompt": PromptTemplate("Again: {query} {avoid}")})
    again = pack.SelfRAGQueryEngine.from_dict(json.loads(json.dumps(engine.to_dict())), **live)
    assert again.get_prompts()["rewrite_prompt"].template == "Again: {query} {avoid}"
    assert set(again.get_prompts()) == set(engine.get_prompts())


def test_the_former_bm25_name_gives_the_new_names_data() -> None:
    with pytest.warns(DeprecationWarning, match="renamed JiebaBM25Retriever"):
        old = pack.BM25Retriever(NODES, similarity_top_k=3)
    data = json.loads(json.dumps(old.to_dict()))
    assert data["class_name"] == "JiebaBM25Retriever"
    assert pack.JiebaBM25Retriever.from_dict(data, nodes=NODES).to_dict() == data


def test_from_dict_refuses_another_class() -> None:
    data = pack.JiebaBM25Retriever(NODES).to_dict()
    with pytest.raises(ValueError, match="'JiebaBM25Retriever', not a 'HybridFusionRetriever'"):
        pack.HybridFusionRetriever.from_dict(data, retrievers=[ListRetriever()])


def test_with_settings_copies_and_shares_the_live_objects() -> None:
    bm25 = pack.JiebaBM25Retriever(NODES, similarity_top_k=2)
    hybrid = pack.HybridFusionRetriever([bm25, ListRetriever()], similarity_top_k=2)
    one = hybrid.with_settings(similarity_top_k=1)
    assert (one.similarity_top_k, hybrid.similarity_top_k) == (1, 2)
    assert one.legs[0] is hybrid.legs[0] is bm25
    assert len(one.retrieve("FX-40")) == 1 and len(hybrid.retrieve("FX-40")) == 2
    assert isinstance(one, Configured)
    with pytest.raises(ValueError, match="similarity_top_k"):
        hybrid.with_settings(similarity_top_k=0)
    assert "similarity_top_k" in setting_names(pack.HybridFusionRetriever)


def test_prompt_settings_round_trip_chat_and_string_templates() -> None:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.prompts import ChatPromptTemplate, PromptTemplate

    chat = ChatPromptTemplate(message_templates=[ChatMessage(role="user", content="q {x}")])
    for prompt in (PromptTemplate("hi {x}"), chat):
        again = prompt_from_data(json.loads(json.dumps(prompt.model_dump(mode="json"))))
        assert type(again) is type(prompt) and again.format(x=1) == prompt.format(x=1)
    with pytest.raises(ValueError, match="template"):
        prompt_from_data({"metadata": {}})


@pytest.mark.milvus_lite
@pytest.mark.parametrize("name", MILVUS)
def test_milvus_retrievers_round_trip(name: str, tmp_path: Path) -> None:
    from llama_index.core import Document

    cls = getattr(pack, name)
    documents = [
        Document(text="The FX-40 syncs every 15 minutes. It has a battery.", id_="a"),
        Document(text="Receipts are needed from 25 euros. Keep them.", id_="b"),
    ]
    options = {"uri": str(tmp_path / "m.db"), "embed_model": HashEmbedding(dim=16)}
    built = cls.from_documents(documents, **options)
    try:
        data = built.to_dict()
        assert data["uri"] == options["uri"] and data["collection_name"]
        clone = cls.from_dict(json.loads(json.dumps(data)), embed_model=HashEmbedding(dim=16))
        try:
            assert clone.to_dict() == data
            query = "How often does the FX-40 sync?"
            ids = [n.node.node_id for n in clone.retrieve(query)]
            assert ids == [n.node.node_id for n in built.retrieve(query)] != []
        finally:
            clone.close()
    finally:
        built.close()
