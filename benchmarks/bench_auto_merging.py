"""Milvus-backed auto-merging against LlamaIndex core's ``AutoMergingRetriever`` on COVID-QA.

All pipelines run in this process on the same 98 papers, questions, embedding model
(all-MiniLM-L6-v2 behind the shared SQLite cache), chunk sizes [1024, 256, 64] and k:

* ``core``: core ``HierarchicalNodeParser`` + ``AutoMergingRetriever`` (leaves in Milvus Lite,
  every level in core's in-memory docstore - what does not survive a restart);
* ``core leaves``: the same leaves without merging (what merging adds);
* ``ours (core parser)``: :class:`HierarchicalAutoMergingRetriever` over core's very nodes,
  parents in Milvus (isolates the retriever from the parser);
* ``ours``: :class:`HierarchicalAutoMergingRetriever` with its default sentence-aligned
  hierarchy parser, built with ``from_documents`` and reopened with ``from_uri``;
* ``ours leaves (no merge)`` and ``ours, k=k-1``: what merging adds on this parser's leaves,
  and the context size one hit less gives;
* ``ours, max_context_tokens=N``: the same with a token budget, by default core's mean context
  size, to compare coverage at (at most) the context core hands the LLM.

Answer coverage@k: a gold answer string (any alternative) inside the context handed to the
LLM (the nodes' texts joined by blank lines, metadata not counted); reported with the mean
context tokens, since a larger context trivially covers more.

Usage::

    .venv/bin/python benchmarks/bench_auto_merging.py                  # 400 questions, k=12
    .venv/bin/python benchmarks/bench_auto_merging.py --max-questions 100 --k 6
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import HierarchicalNodeParser, get_leaf_nodes
from llama_index.core.retrievers import AutoMergingRetriever
from llama_index.core.schema import MetadataMode, NodeWithScore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    cached_minilm_embedding,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index_ext_advrag.evaluation.metrics import answer_covered  # noqa: E402
from llama_index_ext_advrag.milvus import flush, open_vector_store  # noqa: E402
from llama_index_ext_advrag.retrievers import HierarchicalAutoMergingRetriever  # noqa: E402
from llama_index_ext_advrag.text import count_tokens  # noqa: E402

logger = logging.getLogger("bench_auto_merging")

CHUNK_SIZES = [1024, 256, 64]
Retrieve = Callable[[str], Sequence[NodeWithScore]]


def context_of(nodes: Sequence[NodeWithScore]) -> str:
    return "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)


def core_pipelines(
    documents: list[Document], embed_model: Any, uri: str, k: int
) -> tuple[dict[str, Retrieve], list[Any]]:
    """Core's parser and retriever; returns the pipelines and core's nodes (for reuse)."""
    nodes = HierarchicalNodeParser.from_defaults(chunk_sizes=CHUNK_SIZES).get_nodes_from_documents(
        documents
    )
    leaves = get_leaf_nodes(nodes)
    vectors = embed_model.get_text_embedding_batch(
        [n.get_content(metadata_mode=MetadataMode.EMBED) for n in leaves]
    )
    store = open_vector_store(uri, "core_leaves", 384, overwrite=True, expected_rows=len(leaves))
    store.add([n.model_copy(update={"embedding": v}) for n, v in zip(leaves, vectors, strict=True)])
    flush(store)
    storage = StorageContext.from_defaults(vector_store=store)
    storage.docstore.add_documents(nodes)
    base = VectorStoreIndex.from_vector_store(store, embed_model=embed_model).as_retriever(
        similarity_top_k=k
    )
    merging = AutoMergingRetriever(base, storage)  # type: ignore[arg-type]
    logger.info("core hierarchy: %d nodes, %d leaves", len(nodes), len(leaves))
    return {"core leaves (no merge)": base.retrieve, "core AutoMerging": merging.retrieve}, nodes


def our_pipelines(
    documents: list[Document], core_nodes: list[Any], embed_model: Any, uri: str, args: Any
) -> tuple[dict[str, Retrieve], dict[str, Any]]:
    started = time.perf_counter()
    over_core = HierarchicalAutoMergingRetriever.from_nodes(
        core_nodes, uri=uri, collection_name="ours_core_parser", embed_model=embed_model,
        similarity_top_k=args.k, overwrite=True, parser_name="HierarchicalNodeParser",
        chunk_sizes=CHUNK_SIZES,
    )  # fmt: skip
    HierarchicalAutoMergingRetriever.from_documents(
        documents, uri=uri, collection_name="ours_default", embed_model=embed_model,
        chunk_sizes=CHUNK_SIZES, similarity_top_k=args.k, overwrite=True,
    )  # fmt: skip
    build_seconds = time.perf_counter() - started
    # Query what was built through from_uri, as a new process would.
    ours = HierarchicalAutoMergingRetriever.from_uri(
        uri, embed_model=embed_model, collection_name="ours_default", similarity_top_k=args.k
    )
    budget = HierarchicalAutoMergingRetriever.from_uri(
        uri, embed_model=embed_model, collection_name="ours_default", similarity_top_k=args.k,
        max_context_tokens=args.budget,
    )  # fmt: skip
    leaves = VectorStoreIndex.from_vector_store(ours.vector_store, embed_model=embed_model)
    smaller = HierarchicalAutoMergingRetriever.from_uri(
        uri, embed_model=embed_model, collection_name="ours_default", similarity_top_k=args.k - 1
    )
    pipelines = {
        "ours (core parser)": over_core.retrieve,
        "ours leaves (no merge)": leaves.as_retriever(similarity_top_k=args.k).retrieve,
        "ours": ours.retrieve,
        f"ours, k={args.k - 1}": smaller.retrieve,
        f"ours, max_context_tokens={args.budget}": budget.retrieve,
    }
    return pipelines, {"build_seconds": build_seconds, "layout": ours.layout}


def evaluate(name: str, retrieve: Retrieve, questions: Sequence[Any]) -> dict[str, Any]:
    covered, tokens, latencies, nodes = 0, 0, [], 0
    for question in questions:
        started = time.perf_counter()
        results = retrieve(question.question)
        latencies.append((time.perf_counter() - started) * 1000)
        context = context_of(results)
        tokens += count_tokens(context)
        nodes += len(results)
        covered += answer_covered(context, question.answers, require_all=False)
    count = max(len(questions), 1)
    row = {
        "pipeline": name,
        "coverage": covered / count,
        "mean_context_tokens": tokens / count,
        "mean_nodes": nodes / count,
        "p50_ms": statistics.median(latencies) if latencies else 0.0,
    }
    logger.info("%s", {k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()})
    return row


def format_rows(rows: list[dict[str, Any]], baseline: dict[str, Any], k: int, n: int) -> str:
    header = (
        f"COVID-QA, {n} questions, k={k}, chunk sizes {CHUNK_SIZES}; ratios vs core AutoMerging\n"
        f"{'pipeline':32s} {'coverage':>9s} {'ctx tok':>8s} {'nodes':>6s} {'p50 ms':>7s} "
        f"{'cov ratio':>9s} {'tok ratio':>9s}"
    )
    lines = [header, "-" * len(header.splitlines()[-1])]
    for row in rows:
        lines.append(
            f"{row['pipeline']:32s} {row['coverage']:9.3f} {row['mean_context_tokens']:8.1f} "
            f"{row['mean_nodes']:6.1f} {row['p50_ms']:7.1f} "
            f"{row['coverage'] / max(baseline['coverage'], 1e-9):9.3f} "
            f"{row['mean_context_tokens'] / max(baseline['mean_context_tokens'], 1e-9):9.3f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--max-questions", type=int, default=400)
    parser.add_argument("--k", type=int, default=12)
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="max_context_tokens of the budget variant (default: core's mean context tokens)",
    )
    parser.add_argument(
        "--milvus", default=str(CACHE_DIR.parent / "bench-milvus" / "auto_merging.db")
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("llama_index.core.retrievers.auto_merging_retriever", "milvus_lite", "faiss"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    corpus = load_squad(covidqa_path(args.datasets), max_questions=args.max_questions)
    documents = [Document(text=text, id_=doc_id) for doc_id, text in corpus.documents.items()]
    embed_model = cached_minilm_embedding()
    core, core_nodes = core_pipelines(documents, embed_model, args.milvus, args.k)
    rows = [evaluate(name, fn, corpus.questions) for name, fn in core.items()]
    if args.budget is None:  # compare at (at most) the context size core hands the LLM
        args.budget = round(rows[-1]["mean_context_tokens"])
    ours, info = our_pipelines(documents, core_nodes, embed_model, args.milvus, args)
    rows += [evaluate(name, fn, corpus.questions) for name, fn in ours.items()]
    baseline = next(r for r in rows if r["pipeline"] == "core AutoMerging")
    table = format_rows(rows, baseline, args.k, len(corpus.questions))
    print(table)  # noqa: T201 - a benchmark's report
    write_results(
        "auto_merging",
        table,
        {"k": args.k, "questions": len(corpus.questions), "rows": rows, **info},
    )


if __name__ == "__main__":
    main()
