"""Hybrid fusion benchmark: dense vs BM25 (core default and ours) vs fused, over sentence windows.

For CMRC 2018 (Chinese) and COVID-QA (English): every paragraph/paper is cut with
``llama_index_ext_advrag.text.split_sentences``; each sentence is a node (embedded and
BM25-indexed on its own) carrying its window in metadata, which is the context handed to the
LLM: the sentence and ``--radius`` neighbours each side, or with ``--window-tokens N`` the
sentence grown by whole neighbours (next, then previous, alternately) while the window stays
within N tokens. For each retriever and k:

* hit@k: a top-k node comes from the question's own paragraph (CMRC) / paper (COVID-QA);
* coverage@k: a gold answer string occurs in the top-k windows (distinct windows concatenated),
  and the same for the merged context (the windows' sentences, each once, in reading order);
* mean context tokens of that concatenation (LlamaIndex's tokenizer), p50 latency (for the
  fusion rows the legs' results are memoised from the single-leg rows: fusion overhead only).

Baselines in the same process: LlamaIndex core ``VectorStoreIndex`` retriever (dense leg) and
``llama-index-retrievers-bm25``'s default ``BM25Retriever`` (no Chinese tokenisation). Our BM25
runs with the default tokenizer (jieba words + single characters) and, for comparison, with
words only. Fusion rows: equal weights, and "lang" rows where the dense leg is marked
English-only: its term for a candidate shrinks with the CJK share of the query and of the
candidate's text, down to ``--cjk-floor`` ("query-lang" rows: the query's share only).

    python benchmarks/bench_fusion.py                         # CMRC first 1,000 + 300 COVID-QA
    python benchmarks/bench_fusion.py --only cmrc --offset 1000 --k 5   # held-out tuning slice
    python benchmarks/bench_fusion.py --only cmrc --window-tokens 150

With ``--embed e5`` the dense leg is multilingual-e5-small (it reads Chinese, so no leg is
marked English-only and the "lang" rows are left out); ``--cmrc-paragraphs asked`` keeps only
the paragraphs the questions come from, and ``--only rgb`` runs RGB zh_refine (one node per
passage: the positives and negatives of the first ``--max-questions`` questions pooled; hit@k = a
top-k passage is one of the question's positives). Each fusion row is then compared, question by
question, with the best single leg at the same k (paired bootstrap of the coverage difference):

    python benchmarks/bench_fusion.py --embed e5 --only cmrc --max-questions 500 \
        --cmrc-paragraphs asked --k 3 5 10 --window-tokens 150 --rrf-k 10 20 \
        --weight-grid 1,0.5 1,0.3 0.5,1
    python benchmarks/bench_fusion.py --embed e5 --only rgb --max-questions 100 --k 3 5 10 \
        --rrf-k 10 20 --weight-grid 1,0.5 1,0.3 0.5,1

With ``--embed bge`` the dense leg is bge-small-en-v1.5 (the default embedding); ``--only squad2``
runs SQuAD 2.0 (the first 5 dev articles, answerable questions only), ``--covid-papers N`` the
first N COVID-QA papers with all their questions, ``--chunk-tokens N`` indexes core
``SentenceSplitter(N, 20)`` chunks instead of sentences, and ``--rerank ROW...`` adds rows where
the packaged cross-encoder reorders that row's top ``--rerank-multiplier`` * k candidates (what
``advrag compare``'s ``hybrid-rerank`` does), paired against the best leg and against the
candidates unreranked:

    python benchmarks/bench_fusion.py --embed bge --only covidqa --covid-papers 30 --k 3 5 8 \
        --leg-top-k 40 --no-lang-rows --weight-grid 1,0.3 --rerank "fusion zscore w=1/0.3"
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    DEFAULT_DATASETS,
    SquadCorpus,
    cached_bge_embedding,
    cached_e5_embedding,
    cached_minilm_embedding,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index.core import VectorStoreIndex  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402

from llama_index_ext_advrag.evaluation.metrics import answer_covered  # noqa: E402
from llama_index_ext_advrag.evaluation.paired import (  # noqa: E402
    MIN_RESAMPLES,
    count_changes,
    paired_bootstrap_intervals,
)
from llama_index_ext_advrag.judges.base import BaseRelevanceJudge  # noqa: E402
from llama_index_ext_advrag.postprocessor.judge_rerank import rerank_order  # noqa: E402
from llama_index_ext_advrag.retrievers.bm25 import JiebaBM25Retriever  # noqa: E402
from llama_index_ext_advrag.retrievers.fusion import DEFAULT_CJK_WEIGHT_FLOOR  # noqa: E402
from llama_index_ext_advrag.retrievers.hybrid import HybridFusionRetriever  # noqa: E402
from llama_index_ext_advrag.text import count_tokens, split_sentences  # noqa: E402
from llama_index_ext_advrag.text.words import WordTokenizer  # noqa: E402

logger = logging.getLogger("bench_fusion")
WINDOW_KEY = "window"
BOOKKEEPING = ["doc_id", "sentence", "first", "last", WINDOW_KEY]  # never embedded nor shown
DENSE, BM25 = "core vector (dense)", "ours BM25 (words+chars)"  # the legs fusion is held to


@dataclass(frozen=True)
class PassageQuestion:
    """An RGB question: any of ``doc_ids`` (its positive passages) is a hit; every part of
    ``answer_parts`` must be covered, each part by any of its alternatives."""

    id: str
    doc_ids: frozenset[str]
    question: str
    answer_parts: tuple[tuple[str, ...], ...]


@dataclass(frozen=True)
class PassageCorpus:
    documents: dict[str, str]
    questions: list[PassageQuestion]


def gold_documents(question: Any) -> Collection[str]:
    return getattr(question, "doc_ids", None) or (question.doc_id,)


def covers(context: str, question: Any) -> bool:
    parts = getattr(question, "answer_parts", None) or (question.answers,)
    return all(answer_covered(context, part, require_all=False) for part in parts)


def load_rgb(path: Path, limit: int) -> PassageCorpus:
    """The first ``limit`` RGB questions (file order) over their pooled passages (positives and
    negatives, each distinct text once). An answer list of lists is a multi-part answer."""
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset file {path} not found (set ADVRAG_DATASETS or --datasets)"
        )
    documents: dict[str, str] = {}
    ids: dict[str, str] = {}
    questions = []
    for line in path.read_text(encoding="utf-8").splitlines()[:limit]:
        item = json.loads(line)
        for text in item["positive"] + item["negative"]:
            if text not in ids:
                ids[text] = f"rgb-{len(ids)}"
                documents[ids[text]] = text
        answers = item["answer"]
        parts = answers if answers and isinstance(answers[0], list) else [answers]
        questions.append(
            PassageQuestion(
                id=str(item["id"]),
                doc_ids=frozenset(ids[text] for text in item["positive"]),
                question=item["query"],
                answer_parts=tuple(tuple(str(a) for a in part) for part in parts),
            )
        )
    return PassageCorpus(documents=documents, questions=questions)


def passage_nodes(documents: dict[str, str]) -> tuple[list[TextNode], dict]:
    """One node per passage, its own window (RGB passages are snippets of ~190 characters)."""
    nodes = [
        TextNode(
            text=text,
            id_=f"{doc_id}::0",
            metadata={"doc_id": doc_id, "sentence": 0, "first": 0, "last": 0, WINDOW_KEY: text},
            excluded_embed_metadata_keys=BOOKKEEPING,
            excluded_llm_metadata_keys=BOOKKEEPING,
        )
        for doc_id, text in documents.items()
    ]
    return nodes, {doc_id: [text] for doc_id, text in documents.items()}


def window_bounds(token_counts: Sequence[int], i: int, radius: int, budget: int) -> tuple[int, int]:
    """First and last sentence of sentence ``i``'s window: ``radius`` each side, or with a
    token ``budget`` > 0 whole neighbours (next first, then previous, alternately) added while
    the window stays within the budget (a longer sentence stays alone)."""
    last_index = len(token_counts) - 1
    if budget <= 0:
        return max(0, i - radius), min(last_index, i + radius)
    first = last = i
    total = token_counts[i]
    grew = True
    while grew:
        grew = False
        if last < last_index and total + token_counts[last + 1] <= budget:
            last += 1
            total += token_counts[last]
            grew = True
        if first > 0 and total + token_counts[first - 1] <= budget:
            first -= 1
            total += token_counts[first]
            grew = True
    return first, last


def window_nodes(
    documents: dict[str, str], radius: int, budget: int = 0
) -> tuple[list[TextNode], dict]:
    """One node per sentence; its window in metadata (see :func:`window_bounds`). Also
    returns every document's sentences, for the merged context."""
    nodes = []
    sentences_of = {}
    for doc_id, text in documents.items():
        sentences = sentences_of[doc_id] = [s.text for s in split_sentences(text)]
        counts = [count_tokens(s) for s in sentences] if budget > 0 else [0] * len(sentences)
        for i, sentence in enumerate(sentences):
            first, last = window_bounds(counts, i, radius, budget)
            nodes.append(
                TextNode(
                    text=sentence,
                    id_=f"{doc_id}::{i}",
                    metadata={
                        "doc_id": doc_id,
                        "sentence": i,
                        "first": first,
                        "last": last,
                        WINDOW_KEY: " ".join(sentences[first : last + 1]),
                    },
                    excluded_embed_metadata_keys=BOOKKEEPING,
                    excluded_llm_metadata_keys=BOOKKEEPING,
                )
            )
    return nodes, sentences_of


