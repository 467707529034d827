"""Scoring a comparison, rule by rule: the context as the LLM sees it, answer coverage, the
evidence rank (document ids, contained texts, the length floor), LLM-call counting, the run
over questions at several k, and the summaries' arithmetic checked by hand."""

from __future__ import annotations

import math

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.callbacks import CallbackManager, CBEventType
from llama_index.core.schema import NodeRelationship, NodeWithScore, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.evaluation.compare import (
    MIN_CONTAINED_CHARS,
    LLMCallCounter,
    QuestionResult,
    answer_groups_covered,
    attach_counter,
    context_text,
    embed_questions,
    evidence_rank,
    percentile,
    run_questions,
    score,
    summarize,
    summarize_all,
)
from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.text import count_tokens


def hit(text: str, doc: str | None = None, source: str | None = None) -> NodeWithScore:
    node = TextNode(text=text, metadata={"document_id": doc} if doc else {})
    if source:
        node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=source)
    return NodeWithScore(node=node, score=1.0)


def result(**changed) -> QuestionResult:
    values = dict(
        pipeline="p", question_id="q", question_type="single-hop", probe=False, k=2,
        covered=True, evidence_rank=1, context_tokens=10, nodes=2, latency_ms=None, llm_calls=0,
    )  # fmt: skip
    values.update(changed)
    return QuestionResult(**values)


# --- context and coverage -----------------------------------------------------------------------


def test_the_context_is_the_node_texts_without_metadata() -> None:
    nodes = [hit("First text.", doc="d1"), hit("Second text.", doc="d2")]
    assert context_text(nodes) == "First text.\n\nSecond text."
    assert context_text([]) == ""


def test_every_group_needs_one_non_blank_alternative() -> None:
    context = "The Pump  runs\nat 40 degrees."
    assert answer_groups_covered(context, [["pump runs"], ["40 DEGREES", "forty"]])
    assert not answer_groups_covered(context, [["pump runs"], ["fifty"]])
    assert not answer_groups_covered(context, [["zzz", "", "  "]])  # blanks are no alternative
    assert answer_groups_covered(context, [])


# --- evidence rank ------------------------------------------------------------------------------


def test_no_evidence_gives_none_and_blank_evidence_matches_nothing() -> None:
    nodes = [hit("Anything at all here.")]
    assert evidence_rank(nodes, Question(id="q", question="?")) is None
    assert evidence_rank(nodes, Question(id="q", question="?", evidence_texts=("  ",))) == 0


def test_a_gold_document_id_matches_by_source_or_metadata_at_its_rank() -> None:
    nodes = [hit("Unrelated one."), hit("Unrelated two.", doc="d2"), hit("Three.", source="d3")]
    question = Question(id="q", question="?", evidence_docs=("d3", "d2"))
    assert evidence_rank(nodes, question) == 2
    assert evidence_rank(nodes, Question(id="q", question="?", evidence_docs=("d3",))) == 3
    assert evidence_rank(nodes, Question(id="q", question="?", evidence_docs=("d9",))) == 0


def test_text_evidence_matches_a_node_holding_it_or_a_long_node_inside_it() -> None:
    gold = "The crew inspects the northern pumping station every Tuesday morning."
    question = Question(id="q", question="?", evidence_texts=(gold,))
    holder = hit(f"Before. {gold.upper()} After.")  # normalised: case ignored
    assert evidence_rank([hit("Unrelated node."), holder], question) == 2
    inside = gold[4 : 4 + MIN_CONTAINED_CHARS]  # exactly the floor: counts
    assert len(inside) == MIN_CONTAINED_CHARS
    assert evidence_rank([hit(inside)], question) == 1
    assert evidence_rank([hit(inside[:-1])], question) == 0  # one character short
    assert evidence_rank([hit("Unrelated node.")], question) == 0  # no doc ids: no doc match
    titled = TextNode(text=inside, metadata={"section": "Intro"})  # metadata is not read
    assert evidence_rank([NodeWithScore(node=titled, score=1.0)], question) == 1


# --- counting LLM calls -------------------------------------------------------------------------


def test_the_counter_counts_llm_events_only() -> None:
    counter = LLMCallCounter()
    manager = CallbackManager([counter])
    llm = ScriptedLLM(["ok"], callback_manager=manager)
    llm.complete("one")
    llm.complete("two")
    with manager.event(CBEventType.QUERY):
        pass
    assert counter.calls == 2
    assert counter.on_event_start(CBEventType.LLM, event_id="e7") == "e7"
    assert counter.on_event_start(CBEventType.LLM) == ""
    assert counter.calls == 4
    assert counter.on_event_end(CBEventType.LLM, event_id="e7") is None
    assert counter.start_trace("t") is None and counter.end_trace("t") is None


