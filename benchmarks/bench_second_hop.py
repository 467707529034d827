"""A second retrieval hop without an LLM (SecondHopRetriever) against the same retriever alone.

Every set is cut with core's ``SentenceSplitter(256, overlap 20)`` (the ``baseline`` pipeline)
and embedded with bge-small-en-v1.5 (the default model, behind the benchmark cache); retrieval
is exact cosine top-k over the chunk vectors (what Milvus FLAT returns), so that a grid of
settings reuses every search. The second hop wraps that retriever; its output has the same
number of chunks (equal k), so context tokens differ only by chunk lengths (reported).

Per question: coverage (a gold answer string in the context; HotpotQA's yes/no answers are not
scored) and, on HotpotQA, support recall (the share of the gold supporting sentences inside the
context). Every second-hop row is paired question by question with the plain retriever at the
same k (paired bootstrap of the difference, :mod:`~llama_index_ext_advrag.evaluation.paired`).

* ``--grid``: the settings are picked on HotpotQA + SQuAD 2.0 (largest summed HotpotQA gain in
  coverage and support recall over k, with no k below the plain retriever on SQuAD), then
  reported on COVID-QA and CMRC;
* ``--compress``: both pipelines at 8 and 12 chunks compressed to 300 / 600 / 900 tokens by
  ``ContextCompressionPostprocessor`` (cosine + rank prior: no judge);
* ``--latency``: added p50 latency at top 8 over Milvus Lite (uncached bge query embeddings,
  sync and async) and the searches per query.

    nice -n 5 python benchmarks/bench_second_hop.py --grid
    nice -n 5 python benchmarks/bench_second_hop.py --compress --latency
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import logging
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    cached_bge_embedding,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index.core import Document  # noqa: E402
from llama_index.core.node_parser import SentenceSplitter  # noqa: E402
from llama_index.core.retrievers import BaseRetriever  # noqa: E402
from llama_index.core.schema import BaseNode, MetadataMode, NodeWithScore, QueryBundle  # noqa: E402

from llama_index_ext_advrag.evaluation.metrics import answer_covered, normalize_for_match  # noqa: E402
from llama_index_ext_advrag.evaluation.paired import count_changes, paired_bootstrap_intervals  # noqa: E402
from llama_index_ext_advrag.retrievers.second_hop import SecondHopRetriever  # noqa: E402
from llama_index_ext_advrag.text import count_tokens  # noqa: E402

logger = logging.getLogger("bench_second_hop")
PICK_SETS = ("hotpot", "squad")


@dataclass(frozen=True)
class Item:
    id: str
    question: str
    answers: tuple[str, ...]  # alternatives; empty: coverage not scored (yes/no)
    support: tuple[str, ...] = ()  # gold supporting sentences (HotpotQA)


@dataclass
class DataSet:
    name: str
    documents: list[Document]
    items: list[Item]


def load_hotpot(path: Path) -> DataSet:
    raw = json.loads(path.read_text(encoding="utf-8"))
    documents: dict[str, Document] = {}
    items = []
    for record in raw:
        sentences = {}
        for title, lines in record["context"]:
            for number, line in enumerate(lines):
                sentences[(title, number)] = line
            if title not in documents:
                documents[title] = Document(
                    text="".join(lines), id_=f"hotpot:{title}", metadata={"title": title}
                )
        answer = record["answer"].strip()
        support = tuple(
            sentences[(t, i)] for t, i in record["supporting_facts"] if (t, i) in sentences
        )
        answers = () if answer.lower() in ("yes", "no") else (answer,)
        items.append(Item(record["_id"], record["question"], answers, support))
    return DataSet("hotpot", list(documents.values()), items)


def load_single_hop(
    name: str, path: Path, max_questions: int, max_documents: int | None
) -> DataSet:
    corpus = load_squad(path)
    doc_ids = list(corpus.documents)[:max_documents] if max_documents else list(corpus.documents)
    kept = set(doc_ids)
    questions = [q for q in corpus.questions if q.doc_id in kept]
    if len(questions) > max_questions:
        questions = sorted(random.Random(0).sample(questions, max_questions), key=lambda q: q.id)
    documents = [Document(text=corpus.documents[d], id_=f"{name}:{d}") for d in doc_ids]
    items = [Item(q.id, q.question, q.answers) for q in questions]
    return DataSet(name, documents, items)


def load_sets(args: argparse.Namespace) -> list[DataSet]:
    datasets = Path(args.datasets)
    loaders: dict[str, Callable[[], DataSet]] = {
        "hotpot": lambda: load_hotpot(datasets / "hotpotqa" / "hotpot_dev_distractor_first52.json"),
        "squad": lambda: load_single_hop("squad", datasets / "squad2" / "squad2_dev_first5.json", args.max_questions, None),
        "covid": lambda: load_single_hop("covid", covidqa_path(datasets), args.max_questions, args.covid_papers),
        "cmrc": lambda: load_single_hop("cmrc", cmrc_path(datasets), args.max_questions, args.cmrc_paragraphs),
    }  # fmt: skip
    return [loaders[name]() for name in args.sets]


# --- retrieval --------------------------------------------------------------------------------


class ExactRetriever(BaseRetriever):
    """Exact cosine top-k over the chunk vectors; searches are counted and memoised (a grid of
    settings asks the same hop-2 queries again)."""

    def __init__(self, nodes: Sequence[BaseNode], matrix: np.ndarray, embed_model: Any,
                 similarity_top_k: int, memo: dict[Any, list[NodeWithScore]], counter: list[int]) -> None:  # fmt: skip
        super().__init__()
        self.nodes, self.matrix, self._embed_model = nodes, matrix, embed_model
        self.similarity_top_k, self.memo, self.counter = similarity_top_k, memo, counter

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.counter[0] += 1
        key = (query_bundle.query_str, self.similarity_top_k)
        if key not in self.memo:
            vector = query_bundle.embedding or self._embed_model.get_query_embedding(
                query_bundle.query_str
            )
            scores = self.matrix @ np.asarray(vector, dtype=np.float32)
            top = np.argsort(-scores, kind="stable")[: self.similarity_top_k]
            self.memo[key] = [
                NodeWithScore(node=self.nodes[i], score=float(scores[i])) for i in top
            ]
        return list(self.memo[key])


def chunk_and_embed(dataset: DataSet, embed_model: Any) -> tuple[list[BaseNode], np.ndarray]:
    nodes = SentenceSplitter(chunk_size=256, chunk_overlap=20).get_nodes_from_documents(
        dataset.documents
    )
    texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    vectors = embed_model.get_text_embedding_batch([texts[i] for i in order])
    matrix = np.zeros((len(nodes), len(vectors[0])), dtype=np.float32)
    for position, index in enumerate(order):
        matrix[index] = vectors[position]
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return nodes, matrix


# --- scoring ----------------------------------------------------------------------------------


def context_of(results: Sequence[NodeWithScore]) -> str:
    return "\n\n".join(r.node.get_content(metadata_mode=MetadataMode.NONE) for r in results)


def score(item: Item, results: Sequence[NodeWithScore]) -> dict[str, float | None]:
    context = context_of(results)
    haystack = normalize_for_match(context)
    support = [normalize_for_match(s) in haystack for s in item.support if s.strip()]
    return {
        "covered": float(answer_covered(context, item.answers, require_all=False)) if item.answers else None,
        "support": float(np.mean(support)) if support else None,
        "tokens": float(count_tokens(context)),
    }  # fmt: skip


def run(
    items: Sequence[Item], retrieve: Callable[[str], list[NodeWithScore]]
) -> list[dict[str, float | None]]:
    return [score(item, retrieve(item.question)) for item in items]


def summary(
    rows: list[dict[str, float | None]], base: list[dict[str, float | None]] | None
) -> dict[str, Any]:
    out: dict[str, Any] = {"n": len(rows), "tokens": statistics.fmean(r["tokens"] for r in rows)}  # type: ignore[misc]
    for metric in ("covered", "support"):
        values = [r[metric] for r in rows if r[metric] is not None]
        if not values:
            continue
        out[metric] = statistics.fmean(values)  # type: ignore[arg-type]
        if base is not None:
            diffs = [
                r[metric] - b[metric]
                for r, b in zip(rows, base, strict=True)
                if r[metric] is not None
            ]  # type: ignore[operator]
            interval = paired_bootstrap_intervals(diffs)[0]
            changes = count_changes(diffs)
            out[f"{metric}_diff"] = [
                round(interval.mean, 4),
                round(interval.low, 4),
                round(interval.high, 4),
            ]
            out[f"{metric}_changes"] = [changes.better, changes.worse]
    return out


# --- the grid ---------------------------------------------------------------------------------


def grid_settings() -> list[dict[str, Any]]:
    grid = []
    for cue in ("leading_sentence", "title", "entities", "title_and_entities"):
        for new_only in (False, True):
            for keep in (1, 3):
                for weight in (1.0, 2.0):
                    grid.append({"cue": cue, "hop2_new_only": new_only, "keep_hop1_top": keep,
                                 "hop2_weight": weight})  # fmt: skip
    return grid


def label(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"


def evaluate_set(
    dataset: DataSet, embed_model: Any, ks: Sequence[int], settings_list: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    started = time.perf_counter()
    nodes, matrix = chunk_and_embed(dataset, embed_model)
    logger.info(
        "%s: %d chunks embedded in %.0f s", dataset.name, len(nodes), time.perf_counter() - started
    )
    memo: dict[Any, list[NodeWithScore]] = {}
    counter = [0]
    report: dict[str, Any] = {"chunks": len(nodes), "questions": len(dataset.items), "rows": {}}
    for k in ks:
        plain = ExactRetriever(nodes, matrix, embed_model, k, memo, counter)
        base = run(dataset.items, plain.retrieve)
        report["rows"][f"k={k} plain"] = summary(base, None)
        for settings in settings_list:
            hop = SecondHopRetriever(plain, **settings)
            before = counter[0]
            rows = run(dataset.items, hop.retrieve)
            entry = summary(rows, base)
            entry["searches_per_query"] = (counter[0] - before) / len(dataset.items)
            report["rows"][f"k={k} second hop ({label(settings)})"] = entry
        logger.info("%s k=%d done (%.0f s)", dataset.name, k, time.perf_counter() - started)
    return report


def pick(
    reports: dict[str, dict[str, Any]], ks: Sequence[int], settings_list: Sequence[dict[str, Any]]
) -> dict[str, Any]:
    """The settings with the largest summed HotpotQA gain (coverage + support recall, over k)
    that never fall below the plain retriever on SQuAD (point estimate, every k)."""
    best, best_gain = None, -np.inf
    for settings in settings_list:
        name = f"second hop ({label(settings)})"
        squad = [reports["squad"]["rows"][f"k={k} {name}"]["covered_diff"][0] for k in ks]
        if min(squad) < 0:
            continue
        rows = [reports["hotpot"]["rows"][f"k={k} {name}"] for k in ks]
        gain = sum(r["covered_diff"][0] + r["support_diff"][0] for r in rows)
        if gain > best_gain:
            best, best_gain = settings, gain
    if best is None:
        raise SystemExit("no setting keeps SQuAD coverage at every k")
    return best


# --- compression ------------------------------------------------------------------------------


def compressed_rows(
    dataset: DataSet,
    embed_model: Any,
    settings: dict[str, Any],
    budgets: Sequence[int],
    fetch: Sequence[int],
) -> dict[str, Any]:
    from llama_index_ext_advrag.postprocessor.compression import ContextCompressionPostprocessor

    nodes, matrix = chunk_and_embed(dataset, embed_model)
    memo: dict[Any, list[NodeWithScore]] = {}
    counter = [0]
    rows: dict[str, Any] = {}
    for n in fetch:
        plain = ExactRetriever(nodes, matrix, embed_model, n, memo, counter)
        hop = SecondHopRetriever(plain, **settings)
        hits = {name: {item.id: retriever.retrieve(item.question) for item in dataset.items}
                for name, retriever in (("plain", plain), ("second hop", hop))}  # fmt: skip
        for budget in budgets:
            compress = ContextCompressionPostprocessor(
                embed_model=embed_model, max_context_tokens=budget
            )
            scored = {
                name: [score(item, compress.postprocess_nodes(by_id[item.id], query_str=item.question))
                       for item in dataset.items]
                for name, by_id in hits.items()
            }  # fmt: skip
            rows[f"top-{n} -> {budget} plain"] = summary(scored["plain"], None)
            rows[f"top-{n} -> {budget} second hop"] = summary(scored["second hop"], scored["plain"])
        logger.info("%s compressed top-%d done", dataset.name, n)
    return rows


# --- latency ----------------------------------------------------------------------------------


def run_async(loop: asyncio.AbstractEventLoop, retriever: Any, question: str) -> Any:
    return loop.run_until_complete(retriever.aretrieve(question))


def latency(dataset: DataSet, settings: dict[str, Any], uri: str, top_k: int = 8) -> dict[str, Any]:
    from llama_index.core import VectorStoreIndex

    from llama_index_ext_advrag.milvus import count_rows, flush, open_vector_store
    from llama_index_ext_advrag.models import load_default_embed_model

    cached = cached_bge_embedding()
    nodes, matrix = chunk_and_embed(dataset, cached)
    stored = [copy.copy(n) for n in nodes]
    for node, vector in zip(stored, matrix, strict=True):
        node.embedding = vector.tolist()
    Path(uri).parent.mkdir(parents=True, exist_ok=True)
    store = open_vector_store(
        uri, "bench_second_hop", dim=matrix.shape[1], expected_rows=len(stored)
    )
    if count_rows(store.client, store.collection_name) != len(stored):
        store = open_vector_store(
            uri, "bench_second_hop", dim=matrix.shape[1], overwrite=True, expected_rows=len(stored)
        )
        store.add(stored)
    flush(store)
    raw = load_default_embed_model()  # uncached: the query embeddings are part of the cost
    plain = VectorStoreIndex.from_vector_store(store, embed_model=raw).as_retriever(
        similarity_top_k=top_k
    )
    hop = SecondHopRetriever(plain, **settings)
    timings: dict[str, list[float]] = {
        "plain": [],
        "second hop": [],
        "plain async": [],
        "second hop async": [],
    }
    searches = []
    loop = asyncio.new_event_loop()
    questions = [item.question for item in dataset.items]
    for position, question in enumerate(questions[:5] + questions):
        calls = {"plain": partial(plain.retrieve, question), "second hop": partial(hop.retrieve, question),
                 "plain async": partial(run_async, loop, plain, question),
                 "second hop async": partial(run_async, loop, hop, question)}  # fmt: skip
        for name in random.Random(position).sample(list(calls), len(calls)):
            started = time.perf_counter()
            result = calls[name]()
            if position >= 5:  # the first five warm the model and the connection up
                timings[name].append(time.perf_counter() - started)
            if name == "second hop" and position >= 5 and result:
                searches.append(result[0].node.metadata["advrag_trace"]["second_hop"]["searches"])
    loop.close()
    store.client.close()
    p50 = {name: 1000 * float(np.percentile(values, 50)) for name, values in timings.items()}
    return {
        "top_k": top_k, "queries": len(timings["plain"]), "p50_ms": p50,
        "added_p50_ms": p50["second hop"] - p50["plain"],
        "added_p50_ms_async": p50["second hop async"] - p50["plain async"],
        "ratio": p50["second hop"] / p50["plain"], "ratio_async": p50["second hop async"] / p50["plain async"],
        "milvus_searches_per_query": statistics.fmean(searches),
    }  # fmt: skip


# --- report -----------------------------------------------------------------------------------


def format_rows(title: str, rows: dict[str, Any]) -> list[str]:
    lines = [
        title,
        f"{'pipeline':84s} {'n':>4s} {'cover':>6s} {'support':>7s} {'tokens':>7s}  paired diff cover [95%] (+/-) | support",
    ]
    for name, row in rows.items():
        cover = f"{row['covered']:.3f}" if "covered" in row else "-"
        support = f"{row['support']:.3f}" if "support" in row else "-"
        diff = ""
        if "covered_diff" in row:
            m, lo, hi = row["covered_diff"]
            b, w = row["covered_changes"]
            diff = f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}] (+{b}/-{w})"
        if "support_diff" in row:
            m, lo, hi = row["support_diff"]
            diff += f" | {m:+.3f} [{lo:+.3f}, {hi:+.3f}]"
        lines.append(
            f"{name[:84]:84s} {row['n']:4d} {cover:>6s} {support:>7s} {row['tokens']:7.0f}  {diff}"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--datasets", default=str(DEFAULT_DATASETS))
    parser.add_argument("--sets", nargs="+", default=["hotpot", "squad", "covid", "cmrc"])
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5, 8])
    parser.add_argument("--max-questions", type=int, default=200)
    parser.add_argument("--covid-papers", type=int, default=20)
    parser.add_argument("--cmrc-paragraphs", type=int, default=150)
    parser.add_argument("--grid", action="store_true", help="pick the settings on hotpot + squad")
    parser.add_argument(
        "--settings", default="{}", help="JSON settings (default: the class defaults)"
    )
    parser.add_argument("--compress", action="store_true")
    parser.add_argument("--budgets", type=int, nargs="+", default=[300, 600, 900])
    parser.add_argument("--fetch", type=int, nargs="+", default=[8, 12])
    parser.add_argument("--latency", action="store_true")
    parser.add_argument(
        "--milvus", default=str(CACHE_DIR.parent / "bench-milvus" / "second_hop.db")
    )
    parser.add_argument("--out", default="bench_second_hop")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    embed_model = cached_bge_embedding()
    sets = {dataset.name: dataset for dataset in load_sets(args)}
    settings = json.loads(args.settings)
    data: dict[str, Any] = {
        "args": vars(args),
        "embedding": "bge-small-en-v1.5 int8 ONNX",
        "sets": {},
    }
    lines = [
        f"bench_second_hop: SentenceSplitter(256, 20) chunks, bge-small-en-v1.5, exact cosine top-k; k={args.k}"
    ]
    if args.grid:
        grid = grid_settings()
        reports = {name: evaluate_set(sets[name], embed_model, args.k, grid) for name in PICK_SETS}
        settings = pick(reports, args.k, grid)
        data["grid"] = {name: report["rows"] for name, report in reports.items()}
        data["picked"] = settings
        lines.append(f"picked on {' + '.join(PICK_SETS)}: {label(settings)}")
        for name in PICK_SETS:
            lines += ["", *format_rows(f"[grid] {name}", reports[name]["rows"])]
    data["settings"] = settings
    for name, dataset in sets.items():
        report = evaluate_set(dataset, embed_model, args.k, [settings])
        data["sets"][name] = report
        lines += [
            "",
            *format_rows(
                f"{name}: {report['questions']} questions, {report['chunks']} chunks; second hop {label(settings)}",
                report["rows"],
            ),
        ]
    if args.compress:
        for name, dataset in sets.items():
            rows = compressed_rows(dataset, embed_model, settings, args.budgets, args.fetch)
            data.setdefault("compressed", {})[name] = rows
            lines += [
                "",
                *format_rows(
                    f"{name}: compressed (ContextCompressionPostprocessor, cosine + rank prior)",
                    rows,
                ),
            ]
    if args.latency and "hotpot" in sets:
        result = latency(sets["hotpot"], settings, args.milvus)
        data["latency"] = result
        lines += ["", f"latency over Milvus Lite, top {result['top_k']}, {result['queries']} queries (uncached bge query embeddings): "
                  f"p50 plain {result['p50_ms']['plain']:.1f} ms, second hop {result['p50_ms']['second hop']:.1f} ms "
                  f"(+{result['added_p50_ms']:.1f} ms, x{result['ratio']:.2f}); async plain {result['p50_ms']['plain async']:.1f} ms, "
                  f"second hop {result['p50_ms']['second hop async']:.1f} ms (+{result['added_p50_ms_async']:.1f} ms, x{result['ratio_async']:.2f}); "
                  f"Milvus searches per query {result['milvus_searches_per_query']:.2f} (plain: 1)"]  # fmt: skip
    text = "\n".join(lines)
    print(text)
    write_results(args.out, text, data)


if __name__ == "__main__":
    main()
