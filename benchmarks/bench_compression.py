"""Context compression at equal tokens: ContextCompressionPostprocessor against the same
retrieval uncompressed and against core's SentenceEmbeddingOptimizer (issue #40).

Every row uses the same chunks (core ``SentenceSplitter(256, overlap 20)``, the ``baseline``
pipeline of ``advrag compare``) and the same embedding (bge-small-en-v1.5, the default, behind
the on-disk cache, so a re-run embeds nothing). Per question, coverage = the gold answer in
the context (passages joined by a blank line), tokens = LlamaIndex's tokenizer.

- uncompressed: top-k chunks for k = 1..12, read at each budget by interpolating between the
  two k whose mean tokens bracket it (``evaluation.frontier.interpolation_weights``, the same
  weights applied per question, so the paired difference is exact);
- optimizer: core's ``SentenceEmbeddingOptimizer(percentile_cutoff=0.3)`` (the issue's
  setting; it has no token budget) over the top k, k = 1..12, read at each budget the same
  way;
- compressed: the top ``--top`` chunks compressed to the budget (300 / 600 / 900 tokens).

Differences are paired per question with a 95% bootstrap interval
(``evaluation.paired``). ``--sweep`` runs the grid the defaults were picked from (on SQuAD
2.0); the other sets are run with the defaults, and ``--configs`` adds named variants (the
candidate pool cut to the leading passages within a multiple of the budget, the rank prior,
multilingual-e5 as the judge: the per-language judge picked on RGB). The defaults score
Chinese pairs with multilingual-e5 (the postprocessor's ``cjk_judge``, here behind the on-disk
cache); ``"cosine on Chinese pairs too (cjk_judge=False)"`` is the defaults before that. The
cross-encoder (English only) is cached on disk by its raw logit (``judge_score_cache``).

    nice -n 5 python benchmarks/bench_compression.py --dataset squad2 --questions 150 --sweep
    nice -n 5 python benchmarks/bench_compression.py --dataset squad2 --questions 60 --judge \
        --name compression_squad2_judge
    nice -n 5 python benchmarks/bench_compression.py --dataset covidqa --documents 10 --questions 120
    nice -n 5 python benchmarks/bench_compression.py --dataset covidqa --documents 20 \
        --questions 200 --name compression_covidqa_20papers --configs "pool 2.0x budget" \
        "pool 3.0x budget" "pool 4.0x budget" "rank 1.0" "rank 2.0"
    nice -n 5 python benchmarks/bench_compression.py --dataset cmrc --documents 150 --questions 150 \
        --configs "e5 judge + rank" "e5 judge + cosine + rank" "rank 1.0" "pool 3.0x budget"
    nice -n 5 python benchmarks/bench_compression.py --dataset rgb --questions 100 --configs \
        "pool 2.0x budget" "pool 3.0x budget" "rank 1.0" "rank 2.0" "e5 judge + cosine + rank" \
        "e5 judge + rank" "e5 judge + rank, pool 3x"
    nice -n 5 python benchmarks/bench_compression.py --dataset rgb --questions 100 --embed e5 \
        --name compression_rgb_zh_e5
    nice -n 5 python benchmarks/bench_compression.py --dataset covidqa --documents 20 \
        --questions 200 --name compression_covidqa_20papers_e5 --configs \
        "e5 judge + cosine + rank" "e5 judge + rank"
    nice -n 5 python benchmarks/bench_compression.py --dataset squad2 --questions 150 \
        --name compression_squad2_e5 --configs "e5 judge + rank" "e5 judge + cosine + rank"
    nice -n 5 python benchmarks/bench_compression.py --dataset rgb --questions 100 \
        --name compression_rgb_zh_cjk --configs "cosine on Chinese pairs too (cjk_judge=False)" \
        "e5 judge + rank"
    nice -n 5 python benchmarks/bench_compression.py --dataset cmrc --documents 150 --questions 150 \
        --name compression_cmrc_cjk --configs "cosine on Chinese pairs too (cjk_judge=False)" \
        "e5 judge + rank"
    nice -n 5 python benchmarks/bench_compression.py --dataset squad2 --latency 60
"""

from __future__ import annotations

import argparse
import logging
import random
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_fusion import covers, load_rgb  # noqa: E402
from common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    SquadCorpus,
    cached_bge_embedding,
    cached_e5_embedding,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from judge_score_cache import CachedRawJudge, RawScoreCache  # noqa: E402
