"""Sliding-window and hierarchy parsers against LlamaIndex core on COVID-QA and CMRC 2018.

Every pipeline runs in this process with the same embedding model (all-MiniLM-L6-v2 behind the
shared SQLite cache), the same Milvus Lite file and the same questions:

* COVID-QA (98 long English papers): answer coverage@k (a gold answer string inside the context
  handed to the LLM) and mean context tokens, for core ``SentenceSplitter`` 256/512/1024,
  ``SentenceWindowNodeParser(3)`` + ``MetadataReplacementPostProcessor``, core
  ``HierarchicalNodeParser`` + ``AutoMergingRetriever``, and this pack's parsers.
* CMRC 2018 (Chinese paragraphs): hit@k of the gold paragraph and coverage@k.
* Parse throughput (MB/s of UTF-8 source, parsing only, best of three).

The context is measured exactly as handed to the LLM: the retrieved nodes' texts (after
metadata replacement or auto-merging) joined with blank lines, overlaps not deduplicated,
metadata not counted.

Usage::

    .venv/bin/python benchmarks/bench_node_parsers.py                # all three parts
    .venv/bin/python benchmarks/bench_node_parsers.py --parts covid --max-questions 200
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import (
    HierarchicalNodeParser,
    NodeParser,
    SentenceSplitter,
    SentenceWindowNodeParser,
    get_leaf_nodes,
)
from llama_index.core.postprocessor import MetadataReplacementPostProcessor
from llama_index.core.retrievers import AutoMergingRetriever
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    SquadCorpus,
    cached_bge_embedding,
    cached_minilm_embedding,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index_ext_advrag.evaluation.decision import scores_at_budget  # noqa: E402
from llama_index_ext_advrag.evaluation.frontier import common_budgets  # noqa: E402
from llama_index_ext_advrag.evaluation.metrics import answer_covered  # noqa: E402
from llama_index_ext_advrag.evaluation.paired import (  # noqa: E402
    count_changes,
    paired_bootstrap_intervals,
)
from llama_index_ext_advrag.milvus import flush, open_vector_store, process_reconnects  # noqa: E402
from llama_index_ext_advrag.node_parser import (  # noqa: E402
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
)
from llama_index_ext_advrag.node_parser.presets import preset_values  # noqa: E402
from llama_index_ext_advrag.postprocessor import WindowReplacementPostprocessor  # noqa: E402
from llama_index_ext_advrag.text import count_tokens  # noqa: E402

logger = logging.getLogger("bench_node_parsers")

EMBED_DIM = 384
WINDOW_KEY = "window"
NO_REPEAT_FETCH = 4  # hits fetched per window returned by the no-repeat replacement


@dataclass
class IndexSpec:
    """One way of cutting the corpus into an index; several retrieval settings may share it."""

    name: str
    make_parser: Callable[[], NodeParser]
    hierarchical: bool = False  # index the leaves, keep every level in the docstore


@dataclass
class RetrievalSpec:
    """How one pipeline retrieves from an index: ``k`` and what happens to the hits."""

    label: str
    index: str
    k: int
    post: str = (
        "none"  # "none" | "window" (metadata replacement) | "window_no_repeat" | "automerge"
    )


@dataclass
class BuiltIndex:
    index: VectorStoreIndex
    storage: StorageContext
    nodes: int
    storage_expansion: float
    extra: dict[str, Any] = field(default_factory=dict)


def stored_chars(nodes: Sequence[BaseNode]) -> int:
    """Characters a store keeps for the nodes: text plus a window kept in metadata."""
    return sum(
        len(n.get_content(metadata_mode=MetadataMode.NONE)) + len(n.metadata.get(WINDOW_KEY) or "")
        for n in nodes
    )


def embed_sorted(embed_model: Any, texts: list[str]) -> list[list[float]]:
    """Embed through the cache in length order (little padding per batch), return in order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = embed_model.get_text_embedding_batch([texts[i] for i in order])
    result: list[list[float]] = [[] for _ in texts]
    for position, index in enumerate(order):
        result[index] = vectors[position]
    return result


