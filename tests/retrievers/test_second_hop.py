"""SecondHopRetriever: hop-2 queries, fusion that keeps hop 1, faults, sync == async, events."""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest
from advrag_testing import ScriptedLLM, instrumented
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.question_gen.types import BaseQuestionGenerator, SubQuestion
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag import (
    CRAGPostprocessor,
    SecondHopRetriever,
    WindowReplacementPostprocessor,
)
from llama_index_ext_advrag.embeddings.inputs import CleanInputEmbedding
from llama_index_ext_advrag.events import SecondHopEvent
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.retrievers import JiebaBM25Retriever
from llama_index_ext_advrag.retrievers._hops import HopCue, hop_cue, hop_queries, merge_hops
from llama_index_ext_advrag.retrievers.fusion import FusedHit
from llama_index_ext_advrag.trace import get_trace

QUESTION = "Where was the director of the film Ed Wood born?"
CORPUS = {
    "film": "Ed Wood is a 1994 American film directed by Tim Burton. It stars Johnny Depp.",
    "other-film": "Ed Wood also made Plan 9 from Outer Space, often called the worst film.",
    "burton": "Tim Burton was born in Burbank, California. He studied at CalArts.",
    "depp": "Johnny Depp was born in Owensboro, Kentucky.",
    "noise": "Burbank is a city in Los Angeles County with many studios.",
}


def node(node_id: str, **metadata: Any) -> TextNode:
    return TextNode(text=CORPUS[node_id], id_=node_id, metadata=metadata)