from llama_index.core import Document  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.postprocessor import SentenceEmbeddingOptimizer  # noqa: E402
from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode  # noqa: E402

from llama_index_ext_advrag import ContextCompressionPostprocessor  # noqa: E402
from llama_index_ext_advrag.evaluation.frontier import interpolation_weights  # noqa: E402
from llama_index_ext_advrag.evaluation.paired import paired_bootstrap_intervals  # noqa: E402
from llama_index_ext_advrag.judges import CrossEncoderRelevanceJudge, ScoreCalibration  # noqa: E402
from llama_index_ext_advrag.similarity import normalise_rows  # noqa: E402
from llama_index_ext_advrag.text import count_tokens, split_sentences  # noqa: E402

logger = logging.getLogger("benchmarks.compression")

BUDGETS = (300, 600, 900)
MAX_K = 12
OPTIMIZER_CUTOFF = 0.3
SEPARATOR = "\n\n"


@dataclass(frozen=True)
class Config:
    """One compressor setting (the postprocessor's own fields, plus how many chunks it reads)."""

    name: str
    top: int = 12
    neighbours: int = 1
    rank_weight: float = 0.5
    cosine_weight: float = 1.0
    judge: bool = False
    judge_weight: float = 1.0
    e5: bool = False  # the judge is multilingual-e5 (cosine, cached) instead of the cross-encoder
    pool: float | None = None  # candidate passages: the leading ones within pool x budget tokens
    cjk_judge: bool = True  # without a judge: Chinese pairs scored by multilingual-e5 (cached)


DEFAULT = Config("default: cosine (e5 on Chinese pairs) + rank prior, +-1, top 12")
JUDGED = Config("cross-encoder + cosine + rank prior, +-1, top 12", judge=True)


EXTRA = {
    c.name: c
    for c in [
        *(Config(f"pool {f}x budget", pool=f) for f in (2.0, 3.0, 4.0)),
        *(Config(f"rank {r}", rank_weight=r) for r in (1.0, 2.0)),
        Config("e5 judge + cosine + rank", judge=True, e5=True),
        Config("e5 judge + rank", judge=True, e5=True, cosine_weight=0.0),
        Config("e5 judge + rank, pool 3x", judge=True, e5=True, cosine_weight=0.0, pool=3.0),
        Config("e5 judge + cosine + rank, pool 3x", judge=True, e5=True, pool=3.0),
        Config("cosine on Chinese pairs too (cjk_judge=False)", cjk_judge=False),
    ]
}


def sweep_configs(judge: bool) -> list[Config]:
    grid = [
        Config(f"cosine, +-{n}, rank {r}, top 12", neighbours=n, rank_weight=r)
        for n in (0, 1, 2)
        for r in (0.0, 0.5, 1.0)
    ]
    grid.append(Config("cosine, +-1, rank 0.5, top 8", top=8))
    if judge:
        grid += [
            Config(
                "cross-encoder alone, +-1, top 12", judge=True, cosine_weight=0.0, rank_weight=0.0
            ),
            Config("cross-encoder + rank 0.5, +-1, top 12", judge=True, cosine_weight=0.0),
            JUDGED,
        ]
    return grid


@dataclass
class Question:
    id: str
    text: str
    gold: Any  # what bench_fusion.covers reads


@dataclass
class Corpus:
    name: str
    chunks: list[TextNode]
    questions: list[Question]
    notes: dict[str, Any] = field(default_factory=dict)


def chunk_documents(documents: dict[str, str]) -> list[TextNode]:
    splitter = SentenceSplitter(chunk_size=256, chunk_overlap=20)
    docs = [Document(text=text, id_=doc_id) for doc_id, text in documents.items()]
    return [
        TextNode(text=n.get_content(), id_=n.node_id)
        for n in splitter.get_nodes_from_documents(docs)
    ]