def chunk_nodes(documents: dict[str, str], chunk_tokens: int) -> tuple[list[TextNode], dict]:
    """One node per core ``SentenceSplitter(chunk_tokens, 20)`` chunk, its own window (what the
    ``baseline`` pipeline indexes); every document's chunks stand in for its sentences."""
    from llama_index.core.node_parser import SentenceSplitter

    splitter = SentenceSplitter(chunk_size=chunk_tokens, chunk_overlap=20)
    nodes = []
    chunks_of = {}
    for doc_id, text in documents.items():
        chunks = chunks_of[doc_id] = splitter.split_text(text)
        for i, chunk in enumerate(chunks):
            nodes.append(
                TextNode(
                    text=chunk,
                    id_=f"{doc_id}::{i}",
                    metadata={"doc_id": doc_id, "sentence": i, "first": i, "last": i,
                              WINDOW_KEY: chunk},
                    excluded_embed_metadata_keys=BOOKKEEPING,
                    excluded_llm_metadata_keys=BOOKKEEPING,
                )
            )  # fmt: skip
    return nodes, chunks_of


def merged_context_of(results: Sequence[NodeWithScore], sentences_of: dict) -> str:
    """The union of the windows' sentences, per document in reading order (what a merging
    postprocessor hands the LLM: overlapping neighbour windows are not repeated)."""
    wanted: dict[str, set[int]] = {}
    for r in results:
        meta = r.node.metadata
        wanted.setdefault(meta["doc_id"], set()).update(range(meta["first"], meta["last"] + 1))
    parts = []
    for doc_id, indices in wanted.items():
        sentences = sentences_of[doc_id]
        parts.append(" ".join(sentences[i] for i in sorted(indices)))
    return "\n".join(parts)


