"""50 concurrent async queries through hybrid fusion and the drift-aware window (and CRAG with a
scripted LLM judge) give the same results as the same queries one by one (Milvus Lite and the
server). Timing is measured by
``benchmarks/soak_queries.py``, not here."""

from __future__ import annotations

import asyncio

import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Document, StorageContext, VectorStoreIndex

from llama_index_ext_advrag import (
    AdaptiveSlidingWindowNodeParser,
    DriftAwareWindowPostprocessor,
    HybridFusionRetriever,
    JiebaBM25Retriever,
    UnitAnnotator,
)
from llama_index_ext_advrag.judges import LLMRelevanceJudge
from llama_index_ext_advrag.milvus import flush, open_vector_store
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor
from llama_index_ext_advrag.trace import TRACE_KEY

TOPICS = [
    ("Cats", "purr when they are content", "sleep most of the day"),
    ("Dogs", "bark at strangers", "guard the house at night"),
    ("Birds", "sing at dawn", "migrate south in winter"),
    ("Fish", "swim in schools", "breathe through gills"),
    ("Cows", "chew the cud", "give milk every day"),
]
QUERIES = [f"{topic} {fact}" for topic, a, b in TOPICS for fact in (a, b)] * 5


def _documents() -> list[Document]:
    return [
        Document(
            text=" ".join(
                f"{topic} {fact}. They are {topic.lower()} number {i}."
                for i, fact in enumerate((a, b))
            ),
            id_=topic.lower(),
        )
        for topic, a, b in TOPICS
    ]


def _snapshot(results) -> list[tuple[str, float | None, str]]:
    return [(r.node.node_id, r.score, r.node.get_content()) for r in results]


@pytest.mark.timeout(900)
def test_concurrent_queries_equal_sequential_ones(milvus_uri, collection_name, drop_after) -> None:
    embed = HashEmbedding()
    nodes = AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(_documents())
    nodes = UnitAnnotator()(nodes)
    store = open_vector_store(milvus_uri, collection_name, dim=embed.dim, overwrite=True)
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    flush(store)
    hybrid = HybridFusionRetriever(
        [index.as_retriever(similarity_top_k=4), JiebaBM25Retriever(nodes)],
        leg_names=["dense", "bm25"],
        similarity_top_k=3,
    )
    window = DriftAwareWindowPostprocessor(vector_store=store, embed_model=embed)

    async def one(query: str):
        hits = await hybrid.aretrieve(query)
        return _snapshot(await window.apostprocess_nodes(hits, query_str=query))

    async def one_by_one():
        return [await one(query) for query in QUERIES]

    async def concurrently():
        return await asyncio.gather(*(one(query) for query in QUERIES))

    sequential = asyncio.run(one_by_one())
    concurrent = asyncio.run(concurrently())  # a second event loop, too
    assert len(concurrent) == len(QUERIES) == 50
    assert all(sequential), "a query returned nothing"
    assert concurrent == sequential
    for query, results in zip(QUERIES, sequential, strict=True):
        assert query.split()[0] in results[0][2], query  # and the answers are the right ones


def _topic_judge_llm() -> ScriptedLLM:
    """Answers the relevance prompt with yes when the question's topic is in the passage, and
    the rewrite prompt with the topic: deterministic, whatever the order of the calls."""

    def answer(prompt: str) -> str:
        if "Rewrite the question" in prompt:
            return prompt.split("Question: ")[-1].split()[0]
        question = prompt.split("Question: ")[1].split("\n")[0]
        passage = prompt.split("Passage: ")[1].split("\nDoes the passage")[0]
        return "yes" if question.split()[0].lower() in passage.lower() else "no"

    return ScriptedLLM(answer)


@pytest.mark.timeout(900)
def test_concurrent_crag_queries_equal_sequential_ones(
    milvus_uri, collection_name, drop_after
) -> None:
    """Hybrid fusion, then CRAG (an LLM judge and an LLM rewrite, scripted; corrective
    retrieval through the same hybrid retriever), then the drift-aware window."""
    embed = HashEmbedding()
    nodes = AdaptiveSlidingWindowNodeParser(window_size=1).get_nodes_from_documents(_documents())
    nodes = UnitAnnotator()(nodes)
    store = open_vector_store(milvus_uri, collection_name, dim=embed.dim, overwrite=True)
    index = VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed
    )
    flush(store)
    hybrid = HybridFusionRetriever(
        [index.as_retriever(similarity_top_k=4), JiebaBM25Retriever(nodes)],
        leg_names=["dense", "bm25"],
        similarity_top_k=3,
    )
    llm = _topic_judge_llm()
    crag = CRAGPostprocessor(
        judge=LLMRelevanceJudge(llm=llm, max_concurrency=4),
        upper=0.5,
        lower=0.5,
        corrective_retriever=hybrid,
        llm=llm,
    )
    window = DriftAwareWindowPostprocessor(vector_store=store, embed_model=embed)

    async def one(query: str):
        hits = await hybrid.aretrieve(query)
        graded = await crag.apostprocess_nodes(hits, query_str=query)
        results = await window.apostprocess_nodes(graded, query_str=query)
        return _snapshot(results), [
            r.node.metadata[TRACE_KEY]["crag"].get("action") for r in results
        ]

    async def one_by_one():
        return [await one(query) for query in QUERIES]

    async def concurrently():
        return await asyncio.gather(*(one(query) for query in QUERIES))

    sequential = asyncio.run(one_by_one())
    concurrent = asyncio.run(concurrently())
    assert len(concurrent) == len(QUERIES) == 50
    assert all(results for results, _ in sequential), "a query returned nothing"
    assert concurrent == sequential
    for query, (results, actions) in zip(QUERIES, sequential, strict=True):
        assert all(query.split()[0] in text for _, _, text in results), query  # CRAG kept these
        assert set(actions) <= {"correct", "ambiguous", "incorrect"}, actions
    sync = [
        _snapshot(
            window.postprocess_nodes(
                crag.postprocess_nodes(hybrid.retrieve(query), query_str=query), query_str=query
            )
        )
        for query in QUERIES[:10]
    ]
    assert sync == [results for results, _ in sequential[:10]]  # and sync agrees
