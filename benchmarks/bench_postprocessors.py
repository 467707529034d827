"""Neighbour postprocessors against fixed windows and LlamaIndex core on COVID-QA.

Sentence-level retrieval (one node per sentence, ``AdaptiveSlidingWindowNodeParser(window_size=1,
stride=1)``, all-MiniLM-L6-v2 behind the shared embedding cache), the same ``k`` everywhere:

* quality: answer coverage@k (a gold answer inside the context handed to the LLM) and mean
  context tokens for the bare sentences, fixed windows of 1/2/3 neighbours each side (ours and
  core ``PrevNextNodePostprocessor``), core ``SentenceWindowNodeParser(3)`` +
  ``MetadataReplacementPostProcessor``, consecutive merge, the drift-aware window and (with
  ``--llm-base-url``) the LLM-directed prev-next on a subset;
* calibration: ``min_sim``/``prune_sim`` derived by ``calibrate_thresholds`` from held-out
  questions (disjoint from the evaluated ones) and the corpus;
* latency: added time per query of each postprocessor at ``top_k=8`` over Milvus Lite (flushed
  after ingest), p50/p95, and the ratio to retrieval alone (query vectors precomputed).

Usage::

    .venv/bin/python benchmarks/bench_postprocessors.py
    .venv/bin/python benchmarks/bench_postprocessors.py --max-questions 300 --latency-queries 100
    .venv/bin/python benchmarks/bench_postprocessors.py --llm-base-url http://127.0.0.1:8080/v1
"""

from __future__ import annotations

import argparse
import logging
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.node_parser import SentenceWindowNodeParser
from llama_index.core.postprocessor import (
    MetadataReplacementPostProcessor,
    PrevNextNodePostprocessor,
)
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle
from llama_index.core.storage.docstore import SimpleDocumentStore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    SquadQuestion,
    cached_minilm_embedding,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index_ext_advrag.evaluation.metrics import answer_covered  # noqa: E402
from llama_index_ext_advrag.milvus import count_rows, flush, open_vector_store  # noqa: E402
from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser  # noqa: E402
from llama_index_ext_advrag.postprocessor import (  # noqa: E402
    ConsecutiveMergePostprocessor,
    DriftAwareWindowPostprocessor,
    PrevNextPostprocessor,
    UnitAnnotator,
)
from llama_index_ext_advrag.postprocessor.calibration import calibrate_thresholds  # noqa: E402
from llama_index_ext_advrag.text import count_tokens  # noqa: E402

logger = logging.getLogger("bench_postprocessors")

EMBED_DIM = 384
ANNOTATED_ROW = "ours DriftAware (Milvus, UnitAnnotator at ingest)"
Post = Callable[[list[NodeWithScore], QueryBundle], list[NodeWithScore]]


# --- corpus, vectors, exact retrieval ---------------------------------------------------------