def context_of(results: Sequence[NodeWithScore]) -> str:
    windows = dict.fromkeys(
        r.node.metadata.get(WINDOW_KEY) or r.node.get_content() for r in results
    )
    return "\n".join(windows)


def evaluate(
    name: str,
    retrieve: Callable[[str], list[NodeWithScore]] | None,
    corpus: SquadCorpus | PassageCorpus,
    ks: Sequence[int],
    sentences_of: dict,
    per_question: bool = False,
    retrieve_at: Callable[[str, int], list[NodeWithScore]] | None = None,
) -> list[dict[str, Any]]:
    """hit@k, coverage@k and mean context tokens for every k (one retrieval at max k, or with
    ``retrieve_at`` one call per k); with ``per_question`` also each question's coverage and
    tokens (``covered``, ``tokens``)."""
    per_k: dict[int, dict[str, list[float]]] = {
        k: {"hit": [], "cov": [], "tok": [], "mcov": [], "mtok": []} for k in ks
    }
    latencies = []
    for question in corpus.questions:
        start = time.perf_counter()
        if retrieve_at is not None:
            tops = {k: retrieve_at(question.question, k) for k in ks}
        else:
            assert retrieve is not None
            results = retrieve(question.question)
            tops = {k: results[:k] for k in ks}
        latencies.append((time.perf_counter() - start) * 1000)
        for k in ks:
            top = tops[k]
            context = context_of(top)
            gold = gold_documents(question)
            per_k[k]["hit"].append(any(r.node.metadata.get("doc_id") in gold for r in top))
            per_k[k]["cov"].append(covers(context, question))
            per_k[k]["tok"].append(count_tokens(context))
            merged = merged_context_of(top, sentences_of)
            per_k[k]["mcov"].append(covers(merged, question))
            per_k[k]["mtok"].append(count_tokens(merged))
    rows = []
    for k in ks:
        extra = {"covered": per_k[k]["cov"], "tokens": per_k[k]["tok"]} if per_question else {}
        rows.append(
            {
                "retriever": name,
                "k": k,
                "questions": len(corpus.questions),
                "hit": statistics.fmean(per_k[k]["hit"]),
                "coverage": statistics.fmean(per_k[k]["cov"]),
                "context_tokens": statistics.fmean(per_k[k]["tok"]),
                "merged_coverage": statistics.fmean(per_k[k]["mcov"]),
                "merged_context_tokens": statistics.fmean(per_k[k]["mtok"]),
                "p50_ms": statistics.median(latencies),
                **extra,
            }
        )
    logger.info("%s: %s", name, {r["k"]: round(r["coverage"], 3) for r in rows})
    return rows


