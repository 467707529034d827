"""Judge rerank, CRAG and Self-RAG as compare pipelines, with answers evaluated end to end
(Milvus Lite, a hash embedding, a keyword judge and a scripted LLM)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from evaluation._corpus import write_corpus
from llama_index.core.prompts.default_prompts import DEFAULT_TEXT_QA_PROMPT
from llama_index.core.schema import MetadataMode, QueryBundle

from llama_index_ext_advrag.evaluation import session
from llama_index_ext_advrag.evaluation.compare import context_text
from llama_index_ext_advrag.evaluation.compose import BuildContext, SpecError
from llama_index_ext_advrag.evaluation.ingest import IndexStore
from llama_index_ext_advrag.evaluation.registry import get_pipeline, offline_pipeline_names
from llama_index_ext_advrag.evaluation.sources import load_corpus
from llama_index_ext_advrag.judges import BaseRelevanceJudge
from llama_index_ext_advrag.trace import TRACE_KEY

pytestmark = pytest.mark.milvus_lite

JUDGED = ("hybrid-rerank", "crag", "self-rag")


class KeywordJudge(BaseRelevanceJudge):
    """Relevant when the text shares a word (or a CJK character pair) with the query."""

    def _judge(self, query: str, texts: list[str]) -> list:
        words = set(re.findall(r"\w+", query.lower())) - {"the", "at", "what", "does", "when"}
        return [self.grade(float(any(w in t.lower() for w in words))) for t in texts]


def scripted(prompt: str) -> str:
    """YES for support prompts whose information is in the context; answers from the context."""
    if prompt.startswith("Please tell if"):
        information = re.findall(r"Information: (.*)\n", prompt)[-1].strip().rstrip(".")
        return "YES" if information.lower() in prompt.rsplit("Context:", 1)[1].lower() else "NO"
    if prompt.endswith(("Support:", "Rating:")):  # Self-RAG's critique continues its generation
        return "fully" if prompt.endswith("Support:") else "5"
    if "3.5 bar" in prompt and "pressure" in prompt:
        return "The Ferro pump runs at 3.5 bar."
    if "fan" in prompt:
        return "The cooling fan starts when the housing reaches 40 degrees. It is painted green."
    return "Yes."  # Self-RAG's retrieve / support / usefulness questions, and the rest


def test_the_judged_pipelines_are_registered_by_name_only() -> None:
    assert {"hybrid-rerank", "crag"} <= set(offline_pipeline_names())  # no LLM needed
    assert "self-rag" not in offline_pipeline_names()
    default = [p.name for p in session.select_pipelines(None, None, ScriptedLLM(["x"]), True)]
    assert "baseline" in default and not set(JUDGED) & set(default)  # slow: only when named
    assert get_pipeline("self-rag").generates and get_pipeline("self-rag").needs_llm
    assert get_pipeline("crag").by_name_only and not get_pipeline("crag").needs_llm


@pytest.fixture
def context(tmp_path: Path) -> BuildContext:
    docs, _ = write_corpus(tmp_path)
    store = IndexStore(load_corpus([docs]), str(tmp_path / "m.db"), HashEmbedding(dim=64),
                       state_dir=tmp_path / "state", show_progress=False)  # fmt: skip
    built = BuildContext(store, llm=None, english_only_embedding=False, judge=KeywordJudge())
    yield built
    store.close()


def test_crag_and_rerank_grade_with_the_run_judge(context: BuildContext) -> None:
    query = QueryBundle("At what pressure does the Ferro pump run?")
    for name in ("hybrid-rerank", "crag"):
        pipeline = get_pipeline(name).build(context)
        nodes = pipeline.retrieve(query, 2)
        assert nodes, name
        text = " ".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)
        assert "3.5 bar" in text, name
        component = "judge_rerank" if name == "hybrid-rerank" else "crag"
        assert any(component in n.node.metadata.get(TRACE_KEY, {}) for n in nodes), name
        pipeline.close()


def test_self_rag_needs_answers_and_an_llm(context: BuildContext) -> None:
    with pytest.raises(SpecError, match=r"\['self-rag'\] generate their own answer: run them "):
        session.select_pipelines(["baseline", "self-rag"], None, ScriptedLLM(["x"]))
    with pytest.raises(SpecError, match="need an LLM and none is set"):
        session.select_pipelines(["self-rag"], None, None, answers=True)
    with pytest.raises(ValueError, match="'self-rag' generates its answer and needs an LLM"):
        get_pipeline("self-rag").build(context)


def test_compare_with_answers_runs_every_judged_pipeline_and_caches(
    tmp_path: Path, monkeypatch
) -> None:
    model = HashEmbedding(dim=64)
    monkeypatch.setattr("llama_index_ext_advrag.models.load_default_embed_model", lambda: model)
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_multilingual_embed_model", lambda: model
    )
    docs, qa = write_corpus(tmp_path)

    def options(llm: ScriptedLLM) -> session.CompareOptions:
        return session.CompareOptions(
            docs=[str(docs)], questions=str(qa), pipelines=["baseline", *JUDGED],
            uri=str(tmp_path / "m.db"), state_dir=str(tmp_path / "s"), out=str(tmp_path / "o"),
            ks=(1, 2), k=2, llm=llm, answers=True, judge=KeywordJudge(), show_progress=False,
        )  # fmt: skip

    llm = ScriptedLLM(scripted)
    run, files = session.run_compare(options(llm))
    rows = {(a.pipeline, a.question_id): a for a in run.answers}
    assert {p for p, _ in rows} == {"baseline", *JUDGED}
    assert all(a.error is None for a in run.answers), [a.error for a in run.answers if a.error]
    e1 = rows[("baseline", "e1")]
    assert (e1.answer, e1.fact_recall, e1.hallucinated) == (
        "The Ferro pump runs at 3.5 bar.", True, False)  # fmt: skip
    e2 = rows[("baseline", "e2")]  # "It is painted green." is in no context: unsupported
    assert (e2.fact_recall, e2.hallucinated, e2.sentences, e2.unsupported) == (True, True, 2, 1)
    crag = rows[("crag", "e1")]
    assert (crag.fact_recall, crag.hallucinated) == (True, False)
    assert rows[("self-rag", "e1")].llm_calls > 1  # Self-RAG generates and critiques itself
    calls = len(llm.prompts)
    assert calls > 0

    report = (tmp_path / "o" / "report.md").read_text(encoding="utf-8")
    assert "## Answers" in report
    assert "| pipeline | k | n | hallucination rate | fact recall (EM) | token F1 |" in report
    assert "| crag | hallucination rate |" in report  # paired against the baseline
    data = json.loads(files["json"].read_text(encoding="utf-8"))
    assert [s["pipeline"] for s in data["answer_summaries"]] == ["baseline", *JUDGED]
    assert files["answers"].is_file()

    again = ScriptedLLM(scripted)  # re-scoring: every generation and judgement from the cache
    rerun, _ = session.run_compare(options(again))
    assert [p for p in again.prompts if p.startswith(("Context information", "Please tell"))] == []
    assert [a.answer for a in rerun.answers] == [a.answer for a in run.answers]
    assert all(a.cached for a in rerun.answers)


def test_self_rag_refuses_without_a_relevant_passage_and_reads_passages_whole(
    context: BuildContext,
) -> None:
    """The compare pipeline decides retrieval by ISREL (no passage passes: the
    insufficient-evidence answer, no LLM call) and generates from whole passages, as
    always-retrieve's context holds them."""
    from llama_index_ext_advrag.query_engine.self_rag_critique import DEFAULT_INSUFFICIENT_ANSWER

    llm = ScriptedLLM(scripted)
    context.llm = llm
    pipeline = get_pipeline("self-rag").build(context)
    answer, nodes = pipeline.answer(QueryBundle("Zebra quokka xylophone?"), 2)
    assert (answer, nodes, llm.prompts) == (DEFAULT_INSUFFICIENT_ANSWER, [], [])
    answer, nodes = pipeline.answer(QueryBundle("At what pressure does the Ferro pump run?"), 2)
    assert answer == "The Ferro pump runs at 3.5 bar." and nodes
    [generation] = [p for p in llm.prompts if p.endswith("Answer: ")]
    for node in nodes:
        assert node.node.get_content(metadata_mode=MetadataMode.NONE) in generation
    retrieved = pipeline.retrieve(QueryBundle("At what pressure does the Ferro pump run?"), 2)
    assert [n.node.node_id for n in retrieved] == [n.node.node_id for n in nodes]  # all pass
    assert generation == DEFAULT_TEXT_QA_PROMPT.format(
        context_str=context_text(retrieved), query_str="At what pressure does the Ferro pump run?"
    )  # always-retrieve's prompt, word for word
    assert len(llm.prompts) == 3  # generation, ISSUP, ISUSE: no retrieve-decision call
    pipeline.close()