def build_index(
    spec: IndexSpec, documents: list[Document], embed_model: Any, uri: str, prefix: str
) -> BuiltIndex:
    started = time.perf_counter()
    all_nodes = spec.make_parser().get_nodes_from_documents(documents)
    indexed = get_leaf_nodes(all_nodes) if spec.hierarchical else all_nodes
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in indexed]
    for node, vector in zip(indexed, embed_sorted(embed_model, texts), strict=True):
        node.embedding = vector
    collection = f"{prefix}_{spec.name}".replace("-", "_").replace(".", "_")
    store = open_vector_store(
        uri, collection, dim=EMBED_DIM, overwrite=True, expected_rows=len(indexed)
    )
    for start in range(0, len(indexed), 2000):
        store.add(indexed[start : start + 2000])
    flush(store)
    storage = StorageContext.from_defaults(vector_store=store)
    if spec.hierarchical:
        storage.docstore.add_documents(all_nodes)
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    source = sum(len(d.text.strip()) for d in documents)
    logger.info(
        "%s: %d nodes (%d indexed) in %.0f s",
        spec.name,
        len(all_nodes),
        len(indexed),
        time.perf_counter() - started,
    )
    return BuiltIndex(index, storage, len(indexed), stored_chars(all_nodes) / source)


def retrieve_context(built: BuiltIndex, spec: RetrievalSpec, question: str) -> list[NodeWithScore]:
    if spec.post == "window_no_repeat":
        wide = built.index.as_retriever(similarity_top_k=NO_REPEAT_FETCH * spec.k)
        post = WindowReplacementPostprocessor(target_metadata_key=WINDOW_KEY, top_n=spec.k)
        return post.postprocess_nodes(wide.retrieve(question))
    retriever = built.index.as_retriever(similarity_top_k=spec.k)
    if spec.post == "automerge":
        return AutoMergingRetriever(retriever, built.storage).retrieve(question)  # type: ignore[arg-type]
    hits = retriever.retrieve(question)
    if spec.post == "window":
        hits = MetadataReplacementPostProcessor(target_metadata_key=WINDOW_KEY).postprocess_nodes(
            hits
        )
    return hits


def evaluate(
    corpus: SquadCorpus,
    index_specs: Sequence[IndexSpec],
    retrieval_specs: Sequence[RetrievalSpec],
    embed_model: Any,
    uri: str,
    prefix: str,
    skip: str = "",
) -> list[dict[str, Any]]:
    skipped = set(filter(None, skip.split(",")))
    index_specs = [spec for spec in index_specs if spec.name not in skipped]
    retrieval_specs = [spec for spec in retrieval_specs if spec.index not in skipped]
    documents = [Document(text=text, id_=doc_id) for doc_id, text in corpus.documents.items()]
    built = {
        spec.name: build_index(spec, documents, embed_model, uri, prefix) for spec in index_specs
    }
    rows = []
    for spec in retrieval_specs:
        covered: list[bool] = []
        tokens: list[int] = []
        hits = 0
        started = time.perf_counter()
        for question in corpus.questions:
            nodes = retrieve_context(built[spec.index], spec, question.question)
            context = "\n\n".join(
                n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes
            )
            tokens.append(count_tokens(context))
            covered.append(answer_covered(context, question.answers, require_all=False))
            hits += any(n.node.ref_doc_id == question.doc_id for n in nodes)
        count = max(len(corpus.questions), 1)
        rows.append(
            {
                "pipeline": spec.label,
                "k": spec.k,
                "coverage": sum(covered) / count,
                "hit": hits / count,
                "mean_context_tokens": sum(tokens) / count,
                "indexed_nodes": built[spec.index].nodes,
                "storage_expansion": built[spec.index].storage_expansion,
                "seconds": time.perf_counter() - started,
                "covered": covered,  # per question (popped before the results are written)
                "tokens": tokens,
            }
        )
        logger.info("%s", {k: v for k, v in rows[-1].items() if k not in ("covered", "tokens")})
    return rows


# --- pipelines --------------------------------------------------------------------------------


def ours_adaptive(args: argparse.Namespace, embed_unit: str, embed_model: Any) -> NodeParser:
    return AdaptiveSlidingWindowNodeParser(
        min_embed_tokens=args.min_embed_tokens if embed_unit == "sentence" else 0,
        split_at_paragraphs=args.split_at_paragraphs,
        mode="adaptive",
        embed_unit=embed_unit,
        max_window_tokens=args.window_tokens
        if embed_unit == "window"
        else args.sentence_window_tokens,
        stride_ratio=args.stride_ratio,
        forward_ratio=args.forward_ratio,
        breakpoint_percentile=args.percentile
        if embed_unit == "window"
        else args.sentence_percentile,
        breakpoint_signal=args.breakpoint_signal,
        breakpoint_buffer=args.breakpoint_buffer,
        embed_model=embed_model,
    )