def load_corpus(args: argparse.Namespace) -> Corpus:
    datasets: Path = args.datasets
    if args.dataset == "rgb":
        rgb = load_rgb(datasets / "rgb" / "zh_refine.json", args.questions)
        questions = [Question(q.id, q.question, q) for q in rgb.questions]
        return Corpus("rgb_zh", chunk_documents(rgb.documents), questions,
                      {"set": f"RGB zh_refine, first {len(questions)} questions, pooled passages"})  # fmt: skip
    if args.dataset == "squad2":
        squad = load_squad(datasets / "squad2" / "squad2_dev_first5.json")
        note = "SQuAD 2.0 dev, first 5 articles, answerable questions"
    elif args.dataset == "covidqa":
        squad = first_documents(load_squad(covidqa_path(datasets)), args.documents)
        note = f"COVID-QA, first {args.documents} papers"
    else:
        squad = first_documents(load_squad(cmrc_path(datasets)), args.documents)
        note = f"CMRC 2018 dev, first {args.documents} paragraphs"
    pool = squad.questions
    if args.questions < len(pool):
        pool = sorted(random.Random(0).sample(pool, args.questions), key=lambda q: q.id)
    questions = [Question(q.id, q.question, q) for q in pool]
    note += f", {len(questions)} questions (seeded sample of {len(squad.questions)})"
    return Corpus(args.dataset, chunk_documents(squad.documents), questions, {"set": note})


def first_documents(corpus: SquadCorpus, count: int | None) -> SquadCorpus:
    if count is None:
        return corpus
    kept = dict(list(corpus.documents.items())[:count])
    return SquadCorpus(kept, [q for q in corpus.questions if q.doc_id in kept])


# --- the three pipelines ------------------------------------------------------------------


def retrieve_all(corpus: Corpus, embed: Any) -> tuple[list[list[int]], list[list[float]]]:
    texts = [c.get_content(MetadataMode.NONE) for c in corpus.chunks]
    matrix = normalise_rows(embed.get_text_embedding_batch(texts, show_progress=False))
    tops, query_vectors = [], []
    for question in corpus.questions:
        vector = embed.get_query_embedding(question.text)
        scores = matrix @ normalise_rows(vector)[0]
        tops.append([int(i) for i in np.argsort(-scores, kind="stable")[:MAX_K]])
        query_vectors.append(vector)
    return tops, query_vectors


def hits_of(corpus: Corpus, top: Sequence[int], n: int) -> list[NodeWithScore]:
    """Copies of the top ``n`` chunks (core's optimizer rewrites the nodes it is given)."""
    return [
        NodeWithScore(node=corpus.chunks[i].model_copy(), score=1.0 - r / 100)
        for r, i in enumerate(top[:n])
    ]


def context_of(nodes: Sequence[NodeWithScore]) -> str:
    return SEPARATOR.join(n.node.get_content(MetadataMode.NONE) for n in nodes)


def curve(rows: list[list[tuple[int, bool]]]) -> tuple[np.ndarray, np.ndarray]:
    """Per question and point (tokens, covered) -> (mean tokens per point, covered matrix)."""
    tokens = np.array([[t for t, _ in q] for q in rows], dtype=float)
    covered = np.array([[c for _, c in q] for q in rows], dtype=float)
    return tokens.mean(axis=0), covered


def at_budget(means: np.ndarray, covered: np.ndarray, budget: float) -> np.ndarray | None:
    """Per-question coverage of a curve read at ``budget`` mean tokens (None: out of range)."""
    weights = interpolation_weights(list(means), budget)
    if weights is None:
        return None
    return sum(w * covered[:, i] for i, w in weights.items())


def uncompressed(corpus: Corpus, tops: list[list[int]]) -> list[list[tuple[int, bool]]]:
    rows = []
    for question, top in zip(corpus.questions, tops, strict=True):
        row = []
        for k in range(1, MAX_K + 1):
            context = context_of(hits_of(corpus, top, k))
            row.append((count_tokens(context), covers(context, question.gold)))
        rows.append(row)
    return rows


def optimizer(
    corpus: Corpus, tops: list[list[int]], vectors: list[Any], embed: Any
) -> list[list[tuple[int, bool]]]:
    """Core's optimizer at the issue's setting (percentile 0.3, its default +-1 context) over
    the top k, k = 1..12: a curve in k read at each budget like the uncompressed one."""
    post = SentenceEmbeddingOptimizer(embed_model=embed, percentile_cutoff=OPTIMIZER_CUTOFF)
    rows = []
    for question, top, vector in zip(corpus.questions, tops, vectors, strict=True):
        row = []
        for k in range(1, MAX_K + 1):
            bundle = QueryBundle(question.text, embedding=vector)
            context = context_of(
                post.postprocess_nodes(hits_of(corpus, top, k), query_bundle=bundle)
            )
            row.append((count_tokens(context), covers(context, question.gold)))
        rows.append(row)
    return rows


