"""The compression postprocessor's own code, exactly (kills mutants of
postprocessor/compression.py that its other tests leave; the scoring maths is _compression.py's,
tested in test_compression_mutation.py): the sentence units inside a passage's span, which
stored vector a sentence gets, the judge's prompts as a module, passages as retrieved (record,
event, warning only on an error), the cosine deciding what is kept, a judge's score when it has
no raw value, and the warning when the CJK judge's extra is missing."""

from __future__ import annotations

import asyncio
import logging
from types import SimpleNamespace

import pytest
from advrag_testing import HashEmbedding, instrumented
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.events import ContextCompressionEvent
from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade
from llama_index_ext_advrag.layout import NodeLayout, deterministic_node_id
from llama_index_ext_advrag.postprocessor._compression import candidates_of, cut_passages
from llama_index_ext_advrag.postprocessor.compression import (
    CJK_EXTRA_HINT,
    ContextCompressionPostprocessor,
    match_vectors,
    sentence_unit_ids,
)
from llama_index_ext_advrag.trace import get_trace

MODES = ["sync", "async"]
LOGGER = "llama_index_ext_advrag.postprocessor.compression"
EMBED = HashEmbedding(dim=64)


def run(post, mode: str, nodes, query: str) -> list[NodeWithScore]:
    if mode == "sync":
        return post.postprocess_nodes(nodes, query_str=query)
    return asyncio.run(post.apostprocess_nodes(nodes, query_str=query))


def passage(text: str, node_id: str = "p", **metadata) -> NodeWithScore:
    return NodeWithScore(node=TextNode(text=text, id_=node_id, metadata=metadata), score=0.5)


def test_class_name_and_the_judge_as_a_prompt_module() -> None:
    assert ContextCompressionPostprocessor.class_name() == "ContextCompressionPostprocessor"
    judge = Scripted(name="s")
    assert ContextCompressionPostprocessor(judge=judge)._get_prompt_modules() == {"judge": judge}
    assert ContextCompressionPostprocessor(embed_model=EMBED)._get_prompt_modules() == {}


def test_sentence_unit_ids_cover_the_span_only() -> None:
    spanned = passage("x", "a", document_id="doc", sentence_span=[3, 5])
    again = passage("y", "b", document_id="doc", sentence_span=[4, 6])
    ids = sentence_unit_ids([spanned, again, passage("z", "c")], NodeLayout())
    unit = NodeLayout().id_unit
    assert ids == [deterministic_node_id("doc", unit, i, i + 1) for i in (3, 4, 5)]


def test_match_vectors_prefers_a_unit_then_a_one_sentence_passage() -> None:
    nodes = [passage("One. Two."), passage("Three.", "q")]
    nodes[0].node.embedding = [9.0]
    nodes[1].node.embedding = [3.0]
    candidates = candidates_of(cut_passages([n.node.get_content() for n in nodes]))
    assert [c.text for c in candidates] == ["One.", "Two.", "Three."]
    units = [
        TextNode(text=" Two. ", embedding=[2.0]),
        TextNode(text="One.", embedding=None),
        SimpleNamespace(),  # a unit without any vector attribute is passed over
    ]
    # "One." has no stored vector and its passage has two sentences: none; "Three." is its
    # passage: the passage's own vector
    assert match_vectors(nodes, candidates, units) == [None, [2.0], [3.0]]
    units.append(TextNode(text="Three.", embedding=[4.0]))
    assert match_vectors(nodes, candidates, units)[2] == [4.0]
    nodes[1].node.embedding = None
    assert match_vectors(nodes, candidates, units[:3]) == [None, [2.0], None]


@pytest.mark.parametrize("mode", MODES)
def test_passages_that_fit_are_returned_as_retrieved_without_a_warning(mode: str, caplog) -> None:
    post = ContextCompressionPostprocessor(embed_model=EMBED)
    with caplog.at_level(logging.WARNING, logger=LOGGER), instrumented() as (events, _):
        (result,) = run(post, mode, [passage("Short. Text.")], "text")
    assert [r for r in caplog.records if r.name == LOGGER] == []
    record = {"retrieval_rank": 0, "compressed": False, "budget": 600}
    assert get_trace(result.node, "compression") == record
    (event,) = [e for e in events if isinstance(e, ContextCompressionEvent)]
    assert event.nodes == [{"node_id": "p", **record}]