def covid_specs(args: argparse.Namespace, embed_model: Any):
    indexes = [
        IndexSpec("core_ss256", lambda: SentenceSplitter(chunk_size=256)),
        IndexSpec("core_ss512", lambda: SentenceSplitter(chunk_size=512)),
        IndexSpec("core_ss1024", lambda: SentenceSplitter(chunk_size=1024)),
        IndexSpec("core_swnp3", lambda: SentenceWindowNodeParser.from_defaults(window_size=3)),
        IndexSpec(
            "core_hier",
            lambda: HierarchicalNodeParser.from_defaults(chunk_sizes=[1024, 256, 64]),
            hierarchical=True,
        ),
        IndexSpec("ours_adaptive_window", lambda: ours_adaptive(args, "window", embed_model)),
        IndexSpec("ours_adaptive_sentence", lambda: ours_adaptive(args, "sentence", embed_model)),
        IndexSpec(
            "ours_hier",
            lambda: HierarchicalSentenceNodeParser(chunk_sizes=[1024, 256, 64]),
            hierarchical=True,
        ),
    ]
    k = args.k
    retrievals = [
        RetrievalSpec("core SentenceSplitter(256)", "core_ss256", k),
        RetrievalSpec("core SentenceSplitter(512)", "core_ss512", k),
        RetrievalSpec("core SentenceSplitter(1024)", "core_ss1024", k),
        RetrievalSpec("core SentenceWindowNodeParser(3) + replacement", "core_swnp3", 2, "window"),
        RetrievalSpec("core SentenceWindowNodeParser(3) + replacement", "core_swnp3", k, "window"),
        RetrievalSpec("core Hierarchical[1024,256,64] + AutoMerging", "core_hier", 12, "automerge"),
        RetrievalSpec("ours adaptive, embed_unit=window", "ours_adaptive_window", k),
        RetrievalSpec(
            "ours adaptive, embed_unit=sentence + replacement",
            "ours_adaptive_sentence",
            k,
            "window",
        ),
        RetrievalSpec(
            "ours HierarchicalSentence[1024,256,64] + AutoMerging", "ours_hier", 12, "automerge"
        ),
        # the same indexes, windows without repeats (WindowReplacementPostprocessor, 4k fetched)
        RetrievalSpec(
            "core SentenceWindowNodeParser(3) + ours no-repeat replacement",
            "core_swnp3",
            k,
            "window_no_repeat",
        ),
        RetrievalSpec(
            "ours adaptive, embed_unit=sentence + no-repeat replacement",
            "ours_adaptive_sentence",
            k,
            "window_no_repeat",
        ),
    ]
    return indexes, retrievals


def cmrc_specs(args: argparse.Namespace, embed_model: Any):
    indexes = [
        IndexSpec("core_swnp3", lambda: SentenceWindowNodeParser.from_defaults(window_size=3)),
        IndexSpec("ours_adaptive_window", lambda: ours_adaptive(args, "window", embed_model)),
        IndexSpec("ours_adaptive_sentence", lambda: ours_adaptive(args, "sentence", embed_model)),
    ]
    k = args.k
    retrievals = [
        RetrievalSpec("core SentenceWindowNodeParser(3) + replacement", "core_swnp3", k, "window"),
        RetrievalSpec("ours adaptive, embed_unit=window", "ours_adaptive_window", k),
        RetrievalSpec(
            "ours adaptive, embed_unit=sentence + replacement",
            "ours_adaptive_sentence",
            k,
            "window",
        ),
    ]
    return indexes, retrievals