def test_self_rag_pipeline_generates_from_the_retrieval_and_reads_the_critique_by_logprobs(
    context: BuildContext,
) -> None:
    """The settings picked on the pilot's tuning set: once a passage passes ISREL the
    generation reads all the retrieved passages, and ISSUP / ISUSE ask for log-probabilities;
    the answer cache's key names both."""
    from llama_index_ext_advrag.query_engine.self_rag_critique import GenerationPassages

    context.llm = ScriptedLLM(scripted)
    pipeline = get_pipeline("self-rag").build(context)
    engine = pipeline._engine(2)
    assert engine.generation_passages is GenerationPassages.RETRIEVED
    assert engine.critique_logprobs is True
    assert pipeline.settings.endswith(
        "passages uncut, generation from the retrieved passages, critique by logprobs"
    )
    pipeline.close()


def test_self_rag_pipeline_tells_its_own_refusal_in_either_language() -> None:
    from llama_index_ext_advrag.evaluation.judged import SelfRAGPipeline
    from llama_index_ext_advrag.query_engine.self_rag_critique import (
        DEFAULT_INSUFFICIENT_ANSWER,
        DEFAULT_INSUFFICIENT_ANSWER_ZH,
    )

    assert SelfRAGPipeline.refused(DEFAULT_INSUFFICIENT_ANSWER + "\n", "How often?")
    assert SelfRAGPipeline.refused(DEFAULT_INSUFFICIENT_ANSWER_ZH, "多久一次？")
    # the other language's refusal, or a reworded one, is an answer to be judged
    assert not SelfRAGPipeline.refused(DEFAULT_INSUFFICIENT_ANSWER_ZH, "How often?")
    assert not SelfRAGPipeline.refused("The evidence is insufficient.", "How often?")