class Scripted(BaseRelevanceJudge):
    """Scores the sentence holding the word ``key``: 0.9, others 0.1; ``raw`` left out."""

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.9 if "key" in t else 0.1) for t in texts]


class Broken(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("judge down")


LONG = "Cats sleep a lot. Dogs bark at night. The key opens the old door."
LAST = "The key opens the old door."  # 7 tokens; two sentences take 11 or more


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_judge_is_warned_about_and_recorded(mode: str, caplog) -> None:
    post = ContextCompressionPostprocessor(judge=Broken(name="b"), max_context_tokens=5)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        (result,) = run(post, mode, [passage(LONG)], "question")
    (message,) = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    error = get_trace(result.node, "compression")["error"]
    assert "judge down" in error
    assert message == f"context compression skipped; passages as retrieved: {error}"


@pytest.mark.parametrize("mode", MODES)
def test_a_judge_score_without_a_raw_value_decides(mode: str) -> None:
    post = ContextCompressionPostprocessor(
        judge=Scripted(name="s"), cosine_weight=0, rank_weight=0, neighbours=0,
        max_context_tokens=9,
    )  # fmt: skip
    (result,) = run(post, mode, [passage(LONG)], "question")
    assert result.node.get_content() == LAST


@pytest.mark.parametrize("mode", MODES)
def test_the_cosine_decides_without_a_judge(mode: str) -> None:
    post = ContextCompressionPostprocessor(
        embed_model=EMBED, rank_weight=0, neighbours=0, max_context_tokens=9
    )
    (result,) = run(post, mode, [passage(LONG)], "old door key")
    assert result.node.get_content() == LAST


class NoExtra(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise ImportError("no e5 here")


@pytest.mark.parametrize("mode", MODES)
def test_a_missing_cjk_extra_is_warned_about_once(mode: str, caplog) -> None:
    english = HashEmbedding(dim=64, model_name="BAAI/bge-small-en-v1.5")
    post = ContextCompressionPostprocessor(
        embed_model=english, cjk_judge=NoExtra(name="e5"), max_context_tokens=20
    )
    text = "潜伏期一般为三到七天。病人需要隔离观察。医院提供免费检测服务。"
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        run(post, mode, [passage(text)], "潜伏期多长？")
        run(post, mode, [passage(text)], "潜伏期多长？")
    missing = f"the multilingual extra is missing ({CJK_EXTRA_HINT}): no e5 here"
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        f"context compression scores Chinese pairs by cosine: {missing}"
    ]
    bundle = QueryBundle("潜伏期多长？")
    result = post.postprocess_nodes([passage(text)], bundle)
    assert get_trace(result[0].node, "compression")["cjk"]["reason"] == missing


@pytest.mark.parametrize("mode", MODES)
def test_the_record_of_a_compressed_passage(mode: str) -> None:
    post = ContextCompressionPostprocessor(
        judge=Scripted(name="s"), cosine_weight=0, rank_weight=0, neighbours=0,
        max_context_tokens=9,
    )  # fmt: skip
    (result,) = run(post, mode, [passage(LONG)], "question")
    start = LONG.index(LAST)
    assert get_trace(result.node, "compression") == {
        "retrieval_rank": 0,
        "rank": 0,
        "compressed": True,
        "spans": [[start, start + len(LAST)]],
        "kept_sentences": 1,
        "sentences": 3,
        "budget": 9,
        "scorer": "judge",
        "vectors": {},
    }


@pytest.mark.parametrize("mode", MODES)
def test_passages_keep_their_order_unless_ranked(mode: str) -> None:
    first, second = passage("Cats sleep a lot. Dogs bark.", "a"), passage(LAST, "b")
    post = ContextCompressionPostprocessor(
        judge=Scripted(name="s"), cosine_weight=0, rank_weight=0, neighbours=0,
        max_context_tokens=13,
    )  # fmt: skip
    assert [r.node.node_id for r in run(post, mode, [first, second], "q")] == ["a", "b"]
    post.rank_passages = True
    assert [r.node.node_id for r in run(post, mode, [first, second], "q")] == ["b", "a"]


@pytest.mark.parametrize("mode", MODES)
def test_ranking_passages_that_fit_keeps_each_whole(mode: str) -> None:
    post = ContextCompressionPostprocessor(judge=Scripted(name="s"), rank_passages=True)
    output = run(post, mode, [passage(LONG, "a"), passage("", "e")], "q")
    assert [r.node.node_id for r in output] == ["a"]
    trace = get_trace(output[0].node, "compression")
    assert (trace["spans"], trace["kept_sentences"]) == ([[0, len(LONG)]], 3)


class Short(HashEmbedding):
    """Returns one vector too few for a batch."""

    def get_text_embedding_batch(self, texts, **kwargs):  # type: ignore[override]
        return super().get_text_embedding_batch(texts, **kwargs)[:-1]

    async def aget_text_embedding_batch(self, texts, **kwargs):  # type: ignore[override]
        return super().get_text_embedding_batch(texts, **kwargs)[:-1]


@pytest.mark.parametrize("mode", MODES)
def test_a_short_embedding_batch_leaves_the_passages_as_retrieved(mode: str) -> None:
    post = ContextCompressionPostprocessor(embed_model=Short(dim=64), max_context_tokens=9)
    (result,) = run(post, mode, [passage(LONG)], "old door key")
    trace = get_trace(result.node, "compression")
    assert trace["compressed"] is False and "embedding" in trace["error"]
    assert result.node.get_content() == LONG


class Unnamed:
    """An embedding model whose name cannot be read: the CJK plan fails on it."""

    @property
    def model_name(self) -> str:
        raise RuntimeError("no model here")


@pytest.mark.parametrize("mode", MODES)
def test_an_unusable_embedding_model_leaves_the_passages_as_retrieved(mode: str) -> None:
    from llama_index_ext_advrag.plan import as_failed

    post = ContextCompressionPostprocessor(embed_model=Unnamed(), max_context_tokens=20)
    text = "潜伏期一般为三到七天。病人需要隔离观察。医院提供免费检测服务。"
    with instrumented() as (events, _):
        (result,) = run(post, mode, [passage(text)], "潜伏期多长？")
    error = as_failed("embedding", RuntimeError("no model here")).error
    assert get_trace(result.node, "compression") == {
        "retrieval_rank": 0, "compressed": False, "budget": 20, "error": error,
    }  # fmt: skip
    (event,) = [e for e in events if isinstance(e, ContextCompressionEvent)]
    assert (event.query, event.tokens_before, event.error) == ("潜伏期多长？", 43, error)


@pytest.mark.parametrize("mode", MODES)
def test_the_judge_failure_is_named(mode: str) -> None:
    from llama_index_ext_advrag.plan import as_failed

    post = ContextCompressionPostprocessor(judge=Broken(name="b"), max_context_tokens=5)
    (result,) = run(post, mode, [passage(LONG)], "question")
    expected = as_failed("judge", RuntimeError("judge down")).error
    assert get_trace(result.node, "compression")["error"] == expected


class Scripted_e5(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        return [self.grade(0.9 if "隔离" in t else 0.1) for t in texts]


@pytest.mark.parametrize("mode", MODES)
def test_all_pairs_judged_by_the_cjk_judge_read_no_vector(mode: str) -> None:
    english = HashEmbedding(dim=64, model_name="BAAI/bge-small-en-v1.5")
    post = ContextCompressionPostprocessor(
        embed_model=english, cjk_judge=Scripted_e5(name="e5"), max_context_tokens=20,
        rank_weight=0, neighbours=0,
    )  # fmt: skip
    text = "潜伏期一般为三到七天。病人需要隔离观察。医院提供免费检测服务。"
    (result,) = run(post, mode, [passage(text)], "潜伏期多长？")
    trace = get_trace(result.node, "compression")
    assert trace["vectors"] == {"stored": 0, "embedded": 0}
    assert result.node.get_content() == "病人需要隔离观察。"


class QueryGiven(HashEmbedding):
    def _get_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("the bundle's query vector must be used")

    async def _aget_query_embedding(self, query: str) -> list[float]:
        raise AssertionError("the bundle's query vector must be used")


@pytest.mark.parametrize("mode", MODES)
def test_the_bundles_query_vector_is_used(mode: str) -> None:
    post = ContextCompressionPostprocessor(
        embed_model=QueryGiven(dim=64), rank_weight=0, neighbours=0, max_context_tokens=9
    )
    bundle = QueryBundle("old door key", embedding=EMBED.get_query_embedding("old door key"))
    if mode == "sync":
        (result,) = post.postprocess_nodes([passage(LONG)], bundle)
    else:
        (result,) = asyncio.run(post.apostprocess_nodes([passage(LONG)], bundle))
    assert result.node.get_content() == LAST


@pytest.mark.parametrize("mode", MODES)
def test_a_passage_at_the_budget_is_left_alone(mode: str) -> None:
    post = ContextCompressionPostprocessor(embed_model=EMBED, neighbours=0, max_context_tokens=7)
    (result,) = run(post, mode, [passage(LAST)], "door")  # LAST is exactly 7 tokens
    assert get_trace(result.node, "compression")["compressed"] is False


def test_the_constructor_errors_word_for_word() -> None:
    with pytest.raises(ValueError, match="vector_store must be a MilvusVectorStore, got str"):
        ContextCompressionPostprocessor(embed_model=EMBED, vector_store="not a store")
    message = (
        r"^no sentence score: pass a judge= or set cosine_weight > 0 "
        r"\(got judge=None, cosine_weight=0.0\)$"
    )
    with pytest.raises(ValueError, match=message):
        ContextCompressionPostprocessor(cosine_weight=0)
    with pytest.raises(
        ValueError, match="^judge_weight and cosine_weight are both 0: no sentence score$"
    ):
        ContextCompressionPostprocessor(judge=Scripted(name="s"), judge_weight=0, cosine_weight=0)


@pytest.mark.parametrize("mode", MODES)
def test_a_judge_of_weight_zero_is_not_asked(mode: str) -> None:
    post = ContextCompressionPostprocessor(
        judge=Broken(name="b"), judge_weight=0, embed_model=EMBED, max_context_tokens=9
    )
    (result,) = run(post, mode, [passage(LONG)], "old door key")
    assert get_trace(result.node, "compression")["compressed"] is True


class BrokenCjk(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        raise RuntimeError("e5 crashed")


class SlowCjk(BaseRelevanceJudge):
    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        import time

        time.sleep(0.5)
        return [self.grade(0.5) for _ in texts]


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_or_slow_cjk_judge_leaves_the_passages_as_retrieved(mode: str) -> None:
    from llama_index_ext_advrag.plan import as_failed

    english = HashEmbedding(dim=64, model_name="BAAI/bge-small-en-v1.5")
    text = "潜伏期一般为三到七天。病人需要隔离观察。医院提供免费检测服务。"
    post = ContextCompressionPostprocessor(
        embed_model=english, cjk_judge=BrokenCjk(name="e5"), max_context_tokens=20
    )
    (result,) = run(post, mode, [passage(text)], "潜伏期多长？")
    expected = as_failed("judge", RuntimeError("e5 crashed")).error
    assert get_trace(result.node, "compression")["error"] == expected
    post = ContextCompressionPostprocessor(
        embed_model=english, cjk_judge=SlowCjk(name="e5"), max_context_tokens=20,
        judge_timeout=0.05,
    )  # fmt: skip
    (result,) = run(post, mode, [passage(text)], "潜伏期多长？")
    assert get_trace(result.node, "compression")["error"] == "judge timed out after 0.05 s"


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_embedding_is_named_and_the_event_names_each_node(mode: str) -> None:
    post = ContextCompressionPostprocessor(embed_model=Short(dim=64), max_context_tokens=9)
    (result,) = run(post, mode, [passage(LONG)], "old door key")
    assert get_trace(result.node, "compression")["error"].startswith("embedding failed: ")
    post = ContextCompressionPostprocessor(embed_model=EMBED, max_context_tokens=9)
    with instrumented() as (events, _):
        run(post, mode, [passage(LONG)], "old door key")
    (event,) = [e for e in events if isinstance(e, ContextCompressionEvent)]
    assert [n["node_id"] for n in event.nodes] == ["p"]