def window_grid_specs(args: argparse.Namespace, embed_model: Any):
    """The window sizes of the presets, each at every k in ``--ks``: the ``article`` preset
    (sentence unit, no-repeat window replacement of 4k hits, as the ``article`` and ``hybrid``
    pipelines) at each of ``--article-grid`` tokens, and the ``general`` preset (windows
    embedded whole, as ``adaptive-window``) at each of ``--general-grid`` tokens; every other
    setting is the preset's. Sentence vectors are shared by the article variants (the cache)."""
    indexes, retrievals = [], []
    grids = (
        ("article", args.article_grid, "window_no_repeat"),
        ("general", args.general_grid, "none"),
    )
    for preset, sizes, post in grids:
        for tokens in sizes:
            name = f"{preset}_w{tokens}"
            indexes.append(
                IndexSpec(
                    name,
                    lambda p=preset, t=tokens: AdaptiveSlidingWindowNodeParser(
                        preset=p, max_window_tokens=t, embed_model=embed_model
                    ),
                )
            )
            label = f"{preset} preset, {tokens}-token windows"
            retrievals += [RetrievalSpec(label, name, k, post) for k in args.ks]
    return indexes, retrievals


def paired_at_budgets(
    rows: list[dict[str, Any]], baseline: str, count: int = 4
) -> list[dict[str, Any]]:
    """Every pipeline of the same family (the label up to the comma) against ``baseline``,
    per question at equal context tokens: ``count`` budgets over the token range both curves
    (coverage against mean tokens over the measured k) cover, each question's coverage read
    at a budget by interpolating between the bracketing k as ``advrag compare`` does
    (``evaluation.decision.scores_at_budget``); mean difference, 95% paired-bootstrap
    interval, questions gained and lost."""
    family = baseline.split(",")[0]

    def curve(label: str) -> tuple[dict[int, float], dict[int, dict[int, float]]]:
        mine = [r for r in rows if r["pipeline"] == label]
        return (
            {r["k"]: r["mean_context_tokens"] for r in mine},
            {r["k"]: dict(enumerate(map(float, r["covered"]))) for r in mine},
        )

    base_tokens, base_values = curve(baseline)
    out = []
    for label in dict.fromkeys(r["pipeline"] for r in rows):
        if label == baseline or not label.startswith(family):
            continue
        tokens, values = curve(label)
        points = {
            name: sorted((t, 0.0) for t in curve_tokens.values())
            for name, curve_tokens in ((label, tokens), (baseline, base_tokens))
        }
        keys = list(next(iter(values.values())))
        for budget in common_budgets(points, count=count):
            mine = scores_at_budget(values, tokens, budget, keys)
            base = scores_at_budget(base_values, base_tokens, budget, keys)
            assert mine is not None and base is not None
            interval = paired_bootstrap_intervals(mine - base)[0]
            changes = count_changes(mine - base)
            out.append(
                {
                    "pipeline": label,
                    "baseline": baseline,
                    "budget": budget,
                    "coverage": float(mine.mean()),
                    "baseline_coverage": float(base.mean()),
                    "difference": interval.mean,
                    "low": interval.low,
                    "high": interval.high,
                    "gained": changes.better,
                    "lost": changes.worse,
                }
            )
    return out


def format_paired(title: str, compared: list[dict[str, Any]]) -> str:
    lines = [
        title,
        f"{'pipeline':40s} {'budget':>7s} {'cover':>6s} {'base':>6s} {'diff':>7s}"
        f" {'95% interval':>17s} {'+q':>4s} {'-q':>4s}",
    ]
    for c in compared:
        lines.append(
            f"{c['pipeline']:40s} {c['budget']:7.0f} {c['coverage']:6.3f}"
            f" {c['baseline_coverage']:6.3f} {c['difference']:+7.3f}"
            f" [{c['low']:+.3f}, {c['high']:+.3f}] {c['gained']:4d} {c['lost']:4d}"
        )
    return "\n".join(lines)


def grid_part(
    name: str, title: str, corpus: SquadCorpus, args: argparse.Namespace, embed_model: Any
) -> tuple[list[str], dict[str, Any]]:
    """The window-size grid on one corpus: the coverage table and each size against the
    preset's current size at equal tokens."""
    indexes, retrievals = window_grid_specs(args, embed_model)
    rows = evaluate(corpus, indexes, retrievals, embed_model, args.milvus, f"np_{name}", args.skip)
    report = [format_quality(title, rows, rows[0])]
    compared = []
    for preset, current in (("article", args.article_grid), ("general", args.general_grid)):
        default = preset_values(preset)["max_window_tokens"]
        if default in current:
            label = f"{preset} preset, {default}-token windows"
            compared += paired_at_budgets(rows, label)
    report.append(
        format_paired(f"{title}: each window size minus the preset's current one, at equal tokens",
                      compared)
    )  # fmt: skip
    for row in rows:
        row.pop("covered")
        row.pop("tokens")
    return report, {"rows": rows, "paired_against_current": compared}


