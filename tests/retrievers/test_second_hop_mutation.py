"""SecondHopRetriever beyond test_second_hop.py, through the public API in sync and async: the
trace's hop-1 leg and per-leg ranks spelled out, the RRF constant and ``max_cues`` reaching the
fusion and the hop-2 queries, the reasons of skipped seeds and sub-questions, a failing query
embedding (hop 2 still searched, the failure in the trace, the event and the log), what the
question generator is asked, the log lines, and close/aclose reaching the wrapped retriever
(kills the module's mutants those tests leave)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from advrag_testing import instrumented
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.question_gen.types import BaseQuestionGenerator, SubQuestion
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.events import SecondHopEvent
from llama_index_ext_advrag.retrievers.second_hop import SEARCH_TOOL, SecondHopRetriever
from llama_index_ext_advrag.trace import get_trace

QUESTION = "Where was the director of the film Ed Wood born?"
CORPUS = {
    "film": "Ed Wood is a 1994 American film directed by Tim Burton. It stars Johnny Depp.",
    "other-film": "Ed Wood also made Plan 9 from Outer Space, often called the worst film.",
    "burton": "Tim Burton was born in Burbank, California. He studied at CalArts.",
    "depp": "Johnny Depp was born in Owensboro, Kentucky.",
}
# hop 1 answers the question; a hop-2 query naming Tim Burton finds the bridge passage
TABLE = {"Tim Burton": ["burton"], "Ed Wood born": ["film", "other-film", "depp"]}
LEADING = {"cue": "leading_sentence", "hop2_new_only": False, "keep_hop1_top": 5}
MODES = ["sync", "async"]


class Table(BaseRetriever):
    """Results by the first key found in the query; records the queries and closing."""

    def __init__(self, table: dict[str, list[str]] = TABLE) -> None:
        super().__init__()
        self.table, self.queries, self.closed = table, [], []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.queries.append(query_bundle.query_str)
        for key, found in self.table.items():
            if key in query_bundle.query_str:
                return [
                    NodeWithScore(node=TextNode(text=CORPUS[i], id_=i), score=1.0 - r / 10)
                    for r, i in enumerate(found)
                ]
        return []

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._retrieve(query_bundle)

    def close(self) -> None:
        self.closed.append("close")

    async def aclose(self) -> None:
        self.closed.append("aclose")


class BrokenEmbedding(BaseEmbedding):
    """An embedding model whose every call fails."""

    def _get_query_embedding(self, query: str) -> list[float]:
        raise RuntimeError("embedder down")

    async def _aget_query_embedding(self, query: str) -> list[float]:
        raise RuntimeError("embedder down")

    def _get_text_embedding(self, text: str) -> list[float]:
        raise RuntimeError("embedder down")


class Questions(BaseQuestionGenerator):
    """Fixed sub-questions (``None``: fails); records the tools and query it was given."""

    def __init__(self, questions: list[str] | None) -> None:
        self.questions, self.asked = questions, []

    def _get_prompts(self) -> dict[str, Any]:
        return {}

    def _update_prompts(self, prompts: Any) -> None:
        pass

    def generate(self, tools: Any, query: QueryBundle) -> list[SubQuestion]:
        self.asked.append((tools, query.query_str))
        if self.questions is None:
            raise RuntimeError("LLM down")
        return [SubQuestion(sub_question=q, tool_name="search") for q in self.questions]

    async def agenerate(self, tools: Any, query: QueryBundle) -> list[SubQuestion]:
        return self.generate(tools, query)


def run(hop: SecondHopRetriever, mode: str, question: str = QUESTION) -> list[NodeWithScore]:
    return asyncio.run(hop.aretrieve(question)) if mode == "async" else hop.retrieve(question)


def trace_of(results: list[NodeWithScore], node_id: str) -> dict[str, Any]:
    (found,) = [r for r in results if r.node.node_id == node_id]
    return get_trace(found.node, "second_hop")


@pytest.mark.parametrize("mode", MODES)
def test_the_hop_1_leg_and_the_ranks_per_leg_are_spelled_out(mode: str) -> None:
    results = run(SecondHopRetriever(Table(), similarity_top_k=4, **LEADING), mode)
    bridge = trace_of(results, "burton")
    assert bridge["legs"][0] == {"leg": "hop1", "query": QUESTION, "hits": 3, "error": None}
    assert bridge["ranks"] == [{"leg": "hop2:1", "rank": 1}]
    # the other seeds' hop-2 queries hold the question, so they find hop 1's passages again
    assert trace_of(results, "film")["ranks"] == [
        {"leg": "hop1", "rank": 1},
        {"leg": "hop2:2", "rank": 1},
        {"leg": "hop2:3", "rank": 1},
    ]


@pytest.mark.parametrize("mode", MODES)
def test_the_rrf_constant_reaches_the_fusion(mode: str) -> None:
    hop = SecondHopRetriever(Table(), similarity_top_k=4, rrf_k=10, **LEADING)
    assert trace_of(run(hop, mode), "burton")["fused_score"] == pytest.approx(1 / 11)


@pytest.mark.parametrize("mode", MODES)
def test_max_cues_cuts_the_entity_cue_of_a_hop_2_query(mode: str) -> None:
    hop = SecondHopRetriever(Table(), cue="entities", seed_count=1, max_cues=1)
    legs = get_trace(run(hop, mode)[0].node, "second_hop")["legs"]
    assert [leg["query"] for leg in legs] == [QUESTION, f"{QUESTION} 1994"]


class EnglishOnly(BaseEmbedding):
    model_name: str = "BAAI/bge-small-en-v1.5"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [1.0, 0.0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return [1.0, 0.0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return [1.0, 0.0]


@pytest.mark.parametrize("mode", MODES)
def test_the_reasons_of_a_gated_question_and_of_skipped_sub_questions(mode: str) -> None:
    chinese = "艾德伍德的导演出生在哪里？"
    gated = SecondHopRetriever(Table({"导演": ["film"]}), embed_model=EnglishOnly())
    assert get_trace(run(gated, mode, chinese)[0].node, "second_hop")["skipped"] == [
        {
            "seed": "all",
            "reason": "a CJK question and an English-only embedding model (language_gate)",
        }
    ]
    generator = Questions(["", QUESTION])
    hop = SecondHopRetriever(Table(), question_generator=generator, seed_count=0)
    assert get_trace(run(hop, mode)[0].node, "second_hop")["skipped"] == [
        {"seed": "sub:1", "reason": "empty or repeated"},
        {"seed": "sub:2", "reason": "empty or repeated"},
    ]
    assert generator.asked == [([SEARCH_TOOL], QUESTION)]


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_query_embedding_lets_the_retriever_embed_and_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    inner = Table()
    hop = SecondHopRetriever(
        inner, embed_model=BrokenEmbedding(), question_generator=Questions([""]), **LEADING
    )
    with caplog.at_level(logging.WARNING), instrumented() as (events, _):
        results = run(hop, mode)
    failure = {"seed": "embedding", "reason": "error: RuntimeError('embedder down')"}
    assert get_trace(results[0].node, "second_hop")["failures"] == [failure]
    assert len(inner.queries) == 4  # hop 1 and three hop-2 queries, embedded by the retriever
    (event,) = [e for e in events if isinstance(e, SecondHopEvent)]
    assert event.skipped == [{"seed": "sub:1", "reason": "empty or repeated"}, failure]
    messages = [r.getMessage() for r in caplog.records if r.name.endswith("second_hop")]
    assert messages == [
        "hop-2 query embedding failed (RuntimeError('embedder down')); the retriever embeds"
    ]


@pytest.mark.parametrize("mode", MODES)
def test_the_log_names_the_failing_search_and_generator(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    class Failing(Table):
        def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            if "Tim Burton" in query_bundle.query_str:
                raise RuntimeError("search down")
            return super()._retrieve(query_bundle)

    hop = SecondHopRetriever(Failing(), question_generator=Questions(None), **LEADING)
    with caplog.at_level(logging.WARNING):
        run(hop, mode)
    messages = [r.getMessage() for r in caplog.records if r.name.endswith("second_hop")]
    assert messages == [
        "question generator failed (RuntimeError('LLM down')); no sub-questions",
        "second hop hop2:1 failed (RuntimeError('search down')); hop 1 kept",
    ]


def test_close_and_aclose_reach_the_wrapped_retriever() -> None:
    inner = Table()
    hop = SecondHopRetriever(inner)
    hop.close()
    asyncio.run(hop.aclose())
    assert inner.closed == ["close", "aclose"]
