"""ContextCompressionPostprocessor through the public API: the budget is never exceeded,
passages and sentences keep their order, Chinese and Japanese are cut by the pack's segmenter,
empty and one-sentence passages, a failing or hanging judge leaves the passages as retrieved
(recorded), sync equals async, stored sentence vectors spare every sentence embedding, and the
settings round-trip."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from advrag_testing import HashEmbedding, instrumented
from llama_index.core import Document
from llama_index.core.bridge.pydantic import ValidationError
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore

from llama_index_ext_advrag import ContextCompressionPostprocessor
from llama_index_ext_advrag.events import ContextCompressionEvent
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.text import count_tokens
from llama_index_ext_advrag.trace import get_trace

QUERY = "Where is the Eiffel Tower?"
EN = [
    "The Louvre is a museum. It opened in 1793. The Eiffel Tower is in Paris. "
    "It was built in 1889. Gustave Eiffel's company built it.",
    "Cats sleep most of the day. Dogs like to walk. Birds sing in the morning.",
    "Paris is the capital of France. The tower stands on the Champ de Mars. "
    "It is 330 metres tall. Millions visit it every year.",
]
ZH = [
    "北京是中国的首都。故宫位于北京市中心。长城很长。埃菲尔铁塔位于巴黎。",
    "上海是一个港口城市。黄浦江流经上海。",
]
JA = ["東京は日本の首都です。エッフェル塔はパリにあります。富士山は高いです。"]
HANG = 5.0


def hits(texts: list[str], prefix: str = "n") -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"{prefix}{i}"), score=1.0 - i / 10)
        for i, t in enumerate(texts)
    ]


class WordJudge(BaseRelevanceJudge):
    """Share of the query's words in the text (raw = the count of shared words)."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        words = set(query.lower().strip("?").split())
        grades = []
        for text in texts:
            shared = len(words & set(text.lower().strip(".").split()))
            grades.append(self.grade(shared / len(words), raw=float(shared)))
        return grades


class FailingJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("model crashed")


class HangingJudge(BaseRelevanceJudge):
    _release: threading.Event

    def __init__(self, release: threading.Event, **data: Any) -> None:
        super().__init__(**data)
        object.__setattr__(self, "_release", release)

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self._release.wait(HANG)
        return [self.grade(0.9) for _ in texts]

    async def _ajudge(self, query: str, texts: list[str]) -> list[Grade]:
        await asyncio.sleep(HANG)
        return [self.grade(0.9) for _ in texts]


class CountingEmbedding(HashEmbedding):
    """Counts the texts it embeds (queries apart)."""

    texts: int = 0
    queries: int = 0

    def _get_text_embedding(self, text: str) -> list[float]:
        self.texts += 1
        return self._vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        self.queries += 1
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        self.queries += 1
        return self._vector(query)


def run(post: Any, use_async: bool, retrieved: list[NodeWithScore]) -> list[NodeWithScore]:
    if use_async:
        return asyncio.run(post.apostprocess_nodes(retrieved, query_str=QUERY))
    return post.postprocess_nodes(retrieved, query_str=QUERY)


def context_tokens(result: list[NodeWithScore]) -> int:
    return count_tokens("\n\n".join(r.node.get_content() for r in result))


def compressor(**settings: Any) -> ContextCompressionPostprocessor:
    settings.setdefault("embed_model", HashEmbedding())
    return ContextCompressionPostprocessor(**settings)


@pytest.fixture
def release() -> Any:
    event = threading.Event()
    yield event
    event.set()


# --- settings -----------------------------------------------------------------------------


def test_defaults_and_invalid_settings() -> None:
    post = compressor()
    assert (post.max_context_tokens, post.neighbours, post.rank_passages) == (600, 1, False)
    assert post.scorer == "cosine+rank"
    assert compressor(judge=WordJudge()).scorer == "judge+cosine+rank"
    with pytest.raises(ValueError, match="cosine_weight"):
        ContextCompressionPostprocessor(cosine_weight=0.0)
    with pytest.raises(ValueError, match="both 0"):
        compressor(judge=WordJudge(), judge_weight=0.0, cosine_weight=0.0)
    for bad in ({"max_context_tokens": 0}, {"neighbours": -1}, {"rank_weight": -0.5}):
        with pytest.raises(ValidationError):
            compressor(**bad)
    with pytest.raises(ValueError, match="docstore must be"):
        compressor(docstore={"not": "a docstore"})