class TableRetriever(BaseRetriever):
    """Results by query: the first matching key (a substring of the query) wins; records the
    queries, their embeddings and the top k it was asked with; ``fail_on`` raises."""

    def __init__(
        self,
        table: dict[str, list[str]],
        similarity_top_k: int = 10,
        fail_on: str | None = None,
        delay: float = 0.0,
        log: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.table, self.similarity_top_k, self.fail_on, self.delay = (
            table,
            similarity_top_k,
            fail_on,
            delay,
        )
        self.log = log if log is not None else {"queries": [], "embeddings": [], "active": 0}
        self.log.setdefault("peak", 0)

    def _lookup(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.log["queries"].append(query_bundle.query_str)
        self.log["embeddings"].append(query_bundle.embedding)
        if self.fail_on and self.fail_on in query_bundle.query_str:
            raise RuntimeError("search down")
        for key, ids in self.table.items():
            if key in query_bundle.query_str:
                top = ids[: self.similarity_top_k]
                return [NodeWithScore(node=node(i), score=1.0 - r / 10) for r, i in enumerate(top)]
        return []

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._lookup(query_bundle)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.log["active"] += 1
        self.log["peak"] = max(self.log["peak"], self.log["active"])
        try:
            await asyncio.sleep(self.delay)
            return self._lookup(query_bundle)
        finally:
            self.log["active"] -= 1


# hop 1 finds the film; the film passage's leading sentence names Tim Burton
# (every hop-2 query holds the question, so the hop-1 key comes last)
TABLE = {
    "Tim Burton": ["burton", "noise"],
    "Plan 9": ["other-film"],
    "Owensboro": [],
    "Ed Wood born": ["film", "other-film", "depp"],
}


def ids(results: list[NodeWithScore]) -> list[str]:
    return [r.node.node_id for r in results]


# The table answers hop-2 queries by the names in a passage's leading sentence; the mechanics
# tests use that cue and the all-votes fusion (the defaults are checked on their own).
LEADING = {"cue": "leading_sentence", "hop2_new_only": False, "keep_hop1_top": 5}


def make(**settings: Any) -> SecondHopRetriever:
    return SecondHopRetriever(TableRetriever(TABLE), **{**LEADING, **settings})


# ----- defaults and arguments -----


def test_defaults_and_round_trip() -> None:
    hop = SecondHopRetriever(TableRetriever(TABLE))
    assert hop.seed_count == 3 and hop.hop2_top_k == 3 and hop.keep_hop1_top == 3
    assert hop.cue is HopCue.ENTITIES and hop.hop2_new_only and hop.similarity_top_k is None
    assert SecondHopRetriever.class_name() == "SecondHopRetriever"
    data = make(cue="entities", seed_count=2, keep_hop1_top=1).to_dict()
    assert data["class_name"] == "SecondHopRetriever" and data["cue"] == "entities"
    back = SecondHopRetriever.from_dict(data, retriever=TableRetriever(TABLE))
    assert back.to_dict() == data
    assert ids(back.retrieve(QUESTION)) == ids(
        make(cue="entities", seed_count=2, keep_hop1_top=1).retrieve(QUESTION)
    )


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"seed_count": -1}, "seed_count"),
        ({"hop2_top_k": 0}, "hop2_top_k"),
        ({"keep_hop1_top": -1}, "keep_hop1_top"),
        ({"similarity_top_k": 0}, "similarity_top_k"),
        ({"hop2_weight": 0.0}, "hop2_weight"),
        ({"max_concurrency": 0}, "max_concurrency"),
        ({"cue": "gossip"}, "gossip"),
    ],
)
def test_invalid_settings_name_the_value(settings: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        make(**settings)


def test_a_non_retriever_is_refused() -> None:
    with pytest.raises(ValueError, match="list"):
        SecondHopRetriever([])  # type: ignore[arg-type]


# ----- hop-2 queries (pure) -----


def test_cues_by_mode() -> None:
    film = node("film", title="Ed Wood (film)")
    assert hop_cue(film, QUESTION, HopCue.LEADING_SENTENCE, 48, 6) == (
        "Ed Wood is a 1994 American film directed by Tim Burton."
    )
    assert hop_cue(film, QUESTION, HopCue.TITLE, 48, 6) == "Ed Wood (film)"
    assert hop_cue(node("film"), QUESTION, HopCue.TITLE, 48, 6).startswith("Ed Wood is")
    # entity cues the question lacks, in reading order ("ed", "wood" are asked already)
    assert hop_cue(film, QUESTION, HopCue.ENTITIES, 48, 6) == "1994 american tim burton johnny depp"
    assert hop_cue(film, QUESTION, HopCue.ENTITIES, 48, 2) == "1994 american"
    assert hop_cue(film, QUESTION, HopCue.TITLE_AND_ENTITIES, 48, 1) == "Ed Wood (film) 1994"
    assert hop_cue(film, QUESTION, HopCue.LEADING_SENTENCE, 4, 6) == "Ed Wood is a"
    stored = node("film", unit_cues=["Tim Burton", "Ed"])
    assert hop_cue(stored, QUESTION, HopCue.ENTITIES, 48, 6) == "tim burton"


def test_hop_queries_skip_empty_and_repeated_cues() -> None:
    seeds = [node("film"), node("film"), TextNode(text="   ", id_="blank")]
    queries, skipped = hop_queries(QUESTION, seeds, HopCue.LEADING_SENTENCE, 48, 6)
    assert [q.leg for q in queries] == ["hop2:1"]
    assert queries[0].query.startswith(QUESTION + " Ed Wood is a 1994")
    assert skipped == [
        {"seed": "film", "reason": "same query as another hop"},
        {"seed": "blank", "reason": "no cue"},
    ]


def test_merge_hops_by_hand() -> None:
    fused = [FusedHit(i, s, (), ()) for i, s in [("a", 0.5), ("x", 0.4), ("b", 0.3), ("y", 0.1)]]
    assert [h.node_id for h in merge_hops(["b", "a"], fused, 0, 4)] == ["x", "b", "a", "y"]
    assert [h.node_id for h in merge_hops(["a", "b"], fused, 1, 4)] == ["a", "x", "b", "y"]
    assert [h.node_id for h in merge_hops(["b", "a"], fused, 2, 3)] == ["b", "a", "x"]
    assert [h.node_id for h in merge_hops(["b", "b", "a"], fused, 5, 9)] == ["b", "a", "x", "y"]
    assert merge_hops([], [], 3, 3) == []


# ----- retrieval -----


def test_the_bridge_passage_comes_from_hop_2_with_its_trace() -> None:
    results = make(similarity_top_k=4).retrieve(QUESTION)
    assert ids(results) == ["film", "other-film", "depp", "burton"]
    bridge = get_trace(results[3].node, "second_hop")
    assert bridge["hop"] == 2 and bridge["hop1_rank"] is None and not bridge["pinned"]
    assert {r["leg"] for r in bridge["ranks"]} == {"hop2:1"}
    legs = {leg["leg"]: leg for leg in bridge["legs"]}
    assert legs["hop1"]["query"] == QUESTION and legs["hop2:1"]["seed"] == "film"
    assert "Tim Burton" in legs["hop2:1"]["query"] and bridge["searches"] == 4
    first = get_trace(results[0].node, "second_hop")
    assert first["hop"] == 1 and first["hop1_rank"] == 1 and first["pinned"]
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)