class MemoRetriever(BaseRetriever):
    """Benchmark only: remembers a leg's results per query, so the single-leg row and the three
    fusion rows share one call of each leg (fusion latency then excludes the legs' time)."""

    def __init__(self, inner: BaseRetriever) -> None:
        self.inner = inner
        self.memo: dict[str, list[NodeWithScore]] = {}
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if query_bundle.query_str not in self.memo:
            self.memo[query_bundle.query_str] = self.inner.retrieve(query_bundle)
        return self.memo[query_bundle.query_str]


class JudgedScores:
    """Benchmark only: a judge's grades per (query, text), each pair judged once per run."""

    def __init__(self, judge: BaseRelevanceJudge) -> None:
        self.judge = judge
        self.grades: dict[tuple[str, str], Any] = {}
        self.pairs = 0
        self.seconds = 0.0

    def __call__(self, query: str, texts: Sequence[str]) -> list[Any]:
        missing = list(dict.fromkeys(t for t in texts if (query, t) not in self.grades))
        if missing:
            start = time.perf_counter()
            for text, grade in zip(missing, self.judge.judge(query, missing), strict=True):
                self.grades[(query, text)] = grade
            self.seconds += time.perf_counter() - start
            self.pairs += len(missing)
        return [self.grades[(query, t)] for t in texts]


class RerankAt:
    """Benchmark only: what ``hybrid-rerank`` does at k. The base retriever's top
    ``multiplier * k`` candidates are reordered by the judge (``JudgeRerankPostprocessor``'s
    order, :func:`rerank_order`) and the best k kept; the judge reads each candidate's own text
    (``text="node"``, as the pipeline does before window replacement) or its window."""

    def __init__(
        self, base: BaseRetriever, scores: JudgedScores, multiplier: int, text: str = "node"
    ) -> None:
        self.base = base
        self.scores = scores
        self.multiplier = multiplier
        self.text = text
        self.memo: dict[str, list[NodeWithScore]] = {}

    def at(self, query: str, k: int) -> list[NodeWithScore]:
        if query not in self.memo:
            self.memo[query] = self.base.retrieve(query)
        pool = self.memo[query][: self.multiplier * k]
        texts = [
            (r.node.metadata.get(WINDOW_KEY) if self.text == "window" else None)
            or r.node.get_content()
            for r in pool
        ]
        order = rerank_order(self.scores(query, texts))
        return [pool[i] for i in order[:k]]