def throughput(documents: list[Document], repeats: int = 3) -> list[dict[str, Any]]:
    """Parse-only MB/s; adaptive runs without semantic breakpoints (they need embeddings)."""
    size_mb = sum(len(d.text.encode("utf-8")) for d in documents) / 1e6
    parsers: list[tuple[str, Callable[[], NodeParser]]] = [
        ("core SentenceWindowNodeParser(3)", lambda: SentenceWindowNodeParser.from_defaults()),
        ("core SentenceSplitter(1024)", lambda: SentenceSplitter(chunk_size=1024)),
        ("core SentenceSplitter(256)", lambda: SentenceSplitter(chunk_size=256)),
        ("core Hierarchical[1024,256,64]", lambda: HierarchicalNodeParser.from_defaults(chunk_sizes=[1024, 256, 64])),
        ("ours fixed(3,1), window", lambda: AdaptiveSlidingWindowNodeParser()),
        ("ours fixed(3,1), sentence", lambda: AdaptiveSlidingWindowNodeParser(embed_unit="sentence")),
        ("ours adaptive, window (no breakpoints)", lambda: AdaptiveSlidingWindowNodeParser(mode="adaptive", breakpoint_percentile=None)),
        ("ours adaptive, sentence (no breakpoints)", lambda: AdaptiveSlidingWindowNodeParser(mode="adaptive", embed_unit="sentence", breakpoint_percentile=None)),
        ("ours adaptive, sentence, as benchmarked", lambda: AdaptiveSlidingWindowNodeParser(mode="adaptive", embed_unit="sentence", breakpoint_percentile=None, max_window_tokens=280, forward_ratio=0.75, min_embed_tokens=16, split_at_paragraphs=True)),
        ("ours HierarchicalSentence[1024,256,64]", lambda: HierarchicalSentenceNodeParser(chunk_sizes=[1024, 256, 64])),
    ]  # fmt: skip
    rows = []
    for name, make in parsers:
        parser = make()
        parser.get_nodes_from_documents(documents[:2])  # warm up (NLTK, tokenizer)
        best = float("inf")
        for _ in range(repeats):
            started = time.perf_counter()
            nodes = parser.get_nodes_from_documents(documents)
            best = min(best, time.perf_counter() - started)
        rows.append(
            {"parser": name, "nodes": len(nodes), "seconds": best, "mb_per_s": size_mb / best}
        )
        logger.info("%s", rows[-1])
    return rows


# --- reporting --------------------------------------------------------------------------------


def format_quality(title: str, rows: list[dict[str, Any]], baseline: dict[str, Any]) -> str:
    lines = [
        title,
        f"{'pipeline':58s} {'k':>3s} {'cover':>6s} {'hit':>6s} {'tokens':>7s} "
        f"{'cov/base':>8s} {'tok/base':>8s} {'nodes':>7s} {'stored':>6s}",
    ]
    for row in rows:
        lines.append(
            f"{row['pipeline']:58s} {row['k']:3d} {row['coverage']:6.3f} {row['hit']:6.3f} "
            f"{row['mean_context_tokens']:7.0f} {row['coverage'] / max(baseline['coverage'], 1e-9):8.2f} "
            f"{row['mean_context_tokens'] / baseline['mean_context_tokens']:8.2f} "
            f"{row['indexed_nodes']:7d} {row['storage_expansion']:5.2f}x"
        )
    lines.append(f"baseline (ratios): {baseline['pipeline']} k={baseline['k']}")
    return "\n".join(lines)


def format_throughput(rows: list[dict[str, Any]]) -> str:
    base = rows[0]["mb_per_s"]
    lines = ["Parse throughput (COVID-QA, parsing only, best of 3)"]
    lines += [
        f"{r['parser']:44s} {r['mb_per_s']:6.2f} MB/s  x{r['mb_per_s'] / base:4.2f}  {r['nodes']:6d} nodes"
        for r in rows
    ]
    lines.append(f"ratios against {rows[0]['parser']}")
    return "\n".join(lines)