def test_round_trip_keeps_settings_not_live_objects() -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=123, neighbours=0, rank_passages=True)
    data = post.to_dict()
    assert not {"judge", "embed_model", "docstore"} & set(data)
    clone = ContextCompressionPostprocessor.from_dict(data, judge=WordJudge())
    assert clone.to_dict() == data and clone.judge is not None


# --- the budget and the order ---------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("budget", [1, 5, 12, 20, 33, 50, 80])
@pytest.mark.parametrize("neighbours", [0, 1, 2])
def test_budget_is_never_exceeded(use_async: bool, budget: int, neighbours: int) -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=budget, neighbours=neighbours)
    result = run(post, use_async, hits(EN + ZH + JA))
    assert context_tokens(result) <= budget
    if budget >= 12:
        assert result, "a budget that holds a sentence keeps one"


@pytest.mark.parametrize("use_async", [False, True])
def test_order_and_offsets_are_kept(use_async: bool) -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=40, neighbours=0)
    retrieved = hits(EN)
    result = run(post, use_async, retrieved)
    ranks = [get_trace(r.node, "compression")["retrieval_rank"] for r in result]
    assert ranks == sorted(ranks) and len(result) >= 2
    for r in result:
        record = get_trace(r.node, "compression")
        source = retrieved[record["retrieval_rank"]].node.get_content()
        assert r.node.node_id == retrieved[record["retrieval_rank"]].node.node_id
        starts = [start for start, _ in record["spans"]]
        assert starts == sorted(starts)
        pieces = [source[start:end] for start, end in record["spans"]]
        assert r.node.get_content() == post.span_separator.join(pieces)
    assert retrieved[0].node.get_content() == EN[0], "the caller's nodes are untouched"


@pytest.mark.parametrize("use_async", [False, True])
def test_the_best_sentence_is_kept_with_its_neighbour(use_async: bool) -> None:
    only_judge = {"judge": WordJudge(), "cosine_weight": 0.0, "rank_weight": 0.0}
    post = compressor(max_context_tokens=24, neighbours=1, **only_judge)
    (kept,) = run(post, use_async, hits(EN[:1]))
    best = "The Eiffel Tower is in Paris."
    assert kept.node.get_content() == f"It opened in 1793. {best} It was built in 1889."
    (alone,) = run(
        compressor(max_context_tokens=9, neighbours=1, **only_judge), use_async, hits(EN[:1])
    )
    assert alone.node.get_content() == best, "a group that does not fit leaves its sentence"
    (none,) = run(
        compressor(max_context_tokens=24, neighbours=0, **only_judge), use_async, hits(EN[:1])
    )
    assert best in none.node.get_content()


@pytest.mark.parametrize("use_async", [False, True])
def test_chinese_and_japanese_are_cut_into_sentences(use_async: bool) -> None:
    post = compressor(max_context_tokens=20, neighbours=0, rank_weight=0)
    result = run(post, use_async, hits(ZH + JA))
    assert context_tokens(result) <= 20
    sentences = {s for text in ZH + JA for s in text.replace("。", "。\n").split("\n") if s}
    for r in result:
        for piece in r.node.get_content().split(post.span_separator):
            assert piece in "".join(ZH + JA)
            assert piece.endswith("。")
            assert any(piece.startswith(s) for s in sentences)


@pytest.mark.parametrize("use_async", [False, True])
def test_empty_and_one_sentence_passages(use_async: bool) -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=12, neighbours=1)
    retrieved = hits(["", "The Eiffel Tower is in Paris.", "   ", "Cats sleep all day long."])
    result = run(post, use_async, retrieved)
    assert [r.node.node_id for r in result] == ["n1"]
    assert result[0].node.get_content() == "The Eiffel Tower is in Paris."
    assert run(post, use_async, []) == []
    assert run(post, use_async, hits(["", " "])) == []


@pytest.mark.parametrize("use_async", [False, True])
def test_passages_that_fit_are_returned_unchanged(use_async: bool) -> None:
    result = run(compressor(max_context_tokens=1000), use_async, hits(EN))
    assert [r.node.get_content() for r in result] == EN
    assert all(get_trace(r.node, "compression")["compressed"] is False for r in result)