def build_retrievers(
    nodes: list[TextNode],
    max_k: int,
    leg_top_k: int,
    weights: Sequence[float],
    weight_grid: Sequence[tuple[float, ...]] = (),
    cjk_floor: float = DEFAULT_CJK_WEIGHT_FLOOR,
    embed: str = "minilm",
    rrf_ks: Sequence[int] = (),
    lang_rows: bool = True,
    rerank: Sequence[str] = (),
    rerank_multiplier: int = 4,
    rerank_text: str = "node",
) -> dict[str, Any]:
    from llama_index.retrievers.bm25 import BM25Retriever as CoreBM25Retriever

    models = {"e5": cached_e5_embedding, "bge": cached_bge_embedding}
    embed_model = models.get(embed, cached_minilm_embedding)()
    started = time.perf_counter()
    index = VectorStoreIndex(nodes, embed_model=embed_model, show_progress=False)
    logger.info("embedded %d nodes in %.0fs", len(nodes), time.perf_counter() - started)
    top = max(max_k, leg_top_k, rerank_multiplier * max_k if rerank else 0)
    dense = MemoRetriever(index.as_retriever(similarity_top_k=top))
    ours = MemoRetriever(JiebaBM25Retriever(nodes, similarity_top_k=top))
    words_only = JiebaBM25Retriever(
        nodes, similarity_top_k=max_k, tokenizer=WordTokenizer(chinese_characters=False)
    )
    legs = [dense, ours]
    common = {"similarity_top_k": max_k, "leg_top_k": leg_top_k, "weights": weights}
    names = ["dense", "bm25"]
    lang = {**common, "leg_names": names, "english_only_legs": ["dense"]}
    lang["cjk_weight_floor"] = cjk_floor
    query_lang = {**lang, "node_language": False}
    retrievers: dict[str, BaseRetriever] = {
        DENSE: dense,
        "core BM25Retriever (default)": CoreBM25Retriever.from_defaults(
            nodes=nodes, similarity_top_k=max_k
        ),
        "ours BM25 (jieba words)": words_only,
        BM25: ours,
        "fusion rrf k=60": HybridFusionRetriever(legs, mode="rrf", leg_names=names, **common),
        "fusion score minmax": HybridFusionRetriever(
            legs, mode="score", normalization="minmax", leg_names=names, **common
        ),
        "fusion score zscore": HybridFusionRetriever(
            legs, mode="score", normalization="zscore", leg_names=names, **common
        ),
    }
    for rrf_k in rrf_ks:
        retrievers[f"fusion rrf k={rrf_k}"] = HybridFusionRetriever(
            legs, mode="rrf", k=rrf_k, leg_names=names, **common
        )
    english_rows: dict[str, BaseRetriever] = {
        "fusion rrf lang": HybridFusionRetriever(legs, mode="rrf", **lang),
        "fusion minmax lang": HybridFusionRetriever(
            legs, mode="score", normalization="minmax", **lang
        ),
        "fusion zscore lang": HybridFusionRetriever(
            legs, mode="score", normalization="zscore", **lang
        ),
        "fusion rrf query-lang": HybridFusionRetriever(legs, mode="rrf", **query_lang),
        "fusion minmax query-lang": HybridFusionRetriever(
            legs, mode="score", normalization="minmax", **query_lang
        ),
        "fusion zscore query-lang": HybridFusionRetriever(
            legs, mode="score", normalization="zscore", **query_lang
        ),
    }
    if embed != "e5" and lang_rows:  # a dense leg that reads Chinese: not the question
        retrievers.update(english_rows)
    for pair in weight_grid:
        grid = {**common, "weights": list(pair)}
        label = f"w={pair[0]:g}/{pair[1]:g}"
        retrievers[f"fusion rrf {label}"] = HybridFusionRetriever(legs, mode="rrf", **grid)
        for rrf_k in rrf_ks:
            retrievers[f"fusion rrf k={rrf_k} {label}"] = HybridFusionRetriever(
                legs, mode="rrf", k=rrf_k, **grid
            )
        retrievers[f"fusion minmax {label}"] = HybridFusionRetriever(legs, mode="score", **grid)
        retrievers[f"fusion zscore {label}"] = HybridFusionRetriever(
            legs, mode="score", normalization="zscore", **grid
        )
        if embed != "e5" and lang_rows:  # the same with the dense leg English-only
            marked = {**lang, "weights": list(pair)}
            retrievers[f"fusion rrf lang {label}"] = HybridFusionRetriever(
                legs, mode="rrf", **marked
            )
            retrievers[f"fusion minmax lang {label}"] = HybridFusionRetriever(
                legs, mode="score", **marked
            )
            retrievers[f"fusion zscore lang {label}"] = HybridFusionRetriever(
                legs, mode="score", normalization="zscore", **marked
            )
    if rerank:
        from llama_index_ext_advrag.judges import CrossEncoderRelevanceJudge

        scores = JudgedScores(CrossEncoderRelevanceJudge(num_threads=1))
        for label in rerank:
            base = retrievers[label]
            if isinstance(base, HybridFusionRetriever):
                base = base.with_settings(similarity_top_k=rerank_multiplier * max_k)
            name = f"rerank {rerank_multiplier}k ce ({rerank_text}) <- {label}"
            retrievers[name] = RerankAt(base, scores, rerank_multiplier, rerank_text)
    return retrievers


def format_rows(dataset: str, rows: list[dict[str, Any]], baseline: str) -> str:
    base = {r["k"]: r for r in rows if r["retriever"] == baseline}
    header = (
        f"{'retriever':30s} {'k':>3s} {'hit':>6s} {'cov':>6s} {'ctx tok':>8s} {'merged cov':>10s}"
        f" {'merged tok':>10s} {'p50 ms':>7s} {'cov/base':>9s}"
    )
    lines = [f"## {dataset} (n={rows[0]['questions']})", header, "-" * len(header)]
    for r in sorted(
        rows,
        key=lambda r: (
            r["k"],
            list(dict.fromkeys(x["retriever"] for x in rows)).index(r["retriever"]),
        ),
    ):
        ratio = (
            r["coverage"] / base[r["k"]]["coverage"] if base[r["k"]]["coverage"] else float("nan")
        )
        lines.append(
            f"{r['retriever']:30s} {r['k']:3d} {r['hit']:6.3f} {r['coverage']:6.3f}"
            f" {r['context_tokens']:8.1f} {r['merged_coverage']:10.3f}"
            f" {r['merged_context_tokens']:10.1f} {r['p50_ms']:7.1f} {ratio:9.2f}"
        )
    return "\n".join(lines)