def percentile(value: str) -> float | None:
    """A breakpoint percentile argument; ``none`` turns semantic breakpoints off."""
    return None if value.lower() == "none" else float(value)


def load_covid(args: argparse.Namespace) -> SquadCorpus:
    """COVID-QA questions: all, the first N in file order, a seeded random sample of N, all
    but the seeded sample of N the settings were tuned on (``--sample holdout``), or all but
    the first N in file order (``--sample rest``: for tuning apart from the issue's anchor
    set, the first 400)."""
    if args.sample == "rest":
        corpus = load_squad(covidqa_path(args.datasets))
        return SquadCorpus(corpus.documents, corpus.questions[args.max_questions :])
    if args.sample == "holdout":
        corpus = load_squad(covidqa_path(args.datasets))
        tuned = load_squad(covidqa_path(args.datasets), args.max_questions, seed=args.seed)
        seen = {q.id for q in tuned.questions}
        return SquadCorpus(corpus.documents, [q for q in corpus.questions if q.id not in seen])
    if args.max_questions <= 0 or args.sample == "first":
        corpus = load_squad(covidqa_path(args.datasets))
        count = args.max_questions if args.max_questions > 0 else len(corpus.questions)
        return SquadCorpus(corpus.documents, corpus.questions[:count])
    return load_squad(covidqa_path(args.datasets), max_questions=args.max_questions, seed=args.seed)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument(
        "--max-questions", type=int, default=400, help="COVID-QA questions (0: all 1,380)"
    )
    parser.add_argument(
        "--sample",
        choices=("random", "first", "holdout", "rest"),
        default="random",
        help="COVID-QA: a seeded random sample, the first N questions in file order, all "
        "questions except the seeded sample (holdout), or all but the first N (rest)",
    )
    parser.add_argument("--cmrc-questions", type=int, default=1000, help="first N CMRC questions")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument(
        "--parts",
        default="covid,cmrc,throughput",
        help="comma-separated: covid, cmrc, throughput; covid-grid, squad2-grid, cmrc-grid "
        "(window sizes; cmrc-grid: the first --cmrc-questions over their paragraphs)",
    )
    parser.add_argument("--embed", choices=("minilm", "bge"), default="minilm")
    parser.add_argument("--covid-papers", type=int, default=30, help="covid-grid: first N papers")
    parser.add_argument("--ks", type=int, nargs="+", default=[2, 3, 5, 8], help="grid parts")
    parser.add_argument(
        "--article-grid",
        type=int,
        nargs="*",
        default=[200, 280, 360],
        help="grid parts: article preset window tokens",
    )
    parser.add_argument(
        "--general-grid",
        type=int,
        nargs="*",
        default=[192, 256, 384],
        help="grid parts: general preset window tokens",
    )
    parser.add_argument("--window-tokens", type=int, default=200, help="adaptive, window unit")
    parser.add_argument(
        "--sentence-window-tokens", type=int, default=280, help="adaptive, sentence unit"
    )
    parser.add_argument(
        "--split-at-paragraphs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="adaptive: windows stop at blank lines",
    )
    parser.add_argument(
        "--min-embed-tokens", type=int, default=16, help="adaptive, sentence unit (0: off)"
    )
    parser.add_argument("--stride-ratio", type=float, default=0.5)
    parser.add_argument("--forward-ratio", type=float, default=0.75, help="adaptive, sentence unit")
    parser.add_argument(
        "--percentile", type=percentile, default=None, help="adaptive, window unit ('none': off)"
    )
    parser.add_argument(
        "--sentence-percentile",
        type=percentile,
        default=None,
        help="adaptive, sentence unit ('none': off)",
    )
    parser.add_argument(
        "--breakpoint-signal",
        choices=("embedding", "lexical"),
        default="embedding",
        help="adaptive: what breakpoints compare (sentence embeddings or TF-IDF words)",
    )
    parser.add_argument(
        "--breakpoint-buffer", type=int, default=1, help="adaptive: sentences on each side"
    )
    parser.add_argument("--seed", type=int, default=0, help="COVID-QA question sample")
    parser.add_argument("--name", default="node_parsers", help="results file name")
    parser.add_argument("--skip", default="", help="comma-separated index names to leave out")
    parser.add_argument(
        "--milvus", default=str(CACHE_DIR.parent / "bench-milvus" / "node_parsers.db")
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parts = set(args.parts.split(","))
    reconnects_before = process_reconnects()
    embed_model = cached_bge_embedding() if args.embed == "bge" else cached_minilm_embedding()
    report: list[str] = []
    data: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}

    if "covid-grid" in parts:
        corpus = load_squad(covidqa_path(args.datasets))
        documents = dict(list(corpus.documents.items())[: args.covid_papers])
        corpus = SquadCorpus(documents, [q for q in corpus.questions if q.doc_id in documents])
        title = (
            f"COVID-QA, first {args.covid_papers} papers and their {len(corpus.questions)}"
            f" questions ({args.embed})"
        )
        lines, data["covid_grid"] = grid_part("covgrid", title, corpus, args, embed_model)
        report += lines
    if "cmrc-grid" in parts:
        corpus = load_squad(cmrc_path(args.datasets))
        questions = corpus.questions[: args.cmrc_questions]
        asked = {q.doc_id for q in questions}
        corpus = SquadCorpus({d: t for d, t in corpus.documents.items() if d in asked}, questions)
        title = (
            f"CMRC 2018: first {len(questions)} questions over their {len(corpus.documents)}"
            f" paragraphs ({args.embed})"
        )
        lines, data["cmrc_grid"] = grid_part("cmrcgrid", title, corpus, args, embed_model)
        report += lines
    if "squad2-grid" in parts:
        corpus = load_squad(args.datasets / "squad2" / "squad2_dev_first5.json")
        title = (
            f"SQuAD 2.0 dev, first 5 articles: {len(corpus.questions)} answerable questions"
            f" over {len(corpus.documents)} paragraphs ({args.embed})"
        )
        lines, data["squad2_grid"] = grid_part("sqgrid", title, corpus, args, embed_model)
        report += lines

    if "covid" in parts:
        corpus = load_covid(args)
        indexes, retrievals = covid_specs(args, embed_model)
        rows = evaluate(
            corpus, indexes, retrievals, embed_model, args.milvus, "np_covid", args.skip
        )
        baseline = next(
            (r for r in rows if "Window" in r["pipeline"] and r["k"] == args.k), rows[0]
        )
        sample = "first" if args.sample == "first" else f"random, seed {args.seed}"
        if args.max_questions <= 0:
            sample = "all"
        if args.sample == "holdout":
            sample = f"all but the {args.max_questions} of seed {args.seed}"
        if args.sample == "rest":
            sample = f"all but the first {args.max_questions}"
        title = (
            f"COVID-QA: {len(corpus.questions)} questions ({sample}) "
            f"over {len(corpus.documents)} papers"
        )
        report.append(format_quality(title, rows, baseline))
        for row in rows:
            row.pop("covered")
            row.pop("tokens")
        data["covid"] = rows
    if "cmrc" in parts:
        corpus = load_squad(cmrc_path(args.datasets))
        corpus = SquadCorpus(corpus.documents, corpus.questions[: args.cmrc_questions])
        indexes, retrievals = cmrc_specs(args, embed_model)
        rows = evaluate(corpus, indexes, retrievals, embed_model, args.milvus, "np_cmrc", args.skip)
        title = f"CMRC 2018: first {len(corpus.questions)} questions over {len(corpus.documents)} paragraphs"
        report.append(format_quality(title, rows, rows[0]))
        for row in rows:
            row.pop("covered")
            row.pop("tokens")
        data["cmrc"] = rows
    if "throughput" in parts:
        corpus = load_squad(covidqa_path(args.datasets), max_questions=1)
        documents = [Document(text=t, id_=d) for d, t in corpus.documents.items()]
        rows = throughput(documents)
        report.append(format_throughput(rows))
        data["throughput"] = rows
    reconnects = process_reconnects() - reconnects_before
    report.append(f"Milvus reconnects during the run: {reconnects} (each logged as a warning)")
    data["milvus_reconnects"] = reconnects
    text = "\n\n".join(report)
    print(text)  # the benchmark's report is its output
    write_results(args.name, text, data)


if __name__ == "__main__":
    main()