def test_attach_counter_adds_its_handler_to_the_llm() -> None:
    llm = ScriptedLLM(["ok"], callback_manager=CallbackManager([]))
    counter = attach_counter(llm)
    assert counter in llm.callback_manager.handlers
    llm.complete("one")
    assert counter.calls == 1
    assert attach_counter(None).calls == 0  # no LLM: a counter that stays at zero
    assert attach_counter(object()).calls == 0  # no callback manager: nothing to attach to


# --- embedding and running ----------------------------------------------------------------------


class RecordingEmbedding:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def get_query_embedding(self, text: str) -> list[float]:
        self.seen.append(text)
        return [float(len(text)), 1.0]


def test_each_question_is_embedded_once_into_its_bundle(capsys) -> None:
    questions = [Question(id="a", question="Short?"), Question(id="b", question="Longer one?")]
    embed = RecordingEmbedding()
    bundles = embed_questions(questions, embed, show_progress=False)
    assert [(b.query_str, b.embedding) for b in bundles] == [
        ("Short?", [6.0, 1.0]),
        ("Longer one?", [11.0, 1.0]),
    ]
    assert embed.seen == ["Short?", "Longer one?"]
    assert capsys.readouterr().err == ""  # no progress bar when it is off


class ScriptedPipeline:
    """Returns ``k`` copies of one node and makes one LLM call per retrieval at k > 1."""

    name = "scripted"

    def __init__(self, counter: LLMCallCounter, warm: bool = True) -> None:
        self.counter = counter
        self.calls: list[tuple[str, int]] = []
        if warm:
            self.warm = lambda bundle, k: self.calls.append((f"warm {bundle.query_str}", k))

    def retrieve(self, bundle, k: int) -> list[NodeWithScore]:
        self.calls.append((bundle.query_str, k))
        self.counter.calls += k - 1
        return [hit("The pump runs at forty degrees.", doc="d1") for _ in range(k)]


def test_run_questions_times_the_main_k_and_scores_every_k() -> None:
    counter = LLMCallCounter()
    pipeline = ScriptedPipeline(counter)
    questions = [
        Question(id="a", question="Pump?", answer_groups=(("forty",),), evidence_docs=("d1",)),
        Question(id="b", question="Fan?", type="multi-hop", probe=True),
    ]
    bundles = embed_questions(questions, RecordingEmbedding(), show_progress=False)
    results = run_questions(pipeline, questions, bundles, ks=[3, 1, 3], main_k=2,
                            counter=counter, show_progress=False)  # fmt: skip
    assert pipeline.calls == [("Pump?", 2), ("warm Pump?", 3), ("Pump?", 1), ("Pump?", 3),
                              ("Fan?", 2), ("warm Fan?", 3), ("Fan?", 1), ("Fan?", 3)]  # fmt: skip
    assert [(r.question_id, r.k, r.llm_calls, r.nodes) for r in results] == [
        ("a", 2, 1, 2), ("a", 1, 0, 1), ("a", 3, 2, 3),
        ("b", 2, 1, 2), ("b", 1, 0, 1), ("b", 3, 2, 3),
    ]  # fmt: skip
    assert [r.latency_ms is not None for r in results] == [True, False, False] * 2
    assert all(r.latency_ms >= 0 for r in results if r.latency_ms is not None)
    first, other = results[0], results[3]
    assert (first.covered, first.evidence_rank, first.question_type, first.probe) == (
        True, 1, "single-hop", False,
    )  # fmt: skip
    assert (other.covered, other.evidence_rank, other.question_type, other.probe) == (
        None, None, "multi-hop", True,
    )  # fmt: skip
    assert {r.pipeline for r in results} == {"scripted"}


def test_progress_bars_show_by_default_and_are_cleared(capsys) -> None:
    questions = [Question(id="a", question="Pump?")]
    bundles = embed_questions(questions, RecordingEmbedding())
    err = capsys.readouterr().err
    assert "embedding questions: " in err and err.endswith("\r")  # leave=False: cleared
    run_questions(ScriptedPipeline(LLMCallCounter()), questions, bundles, ks=[1], main_k=1)
    err = capsys.readouterr().err
    assert "scripted: " in err and err.endswith("\r")
    run_questions(ScriptedPipeline(LLMCallCounter()), questions, bundles, ks=[1], main_k=1,
                  show_progress=False)  # fmt: skip
    assert capsys.readouterr().err == ""


def test_the_main_k_latency_is_in_milliseconds(monkeypatch) -> None:
    from llama_index_ext_advrag.evaluation import compare

    clock = iter([10.0, 10.25])
    monkeypatch.setattr(compare.time, "perf_counter", lambda: next(clock))
    questions = [Question(id="a", question="Pump?")]
    bundles = embed_questions(questions, RecordingEmbedding(), show_progress=False)
    [scored] = run_questions(ScriptedPipeline(LLMCallCounter()), questions, bundles, ks=[1],
                             main_k=1, show_progress=False)  # fmt: skip
    assert scored.latency_ms == 250.0


