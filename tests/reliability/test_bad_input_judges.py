"""Bad input through the relevance judges, CRAG, judge-rerank, Self-RAG and ``advrag
compare`` / ``advrag ask``: a result or a clear error naming the problem, no hang, nothing
dropped without a word. Outcomes are counted (``reliability_outcomes``) and printed.

Fixed on the way (each case below failed before): a lone surrogate crashed the cross-encoder
(and the language-routed judge) with the tokenizer's "TextInputSequence must be str"; a blank
text or query was graded by the model (an empty passage scored 0.0 and was dropped as
irrelevant); CRAG returning no node at all left no trace; ``--max-questions -1`` silently
dropped the last question and ``0`` was ignored, ``--probes 0`` was ignored and ``--probes -3``
raised "Sample larger than population or is negative"; ``advrag ask ""`` failed in pymilvus
("search_data value [None] is illegal").
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from evaluation._corpus import write_corpus
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import ImageNode, NodeWithScore, QueryBundle, TextNode
from reliability_outcomes import record

from llama_index_ext_advrag import cli
from llama_index_ext_advrag.judges import (
    BaseRelevanceJudge,
    CrossEncoderRelevanceJudge,
    EmbeddingRelevanceJudge,
    GradeLabel,
    LanguageRoutedJudge,
    LLMRelevanceJudge,
)
from llama_index_ext_advrag.judges.cross_encoder import (
    OnnxCrossEncoder,
    packaged_cross_encoder_dir,
)
from llama_index_ext_advrag.postprocessor import CRAGPostprocessor, JudgeRerankPostprocessor
from llama_index_ext_advrag.query_engine import SelfRAGQueryEngine
from llama_index_ext_advrag.retrievers import JiebaBM25Retriever
from llama_index_ext_advrag.trace import TRACE_KEY

pytestmark = pytest.mark.timeout(600)

STRINGS: dict[str, str] = {
    "empty": "",
    "whitespace": " \n\t\u3000 ",
    "50KB": "cats purr " * 5_000,
    "lone-surrogate": "Cats \ud800 purr.",
    "nul": "Cats\x00 purr.",
    "right-to-left": "مرحبا بالعالم. שלום עולם.",
    "emoji": "Cats 🐱 purr 😀 🎉",
    "chinese": "猫高兴时会发出呼噜声。",
    "punctuation-only": "?!。，…",
}
GOOD_TEXT = "Cats purr when they are content."
BLANK = ("empty", "whitespace")


def _cross_encoder_available() -> bool:
    try:
        packaged_cross_encoder_dir()
        import onnxruntime  # noqa: F401
        import tokenizers  # noqa: F401
    except (FileNotFoundError, ImportError):
        return False
    return True


CROSS_ENCODER = _cross_encoder_available()
needs_cross_encoder = pytest.mark.skipif(
    not CROSS_ENCODER, reason="the packaged cross-encoder needs the `judges` extra"
)


@functools.cache
def _packaged_cross_encoder() -> OnnxCrossEncoder:
    """The packaged model loaded once for the module: every judge below grades with it."""
    return OnnxCrossEncoder(packaged_cross_encoder_dir(), num_threads=1)


def _judges() -> dict[str, Callable[[], BaseRelevanceJudge]]:
    made: dict[str, Callable[[], BaseRelevanceJudge]] = {
        "embedding": lambda: EmbeddingRelevanceJudge(embed_model=HashEmbedding()),
        "llm": lambda: LLMRelevanceJudge(llm=ScriptedLLM(["yes"])),
    }
    if CROSS_ENCODER:
        made["cross-encoder"] = lambda: CrossEncoderRelevanceJudge(scorer=_packaged_cross_encoder())
        made["routed"] = lambda: LanguageRoutedJudge(
            {
                "en": CrossEncoderRelevanceJudge(scorer=_packaged_cross_encoder()),
                "zh": EmbeddingRelevanceJudge(embed_model=HashEmbedding()),
            }
        )
    return made


JUDGES = _judges()


def _grades_wrong(grades: list, texts: list[str], query: str) -> str | None:
    """Why a judge's answer is wrong: not one grade per text, a score out of [0, 1], a label
    that disagrees with the score, an unknown grade without a reason, a blank text graded."""
    if len(grades) != len(texts):
        return f"{len(grades)} grades for {len(texts)} texts"
    for text, grade in zip(texts, grades, strict=True):
        if grade.score is None:
            if grade.label is not GradeLabel.UNKNOWN or not grade.reason:
                return f"unknown grade without label/reason: {grade}"
        elif not 0.0 <= grade.score <= 1.0 or grade.label is GradeLabel.UNKNOWN:
            return f"bad grade {grade}"
        if not (query.strip() and text.strip()) and grade.known:
            return f"a blank query or text was graded: {grade}"
    return None


# --- judges ------------------------------------------------------------------------------------


@pytest.mark.parametrize("judge_name", sorted(JUDGES))
@pytest.mark.parametrize("query_name", sorted(STRINGS))
def test_judges_take_bad_queries_and_passages(judge_name: str, query_name: str) -> None:
    judge = JUDGES[judge_name]()
    query = STRINGS[query_name]
    texts = [*STRINGS.values(), GOOD_TEXT]
    outcome, value = record(
        "judges",
        f"{judge_name}/{query_name}",
        lambda: judge.judge(query, texts),
        check=lambda grades: _grades_wrong(grades, texts, query),
    )
    assert outcome == "result", value
    if query_name == "lone-surrogate" and judge_name in ("cross-encoder", "routed"):
        assert value[-1].known  # the surrogate became U+FFFD; the model read the query


@pytest.mark.parametrize("judge_name", sorted(JUDGES))
def test_judges_async_take_bad_passages(judge_name: str) -> None:
    judge = JUDGES[judge_name]()
    texts = [*STRINGS.values(), GOOD_TEXT]
    sync = judge.judge("cats purr", texts)
    outcome, value = record(
        "judges",
        f"{judge_name}/async",
        lambda: asyncio.run(judge.ajudge("cats purr", texts)),
        check=lambda grades: _grades_wrong(grades, texts, "cats purr"),
    )
    assert outcome == "result", value
    assert [g.score for g in value] == [g.score for g in sync]


WRONG_CALLS: dict[str, tuple[Callable[[BaseRelevanceJudge], Any], tuple[str, ...]]] = {
    "query-none": (lambda j: j.judge(None, ["x"]), ("query must be a str",)),
    "texts-a-str": (lambda j: j.judge("q", "text"), ("single str",)),
    "text-none": (lambda j: j.judge("q", ["x", None]), ("texts[1]",)),
    "text-bytes": (lambda j: j.judge("q", [b"x"]), ("texts[0]",)),
}


@pytest.mark.parametrize("case", sorted(WRONG_CALLS))
def test_judges_refuse_wrong_types(case: str) -> None:
    call, names = WRONG_CALLS[case]
    judge = EmbeddingRelevanceJudge(embed_model=HashEmbedding())
    outcome, value = record("judges", f"wrong-type/{case}", lambda: call(judge), names)
    assert outcome == "clear_error", value


BAD_JUDGE_ARGS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "threshold-above-1": (
        lambda: EmbeddingRelevanceJudge(decision_threshold=1.5),
        ("decision_threshold",),
    ),
    "llm-timeout-0": (lambda: LLMRelevanceJudge(timeout=0), ("timeout",)),
    "llm-concurrency-0": (lambda: LLMRelevanceJudge(max_concurrency=0), ("max_concurrency",)),
    "llm-prompt-without-text": (
        lambda: LLMRelevanceJudge(prompt=PromptTemplate("{query}")),
        ("text",),
    ),
    "routed-unknown-language": (
        lambda: LanguageRoutedJudge({"fr": EmbeddingRelevanceJudge()}),
        ("fr", "allowed"),
    ),
    "routed-none": (lambda: LanguageRoutedJudge({}), ("at least one",)),
    "cross-encoder-missing-model": (
        lambda: CrossEncoderRelevanceJudge(model_path="/nonexistent/model.onnx").judge("q", ["x"]),
        ("does not exist", "judges"),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_JUDGE_ARGS))
def test_judges_refuse_bad_arguments(case: str) -> None:
    make, names = BAD_JUDGE_ARGS[case]
    outcome, value = record("judges", f"bad-argument/{case}", make, names)
    assert outcome == "clear_error", value


# --- CRAG and judge-rerank ---------------------------------------------------------------------

CORPUS = [
    TextNode(text=text, id_=f"corpus-{i}")
    for i, text in enumerate(
        ["Cats purr when content.", "Dogs bark at strangers.", "Birds sing at dawn."]
    )
]


def _hits(text: str) -> list[NodeWithScore]:
    return [
        NodeWithScore(node=TextNode(text=text, id_="odd"), score=0.9),
        NodeWithScore(node=TextNode(text=GOOD_TEXT, id_="good"), score=0.5),
    ]


NODE_LISTS: dict[str, Callable[[], list[NodeWithScore]]] = {
    "no-nodes": lambda: [],
    "text-node-without-text": lambda: [NodeWithScore(node=TextNode(text="", id_="e"), score=1.0)],
    "image-node": lambda: [
        NodeWithScore(node=ImageNode(image="aGVsbG8=", id_="img"), score=1.0),
        NodeWithScore(node=TextNode(text=GOOD_TEXT, id_="good"), score=0.5),
    ],
    "score-none": lambda: [NodeWithScore(node=TextNode(text=GOOD_TEXT, id_="g"), score=None)],
    "duplicate-nodes": lambda: (
        [NodeWithScore(node=TextNode(text=GOOD_TEXT, id_="same"), score=0.5)] * 3
    ),
}


def _postprocessors() -> dict[str, Callable[[], Any]]:
    judge = EmbeddingRelevanceJudge(embed_model=HashEmbedding())
    return {
        "crag": lambda: CRAGPostprocessor(
            judge=judge,
            upper=0.6,
            lower=0.1,
            corrective_retriever=JiebaBM25Retriever(CORPUS, similarity_top_k=2),
        ),
        "crag-no-corrective": lambda: CRAGPostprocessor(judge=judge, upper=0.6, lower=0.1),
        "judge-rerank": lambda: JudgeRerankPostprocessor(judge=judge, top_n=5),
    }


POSTPROCESSORS = _postprocessors()


def _postprocess(make: Callable[[], Any], nodes: list[NodeWithScore], query: str, caplog) -> Any:
    before = copy.deepcopy(nodes)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        output = make().postprocess_nodes(nodes, query_str=query)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    if [(n.node.get_content(), n.score, dict(n.node.metadata)) for n in nodes] != [
        (n.node.get_content(), n.score, dict(n.node.metadata)) for n in before
    ]:
        raise AssertionError("the input nodes were modified")
    return output, warnings, len(nodes)


def _output_wrong(value: tuple[list[NodeWithScore], list[str], int]) -> str | None:
    """An output is fine when every node carries its trace, scores stay in [0, 1] and an
    empty output for non-empty input comes with a warning saying so."""
    output, warnings, given = value
    if given and not output and not any("no nodes" in w for w in warnings):
        return f"{given} nodes in, none out, and no warning"
    for node in output:
        trace = node.node.metadata.get(TRACE_KEY, {})
        if not ({"crag", "judge_rerank"} & set(trace)):
            return f"node {node.node.node_id} without a trace"
        if node.score is not None and not 0.0 <= node.score <= 1.0:
            return f"score {node.score} out of [0, 1]"
    return None


@pytest.mark.parametrize("post_name", sorted(POSTPROCESSORS))
@pytest.mark.parametrize("query_name", sorted(STRINGS))
def test_crag_and_rerank_take_bad_queries_and_passages(post_name, query_name, caplog) -> None:
    for text_name, text in STRINGS.items():
        outcome, value = record(
            "crag-rerank",
            f"{post_name}/{query_name}/{text_name}",
            lambda text=text: _postprocess(
                POSTPROCESSORS[post_name], _hits(text), STRINGS[query_name], caplog
            ),
            check=_output_wrong,
        )
        assert outcome == "result", value


@pytest.mark.parametrize("post_name", sorted(POSTPROCESSORS))
@pytest.mark.parametrize("list_name", sorted(NODE_LISTS))
def test_crag_and_rerank_take_odd_node_lists(post_name, list_name, caplog) -> None:
    outcome, value = record(
        "crag-rerank",
        f"{post_name}/{list_name}",
        lambda: _postprocess(POSTPROCESSORS[post_name], NODE_LISTS[list_name](), "cats", caplog),
        check=_output_wrong,
    )
    assert outcome == "result", value
    if list_name in ("text-node-without-text", "image-node"):
        # A node without text cannot be judged: an unknown grade, never "irrelevant"; it is
        # returned or (CRAG's Correct action keeps only confident nodes) listed as dropped.
        grades = []
        for node in value[0]:
            trace = node.node.metadata[TRACE_KEY]
            record_ = trace.get("crag") or trace.get("judge_rerank")
            if not node.node.get_content().strip():
                grades.append(record_.get("grade"))
            grades += [d["grade"] for d in record_.get("dropped", [])]
        assert grades, "the text-less node is neither returned nor traced as dropped"
        assert all(g is None or g["label"] == "unknown" for g in grades), grades


@pytest.mark.parametrize("post_name", sorted(POSTPROCESSORS))
def test_crag_and_rerank_async_take_bad_passages(post_name) -> None:
    async def run() -> list[list[NodeWithScore]]:
        post = POSTPROCESSORS[post_name]()
        return [
            await post.apostprocess_nodes(_hits(text), query_str="cats purr")
            for text in STRINGS.values()
        ]

    outcome, value = record("crag-rerank", f"{post_name}/async", lambda: asyncio.run(run()))
    assert outcome == "result", value
    sync = [
        POSTPROCESSORS[post_name]().postprocess_nodes(_hits(text), query_str="cats purr")
        for text in STRINGS.values()
    ]
    assert [[(n.node.node_id, n.score) for n in out] for out in value] == [
        [(n.node.node_id, n.score) for n in out] for out in sync
    ]


def _judge() -> EmbeddingRelevanceJudge:
    return EmbeddingRelevanceJudge(embed_model=HashEmbedding())


BAD_POSTPROCESSOR_ARGS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "rerank-top-n-0": (lambda: JudgeRerankPostprocessor(judge=_judge(), top_n=0), ("top_n",)),
    "rerank-top-n-negative": (
        lambda: JudgeRerankPostprocessor(judge=_judge(), top_n=-3),
        ("top_n",),
    ),
    "rerank-no-judge": (lambda: JudgeRerankPostprocessor(), ("judge",)),
    "crag-lower-above-upper": (
        lambda: CRAGPostprocessor(judge=_judge(), upper=0.2, lower=0.8),
        ("lower", "upper"),
    ),
    "crag-upper-above-1": (lambda: CRAGPostprocessor(judge=_judge(), upper=3.0), ("upper",)),
    "crag-lower-negative": (lambda: CRAGPostprocessor(judge=_judge(), lower=-1), ("lower",)),
    "crag-rounds-negative": (
        lambda: CRAGPostprocessor(judge=_judge(), max_rounds=-1),
        ("max_rounds",),
    ),
    "crag-rounds-huge": (
        lambda: CRAGPostprocessor(judge=_judge(), max_rounds=10**6),
        ("max_rounds",),
    ),
    "crag-strip-tokens-0": (
        lambda: CRAGPostprocessor(judge=_judge(), strip_tokens=0),
        ("strip_tokens",),
    ),
    "crag-no-query": (
        lambda: CRAGPostprocessor(judge=_judge()).postprocess_nodes(_hits("x")),
        ("query",),
    ),
    "rerank-no-query": (
        lambda: JudgeRerankPostprocessor(judge=_judge()).postprocess_nodes(_hits("x")),
        ("query",),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_POSTPROCESSOR_ARGS))
def test_crag_and_rerank_refuse_bad_arguments(case: str) -> None:
    make, names = BAD_POSTPROCESSOR_ARGS[case]
    outcome, value = record("crag-rerank", f"bad-argument/{case}", make, names)
    assert outcome == "clear_error", value


def test_rerank_takes_a_huge_top_n() -> None:
    outcome, value = record(
        "crag-rerank",
        "rerank-top-n-huge",
        lambda: JudgeRerankPostprocessor(judge=_judge(), top_n=10**9).postprocess_nodes(
            _hits("Dogs bark."), query_str="cats"
        ),
        check=lambda out: None if len(out) == 2 else f"{len(out)} nodes of 2",
    )
    assert outcome == "result", value


def test_crag_that_drops_everything_says_so(caplog) -> None:
    """Before: CRAG's Incorrect action with nothing found again returned [] in silence (the
    trace lives on returned nodes, and there were none). The paper's rule (``min_kept=0``);
    the default keeps the best-graded node back (tests/postprocessor/test_crag_defaults.py)."""
    crag = CRAGPostprocessor(judge=_judge(), upper=0.9, lower=0.5, min_kept=0)
    with caplog.at_level(logging.WARNING):
        output = crag.postprocess_nodes(_hits("Dogs bark."), query_str="parrots talk")
    assert output == []
    assert any("returns no nodes" in r.getMessage() for r in caplog.records)


# --- Self-RAG ----------------------------------------------------------------------------------


class FixedRetriever(BaseRetriever):
    """Returns the same nodes for every query (text-less ones included)."""

    def __init__(self, nodes: list[NodeWithScore]) -> None:
        super().__init__()
        self._nodes = nodes

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return [NodeWithScore(node=n.node, score=n.score) for n in self._nodes]


def _self_rag_llm() -> ScriptedLLM:
    def answer(prompt: str) -> str:
        if "Does it need documents?" in prompt:
            return "yes"
        if "Does the passage contain" in prompt:
            return "yes"
        if "Is the answer above supported" in prompt:
            return "fully"
        if "Rate how useful" in prompt:
            return "4"
        if "Rewrite the question" in prompt:
            return "cats purring"
        return "Cats purr when content."

    return ScriptedLLM(answer)


ALLOWED_KINDS = {
    "direct",
    "supported",
    "partially_supported",
    "insufficient_evidence",
    "extractive",
}


def _response_wrong(response: Any) -> str | None:
    trace = (response.metadata or {}).get(TRACE_KEY, {}).get("self_rag")
    if trace is None:
        return "no self_rag trace"
    if trace.get("answer_kind") not in ALLOWED_KINDS:
        return f"answer kind {trace.get('answer_kind')!r}"
    if not str(response).strip():
        return "an empty answer"
    for node in response.source_nodes:
        if node.score is not None and not 0.0 <= node.score <= 1.0:
            return f"source score {node.score}"
    return None


SELF_RAG_RETRIEVERS: dict[str, Callable[[], BaseRetriever]] = {
    "bm25-top-1": lambda: JiebaBM25Retriever(CORPUS, similarity_top_k=1),
    "bm25-top-huge": lambda: JiebaBM25Retriever(CORPUS, similarity_top_k=10**6),
    "text-less-nodes": lambda: FixedRetriever(
        [
            NodeWithScore(node=TextNode(text="", id_="empty"), score=0.9),
            NodeWithScore(node=ImageNode(image="aGVsbG8=", id_="img"), score=0.8),
            NodeWithScore(node=TextNode(text=GOOD_TEXT, id_="good"), score=0.5),
        ]
    ),
    "nothing": lambda: FixedRetriever([]),
}


@pytest.mark.parametrize("with_llm", [False, True], ids=["no-llm", "llm"])
@pytest.mark.parametrize("retriever_name", sorted(SELF_RAG_RETRIEVERS))
def test_self_rag_takes_bad_queries(with_llm: bool, retriever_name: str) -> None:
    for query_name, query in STRINGS.items():
        engine = SelfRAGQueryEngine(
            retriever=SELF_RAG_RETRIEVERS[retriever_name](),
            llm=_self_rag_llm() if with_llm else None,
            judge=None if with_llm else _judge(),
            max_retrievals=2,
        )
        outcome, value = record(
            "self-rag",
            f"{'llm' if with_llm else 'no-llm'}/{retriever_name}/{query_name}",
            lambda engine=engine, query=query: engine.query(query),
            check=_response_wrong,
        )
        assert outcome == "result", value


def test_self_rag_traces_nodes_without_text() -> None:
    """Before: text-less nodes were counted as ``already_judged`` in the trace."""
    engine = SelfRAGQueryEngine(
        retriever=SELF_RAG_RETRIEVERS["text-less-nodes"](), llm=None, judge=_judge()
    )
    trace = engine.query("cats purr").metadata[TRACE_KEY]["self_rag"]
    first = trace["iterations"][0]
    assert first["without_text"] == 2 and first["already_judged"] == 0


def test_self_rag_async_takes_bad_queries() -> None:
    engine = SelfRAGQueryEngine(
        retriever=SELF_RAG_RETRIEVERS["text-less-nodes"](), llm=_self_rag_llm(), max_retrievals=2
    )

    async def run() -> list[Any]:
        return [await engine.aquery(query) for query in STRINGS.values()]

    outcome, value = record(
        "self-rag",
        "async",
        lambda: asyncio.run(run()),
        check=lambda responses: next(filter(None, map(_response_wrong, responses)), None),
    )
    assert outcome == "result", value


BAD_SELF_RAG_ARGS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "max-retrievals-0": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), max_retrievals=0),
        ("max_retrievals",),
    ),
    "max-retrievals-huge": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), max_retrievals=10**6),
        ("max_retrievals",),
    ),
    "max-passages-negative": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), max_passages=-1),
        ("max_passages",),
    ),
    "generation-mode": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), generation_mode="all"),
        ("generation_mode", "per_passage"),
    ),
    "min-support-above-accept": (
        lambda: SelfRAGQueryEngine(
            retriever=JiebaBM25Retriever(CORPUS), min_support=0.9, accept_support=0.5
        ),
        ("min_support",),
    ),
    "weights-zero": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), w_rel=0, w_sup=0, w_use=0),
        ("w_rel",),
    ),
    "weight-nan": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), w_rel=float("nan")),
        ("w_rel",),
    ),
    "retriever-none": (lambda: SelfRAGQueryEngine(retriever=None), ("retriever",)),
    "postprocessor-wrong": (
        lambda: SelfRAGQueryEngine(retriever=JiebaBM25Retriever(CORPUS), node_postprocessors=["x"]),
        ("node_postprocessors[0]",),
    ),
    "bm25-top-k-0": (lambda: JiebaBM25Retriever(CORPUS, similarity_top_k=0), ("top_k",)),
    "bm25-top-k-negative": (lambda: JiebaBM25Retriever(CORPUS, similarity_top_k=-2), ("top_k",)),
}


@pytest.mark.parametrize("case", sorted(BAD_SELF_RAG_ARGS))
def test_self_rag_refuses_bad_arguments(case: str) -> None:
    make, names = BAD_SELF_RAG_ARGS[case]
    outcome, value = record("self-rag", f"bad-argument/{case}", make, names)
    assert outcome == "clear_error", value


# --- advrag compare / advrag ask ---------------------------------------------------------------


@pytest.fixture
def hash_model(monkeypatch):
    """The offline default, English or multilingual (the test corpus is half Chinese)."""
    model = HashEmbedding(dim=64)
    monkeypatch.setattr("llama_index_ext_advrag.models.load_default_embed_model", lambda: model)
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_multilingual_embed_model", lambda: model
    )
    return model


@pytest.fixture
def cli_setup(tmp_path: Path, hash_model) -> dict[str, Any]:
    docs, qa = write_corpus(tmp_path)
    (tmp_path / "empty-folder").mkdir()
    (tmp_path / "blank-docs").mkdir()
    (tmp_path / "blank-docs" / "a.md").write_text("  \n", encoding="utf-8")
    base = ["--no-llm", "--quiet", "--uri", str(tmp_path / "m.db"),
            "--state-dir", str(tmp_path / "state")]  # fmt: skip
    return {"tmp": tmp_path, "docs": str(docs), "qa": str(qa), "base": base}


def _questions_file(tmp: Path, name: str, content: str | bytes) -> str:
    path = tmp / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return str(path)


QUESTION_FILES: dict[str, tuple[str, str | bytes, tuple[str, ...]]] = {
    "missing-field": ("m.jsonl", '{"id": "1", "question": "q"}\n', ("m.jsonl:1", "answers")),
    "invalid-json-line": (
        "i.jsonl",
        '{"id": "1", "question": "q", "answers": []}\n{oops\n',
        ("i.jsonl:2", "not valid json"),
    ),
    "non-utf8": (
        "n.jsonl",
        '{"id": "1", "question": "caf\xe9", "answers": []}\n'.encode("latin-1"),
        ("not utf-8", "0xe9"),
    ),
    "empty-file": ("e.jsonl", "", ("e.jsonl", "format")),
    "array-of-numbers": ("a.json", "[1, 2]", ("a.json", "expected a json object")),
    "answers-a-string": (
        "s.jsonl",
        '{"id": "1", "question": "q", "answers": "3.5 bar"}\n',
        ("s.jsonl:1", "must be a list"),
    ),
    "question-null": (
        "q.jsonl",
        '{"id": "1", "question": null, "answers": ["x"]}\n',
        ("q.jsonl:1: 'question' must be a string",),
    ),
    "only-unusable-rows": (
        "u.jsonl",
        '{"id": "1", "question": "", "answers": ["x"]}\n{"id": "2", "question": "q", "answers": []}\n',
        ("u.jsonl:1 (id 1): empty question",),
    ),
    "duplicate-ids": (
        "d.jsonl",
        '{"id": "1", "question": "q", "answers": []}\n{"id": "1", "question": "r", "answers": []}\n',
        ("d.jsonl", "more than once"),
    ),
}


def _run_cli(argv: list[str], capsys) -> str:
    """Run ``advrag``; a failure must be one line naming the problem (raised as ValueError
    for ``record`` to judge), a success returns its output."""
    code = cli.main(argv)
    captured = capsys.readouterr()
    if code == 0:
        return captured.out
    lines = captured.err.strip().splitlines()
    if len(lines) != 1 or not lines[0].startswith("advrag: error: "):
        raise RuntimeError(f"exit {code} without one error line: {captured.err[-500:]!r}")
    raise ValueError(lines[0])


@pytest.mark.parametrize("case", sorted(QUESTION_FILES))
def test_compare_refuses_bad_question_files(cli_setup, case: str, capsys) -> None:
    name, content, names = QUESTION_FILES[case]
    questions = _questions_file(cli_setup["tmp"], name, content)
    argv = ["compare", "--docs", cli_setup["docs"], *cli_setup["base"], "--questions", questions]
    outcome, value = record(
        "cli-compare-ask", f"questions/{case}", lambda: _run_cli(argv, capsys), names
    )
    assert outcome == "clear_error", value


COMPARE_ARGS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "docs-missing": (["--docs", "{tmp}/nope"], ("does not exist",)),
    "docs-empty-folder": (["--docs", "{tmp}/empty-folder"], ("no .md/.txt/.xlsx documents",)),
    "docs-blank-files": (["--docs", "{tmp}/blank-docs"], ("no .md/.txt/.xlsx documents",)),
    "questions-missing": (["--docs", "{docs}", "--questions", "{tmp}/nope.jsonl"], ("nope.jsonl",)),
    "questions-a-folder": (
        ["--docs", "{docs}", "--questions", "{tmp}/empty-folder"],
        ("empty-folder",),
    ),
    "k-0": (["--docs", "{docs}", "--questions", "{qa}", "--k", "0"], ("--k",)),
    "k-negative": (["--docs", "{docs}", "--questions", "{qa}", "--k", "-4"], ("--k",)),
    "max-questions-negative": (
        ["--docs", "{docs}", "--questions", "{qa}", "--max-questions", "-1"],
        ("--max-questions",),
    ),
    "max-questions-0": (
        ["--docs", "{docs}", "--questions", "{qa}", "--max-questions", "0"],
        ("--max-questions",),
    ),
    "probes-0": (["--docs", "{docs}", "--probes", "0"], ("--probes",)),
    "probes-negative": (["--docs", "{docs}", "--probes", "-3"], ("--probes",)),
    "unknown-pipeline": (["--docs", "{docs}", "--pipelines", "nope"], ("nope",)),
}


@pytest.mark.parametrize("case", sorted(COMPARE_ARGS))
def test_compare_refuses_bad_arguments(cli_setup, case: str, capsys) -> None:
    args, names = COMPARE_ARGS[case]
    argv = ["compare", *[a.format(**cli_setup) for a in args], *cli_setup["base"]]
    outcome, value = record(
        "cli-compare-ask", f"compare/{case}", lambda: _run_cli(argv, capsys), names
    )
    assert outcome == "clear_error", value


@pytest.mark.milvus_lite
def test_compare_takes_a_huge_k(cli_setup, capsys) -> None:
    argv = ["compare", "--docs", cli_setup["docs"], *cli_setup["base"], "--questions",
            cli_setup["qa"], "--pipelines", "baseline", "--k", "100000", "--ks", "1",
            "--out", str(cli_setup["tmp"] / "out")]  # fmt: skip
    outcome, value = record(
        "cli-compare-ask",
        "compare/k-huge",
        lambda: _run_cli(argv, capsys),
        check=lambda out: None if "4 labelled questions" in out else f"output {out[:300]!r}",
    )
    assert outcome == "result", value


ASK_QUESTIONS = {name: text for name, text in STRINGS.items() if name not in BLANK}


@pytest.mark.milvus_lite
def test_ask_takes_bad_questions(cli_setup, capsys) -> None:
    for name, question in ASK_QUESTIONS.items():
        argv = ["ask", question, "--docs", cli_setup["docs"], *cli_setup["base"], "--json"]
        outcome, value = record(
            "cli-compare-ask",
            f"ask/{name}",
            lambda argv=argv: _run_cli(argv, capsys),
            check=lambda out: None if '"context"' in out else f"output {out[:300]!r}",
        )
        assert outcome == "result", (name, value)


ASK_ARGS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "question-empty": (["", "--docs", "{docs}"], ("question is empty",)),
    "question-whitespace": ([" \t\n", "--docs", "{docs}"], ("question is empty",)),
    "k-0": (["pump", "--k", "0", "--docs", "{docs}"], ("--k",)),
    "k-negative": (["pump", "--k", "-5", "--docs", "{docs}"], ("--k",)),
    "docs-missing": (["pump", "--docs", "{tmp}/nope"], ("does not exist",)),
    "docs-empty-folder": (["pump", "--docs", "{tmp}/empty-folder"], ("no .md/.txt/.xlsx",)),
    "unknown-pipeline": (["pump", "--pipeline", "nope", "--docs", "{docs}"], ("nope",)),
}


@pytest.mark.parametrize("case", sorted(ASK_ARGS))
def test_ask_refuses_bad_arguments(cli_setup, case: str, capsys) -> None:
    args, names = ASK_ARGS[case]
    argv = ["ask", *[a.format(**cli_setup) for a in args], *cli_setup["base"]]
    outcome, value = record("cli-compare-ask", f"ask/{case}", lambda: _run_cli(argv, capsys), names)
    assert outcome == "clear_error", value