def run_dataset(
    name: str, corpus: SquadCorpus | PassageCorpus, args: argparse.Namespace
) -> list[dict[str, Any]]:
    if isinstance(corpus, PassageCorpus):
        nodes, sentences_of = passage_nodes(corpus.documents)
    elif args.chunk_tokens:
        nodes, sentences_of = chunk_nodes(corpus.documents, args.chunk_tokens)
    else:
        nodes, sentences_of = window_nodes(corpus.documents, args.radius, args.window_tokens)
    logger.info(
        "%s: %d documents, %d nodes, %d questions",
        name,
        len(corpus.documents),
        len(nodes),
        len(corpus.questions),
    )
    grid = [tuple(float(w) for w in pair.split(",")) for pair in args.weight_grid]
    retrievers = build_retrievers(
        nodes,
        max(args.k),
        args.leg_top_k,
        args.weights,
        grid,
        args.cjk_floor,
        embed=args.embed,
        rrf_ks=args.rrf_k,
        lang_rows=args.lang_rows,
        rerank=args.rerank,
        rerank_multiplier=args.rerank_multiplier,
        rerank_text=args.rerank_text,
    )
    rows = []
    for label, retriever in retrievers.items():
        if isinstance(retriever, RerankAt):
            rows.extend(evaluate(label, None, corpus, args.k, sentences_of, True, retriever.at))
            rows[-1]["judge_pairs"] = retriever.scores.pairs
            rows[-1]["judge_seconds"] = retriever.scores.seconds
        else:
            rows.extend(evaluate(label, retriever.retrieve, corpus, args.k, sentences_of, True))
    for row in rows:
        row["dataset"] = name
    return rows


def paired_difference(row: dict[str, Any], base: dict[str, Any], resamples: int) -> dict:
    """``row`` minus ``base`` per question: mean coverage difference, its 95% paired-bootstrap
    interval, questions gained and lost, mean token difference."""
    differences = [a - b for a, b in zip(row["covered"], base["covered"], strict=True)]
    interval = paired_bootstrap_intervals(differences, resamples=resamples)[0]
    changes = count_changes(differences)
    tokens = statistics.fmean(a - b for a, b in zip(row["tokens"], base["tokens"], strict=True))
    return {
        "retriever": row["retriever"],
        "k": row["k"],
        "coverage": row["coverage"],
        "context_tokens": row["context_tokens"],
        "difference": interval.mean,
        "low": interval.low,
        "high": interval.high,
        "gained": changes.better,
        "lost": changes.worse,
        "token_difference": tokens,
    }


def paired_rows(
    rows: list[dict[str, Any]], resamples: int = MIN_RESAMPLES * 5
) -> tuple[list[dict], list[dict]]:
    """Every fusion and rerank row against the better single leg (dense or our BM25, by
    coverage) at the same k; and every rerank row against the row whose candidates it
    reordered (does the judge help?). Pops the per-question lists from ``rows``."""
    by_key = {(r["retriever"], r["k"]): r for r in rows}
    compared, judged = [], []
    for k in sorted({r["k"] for r in rows}):
        legs = [by_key[(leg, k)] for leg in (DENSE, BM25)]
        best = max(legs, key=lambda r: r["coverage"])
        for row in rows:
            if row["k"] != k or not row["retriever"].startswith(("fusion", "rerank")):
                continue
            compared.append(
                paired_difference(row, best, resamples)
                | {"best_leg": best["retriever"], "best_leg_coverage": best["coverage"]}
            )
            if row["retriever"].startswith("rerank"):
                base = by_key[(row["retriever"].split(" <- ", 1)[1], k)]
                judged.append(
                    paired_difference(row, base, resamples)
                    | {"best_leg": base["retriever"], "best_leg_coverage": base["coverage"]}
                )
    for row in rows:
        row.pop("covered", None)
        row.pop("tokens", None)
    return compared, judged