@pytest.mark.parametrize("use_async", [False, True])
def test_rank_passages_orders_by_the_best_sentence(use_async: bool) -> None:
    post = compressor(judge=WordJudge(), rank_passages=True, rank_weight=0, cosine_weight=0)
    retrieved = hits([EN[1], "Nothing here at all.", "Where is the Eiffel Tower? In Paris."])
    result = run(post, use_async, retrieved)
    assert [r.node.node_id for r in result] == ["n2", "n0", "n1"]
    assert result[0].score > result[1].score


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failing_judge_leaves_the_passages_as_retrieved(use_async: bool) -> None:
    post = compressor(judge=FailingJudge(), max_context_tokens=10)
    retrieved = hits(EN)
    with instrumented() as (events, _):
        result = run(post, use_async, retrieved)
    assert [r.node.get_content() for r in result] == EN
    assert [r.node.node_id for r in result] == ["n0", "n1", "n2"]
    for r in result:
        assert "model crashed" in get_trace(r.node, "compression")["error"]
    (event,) = [e for e in events if isinstance(e, ContextCompressionEvent)]
    assert "model crashed" in event.error and event.tokens_after == event.tokens_before


@pytest.mark.parametrize("use_async", [False, True])
def test_a_hanging_judge_is_cut_off(use_async: bool, release: threading.Event) -> None:
    post = compressor(judge=HangingJudge(release), max_context_tokens=10, judge_timeout=0.2)
    result = run(post, use_async, hits(EN))
    assert [r.node.get_content() for r in result] == EN
    assert "timed out" in get_trace(result[0].node, "compression")["error"]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failing_embedding_leaves_the_passages_as_retrieved(use_async: bool) -> None:
    class Broken(HashEmbedding):
        def _get_text_embedding(self, text: str) -> list[float]:
            raise OSError("model file missing")

    result = run(compressor(embed_model=Broken(), max_context_tokens=10), use_async, hits(EN))
    assert [r.node.get_content() for r in result] == EN
    assert "model file missing" in get_trace(result[0].node, "compression")["error"]


# --- sync equals async, stored vectors, the event --------------------------------------------


@pytest.mark.parametrize("budget", [15, 30, 60])
def test_sync_equals_async(budget: int) -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=budget, rank_passages=True)
    sync, asynchronous = run(post, False, hits(EN + ZH)), run(post, True, hits(EN + ZH))
    assert [(r.node.node_id, r.node.get_content(), r.score) for r in sync] == [
        (r.node.node_id, r.node.get_content(), r.score) for r in asynchronous
    ]


@pytest.mark.parametrize("use_async", [False, True])
def test_stored_sentence_vectors_spare_the_sentence_embeddings(use_async: bool) -> None:
    document = Document(text=EN[0] + " " + EN[2], id_="doc")
    units = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        [document]
    )
    for unit in units:
        unit.embedding = HashEmbedding().get_text_embedding(unit.get_content())
    docstore = SimpleDocumentStore()
    docstore.add_documents(units)
    chunks = AdaptiveSlidingWindowNodeParser(window_size=5, stride=5).get_nodes_from_documents(
        [document]
    )
    model = CountingEmbedding()
    post = ContextCompressionPostprocessor(
        embed_model=model, docstore=docstore, max_context_tokens=30
    )
    result = run(post, use_async, [NodeWithScore(node=c, score=0.5) for c in chunks])
    assert result and context_tokens(result) <= 30
    assert (model.texts, model.queries) == (0, 1)
    counts = get_trace(result[0].node, "compression")["vectors"]
    assert counts == {"stored": len(units), "embedded": 0}
    embedded = ContextCompressionPostprocessor(embed_model=HashEmbedding(), max_context_tokens=30)
    again = run(embedded, use_async, [NodeWithScore(node=c, score=0.5) for c in chunks])
    assert [r.node.get_content() for r in again] == [r.node.get_content() for r in result]


@pytest.mark.parametrize("use_async", [False, True])
def test_the_event_carries_the_trace(use_async: bool) -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=30)
    with instrumented() as (events, _):
        result = run(post, use_async, hits(EN))
    (event,) = [e for e in events if isinstance(e, ContextCompressionEvent)]
    assert event.tokens_after == context_tokens(result) <= 30 < event.tokens_before
    assert [n["spans"] for n in event.nodes] == [
        get_trace(r.node, "compression")["spans"] for r in result
    ]
    assert set(event.dropped) == {"n0", "n1", "n2"} - {r.node.node_id for r in result}