def compressed(
    corpus: Corpus,
    tops: list[list[int]],
    vectors: list[Any],
    embed: Any,
    judge: Any,
    config: Config,
) -> dict[int, list[tuple[int, bool]]]:
    out: dict[int, list[tuple[int, bool]]] = {}
    for budget in BUDGETS:
        post = ContextCompressionPostprocessor(
            judge=(e5_judge() if config.e5 else judge) if config.judge else None,
            embed_model=embed,
            max_context_tokens=budget,
            neighbours=config.neighbours,
            rank_weight=config.rank_weight,
            cosine_weight=config.cosine_weight,
            judge_weight=config.judge_weight,
            cjk_judge=e5_judge() if config.cjk_judge else False,
        )
        rows = []
        for question, top, vector in zip(corpus.questions, tops, vectors, strict=True):
            bundle = QueryBundle(question.text, embedding=vector)
            hits = hits_of(corpus, top, config.top)
            if config.pool is not None:
                hits = within_pool(hits, config.pool * budget)
            context = context_of(post.postprocess_nodes(hits, query_bundle=bundle))
            rows.append((count_tokens(context), covers(context, question.gold)))
        out[budget] = rows
    return out


def within_pool(hits: list[NodeWithScore], tokens: float) -> list[NodeWithScore]:
    """The leading hits whose texts together hold at most ``tokens`` tokens (at least one)."""
    kept, used = [], 0
    for hit in hits:
        used += count_tokens(hit.node.get_content(MetadataMode.NONE))
        if kept and used > tokens:
            break
        kept.append(hit)
    return kept


_E5_JUDGE: list[Any] = []


def e5_judge() -> Any:
    """multilingual-e5-small as a cosine judge, behind the on-disk embedding cache."""
    if not _E5_JUDGE:
        from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge

        _E5_JUDGE.append(EmbeddingRelevanceJudge(embed_model=cached_e5_embedding(), name="e5"))
    return _E5_JUDGE[0]


# --- report -------------------------------------------------------------------------------


def interval(diff: np.ndarray) -> dict[str, float]:
    (result,) = paired_bootstrap_intervals(diff)
    return {
        "mean": round(result.mean, 4),
        "low": round(result.low, 4),
        "high": round(result.high, 4),
    }


def fmt(value: dict[str, float] | None) -> str:
    if value is None:
        return "n/a"
    return f"{value['mean']:+.3f} [{value['low']:+.3f}, {value['high']:+.3f}]"


def compare(
    config: Config, rows: dict[int, list[tuple[int, bool]]], base: tuple, opt: tuple
) -> list[dict[str, Any]]:
    results = []
    for budget in BUDGETS:
        covered = np.array([c for _, c in rows[budget]], dtype=float)
        tokens = [t for t, _ in rows[budget]]
        plain = at_budget(*base, budget)
        core = at_budget(*opt, budget)
        results.append({
            "config": config.name, "budget": budget, "coverage": round(float(covered.mean()), 4),
            "mean_tokens": round(statistics.fmean(tokens), 1), "max_tokens": max(tokens),
            "uncompressed": None if plain is None else round(float(plain.mean()), 4),
            "optimizer": None if core is None else round(float(core.mean()), 4),
            "vs_uncompressed": None if plain is None else interval(covered - plain),
            "vs_optimizer": None if core is None else interval(covered - core),
        })  # fmt: skip
    return results