def format_paired(
    dataset: str,
    compared: list[dict[str, Any]],
    title: str = "fusion minus the better single leg at the same k, paired per question",
) -> str:
    width = max([34, *(len(c["retriever"]) for c in compared)])
    header = (
        f"{'fusion':{width}s} {'k':>3s} {'cov':>6s} {'baseline':>9s} {'diff':>7s}"
        f" {'95% interval':>17s} {'+q':>4s} {'-q':>4s} {'d tok':>7s}"
    )
    lines = [f"## {dataset}: {title}", header, "-" * len(header)]
    for c in compared:
        leg = {DENSE: "dense", BM25: "bm25"}.get(c["best_leg"], "base")
        lines.append(
            f"{c['retriever']:{width}s} {c['k']:3d} {c['coverage']:6.3f} {leg:>5s} "
            f"{c['best_leg_coverage']:.3f} {c['difference']:+7.3f} "
            f"[{c['low']:+.3f}, {c['high']:+.3f}] {c['gained']:4d} {c['lost']:4d}"
            f" {c['token_difference']:+7.1f}"
        )
    return "\n".join(lines)


def cmrc_subset(
    corpus: SquadCorpus, limit: int, whole_corpus: bool, offset: int = 0
) -> SquadCorpus:
    """The first ``limit`` questions (after ``offset``) over all 848 paragraphs, or over only
    the paragraphs they come from (the multilingual model embeds about 75 Chinese characters a
    second on a loaded 2-core machine, so all 10,657 sentences would take over an hour)."""
    subset = first_questions(corpus, limit, offset)
    if whole_corpus:
        return subset
    asked = {q.doc_id for q in subset.questions}
    documents = {d: text for d, text in corpus.documents.items() if d in asked}
    return SquadCorpus(documents=documents, questions=subset.questions)


def first_papers(corpus: SquadCorpus, papers: int) -> SquadCorpus:
    """The first ``papers`` documents in file order and every question asked of them."""
    documents = dict(list(corpus.documents.items())[:papers])
    return SquadCorpus(documents, [q for q in corpus.questions if q.doc_id in documents])