def test_a_pipeline_is_not_warmed_without_other_k() -> None:
    pipeline = ScriptedPipeline(LLMCallCounter())
    questions = [Question(id="a", question="Pump?")]
    bundles = embed_questions(questions, RecordingEmbedding(), show_progress=False)
    run_questions(pipeline, questions, bundles, ks=[2], main_k=2, show_progress=False)
    assert pipeline.calls == [("Pump?", 2)]


def test_run_questions_without_warm_or_other_k_and_with_its_own_counter() -> None:
    pipeline = ScriptedPipeline(LLMCallCounter(), warm=False)
    questions = [Question(id="a", question="Pump?")]
    bundles = embed_questions(questions, RecordingEmbedding(), show_progress=False)
    results = run_questions(pipeline, questions, bundles, ks=[2], main_k=2, show_progress=False)
    assert pipeline.calls == [("Pump?", 2)]
    assert [(r.k, r.llm_calls) for r in results] == [(2, 0)]  # its own counter saw no call
    with pytest.raises(ValueError):
        run_questions(pipeline, questions, [], ks=[2], main_k=2, show_progress=False)


def test_score_counts_the_context_tokens_and_leaves_coverage_to_answerable_questions() -> None:
    nodes = [hit("The pump runs."), hit("At forty degrees.")]
    question = Question(id="q", question="?", answer_groups=(("forty",), ("pump",)), type="t")
    scored = score("p", question, 2, nodes, latency_ms=1.5, llm_calls=3)
    assert scored == QuestionResult(
        pipeline="p", question_id="q", question_type="t", probe=False, k=2, covered=True,
        evidence_rank=None, context_tokens=count_tokens("The pump runs.\n\nAt forty degrees."),
        nodes=2, latency_ms=1.5, llm_calls=3,
    )  # fmt: skip


# --- summaries ----------------------------------------------------------------------------------


def test_percentile_interpolates_linearly_and_is_nan_when_empty() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20], 95) == pytest.approx(19.5)
    assert math.isnan(percentile([], 50))


def test_summarize_by_hand() -> None:
    results = [
        result(covered=True, evidence_rank=1, context_tokens=10, latency_ms=10.0, llm_calls=1),
        result(covered=False, evidence_rank=4, context_tokens=20, latency_ms=30.0, llm_calls=2),
        result(covered=None, evidence_rank=0, context_tokens=30),
        result(covered=True, evidence_rank=None, context_tokens=40),
    ]
    summary = summarize(results, group="multi-hop")
    assert (summary.pipeline, summary.k, summary.group) == ("p", 2, "multi-hop")
    assert (summary.questions, summary.answerable) == (4, 3)
    assert summary.coverage == pytest.approx(2 / 3)
    assert summary.hit == pytest.approx(2 / 3)  # ranks 1, 4, 0
    assert summary.mrr == pytest.approx((1 + 1 / 4) / 3)
    assert summary.mean_tokens == 25.0
    assert summary.p95_tokens == pytest.approx(38.5)
    assert summary.p50_latency_ms == 20.0
    assert summary.p95_latency_ms == pytest.approx(29.0)
    assert summary.llm_calls == 3


def test_summarize_without_measurable_values_gives_none() -> None:
    summary = summarize([result(covered=None, evidence_rank=None, latency_ms=None)])
    assert summary.group == "all"
    assert (summary.coverage, summary.hit, summary.mrr) == (None, None, None)
    assert (summary.p50_latency_ms, summary.p95_latency_ms) == (None, None)
    with pytest.raises(ValueError) as caught:
        summarize([])
    assert str(caught.value) == "summarize needs at least one result"


def test_summarize_all_groups_by_pipeline_k_and_type() -> None:
    results = [
        result(pipeline="a", k=1, question_type="x"),
        result(pipeline="a", k=2, question_type="y"),
        result(pipeline="b", k=1, question_type="x"),
        result(pipeline="a", k=1, question_type="y"),
    ]
    plain = summarize_all(results)
    assert [(s.pipeline, s.k, s.group, s.questions) for s in plain] == [
        ("a", 1, "all", 2), ("a", 2, "all", 1), ("b", 1, "all", 1),
    ]  # fmt: skip
    typed = summarize_all(results, by_type=True)
    assert [(s.pipeline, s.k, s.group, s.questions) for s in typed] == [
        ("a", 1, "all", 2), ("a", 1, "x", 1), ("a", 2, "all", 1), ("a", 2, "y", 1),
        ("b", 1, "all", 1), ("b", 1, "x", 1), ("a", 1, "y", 1),
    ]  # fmt: skip