def embed_sorted(embed_model: Any, texts: list[str]) -> np.ndarray:
    """Embed through the cache in length order (little padding per batch), return in order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = embed_model.get_text_embedding_batch([texts[i] for i in order])
    result = np.zeros((len(texts), EMBED_DIM), dtype=np.float32)
    for position, index in enumerate(order):
        result[index] = vectors[position]
    return result


def embedded_nodes(parser: Any, documents: list[Document], embed_model: Any) -> list[BaseNode]:
    nodes = parser.get_nodes_from_documents(documents)
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    for node, vector in zip(nodes, embed_sorted(embed_model, texts), strict=True):
        node.embedding = vector.tolist()
    return nodes


class ExactIndex:
    """Brute-force cosine top-k over the node vectors (what Milvus FLAT returns)."""

    def __init__(self, nodes: Sequence[BaseNode]) -> None:
        matrix = np.asarray([n.embedding for n in nodes], dtype=np.float32)
        self.matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        self.nodes = nodes

    def retrieve(self, query_vector: Sequence[float], k: int) -> list[NodeWithScore]:
        scores = self.matrix @ np.asarray(query_vector, dtype=np.float32)
        top = np.argpartition(-scores, k)[:k]
        top = top[np.argsort(-scores[top])]
        return [
            NodeWithScore(node=self.nodes[i].model_copy(update={"embedding": None}), score=float(scores[i]))
            for i in top
        ]  # fmt: skip


def split_questions(
    questions: list[SquadQuestion], evaluated: int, held_out: int, seed: int = 0
) -> tuple[list[SquadQuestion], list[SquadQuestion]]:
    """A seeded evaluation sample (the head of a shuffle) and a disjoint held-out sample for
    calibration (its tail, so it does not change with ``evaluated``)."""
    if evaluated + held_out > len(questions):
        raise ValueError(f"{evaluated} + {held_out} questions requested, {len(questions)} exist")
    shuffled = list(questions)
    random.Random(seed).shuffle(shuffled)
    return shuffled[:evaluated], shuffled[len(shuffled) - held_out :]


# --- quality ----------------------------------------------------------------------------------


def context_of(nodes: list[NodeWithScore]) -> str:
    return "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)


def evaluate(
    label: str,
    questions: list[SquadQuestion],
    retrieve: Callable[[SquadQuestion], tuple[list[NodeWithScore], QueryBundle]],
    post: Post | None,
) -> dict[str, Any]:
    covered = tokens = 0
    started = time.perf_counter()
    stops: dict[str, int] = {}
    for question in questions:
        hits, bundle = retrieve(question)
        nodes = post(hits, bundle) if post else hits
        context = context_of(nodes)
        tokens += count_tokens(context)
        covered += answer_covered(context, question.answers, require_all=False)
        traces = [n.node.metadata.get("advrag_trace", {}) for n in nodes]
        for trace in traces:
            for record in trace.get("drift_window", {}).get("records", []):
                stops[record["stop"]] = stops.get(record["stop"], 0) + 1
        if traces and "prev_next" in traces[0]:  # one direction decision per question
            decision = traces[0]["prev_next"]
            source = f"direction from {decision['source']}: {decision['direction']}"
            stops[source] = stops.get(source, 0) + 1
    count = max(len(questions), 1)
    row = {"pipeline": label, "questions": len(questions), "coverage": covered / count,
           "mean_context_tokens": tokens / count, "seconds": time.perf_counter() - started}  # fmt: skip
    if stops:
        row["decisions"] = stops
    logger.info("%s", row)
    return row


def quality_rows(
    args: argparse.Namespace,
    questions: list[SquadQuestion],
    nodes: list[BaseNode],
    query_vectors: dict[str, list[float]],
    swnp: ExactIndex,
    thresholds: dict[str, float],
) -> list[dict[str, Any]]:
    k = args.top_k
    docstore = SimpleDocumentStore()
    docstore.add_documents(nodes)
    index = ExactIndex(nodes)

    def sentences(q: SquadQuestion) -> tuple[list[NodeWithScore], QueryBundle]:
        vector = query_vectors[q.question]
        return index.retrieve(vector, k), QueryBundle(q.question, embedding=vector)

    def windows(q: SquadQuestion) -> tuple[list[NodeWithScore], QueryBundle]:
        vector = query_vectors[q.question]
        return swnp.retrieve(vector, k), QueryBundle(q.question, embedding=vector)

    def ours(post: Any) -> Post:
        return lambda hits, bundle: post.postprocess_nodes(hits, bundle)

    replacement = MetadataReplacementPostProcessor(target_metadata_key="window")
    rows = [evaluate(f"sentences top-{k}, no postprocessor", questions, sentences, None)]
    for n in (1, 2, 3):
        fixed = PrevNextPostprocessor(docstore=docstore, num_nodes=n)
        rows.append(evaluate(f"ours PrevNext fixed +-{n}", questions, sentences, ours(fixed)))
    for n in (1, 2, 3):
        core = PrevNextNodePostprocessor(docstore=docstore, num_nodes=n, mode="both")
        rows.append(
            evaluate(f"core PrevNextNodePostprocessor both +-{n}", questions, sentences, ours(core))
        )
    rows.append(
        evaluate(
            f"core SentenceWindowNodeParser(3) + replacement, top-{k}",
            questions,
            windows,
            ours(replacement),
        )
    )
    merge = ConsecutiveMergePostprocessor(docstore=docstore, fill_gaps=True)
    rows.append(evaluate("ours ConsecutiveMerge fill_gaps<=2", questions, sentences, ours(merge)))
    for label, overrides in drift_settings(thresholds):
        drift = DriftAwareWindowPostprocessor(docstore=docstore, **overrides)
        rows.append(evaluate(label, questions, sentences, ours(drift)))
    if args.llm_base_url:
        rows += llm_rows(args, questions[: args.llm_questions], docstore, sentences)
    return rows


def drift_settings(thresholds: dict[str, float]) -> list[tuple[str, dict[str, Any]]]:
    """The drift-aware window with its defaults, the freshly calibrated thresholds, a shorter
    reach (cheaper fetch) and no hole filling, to show the coverage/token trade-offs."""
    return [
        ("ours DriftAware (defaults)", {}),
        (f"ours DriftAware (calibrated now: {thresholds['min_sim']:.3f}/{thresholds['prune_sim']:.3f})", thresholds),
        ("ours DriftAware (max_expand_steps=6)", {"max_expand_steps": 6}),
        ("ours DriftAware (max_hole=0: strict pruning)", {"max_hole": 0}),
    ]  # fmt: skip


def llm_rows(
    args: argparse.Namespace, questions: list[SquadQuestion], docstore: Any, sentences: Callable
) -> list[dict[str, Any]]:
    from llama_index.llms.openai_like import OpenAILike

    llm = OpenAILike(model="local", api_base=args.llm_base_url, api_key="none", is_chat_model=True,
                     max_tokens=8, temperature=0.0, timeout=120)  # fmt: skip
    rows = []
    for label, post in (
        ("subset: sentences, no postprocessor", None),
        ("subset: ours PrevNext fixed +-2", PrevNextPostprocessor(docstore=docstore, num_nodes=2)),
        ("subset: ours PrevNext auto +-2 (local LLM)", PrevNextPostprocessor(docstore=docstore, num_nodes=2, mode="auto", llm=llm)),
    ):  # fmt: skip
        fn = (
            None
            if post is None
            else (lambda p: lambda hits, bundle: p.postprocess_nodes(hits, bundle))(post)
        )
        rows.append(evaluate(label, questions, sentences, fn))
    return rows


# --- latency ----------------------------------------------------------------------------------


def milvus_store(uri: str, nodes: list[BaseNode], name: str = "bench_pp_sentences") -> Any:
    """The sentence nodes in Milvus Lite, ingested once and reused while the count matches."""
    store = open_vector_store(uri, name, dim=EMBED_DIM, expected_rows=len(nodes))
    if count_rows(store.client, store.collection_name) != len(nodes):
        store = open_vector_store(uri, name, dim=EMBED_DIM, overwrite=True,
                                  expected_rows=len(nodes))  # fmt: skip
        for start in range(0, len(nodes), 2000):
            store.add(nodes[start : start + 2000])
    flush(store)
    return store


def latency_rows(
    args: argparse.Namespace,
    questions: list[SquadQuestion],
    nodes: list[BaseNode],
    query_vectors: dict[str, list[float]],
    embed_model: Any,
) -> list[dict[str, Any]]:
    store = milvus_store(args.milvus, nodes)
    # the same nodes with token counts and cues stored at ingest (UnitAnnotator)
    annotated = milvus_store(args.milvus, UnitAnnotator()(nodes), "bench_pp_annotated")
    annotated_retriever = VectorStoreIndex.from_vector_store(
        annotated, embed_model=embed_model
    ).as_retriever(similarity_top_k=8)
    retriever = VectorStoreIndex.from_vector_store(store, embed_model=embed_model).as_retriever(
        similarity_top_k=8
    )
    docstore = SimpleDocumentStore()
    docstore.add_documents(nodes)
    posts: dict[str, Any] = {
        "ours PrevNext fixed +-1 (Milvus)": PrevNextPostprocessor(vector_store=store, num_nodes=1),
        "ours PrevNext fixed +-3 (Milvus)": PrevNextPostprocessor(vector_store=store, num_nodes=3),
        "ours DriftAware (Milvus)": DriftAwareWindowPostprocessor(vector_store=store),
        ANNOTATED_ROW: DriftAwareWindowPostprocessor(vector_store=annotated),
        "ours DriftAware max_expand_steps=6 (Milvus)": DriftAwareWindowPostprocessor(vector_store=store, max_expand_steps=6),
        "ours ConsecutiveMerge fill_gaps (Milvus)": ConsecutiveMergePostprocessor(vector_store=store, fill_gaps=True),
        "ours PrevNext fixed +-1 (docstore)": PrevNextPostprocessor(docstore=docstore, num_nodes=1),
        "core PrevNextNodePostprocessor +-1 (docstore)": PrevNextNodePostprocessor(docstore=docstore, num_nodes=1, mode="both"),
        "core PrevNextNodePostprocessor +-3 (docstore)": PrevNextNodePostprocessor(docstore=docstore, num_nodes=3, mode="both"),
    }  # fmt: skip
    timings: dict[str, list[float]] = {"retrieval alone (Milvus Lite, top_k=8)": []}
    timings.update({name: [] for name in posts})
    sample = questions[: args.latency_queries + 5]
    for position, question in enumerate(sample):
        bundle = QueryBundle(question.question, embedding=query_vectors[question.question])
        started = time.perf_counter()
        hits = retriever.retrieve(bundle)
        elapsed = time.perf_counter() - started
        measured = position >= 5  # the first queries warm caches and connections up
        if measured:
            timings["retrieval alone (Milvus Lite, top_k=8)"].append(elapsed)
        # the same hits as a deployment with UnitAnnotator gets them: from its own collection
        annotated_hits = annotated_retriever.retrieve(bundle)
        for name in random.Random(position).sample(list(posts), len(posts)):
            given = annotated_hits if name == ANNOTATED_ROW else hits
            started = time.perf_counter()
            posts[name].postprocess_nodes(given, bundle)
            if measured:
                timings[name].append(time.perf_counter() - started)
    base = float(np.percentile(timings["retrieval alone (Milvus Lite, top_k=8)"], 50))
    return [
        {"step": name, "queries": len(values), "p50_ms": 1000 * float(np.percentile(values, 50)),
         "p95_ms": 1000 * float(np.percentile(values, 95)),
         "p50_ratio_to_retrieval": float(np.percentile(values, 50)) / base}
        for name, values in timings.items()
    ]  # fmt: skip


# --- report -----------------------------------------------------------------------------------


def format_quality(rows: list[dict[str, Any]], title: str) -> str:
    base = rows[0]
    lines = [title, f"{'pipeline':66s} {'n':>4s} {'cover':>6s} {'tokens':>7s} {'tok/base':>8s}"]
    for row in rows:
        if row["pipeline"].startswith("subset:") and not base["pipeline"].startswith("subset:"):
            base = row
        lines.append(
            f"{row['pipeline']:66s} {row['questions']:4d} {row['coverage']:6.3f} "
            f"{row['mean_context_tokens']:7.0f} {row['mean_context_tokens'] / base['mean_context_tokens']:8.2f}"
        )
    lines.append("tok/base: against the first row of its block (bare sentences)")
    return "\n".join(lines)


def format_latency(rows: list[dict[str, Any]]) -> str:
    lines = ["Added latency per query, top_k=8 (ratio = p50 / retrieval p50)",
             f"{'step':50s} {'n':>4s} {'p50 ms':>8s} {'p95 ms':>8s} {'ratio':>6s}"]  # fmt: skip
    lines += [
        f"{r['step']:50s} {r['queries']:4d} {r['p50_ms']:8.1f} {r['p95_ms']:8.1f} {r['p50_ratio_to_retrieval']:6.3f}"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--max-questions", type=int, default=300, help="evaluated questions")
    parser.add_argument("--calibration-questions", type=int, default=200, help="held out")
    parser.add_argument("--top-k", type=int, default=8)
    parser.add_argument("--latency-queries", type=int, default=100)
    parser.add_argument("--parts", default="quality,latency")
    parser.add_argument(
        "--llm-base-url", default=None, help="OpenAI-compatible server for auto mode"
    )
    parser.add_argument("--llm-questions", type=int, default=100)
    parser.add_argument(
        "--results-name", default="postprocessors", help="benchmarks/results/<name>.*"
    )
    parser.add_argument(
        "--milvus", default=str(CACHE_DIR.parent / "bench-milvus" / "postprocessors.db")
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "llama_index_ext_advrag"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parts = set(args.parts.split(","))
    embed_model = cached_minilm_embedding()
    corpus = load_squad(covidqa_path(args.datasets))
    evaluated, held_out = split_questions(
        corpus.questions, args.max_questions, args.calibration_questions
    )
    documents = [Document(text=text, id_=doc_id) for doc_id, text in corpus.documents.items()]
    nodes = embedded_nodes(
        AdaptiveSlidingWindowNodeParser(window_size=1, stride=1), documents, embed_model
    )
    texts = [q.question for q in evaluated + held_out]
    query_vectors = dict(
        zip(texts, (embed_model.get_query_embedding(t) for t in texts), strict=True)
    )
    calibration = calibrate_thresholds([n.get_content() for n in nodes], embed_model,
                                       queries=[q.question for q in held_out])  # fmt: skip
    report = [f"Calibration on {calibration.num_queries} held-out questions x {calibration.num_sentences} "
              f"sentences: min_sim={calibration.min_sim} prune_sim={calibration.prune_sim} "
              f"background quantiles {calibration.quantiles}"]  # fmt: skip
    data: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()},
                            "calibration": calibration.__dict__, "sentence_nodes": len(nodes)}  # fmt: skip
    if "quality" in parts:
        swnp = ExactIndex(
            embedded_nodes(
                SentenceWindowNodeParser.from_defaults(window_size=3), documents, embed_model
            )
        )
        rows = quality_rows(args, evaluated, nodes, query_vectors, swnp, calibration.as_kwargs())
        title = (f"COVID-QA: {len(evaluated)} questions over {len(documents)} papers, "
                 f"{len(nodes)} sentence nodes, k={args.top_k}")  # fmt: skip
        report.append(format_quality(rows, title))
        data["quality"] = rows
    if "latency" in parts:
        rows = latency_rows(args, evaluated, nodes, query_vectors, embed_model)
        report.append(format_latency(rows))
        data["latency"] = rows
    text = "\n\n".join(report)
    print(text)  # the benchmark's report is its output
    write_results(args.results_name, text, data)


if __name__ == "__main__":
    main()