def first_questions(corpus: SquadCorpus, limit: int | None, offset: int = 0) -> SquadCorpus:
    """CMRC anchors use the first N questions in file order, not a sample (``offset`` skips
    some, for tuning on questions the reported figures do not use)."""
    questions = corpus.questions[offset:]
    questions = questions if limit is None else questions[:limit]
    return SquadCorpus(documents=corpus.documents, questions=questions)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--only", choices=["cmrc", "covidqa", "rgb", "squad2"], default=None)
    parser.add_argument(
        "--max-questions", type=int, default=None, help="default 1000 CMRC / 300 COVID-QA / 100 RGB"
    )
    parser.add_argument(
        "--embed", choices=["minilm", "e5", "bge"], default="minilm", help="dense leg"
    )
    parser.add_argument(
        "--covid-papers", type=int, default=0, help="COVID-QA: the first N papers, all questions"
    )
    parser.add_argument(
        "--chunk-tokens",
        type=int,
        default=0,
        help="nodes: SentenceSplitter(N) chunks, not sentences",
    )
    parser.add_argument(
        "--lang-rows",
        action=argparse.BooleanOptionalAction,
        default=True,
        help='"lang" fusion rows (English-only dense leg; identical on English text)',
    )
    parser.add_argument(
        "--rerank",
        nargs="*",
        default=[],
        help="rows whose top multiplier*k the cross-encoder reorders (hybrid-rerank's judge)",
    )
    parser.add_argument("--rerank-multiplier", type=int, default=4)
    parser.add_argument("--rerank-text", choices=["node", "window"], default="node")
    parser.add_argument("--name", default=None, help="results file name")
    parser.add_argument(
        "--cmrc-paragraphs",
        choices=["all", "asked"],
        default="all",
        help="CMRC corpus: all 848 paragraphs, or those the questions come from",
    )
    parser.add_argument(
        "--rrf-k", type=int, nargs="*", default=[], help="extra RRF constants (besides 60)"
    )
    parser.add_argument("--k", type=int, nargs="+", default=[1, 3, 5, 10])
    parser.add_argument("--radius", type=int, default=1, help="window = sentence +- radius")
    parser.add_argument(
        "--window-tokens", type=int, default=0, help="token-capped windows (0: use --radius)"
    )
    parser.add_argument("--leg-top-k", type=int, default=30)
    parser.add_argument(
        "--cjk-floor", type=float, default=DEFAULT_CJK_WEIGHT_FLOOR, help='"lang" fusion rows'
    )
    parser.add_argument("--weights", type=float, nargs=2, default=[1.0, 1.0])
    parser.add_argument(
        "--weight-grid", nargs="*", default=[], help='extra "dense,bm25" weight pairs, e.g. 0.3,1'
    )
    parser.add_argument("--offset", type=int, default=0, help="skip the first N CMRC questions")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "sentence_transformers", "bm25s", "jieba"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    tables, rows = [], []
    if args.only in (None, "cmrc"):
        cmrc = cmrc_subset(
            load_squad(cmrc_path(args.datasets)),
            args.max_questions or 1000,
            args.cmrc_paragraphs == "all",
            args.offset,
        )
        cmrc_rows = run_dataset("cmrc2018", cmrc, args)
        first, last = args.offset + 1, args.offset + len(cmrc.questions)
        title = f"CMRC 2018 dev, questions {first}-{last} in file order"
        title += f" over {len(cmrc.documents)} paragraphs"
        tables.append(format_rows(title, cmrc_rows, DENSE))
        rows += cmrc_rows
    if args.only in (None, "covidqa"):
        if args.covid_papers:
            covid = first_papers(load_squad(covidqa_path(args.datasets)), args.covid_papers)
            title = f"COVID-QA, first {args.covid_papers} papers and their questions"
        else:
            covid = load_squad(covidqa_path(args.datasets), args.max_questions or 300)
            title = "COVID-QA, seeded sample"
        covid_rows = run_dataset("covidqa", covid, args)
        tables.append(format_rows(title, covid_rows, DENSE))
        rows += covid_rows
    if args.only in (None, "rgb"):
        rgb = load_rgb(args.datasets / "rgb" / "zh_refine.json", args.max_questions or 100)
        rgb_rows = run_dataset("rgb_zh", rgb, args)
        title = (
            f"RGB zh_refine, first {len(rgb.questions)} questions over their"
            f" {len(rgb.documents)} pooled passages"
        )
        tables.append(format_rows(title, rgb_rows, DENSE))
        rows += rgb_rows
    if args.only in (None, "squad2"):
        squad = load_squad(args.datasets / "squad2" / "squad2_dev_first5.json", args.max_questions)
        squad_rows = run_dataset("squad2", squad, args)  # answerable questions only
        title = (
            f"SQuAD 2.0 dev, first 5 articles: {len(squad.questions)} answerable questions"
            f" over {len(squad.documents)} paragraphs"
        )
        tables.append(format_rows(title, squad_rows, DENSE))
        rows += squad_rows
    compared, judged = [], []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        these = [r for r in rows if r["dataset"] == dataset]
        against_leg, against_base = paired_rows(these)
        compared.extend(c | {"dataset": dataset} for c in against_leg)
        judged.extend(c | {"dataset": dataset} for c in against_base)
        tables.append(format_paired(dataset, [c for c in compared if c["dataset"] == dataset]))
        if against_base:
            title = "reranked minus the same candidates unreranked, at the same k"
            tables.append(format_paired(dataset, against_base, title))
    settings = (
        f"radius={args.radius} window_tokens={args.window_tokens} leg_top_k={args.leg_top_k}"
        f" weights={args.weights} cjk_floor={args.cjk_floor} offset={args.offset}"
        f" embed={args.embed} chunk_tokens={args.chunk_tokens} rerank={args.rerank}"
        f" rerank_multiplier={args.rerank_multiplier} rerank_text={args.rerank_text}"
    )
    text = "\n\n".join([f"# bench_fusion ({settings})", *tables])
    print(text)
    name = "bench_fusion_zh_e5" if args.embed == "e5" else "bench_fusion"
    name += "_bge" if args.embed == "bge" else ""
    name += "" if args.only is None else f"_{args.only}"
    name += f"_p{args.covid_papers}" if args.covid_papers else ""
    name += f"_chunk{args.chunk_tokens}" if args.chunk_tokens else ""
    name += f"_offset{args.offset}" if args.offset else ""
    name += f"_wt{args.window_tokens}" if args.window_tokens else ""
    name += f"_floor{args.cjk_floor:g}" if args.cjk_floor != DEFAULT_CJK_WEIGHT_FLOOR else ""
    write_results(
        args.name or name,
        text,
        {
            "settings": vars(args) | {"datasets": str(args.datasets)},
            "rows": rows,
            "paired_against_best_leg": compared,
            "paired_rerank_against_candidates": judged,
        },
    )


if __name__ == "__main__":
    main()