def test_equal_k_by_default_and_a_low_pin_lets_hop_2_in() -> None:
    assert ids(make().retrieve(QUESTION)) == ["film", "other-film", "depp"]
    assert ids(make(keep_hop1_top=1).retrieve(QUESTION)) == ["film", "other-film", "burton"]
    assert ids(make(seed_count=0).retrieve(QUESTION)) == ["film", "other-film", "depp"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hop2_new_only_ranks_hop_2_among_new_nodes(mode: str) -> None:
    table = {"Tim Burton": ["film", "other-film", "burton"], "Ed Wood born": TABLE["Ed Wood born"]}

    def top(**settings: Any) -> list[str]:
        settings = {**LEADING, "seed_count": 1, "keep_hop1_top": 1, **settings}
        hop = SecondHopRetriever(TableRetriever(table), **settings)
        run = asyncio.run(hop.aretrieve(QUESTION)) if mode == "async" else hop.retrieve(QUESTION)
        return ids(run)

    # with votes for every node, burton (hop-2 rank 3) stays below hop 1's third node
    assert top() == ["film", "other-film", "depp"]
    # ranked among new nodes, burton is hop 2's first: it outscores hop 1's second
    assert top(hop2_new_only=True) == ["film", "burton", "other-film"]
    assert top(hop2_new_only=True, keep_hop1_top=2) == ["film", "other-film", "burton"]


def test_hop_2_searches_fetch_hop2_top_k() -> None:
    inner = TableRetriever(TABLE, similarity_top_k=3)
    SecondHopRetriever(inner, hop2_top_k=1, similarity_top_k=5, **LEADING).retrieve(QUESTION)
    assert inner.similarity_top_k == 3  # the caller's retriever is not modified
    hop = SecondHopRetriever(
        inner, **{**LEADING, "hop2_top_k": 1, "keep_hop1_top": 0}, similarity_top_k=5
    )
    assert ids(hop.retrieve(QUESTION)).count("noise") == 0  # burton's third hit not fetched


def random_case(rng: random.Random) -> tuple[dict[str, list[str]], dict[str, Any]]:
    pool = list(CORPUS)
    table = {key: rng.sample(pool, rng.randint(0, 5)) for key in ("Tim Burton", "Plan 9", "Johnny")}
    table["Ed Wood born"] = rng.choices(pool, k=rng.randint(1, 6))  # duplicates included
    settings = {
        "seed_count": rng.randint(0, 4),
        "keep_hop1_top": rng.randint(0, 6),
        "similarity_top_k": rng.choice([None, 2, 5, 9]),
        "hop2_weight": rng.choice([0.3, 1.0, 3.0]),
        "hop2_new_only": rng.random() < 0.5,
        "cue": rng.choice(list(HopCue)),
    }
    return table, settings


@pytest.mark.parametrize("seed", range(40))
def test_no_duplicates_hop_1_order_and_pins_hold_sync_and_async(seed: int) -> None:
    table, settings = random_case(random.Random(seed))
    hop = SecondHopRetriever(TableRetriever(table), **settings)
    hop1 = list(dict.fromkeys(table["Ed Wood born"]))
    results = hop.retrieve(QUESTION)
    got = ids(results)
    assert len(got) == len(set(got))
    limit = settings["similarity_top_k"] or len(hop1)
    assert min(limit, len(hop1)) <= len(got) <= limit
    assert [i for i in got if i in hop1] == [i for i in hop1 if i in got]  # hop-1 order kept
    pinned = hop1[: settings["keep_hop1_top"]][: len(got)]
    assert got[: len(pinned)] == pinned  # never pushed out
    scores = [r.score for r in results]
    assert scores == sorted(scores, reverse=True)
    again = asyncio.run(hop.aretrieve(QUESTION))
    assert ids(again) == got and [r.score for r in again] == scores
    assert [r.node.metadata for r in again] == [r.node.metadata for r in results]


def test_a_failing_hop_2_search_returns_hop_1_with_the_failure(caplog) -> None:
    inner = TableRetriever(TABLE, fail_on="Tim Burton")
    for results in (
        SecondHopRetriever(inner, **{**LEADING, "keep_hop1_top": 0}).retrieve(QUESTION),
        asyncio.run(
            SecondHopRetriever(inner, **{**LEADING, "keep_hop1_top": 0}).aretrieve(QUESTION)
        ),
    ):
        assert ids(results)[:3] == ["film", "other-film", "depp"] and "burton" not in ids(results)
        legs = {leg["leg"]: leg for leg in get_trace(results[0].node, "second_hop")["legs"]}
        assert legs["hop2:1"]["error"] == "error: RuntimeError('search down')"
        assert legs["hop2:1"]["hits"] == 0 and legs["hop2:2"]["error"] is None
    assert "second hop hop2:1 failed" in caplog.text


def test_a_failing_hop_1_raises() -> None:
    hop = SecondHopRetriever(TableRetriever(TABLE, fail_on="Ed Wood born"))
    with pytest.raises(RuntimeError, match="search down"):
        hop.retrieve(QUESTION)
    with pytest.raises(RuntimeError, match="search down"):
        asyncio.run(hop.aretrieve(QUESTION))


def test_nothing_found_returns_nothing() -> None:
    assert make().retrieve("unrelated") == []


def test_caller_nodes_are_not_mutated() -> None:
    shared = {i: node(i) for i in CORPUS}

    class Shared(TableRetriever):
        def _lookup(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
            found = super()._lookup(query_bundle)
            return [NodeWithScore(node=shared[r.node.node_id], score=r.score) for r in found]

    SecondHopRetriever(Shared(TABLE), similarity_top_k=4).retrieve(QUESTION)
    assert all(n.metadata == {} for n in shared.values())


async def test_hop_2_searches_run_concurrently_within_the_bound() -> None:
    log: dict[str, Any] = {"queries": [], "embeddings": [], "active": 0}
    inner = TableRetriever(TABLE, delay=0.02, log=log)
    await SecondHopRetriever(inner, max_concurrency=2).aretrieve(QUESTION)
    assert log["peak"] == 2 and len(log["queries"]) == 4
    log["peak"] = 0
    await SecondHopRetriever(inner, max_concurrency=1).aretrieve(QUESTION)
    assert log["peak"] == 1


class CountingEmbedding(CleanInputEmbedding):
    """Vectors from the query length; counts batch and single query calls."""

    batches: list[list[str]] = []
    singles: int = 0

    def _get_query_embedding(self, query: str) -> list[float]:
        self.singles += 1
        return [float(len(query)), 1.0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return [float(len(text)), 1.0]

    def _get_query_embeddings(self, queries: list[str]) -> list[list[float]]:
        self.batches.append(list(queries))
        return [[float(len(q)), 1.0] for q in queries]

    async def _aget_query_embeddings(self, queries: list[str]) -> list[list[float]]:
        return self._get_query_embeddings(queries)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hop_2_queries_are_embedded_in_one_batch(mode: str) -> None:
    model = CountingEmbedding(batches=[])
    inner = TableRetriever(TABLE)
    hop = SecondHopRetriever(inner, embed_model=model)
    asyncio.run(hop.aretrieve(QUESTION)) if mode == "async" else hop.retrieve(QUESTION)
    assert len(model.batches) == 1 and len(model.batches[0]) == 3 and model.singles == 0
    hop1_embedding, *hop2_embeddings = inner.log["embeddings"]
    assert hop1_embedding is None  # hop 1 is the retriever's own business
    assert hop2_embeddings == [[float(len(q)), 1.0] for q in model.batches[0]]


class EnglishOnlyEmbedding(CountingEmbedding):
    model_name: str = "BAAI/bge-small-en-v1.5"


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_language_gate_skips_hop_2_for_cjk_questions_on_an_english_only_model(mode: str) -> None:
    chinese = "艾德伍德的导演出生在哪里？"
    inner = TableRetriever({"导演": ["film", "other-film", "depp"]})
    hop = SecondHopRetriever(inner, embed_model=EnglishOnlyEmbedding(batches=[]), **LEADING)
    run = asyncio.run(hop.aretrieve(chinese)) if mode == "async" else hop.retrieve(chinese)
    assert ids(run) == ["film", "other-film", "depp"] and inner.log["queries"] == [chinese]
    trace = get_trace(run[0].node, "second_hop")
    assert trace["searches"] == 1 and trace["skipped"][0]["seed"] == "all"
    assert hop.language_factor(chinese) == 0.0 and hop.language_factor(QUESTION) == 1.0
    mixed = "艾德伍德的导演 Ed Wood born"  # mixed: hop 2 weighs 1 - the CJK share
    factor = hop.language_factor(mixed)
    assert 0.0 < factor < 1.0
    model = EnglishOnlyEmbedding(batches=[])
    mixed_hop = SecondHopRetriever(TableRetriever(TABLE), embed_model=model, **LEADING)
    bridge = mixed_hop.with_settings(similarity_top_k=4).retrieve(mixed)[3]
    assert bridge.node.node_id == "burton"
    assert get_trace(bridge.node, "second_hop")["fused_score"] == pytest.approx(factor / 61)
    # a model that reads Chinese, or the gate off: the second hop runs
    for other in (
        SecondHopRetriever(inner, embed_model=CountingEmbedding(batches=[]), **LEADING),
        SecondHopRetriever(
            inner, embed_model=EnglishOnlyEmbedding(batches=[]), language_gate=False, **LEADING
        ),
    ):
        assert other.language_factor(chinese) == 1.0
        assert get_trace(other.retrieve(chinese)[0].node, "second_hop")["searches"] == 4


def test_the_embedding_model_is_found_on_the_retriever() -> None:
    inner = TableRetriever(TABLE)
    inner._embed_model = CountingEmbedding(batches=[])  # as core's vector retrievers hold it
    SecondHopRetriever(inner).retrieve(QUESTION)
    assert all(e is not None for e in inner.log["embeddings"][1:])


class FixedQuestions(BaseQuestionGenerator):
    def __init__(self, questions: list[str] | None) -> None:
        self.questions = questions

    def _get_prompts(self) -> dict[str, Any]:
        return {}

    def _update_prompts(self, prompts: Any) -> None:
        pass

    def generate(self, tools: Any, query: QueryBundle) -> list[SubQuestion]:
        if self.questions is None:
            raise RuntimeError("LLM down")
        return [SubQuestion(sub_question=q, tool_name="search") for q in self.questions]

    async def agenerate(self, tools: Any, query: QueryBundle) -> list[SubQuestion]:
        return self.generate(tools, query)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_sub_questions_are_fused_the_same_way(mode: str) -> None:
    generator = FixedQuestions(["Who made Plan 9?", "Who made Plan 9?", ""])
    hop = SecondHopRetriever(
        TableRetriever(TABLE), question_generator=generator, seed_count=0, similarity_top_k=4
    )
    results = asyncio.run(hop.aretrieve(QUESTION)) if mode == "async" else hop.retrieve(QUESTION)
    trace = get_trace(results[0].node, "second_hop")
    assert [leg["leg"] for leg in trace["legs"]] == ["hop1", "sub:1"]
    assert [s["seed"] for s in trace["skipped"]] == ["sub:2", "sub:3"]
    assert ids(results) == ["film", "other-film", "depp"]  # sub:1 found nothing new


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_failing_question_generator_keeps_the_hops(mode: str) -> None:
    hop = SecondHopRetriever(TableRetriever(TABLE), question_generator=FixedQuestions(None))
    results = asyncio.run(hop.aretrieve(QUESTION)) if mode == "async" else hop.retrieve(QUESTION)
    assert ids(results) == ["film", "other-film", "depp"]
    failure = get_trace(results[0].node, "second_hop")["failures"]
    assert failure == [{"seed": "sub-questions", "reason": "error: RuntimeError('LLM down')"}]


def test_core_question_generator_from_an_llm() -> None:
    answer = '```json\n[{"sub_question": "Who directed Ed Wood? Tim Burton", "tool_name": "search"}]\n```'
    hop = SecondHopRetriever(
        TableRetriever(TABLE), llm=ScriptedLLM([answer]), seed_count=0, keep_hop1_top=1
    )
    results = hop.retrieve(QUESTION)
    legs = get_trace(results[0].node, "second_hop")["legs"]
    assert legs[1] == {
        "leg": "sub:1",
        "query": "Who directed Ed Wood? Tim Burton",
        "seed": "",
        "hits": 2,
        "error": None,
    }
    assert ids(results) == ["film", "burton", "other-film"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_event_carries_the_trace_facts(mode: str) -> None:
    hop = make(similarity_top_k=4)
    with instrumented() as (events, _):
        run = asyncio.run(hop.aretrieve(QUESTION)) if mode == "async" else hop.retrieve(QUESTION)
    (event,) = [e for e in events if isinstance(e, SecondHopEvent)]
    assert event.searches == 4 and event.query == QUESTION
    assert [r["node_id"] for r in event.returned] == ids(run)
    assert event.legs == get_trace(run[0].node, "second_hop")["legs"]


# ----- composition -----

STORY = (
    "Ed Wood is a 1994 film by Tim Burton. It was shot in black and white. "
    "Tim Burton was born in Burbank. He grew up there. Burbank lies near Los Angeles."
)


def test_in_front_of_window_replacement_and_crag() -> None:
    from llama_index.core import Document

    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=1, embed_unit="sentence")
    nodes = parser.get_nodes_from_documents([Document(text=STORY, id_="story")])
    bm25 = JiebaBM25Retriever(nodes, similarity_top_k=2)
    hop = SecondHopRetriever(bm25, seed_count=2, keep_hop1_top=1, similarity_top_k=4)
    hits = hop.retrieve("Which film of 1994 did the man born in Burbank make?")
    assert len(ids(hits)) == len(set(ids(hits)))
    windows = WindowReplacementPostprocessor(top_n=3).postprocess_nodes(hits)
    assert windows and all(get_trace(w.node, "second_hop") for w in windows)

    class ByWord(BaseRelevanceJudge):
        def _judge(self, query: str, texts: list[str]) -> list[Grade]:
            return [self.grade(0.9 if "Burbank" in t else 0.1) for t in texts]

    graded = CRAGPostprocessor(judge=ByWord(), refine=False).postprocess_nodes(
        windows, query_str="Who was born in Burbank?"
    )
    assert get_trace(graded[0].node, "crag")["action"] == "correct"
    assert all(get_trace(g.node, "second_hop") and get_trace(g.node, "crag") for g in graded)
    from_hop_2 = [g for g in graded if get_trace(g.node, "second_hop")["hop"] == 2]
    assert [g.node.get_content() for g in from_hop_2] == [
        "He grew up there. Burbank lies near Los Angeles."
    ]
    assert from_hop_2[0].score == pytest.approx(0.9)
