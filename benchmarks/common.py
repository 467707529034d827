"""Shared benchmark plumbing: dataset loaders, the on-disk embedding cache, result tables.

Benchmarks read the public datasets by path (default ../shared/datasets, override with
``ADVRAG_DATASETS`` or ``--datasets``); nothing of them is copied into this repository.
Every benchmark runs a LlamaIndex-core baseline in the same process and prints ratios.
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index_ext_advrag.embeddings.cache import CachedEmbedding

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASETS = Path(os.environ.get("ADVRAG_DATASETS", REPO_ROOT.parent / "shared" / "datasets"))
CACHE_DIR = Path(os.environ.get("ADVRAG_BENCH_CACHE", REPO_ROOT / ".advrag" / "bench-cache"))
# ADVRAG_BENCH_RESULTS redirects the tables (run_all.py sends its modest-size runs elsewhere so
# the committed full-size results are not overwritten).
RESULTS_DIR = Path(os.environ.get("ADVRAG_BENCH_RESULTS", REPO_ROOT / "benchmarks" / "results"))


@dataclass(frozen=True)
class SquadQuestion:
    """A SQuAD-style question: its document, the question and the answer alternatives."""

    id: str
    doc_id: str
    question: str
    answers: tuple[str, ...]


@dataclass(frozen=True)
class SquadCorpus:
    documents: dict[str, str]  # doc_id -> text
    questions: list[SquadQuestion]


def load_squad(path: Path, max_questions: int | None = None, seed: int = 0) -> SquadCorpus:
    """Load COVID-QA or CMRC 2018 (SQuAD format). Answers are located with ``str.find`` since
    about 17% of COVID-QA's ``answer_start`` offsets are off; unlocatable answers are dropped.

    ``max_questions`` takes a seeded random sample (all documents are always kept, so the
    retrieval task keeps its full difficulty)."""
    if not path.is_file():
        raise FileNotFoundError(
            f"dataset file {path} not found (set ADVRAG_DATASETS or --datasets)"
        )
    raw = json.loads(path.read_text(encoding="utf-8"))
    documents: dict[str, str] = {}
    questions: list[SquadQuestion] = []
    for article_index, article in enumerate(raw["data"]):
        for paragraph_index, paragraph in enumerate(article["paragraphs"]):
            doc_id = str(paragraph.get("document_id") or f"{article_index}-{paragraph_index}")
            context = paragraph["context"]
            documents[doc_id] = context
            for qa in paragraph["qas"]:
                answers = tuple(
                    dict.fromkeys(
                        a["text"].strip() for a in qa["answers"] if a["text"].strip() in context
                    )
                )
                if answers:
                    questions.append(SquadQuestion(str(qa["id"]), doc_id, qa["question"], answers))
    if max_questions is not None and max_questions < len(questions):
        questions = sorted(random.Random(seed).sample(questions, max_questions), key=lambda q: q.id)
    return SquadCorpus(documents=documents, questions=questions)


def covidqa_path(datasets: Path = DEFAULT_DATASETS) -> Path:
    return datasets / "covidqa" / "200423_covidQA.json"


def cmrc_path(datasets: Path = DEFAULT_DATASETS) -> Path:
    return datasets / "cmrc2018" / "cmrc2018_dev.json"


def cached_minilm_embedding() -> CachedEmbedding:
    """all-MiniLM-L6-v2 (torch; the default embedding until bge-small-en-v1.5, and the model
    of the results measured before it) behind the benchmark's on-disk cache."""
    from llama_index_ext_advrag.models import load_packaged_embed_model

    return CachedEmbedding(
        load_packaged_embed_model(embed_batch_size=128),
        path=CACHE_DIR,
        model_key="all-MiniLM-L6-v2",
        model_name="cached:all-MiniLM-L6-v2",
    )


def cached_bge_embedding() -> CachedEmbedding:
    """bge-small-en-v1.5 int8 ONNX (the default embedding model) behind the on-disk cache."""
    from llama_index_ext_advrag.models import load_default_embed_model

    return CachedEmbedding(
        load_default_embed_model(),
        path=CACHE_DIR,
        model_key="bge-small-en-v1.5-int8-onnx",
        model_name="cached:bge-small-en-v1.5",
    )


def cached_e5_embedding() -> CachedEmbedding:
    """multilingual-e5-small (4-bit weights, ONNX backend, one thread) behind the on-disk cache."""
    from llama_index_ext_advrag.embeddings import MultilingualE5Embedding

    return CachedEmbedding(
        MultilingualE5Embedding(num_threads=1),
        path=CACHE_DIR,
        model_key="multilingual-e5-small-q4",
        model_name="cached:multilingual-e5-small-q4",
    )


def portable(value: Any, datasets: Path = DEFAULT_DATASETS) -> Any:
    """``value`` with machine paths replaced: a datasets path by its name inside the datasets
    folder (``"datasets:covidqa/200423_covidQA.json"``), any other absolute path by its file name.
    Result files record what was measured, never where it lay on one machine."""
    if isinstance(value, dict):
        return {key: portable(item, datasets) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [portable(item, datasets) for item in value]
    if isinstance(value, Path):
        value = str(value)
    if isinstance(value, str) and value.startswith("/") and "\n" not in value:
        path = Path(value)
        for root in {Path(datasets), Path(datasets).resolve()}:
            if path == root or root in path.parents:
                relative = path.relative_to(root).as_posix()
                return "datasets:" + ("" if relative == "." else relative)
        return path.name
    return value


def write_results(name: str, text: str, data: Any) -> Path:
    """Save a benchmark's table (``.txt``) and figures (``.json``) under benchmarks/results/,
    with machine paths made :func:`portable`."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    path = RESULTS_DIR / f"{name}.json"
    text_json = json.dumps(portable(data), indent=2, ensure_ascii=False)
    path.write_text(text_json + "\n", encoding="utf-8")
    return path


def interleaved_rates(
    runners: dict[str, Callable[[list[str]], Any]], texts: list[str], rounds: int, unit: str
) -> dict[str, list[float]]:
    """Texts/s of each runner over ``texts``, run in interleaved rounds (A/B/A/B, the order
    reversed every other round) so that load changes hit every runner alike."""
    rates: dict[str, list[float]] = {name: [] for name in runners}
    for round_index in range(rounds):
        order = list(runners) if round_index % 2 == 0 else list(reversed(runners))
        for name in order:
            started = time.perf_counter()
            runners[name](texts)
            rates[name].append(len(texts) / (time.perf_counter() - started))
            logging.getLogger("benchmarks").info(
                "round %d %s: %.2f %s/s", round_index, name, rates[name][-1], unit
            )
    return rates