@pytest.mark.parametrize("use_async", [False, True])
def test_the_rank_prior_favours_earlier_passages(use_async: bool) -> None:
    retrieved = hits(["The tower is tall.", "Where is the Eiffel Tower?"])
    settings = {"judge": WordJudge(), "cosine_weight": 0.0, "max_context_tokens": 8}
    (alone,) = run(compressor(rank_weight=0.0, **settings), use_async, retrieved)
    assert alone.node.node_id == "n1", "the judge alone keeps the better sentence"
    (prior,) = run(compressor(rank_weight=5.0, **settings), use_async, retrieved)
    assert prior.node.node_id == "n0", "a strong prior keeps the first passage's sentence"


@pytest.fixture
def character_tokens() -> Any:
    """LlamaIndex's global tokenizer set to one token per character (the user's own
    tokenizer): sentences counted alone then miss the spaces that join them."""
    import llama_index.core
    from llama_index.core import set_global_tokenizer

    from llama_index_ext_advrag.text.tokens import _tokenizer

    previous = llama_index.core.global_tokenizer
    set_global_tokenizer(list)
    _tokenizer.cache_clear()
    yield
    llama_index.core.global_tokenizer = previous
    _tokenizer.cache_clear()


@pytest.mark.parametrize("use_async", [False, True])
@pytest.mark.parametrize("budget", [30, 64, 100, 150, 220])
def test_the_budget_holds_under_the_users_tokenizer(
    use_async: bool, budget: int, character_tokens: Any
) -> None:
    post = compressor(judge=WordJudge(), max_context_tokens=budget, neighbours=2)
    result = run(post, use_async, hits(EN))
    assert result and len("\n\n".join(r.node.get_content() for r in result)) <= budget


class SaturatedJudge(BaseRelevanceJudge):
    """Every sentence sharing a query word scores 1.0; the raw value still tells them apart."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        words = set(query.lower().strip("?").split())
        shared = [len(words & set(t.lower().strip(".?").split())) for t in texts]
        return [self.grade(1.0 if s else 0.0, raw=float(s)) for s in shared]


@pytest.mark.parametrize("use_async", [False, True])
def test_the_judges_raw_value_is_scored_not_its_saturated_probability(use_async: bool) -> None:
    retrieved = hits(["The tower is tall.", "Where is the Eiffel Tower?"])
    post = compressor(
        judge=SaturatedJudge(), cosine_weight=0.0, rank_weight=0.0, max_context_tokens=8
    )
    (kept,) = run(post, use_async, retrieved)
    assert kept.node.node_id == "n1"


class WideJudge(BaseRelevanceJudge):
    """A logit-like scale: ten per query word the sentence shares."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        words = set(query.lower().strip("?").split())
        shared = [len(words & set(t.lower().strip(".").split())) for t in texts]
        return [self.grade(s / len(words), raw=10.0 * s) for s in shared]


class NarrowJudge(BaseRelevanceJudge):
    """A cosine-like scale: 0.84 for the sentence naming the tower, 0.80 for the others."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [
            self.grade(0.9 if "埃菲尔铁塔" in t else 0.1, raw=0.84 if "埃菲尔铁塔" in t else 0.80)
            for t in texts
        ]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_routed_judges_values_are_scored_per_judge(use_async: bool) -> None:
    # One judge per language (as offline_judge(): cross-encoder logits for English, e5 cosines
    # for Chinese): pooled in one z-score the narrow scale would sink every Chinese sentence.
    from llama_index_ext_advrag.judges import LanguageRoutedJudge

    judge = LanguageRoutedJudge({"en": WideJudge(name="wide"), "zh": NarrowJudge(name="narrow")})
    best_en, best_zh = "The Eiffel Tower is in Paris.", "埃菲尔铁塔位于巴黎。"
    budget = count_tokens(best_en) + count_tokens("\n\n") + count_tokens(best_zh)  # as counted
    post = compressor(
        judge=judge, cosine_weight=0.0, rank_weight=0.0, neighbours=0, max_context_tokens=budget
    )
    result = run(post, use_async, hits([EN[0], ZH[0]]))
    assert [r.node.get_content() for r in result] == [best_en, best_zh]


def test_an_unknown_grade_next_to_two_judges_ranks_lowest() -> None:
    from llama_index_ext_advrag.postprocessor._compression import standardise_within

    z = standardise_within([-8.0, 4.0, 0.75, 0.85, None], ["ce", "ce", "e5", "e5", "router"])
    assert z.round(6).tolist() == [-1.0, 1.0, -1.0, 1.0, -1.0]
