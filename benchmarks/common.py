"""Shared benchmark plumbing: dataset loaders, a disk cache for embeddings, result tables.

Benchmarks read the public datasets by path (default ../shared/datasets, override with
``ADVRAG_DATASETS`` or ``--datasets``); nothing of them is copied into this repository.
Every benchmark runs a LlamaIndex-core baseline in the same process and prints ratios.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from pydantic import PrivateAttr

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


class CachedEmbedding(BaseEmbedding):
    """Wrap an embedding model with a SQLite cache keyed by (model, text) hash, so benchmark
    pipelines and reruns never embed the same sentence twice. Benchmarks only."""

    _inner: BaseEmbedding = PrivateAttr()
    _db: sqlite3.Connection = PrivateAttr()
    _lock: threading.Lock = PrivateAttr()
    _tag: str = PrivateAttr()

    def __init__(self, inner: BaseEmbedding, tag: str = "all-MiniLM-L6-v2", **kwargs: Any) -> None:
        super().__init__(model_name=f"cached:{tag}", embed_batch_size=256, **kwargs)
        self._inner = inner
        self._tag = tag
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            CACHE_DIR / "embeddings.sqlite", timeout=60, check_same_thread=False
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS emb (key TEXT PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()

    @classmethod
    def class_name(cls) -> str:
        return "CachedEmbedding"

    def _key(self, kind: str, text: str) -> str:
        return hashlib.sha1(f"{self._tag}\x00{kind}\x00{text}".encode()).hexdigest()

    def _lookup(self, kind: str, texts: list[str], compute) -> list[list[float]]:
        keys = [self._key(kind, t) for t in texts]
        found: dict[str, list[float]] = {}
        with self._lock:
            for start in range(0, len(keys), 900):
                chunk = keys[start : start + 900]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._db.execute(
                    f"SELECT key, vec FROM emb WHERE key IN ({marks})", chunk
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32).tolist()
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            vectors = compute([texts[i] for i in missing])
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO emb VALUES (?, ?)",
                    [
                        (keys[i], np.asarray(v, dtype=np.float32).tobytes())
                        for i, v in zip(missing, vectors, strict=True)
                    ],
                )
                self._db.commit()
            for i, v in zip(missing, vectors, strict=True):
                found[keys[i]] = list(v)
        return [found[k] for k in keys]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._lookup(
            "q", [query], lambda ts: [self._inner.get_query_embedding(t) for t in ts]
        )[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._lookup("t", texts, self._inner.get_text_embedding_batch)


def cached_default_embedding() -> CachedEmbedding:
    """The packaged all-MiniLM-L6-v2 behind the benchmark cache."""
    from llama_index_ext_advrag.models import load_packaged_embed_model

    return CachedEmbedding(load_packaged_embed_model(embed_batch_size=128))


def write_results(name: str, text: str, data: Any) -> Path:
    """Save a benchmark's table (``.txt``) and figures (``.json``) under benchmarks/results/."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    path = RESULTS_DIR / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