def table(title: str, results: list[dict[str, Any]]) -> str:
    lines = [f"## {title}", "",
             "| compressor | budget | coverage @ mean tokens (max) | uncompressed | optimizer | vs uncompressed [95%] | vs optimizer [95%] |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in results:
        lines.append(
            f"| {r['config']} | {r['budget']} | {r['coverage']:.3f} @ {r['mean_tokens']:.0f} ({r['max_tokens']}) "
            f"| {r['uncompressed'] if r['uncompressed'] is not None else 'n/a'} "
            f"| {r['optimizer'] if r['optimizer'] is not None else 'n/a'} "
            f"| {fmt(r['vs_uncompressed'])} | {fmt(r['vs_optimizer'])} |"
        )
    return "\n".join(lines)


def curve_lines(name: str, means: np.ndarray, covered: np.ndarray, labels: Sequence[Any]) -> str:
    points = ", ".join(
        f"{label}: {c:.3f} @ {t:.0f}"
        for label, t, c in zip(labels, means, covered.mean(axis=0), strict=True)
    )
    return f"{name}: {points}"


def run_quality(args: argparse.Namespace) -> None:
    corpus = load_corpus(args)
    embed = cached_e5_embedding() if args.embed == "e5" else cached_bge_embedding()
    started = time.perf_counter()
    tops, vectors = retrieve_all(corpus, embed)
    logger.info(
        "%s: %d chunks, %d questions retrieved in %.0f s",
        corpus.name,
        len(corpus.chunks),
        len(corpus.questions),
        time.perf_counter() - started,
    )
    base = curve(uncompressed(corpus, tops))
    started = time.perf_counter()
    opt = curve(optimizer(corpus, tops, vectors, embed))
    logger.info("optimizer: %.0f s", time.perf_counter() - started)
    judge = None
    if args.judge or args.sweep:
        inner = CrossEncoderRelevanceJudge(num_threads=1, calibration=ScoreCalibration())
        judge = CachedRawJudge(
            inner, RawScoreCache(CACHE_DIR / "judges"), "ce-msmarco-int8", ScoreCalibration()
        )
    configs = (
        sweep_configs(args.judge) if args.sweep else [DEFAULT] + ([JUDGED] if args.judge else [])
    )
    if args.configs:
        configs = [DEFAULT] + [EXTRA[name] for name in args.configs]
    results = []
    for config in configs:
        started = time.perf_counter()
        results += compare(
            config, compressed(corpus, tops, vectors, embed, judge, config), base, opt
        )
        logger.info("%s: %.0f s", config.name, time.perf_counter() - started)
    text = "\n\n".join([
        table(f"{corpus.notes['set']}: compression at equal tokens ({embed.model_name}, SentenceSplitter(256))", results),
        curve_lines("uncompressed top-k (coverage @ mean tokens)", *base, range(1, MAX_K + 1)),
        curve_lines(f"SentenceEmbeddingOptimizer(percentile_cutoff={OPTIMIZER_CUTOFF}) over top k", *opt, range(1, MAX_K + 1)),
        f"judge pairs scored by the model this run: {judge.scored if judge is not None else 0}",
    ])  # fmt: skip
    print(text)
    name = args.name or f"compression_{corpus.name}" + ("_sweep" if args.sweep else "")
    write_results(name, text, {"set": corpus.notes, "questions": len(corpus.questions), "chunks": len(corpus.chunks),
                               "budgets": list(BUDGETS), "results": results,
                               "uncompressed": [[float(t), float(c)] for t, c in zip(base[0], base[1].mean(axis=0), strict=True)],
                               "optimizer": [[float(t), float(c)] for t, c in zip(opt[0], opt[1].mean(axis=0), strict=True)]})  # fmt: skip


# --- cost -----------------------------------------------------------------------------------


def run_latency(args: argparse.Namespace) -> None:
    """p50 overhead at top 12 with sentence vectors read from a docstore of sentence units
    (the pack's sentence-unit parser over the same documents, vectors stored at ingest), the
    query vector given by the retriever; against the same call embedding the sentences (cached
    model: the lookup alone) and the cross-encoder's pairs/s."""
    from llama_index.core.storage.docstore import SimpleDocumentStore

    from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser

    args.questions = args.latency
    squad = load_squad(args.datasets / "squad2" / "squad2_dev_first5.json")
    documents = [Document(text=t, id_=d) for d, t in squad.documents.items()]
    embed = cached_bge_embedding()
    units = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        documents
    )
    for unit, vector in zip(
        units,
        embed.get_text_embedding_batch([u.get_content(MetadataMode.NONE) for u in units]),
        strict=True,
    ):
        unit.embedding = vector
    docstore = SimpleDocumentStore()
    docstore.add_documents(units)
    chunks = AdaptiveSlidingWindowNodeParser(window_size=8, stride=8).get_nodes_from_documents(
        documents
    )
    matrix = normalise_rows(
        embed.get_text_embedding_batch([c.get_content(MetadataMode.NONE) for c in chunks])
    )
    questions = random.Random(0).sample(squad.questions, min(args.latency, len(squad.questions)))
    stored = ContextCompressionPostprocessor(
        embed_model=embed, docstore=docstore, max_context_tokens=600
    )
    embedded = ContextCompressionPostprocessor(embed_model=embed, max_context_tokens=600)
    core = SentenceEmbeddingOptimizer(embed_model=embed, percentile_cutoff=OPTIMIZER_CUTOFF)
    names = ("stored vectors", "cached embedding", "core optimizer, cached embedding")
    times: dict[str, list[float]] = {name: [] for name in names}
    counts = []
    inner = embed._inner  # the model itself: retrieval timed as a user pays it (no cache)
    retrieval: list[float] = []
    for question in questions:
        started = time.perf_counter()
        vector = inner.get_query_embedding(question.question)
        top = np.argsort(-(matrix @ normalise_rows(vector)[0]))[:12]
        retrieval.append((time.perf_counter() - started) * 1000)
        bundle = QueryBundle(question.question, embedding=vector)
        for name, post in zip(names, (stored, embedded, core), strict=True):
            hits = [NodeWithScore(node=chunks[i].model_copy(), score=0.5) for i in top]
            started = time.perf_counter()
            result = post.postprocess_nodes(hits, query_bundle=bundle)
            times[name].append((time.perf_counter() - started) * 1000)
            if name == "stored vectors" and result:
                counts.append(result[0].node.metadata["advrag_trace"]["compression"]["vectors"])
    judge = CrossEncoderRelevanceJudge(num_threads=1)
    pairs = [s.text for c in chunks for s in split_sentences(c.get_content())][:120]
    judge.judge(questions[0].question, pairs[:2])  # loads the model
    started = time.perf_counter()
    judge.judge(questions[0].question, pairs)
    rate = len(pairs) / (time.perf_counter() - started)
    core_p50 = statistics.median(times[names[2]])
    lines = ["## Cost at top 12 (SQuAD 2.0 first 5 articles, pack sentence units, 600-token budget)", "",
             "| scorer | p50 ms | p90 ms | p50 / core optimizer's |", "|---|---|---|---|"]  # fmt: skip
    for name, values in times.items():
        p50 = statistics.median(values)
        lines.append(
            f"| {name} | {p50:.1f} | {np.percentile(values, 90):.1f} | {p50 / core_p50:.2f} |"
        )
    retrieval_p50 = statistics.median(retrieval)
    stored_p50 = statistics.median(times[names[0]])
    lines.append(
        f"| retrieval (query embedding, uncached, + top-12 search over {len(chunks)} chunk vectors) "
        f"| {retrieval_p50:.1f} | {np.percentile(retrieval, 90):.1f} | {retrieval_p50 / core_p50:.2f} |"
    )
    lines.append(
        f"\nstored-vector compression p50 / retrieval p50, same run: {stored_p50 / retrieval_p50:.2f}"
    )
    lines.append(
        f"\ncross-encoder (ms-marco-MiniLM-L-12 int8, 1 thread): {rate:.1f} pairs/s on {len(pairs)} sentence pairs"
    )
    stored_share = sum(c["stored"] for c in counts) / max(
        1, sum(c["stored"] + c["embedded"] for c in counts)
    )
    lines.append(f"sentences with a stored vector: {stored_share:.3f}; {len(questions)} questions")
    text = "\n".join(lines)
    print(text)
    write_results(args.name or "compression_cost", text, {"p50_ms": {k: statistics.median(v) for k, v in times.items()},
                                                          "p90_ms": {k: float(np.percentile(v, 90)) for k, v in times.items()},
                                                          "judge_pairs_per_s": rate, "stored_share": stored_share,
                                                          "retrieval_p50_ms": retrieval_p50,
                                                          "overhead_to_retrieval": stored_p50 / retrieval_p50,
                                                          "questions": len(questions)})  # fmt: skip


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=["squad2", "covidqa", "cmrc", "rgb"], default="squad2")
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument(
        "--documents", type=int, default=None, help="first N documents (COVID-QA, CMRC)"
    )
    parser.add_argument(
        "--judge", action="store_true", help="also the cross-encoder rows (English)"
    )
    parser.add_argument(
        "--sweep", action="store_true", help="the grid the defaults were picked from"
    )
    parser.add_argument("--latency", type=int, default=0, help="cost run over N questions instead")
    parser.add_argument("--name", default=None)
    parser.add_argument(
        "--configs",
        nargs="+",
        choices=sorted(EXTRA),
        default=None,
        help="the defaults and these settings instead (rules tried against the defaults)",
    )
    parser.add_argument(
        "--embed", choices=["bge", "e5"], default="bge", help="e5: multilingual-e5-small (Chinese)"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    if args.latency:
        run_latency(args)
    else:
        run_quality(args)


if __name__ == "__main__":
    main()
