"""The design's answer table, measured with a local LLM: resumable, every call cached.

Fixed question samples never used to pick a default (see ``covidqa_sample`` / ``cmrc_sample``):
100 COVID-QA questions from papers 61-98 (corpus: those 38 papers; the benchmarks tuned
defaults on the first 400 questions in file order, on a seeded random 400 and on the first 20
papers, all left out) and 50 CMRC 2018 dev questions from its last 100 paragraphs (corpus: those
paragraphs; at most one question per paragraph; the fusion defaults were picked on the first
2,000 questions). Each row is a pipeline at a context budget (the k whose mean context tokens
on the sample is closest to it) or at its natural k=5. Rows run in groups, in order of
importance; inside a group the questions are the outer loop, so every group grows paired. Each
answer's sentences are judged right after it is generated, by the prefix support judge
(:mod:`~llama_index_ext_advrag.evaluation.support_judge`): its prompt begins with the
generation's, so the server evaluates only the judge's own tokens.

Everything goes through the answer cache (``AnswerCache``, JSON lines): generations,
judgements, each row's k choice and each finished row record. ``run`` resumes after any
interruption; ``snapshot`` writes the committed copy ``benchmarks/results/answers_cache.jsonl.gz``
(``run`` restores from it when the working cache is missing); ``report`` rebuilds every table
from the cache alone (no LLM, no index), in seconds.

Usage (``benchmarks/llm_server.py`` is started at nice +10 with 1 thread unless a server
answers at --port; the datasets come from ``$ADVRAG_DATASETS`` or ``--datasets``)::

    nice -n 5 python benchmarks/bench_answers.py run --gguf MODEL.gguf          # resume the run
    nice -n 5 python benchmarks/bench_answers.py run --gguf MODEL.gguf --rows covidqa:compress@520
    python benchmarks/bench_answers.py snapshot     # cache -> benchmarks/results/*.jsonl.gz
    python benchmarks/bench_answers.py report       # tables from the cache, no LLM
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import logging
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    DEFAULT_DATASETS,
    REPO_ROOT,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index_ext_advrag.evaluation.answer_cache import AnswerCache, cache_key  # noqa: E402

logger = logging.getLogger("bench_answers")

WORK_DIR = REPO_ROOT / ".advrag" / "answers-run"
SNAPSHOT = (
    REPO_ROOT / "benchmarks" / "results" / "answers_cache.jsonl.gz"
)  # inputs: never redirected
DEFAULT_PORT = 8741
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct-q4_k_m"
MAX_TOKENS = 64
N_CTX = 4096
SAMPLE_SEED = 41
COVID_PAPERS = (60, 98)  # article indexes [start, end): papers 61-98
CMRC_PARAGRAPHS = (748, 848)  # the last 100 paragraphs
COVID_QUESTIONS = 100
CMRC_QUESTIONS = 50
NATURAL_K = 5
K_PROBE = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 28, 32, 40)  # adaptive-window nodes are short
K_PROBE_QUESTIONS = 30

# groups of rows, most important first: dataset:pipeline@budget (no budget: k=5)
DESIGN = ("baseline@520", "baseline-1024@1050", "adaptive-window@830")
PACK = ("hybrid", "crag", "self-rag")
COMPRESS = "hybrid-compress@520"  # the compression issue's best pipeline, at the first row's budget
DEFAULT_GROUPS = (
    [f"covidqa:{row}" for row in (*DESIGN, COMPRESS)],
    [f"cmrc:{row}" for row in DESIGN],
    [f"covidqa:{row}" for row in PACK if row != "self-rag"],
    [f"cmrc:{row}" for row in PACK if row != "self-rag"],
    # Self-RAG after the other pack rows: its defaults are picked on the pilot's tuning set
    # (benchmarks/pilot_self_rag_answers.py --tune) while those run
    ["covidqa:self-rag", "cmrc:self-rag"],
    # refusal: the 16 unanswerable questions (benchmarks/answers_unanswerable.jsonl), Self-RAG
    # against always-retrieve (hybrid at k=5, one generation) with the same model and retrieval
    ["covidqa+u:hybrid", "covidqa+u:self-rag", "cmrc+u:hybrid", "cmrc+u:self-rag"],
)
UNANSWERABLE = Path(__file__).with_name("answers_unanswerable.jsonl")
# an answer that declines: Self-RAG's insufficient-evidence answer, or the usual phrasings
REFUSAL = re.compile(
    r"insufficient|not (?:mentioned|provided|specified|stated|available|given|found|included)|"
    r"does not (?:mention|provide|specify|state|say|contain|include)|no information|"
    r"cannot (?:be )?(?:determine|answer|found)|unable to|unknown|"
    r"没有(?:提到|提及|提供|说明|相关)|未(?:提及|提到|说明|提供)|无法|不知道|不清楚|不足以",
    re.IGNORECASE,
)
DESIGN_NUMBERS = {  # the design's table: hallucination, fact recall (EM), latency ms, tokens
    "baseline@520": (0.234, 0.612, 612, 520),
    "baseline-1024@1050": (0.159, 0.687, 688, 1050),
    "adaptive-window@830": (0.096, 0.789, 745, 830),
}


# --- samples ----------------------------------------------------------------------------------


def _tuning_ids(path: Path) -> set[str]:
    """COVID-QA questions earlier benchmarks tuned on: the first 400 in file order and the
    seeded random 400 of ``bench_node_parsers`` (seed 0)."""
    everything = load_squad(path).questions
    first = {q.id for q in everything[:400]}
    seeded = {q.id for q in load_squad(path, 400, seed=0).questions}
    return first | seeded


def covidqa_sample(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The corpus (a SQuAD file of papers 61-98) and the sampled question ids, in run order."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    raw["data"] = raw["data"][COVID_PAPERS[0] : COVID_PAPERS[1]]
    excluded = _tuning_ids(path)
    ids = [
        str(qa["id"])
        for article in raw["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if str(qa["id"]) not in excluded and any(a["text"].strip() for a in qa["answers"])
    ]
    return raw, random.Random(SAMPLE_SEED).sample(ids, COVID_QUESTIONS)


def cmrc_sample(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The corpus (CMRC's last 100 paragraphs) and one question from each of 50 of them."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    paragraphs = [(a, p) for a in raw["data"] for p in a["paragraphs"]]
    kept = paragraphs[CMRC_PARAGRAPHS[0] : CMRC_PARAGRAPHS[1]]
    rng = random.Random(SAMPLE_SEED)
    chosen = rng.sample(range(len(kept)), CMRC_QUESTIONS)
    ids = [str(rng.choice(kept[i][1]["qas"])["id"]) for i in chosen]
    articles: dict[int, dict[str, Any]] = {}
    for article, paragraph in kept:
        articles.setdefault(id(article), {**article, "paragraphs": []})["paragraphs"].append(
            paragraph
        )
    return {**raw, "data": list(articles.values())}, ids


# --- the LLM server ---------------------------------------------------------------------------


def server_up(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def start_server(gguf: Path, port: int, log: Path, threads: int) -> subprocess.Popen[bytes]:
    """``benchmarks/llm_server.py`` (llama-cpp-python, no ``logits_all``: see its docstring) at
    nice +10; it keeps the previous prompt's longest common prefix in its KV cache."""
    # nice +10 in absolute terms (this process may already run at nice 5)
    command = ["nice", "-n", str(max(0, 10 - os.nice(0))), sys.executable,
               str(Path(__file__).with_name("llm_server.py")),
               "--model", str(gguf), "--alias", MODEL_ALIAS, "--port", str(port),
               "--threads", str(threads), "--n-ctx", str(N_CTX)]  # fmt: skip
    handle = log.open("ab")
    process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    for _ in range(600):
        if server_up(port):
            return process
        if process.poll() is not None:
            raise RuntimeError(f"the LLM server exited with {process.returncode}; see {log}")
        time.sleep(1)
    process.terminate()
    raise RuntimeError(f"the LLM server did not answer within 600 s; see {log}")


def make_llm(port: int, timeout: float) -> Any:
    from llama_index_ext_advrag.cli_compare import openai_like_llm

    return openai_like_llm(f"http://127.0.0.1:{port}/v1", MODEL_ALIAS, timeout, MAX_TOKENS)


# --- the working cache and its committed snapshot ---------------------------------------------


def restore(cache_dir: Path) -> None:
    """Append the snapshot's entries that the working cache lacks (a fresh checkout, or a
    snapshot committed by another machine)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    if not SNAPSHOT.is_file():
        return
    cache = AnswerCache(cache_dir)
    added = 0
    with gzip.open(SNAPSHOT, "rt", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            entry = json.loads(line)
            if entry["key"] not in cache._entries:
                cache.put(entry["key"], entry["value"])
                added += 1
    if added:
        logger.info("restored %d entries from %s", added, SNAPSHOT.name)


# dataset text a row record holds for reading and labelling on this machine; the committed
# snapshot leaves it out (the datasets are never committed, only what the LLM said of them)
DATASET_FIELDS = ("context", "question", "gold")


def _committable(value: Any) -> Any:
    if isinstance(value, dict) and "dataset" in value:
        return {k: v for k, v in value.items() if k not in DATASET_FIELDS}
    if isinstance(value, dict) and "context" in value:  # a self-answering pipeline's answer
        return {k: v for k, v in value.items() if k != "context"}
    return value


def snapshot(cache_dir: Path) -> Path:
    """The working cache, deduplicated and gzipped (mtime 0: the same entries, the same bytes),
    without the dataset text of the row records."""
    cache = AnswerCache(cache_dir)
    lines = [json.dumps({"key": k, "value": _committable(v)}, ensure_ascii=False, sort_keys=True)
             for k, v in sorted(cache._entries.items())]  # fmt: skip
    tmp = SNAPSHOT.with_suffix(".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as handle:
        handle.write("".join(line + "\n" for line in lines).encode("utf-8"))
    tmp.replace(SNAPSHOT)
    return SNAPSHOT


# --- rows -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Row:
    dataset: str
    pipeline: str
    budget: float | None  # None: k = NATURAL_K
    unanswerable: bool = False  # the dataset's unanswerable questions instead of its sample

    @property
    def label(self) -> str:
        return (self.pipeline + (f"@{self.budget:g}" if self.budget is not None else "")
                + (" unanswerable" if self.unanswerable else ""))  # fmt: skip

    @classmethod
    def parse(cls, text: str) -> Row:
        dataset, _, rest = text.partition(":")
        unanswerable = dataset.endswith("+u")
        dataset = dataset.removesuffix("+u")
        if dataset not in ("covidqa", "cmrc") or not rest:
            raise ValueError(f"a row is covidqa[+u]:PIPELINE[@BUDGET] or cmrc..., got {text!r}")
        name, _, budget = rest.partition("@")
        return cls(dataset, name, float(budget) if budget else None, unanswerable)


class Dataset:
    """One dataset's corpus, questions and (built when first needed) index context."""

    def __init__(self, name: str, datasets: Path, llm: Any) -> None:
        self.name = name
        path = covidqa_path(datasets) if name == "covidqa" else cmrc_path(datasets)
        raw, self.ids = covidqa_sample(path) if name == "covidqa" else cmrc_sample(path)
        self.folder = WORK_DIR / name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.corpus = self.folder / "corpus.json"
        text = json.dumps(raw, ensure_ascii=False)
        if not self.corpus.is_file() or self.corpus.read_text(encoding="utf-8") != text:
            self.corpus.write_text(text, encoding="utf-8")
        from llama_index_ext_advrag.evaluation.questions import read_questions

        by_id = {q.id: q for q in read_questions(str(self.corpus)).questions}
        missing = [i for i in self.ids if i not in by_id]
        if missing:
            raise ValueError(f"{name}: sampled questions not read: {missing[:5]}")
        self.questions = [by_id[i] for i in self.ids]
        from llama_index_ext_advrag.evaluation.questions import Question

        self.unanswerable = [
            Question(x["id"], x["question"], (), lang=x["lang"])
            for x in map(json.loads, UNANSWERABLE.read_text(encoding="utf-8").splitlines())
            if x["corpus"] == name
        ]
        self.llm = llm
        self._context: Any = None
        self._bundles: dict[str, Any] = {}
        self._pipelines: dict[str, Any] = {}

    def context(self) -> Any:
        if self._context is None:
            from benchmarks.common import cached_bge_embedding, cached_e5_embedding
            from llama_index_ext_advrag.evaluation.compare import embed_questions
            from llama_index_ext_advrag.evaluation.session import CompareOptions, build_context
            from llama_index_ext_advrag.evaluation.sources import load_corpus

            embed = cached_bge_embedding() if self.name == "covidqa" else cached_e5_embedding()
            options = CompareOptions(docs=[str(self.corpus)], uri=str(self.folder / "index.db"),
                                     state_dir=str(self.folder / "state"), show_progress=False,
                                     doc_type="auto")  # fmt: skip
            documents = load_corpus(options.docs)
            self._context = build_context(options, documents, embed, self.llm)
            self._context.store.warm_up()
            asked = self.questions + self.unanswerable
            bundles = embed_questions(asked, embed, show_progress=False)
            self._bundles = {q.id: b for q, b in zip(asked, bundles, strict=True)}
        return self._context

    def of(self, row: Row) -> list[Any]:
        """The row's questions: the sample, or the unanswerable ones."""
        return self.unanswerable if row.unanswerable else self.questions

    def pipeline(self, name: str) -> Any:
        if name not in self._pipelines:
            from llama_index_ext_advrag.evaluation.registry import get_pipeline

            logger.info("%s: building pipeline %s", self.name, name)
            self._pipelines[name] = get_pipeline(name).build(self.context())
        return self._pipelines[name]

    def bundle(self, question_id: str) -> Any:
        self.context()
        return self._bundles[question_id]

    def close(self) -> None:
        for pipeline in self._pipelines.values():
            if hasattr(pipeline, "close"):
                pipeline.close()
        if self._context is not None:
            self._context.store.close()


def choose_row_k(row: Row, data: Dataset, cache: AnswerCache) -> int:
    """The row's k: NATURAL_K, or the k whose mean context tokens over the first
    K_PROBE_QUESTIONS sample questions is closest to the budget (kept in the cache, so a re-run
    answers at the same k)."""
    if row.budget is None:
        return NATURAL_K
    key = cache_key("row-k", row.dataset, row.pipeline, data.ids[:K_PROBE_QUESTIONS], K_PROBE)
    hit = cache.get(key)
    if hit is None:
        from llama_index_ext_advrag.evaluation.compare import context_text
        from llama_index_ext_advrag.text import count_tokens

        pipeline = data.pipeline(row.pipeline)
        tokens: dict[int, float] = {}
        for k in K_PROBE:
            counts = [count_tokens(context_text(pipeline.retrieve(data.bundle(q.id), k)))
                      for q in data.questions[:K_PROBE_QUESTIONS]]  # fmt: skip
            tokens[k] = sum(counts) / len(counts)
        hit = {str(k): v for k, v in tokens.items()}
        cache.put(key, hit)
    from llama_index_ext_advrag.evaluation.answers import choose_k

    k = choose_k({int(k): float(v) for k, v in hit.items()}, row.budget)
    choice = {"dataset": row.dataset, "label": row.label, "k": k, "kind": "row-choice"}
    if cache.get(choice_key(row)) != choice:  # the report keeps the rows answered at this k
        cache.put(choice_key(row), choice)
    logger.info("%s %s: k=%d (%s)", row.dataset, row.label, k,
                ", ".join(f"k={k_}: {float(v):.0f}" for k_, v in hit.items()))  # fmt: skip
    return k


def choice_key(row: Row) -> str:
    return cache_key("row-choice", row.dataset, row.label)


def row_key(row: Row, question_id: str, identity: dict[str, Any], k: int) -> str:
    return cache_key("row", row.dataset, row.label, question_id, identity, k)


def _record(row: Row, question: Any, result: Any, calls: int) -> dict[str, Any]:
    record = dataclasses.asdict(result)
    record["pipeline"] = row.label
    record["verdicts"] = [v.to_dict() for v in result.verdicts]
    record.update(dataset=row.dataset, question=question.question,
                  gold=[list(g) for g in question.answer_groups], calls_total=calls)  # fmt: skip
    return record


def total_calls(row: Row, result: Any, evaluator: Any, pipeline: Any, question: Any, k: int) -> int:
    """LLM calls the answer took, cached parts included: the generation (Self-RAG: its own
    count) and one per judged sentence."""
    if not getattr(pipeline, "generates", False):
        return 1 + result.sentences
    from llama_index_ext_advrag.evaluation.answers import pipeline_key

    key = evaluator._self_answer_key(pipeline_key(pipeline), k, question.question)
    hit = evaluator.cache._entries.get(key) or {}
    return int(hit.get("calls", 0)) + result.sentences


def fresh(record: Any, pipeline: str) -> bool:
    """Whether a cached row stands: a generating pipeline's row made before its refusals were
    told apart (no ``refused`` field) is scored again from its cached answer and verdicts."""
    from llama_index_ext_advrag.evaluation.registry import get_pipeline

    if record is None:
        return False
    return "refused" in record or not get_pipeline(pipeline).generates


def run(args: argparse.Namespace) -> int:
    from llama_index_ext_advrag.evaluation.answers import AnswerEvaluator, pipeline_key

    cache_dir = WORK_DIR / "cache"
    running = WORK_DIR / "run.pid"
    if running.is_file() and running.read_text().strip().isdigit():
        pid = int(running.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline")
        if pid != os.getpid() and cmdline.is_file() and b"bench_answers" in cmdline.read_bytes():
            raise SystemExit(f"a run is going on (pid {pid}): stop it first (kill {pid})")
    restore(cache_dir)
    server = None
    if not server_up(args.port):
        if args.gguf is None:
            raise SystemExit(f"no LLM server at port {args.port}: pass --gguf MODEL.gguf")
        server = start_server(args.gguf, args.port, WORK_DIR / "server.log", args.threads)
        logger.info("LLM server started, pid %d", server.pid)
    (WORK_DIR / "run.pid").write_text(str(os.getpid()))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # kill PID: snapshot, then stop
    llm = make_llm(args.port, args.timeout)
    evaluator = AnswerEvaluator(llm, cache_dir, timeout=args.timeout, support_judge="prefix")
    identity = {"llm": evaluator._identity, "judge": evaluator._judge_identity}
    # FaithfulnessEvaluator on the hand-labelled sentences, a few between questions (its
    # calls would break the prefix the judge reuses if interleaved inside a question)
    faithfulness = AnswerEvaluator(llm, cache_dir, timeout=args.timeout)
    faithfulness.cache = evaluator.cache
    groups = [[Row.parse(r) for r in g] for g in DEFAULT_GROUPS]
    if args.rows:
        groups.append([Row.parse(r) for r in args.rows.split(",") if r.strip()])
    datasets: dict[str, Dataset] = {}
    last_snapshot = time.monotonic()
    try:
        for group in groups:
            for row in group:
                if row.dataset not in datasets:
                    datasets[row.dataset] = Dataset(row.dataset, args.datasets, llm)
            ks = {}
            for index in range(max(len(datasets[r.dataset].of(r)) for r in group)):
                audit(evaluator, faithfulness, args.audit_per_question)
                for row in group:
                    data = datasets[row.dataset]
                    if index >= len(data.of(row)):
                        continue
                    question = data.of(row)[index]
                    if row.label not in ks:
                        ks[row.label] = choose_row_k(row, data, evaluator.cache)
                    k = ks[row.label]
                    key = row_key(row, question.id, identity, k)
                    if fresh(evaluator.cache.get(key), row.pipeline):
                        continue
                    pipeline = data.pipeline(row.pipeline)
                    result = evaluator.score(pipeline, question, data.bundle(question.id), k,
                                             pipeline_key(pipeline))  # fmt: skip
                    calls = total_calls(row, result, evaluator, pipeline, question, k)
                    logger.info("%s %s q%d %s: %s%s", row.dataset, row.label, index,
                                question.id, (result.error or result.answer)[:80].replace("\n", " "),
                                f" [{result.unsupported}/{result.sentences} unsupported]")  # fmt: skip
                    deterministic = result.error is None or result.error.startswith("EmptyAnswer")
                    if deterministic and result.unjudged == 0:
                        evaluator.cache.put(key, _record(row, question, result, calls))
                    if time.monotonic() - last_snapshot > args.snapshot_every * 60:
                        snapshot(cache_dir)
                        last_snapshot = time.monotonic()
        logger.info("every row done")
    finally:
        snapshot(cache_dir)
        for data in datasets.values():
            data.close()
        if server is not None and not args.keep_server:
            server.send_signal(signal.SIGTERM)
    return 0


# --- hand labels and the FaithfulnessEvaluator audit ------------------------------------------

LABELS = REPO_ROOT / "benchmarks" / "results" / "answers_labels.jsonl"


def read_labels() -> list[dict[str, Any]]:
    """The hand labels: one line per answer sentence, ``label`` "supported" or "unsupported"
    (read against the row's context), keyed by the row record's key and the sentence index."""
    if not LABELS.is_file():
        return []
    return [json.loads(line) for line in LABELS.read_text(encoding="utf-8").splitlines()
            if line.strip()]  # fmt: skip


def audit_key(label: dict[str, Any]) -> str:
    return cache_key("audit-faithfulness", label["row_key"], label["sentence_index"])


def audit(evaluator: Any, faithfulness: Any, budget: int) -> None:
    """Judge up to ``budget`` labelled sentences with ``FaithfulnessEvaluator`` (cached)."""
    done = 0
    for label in read_labels():
        if done >= budget:
            return
        key = audit_key(label)
        record = evaluator.cache._entries.get(label["row_key"])
        if evaluator.cache._entries.get(key) is not None or not (record or {}).get("context"):
            continue  # judged already, or no context here (a copy restored from the snapshot)
        started = time.perf_counter()
        verdict = faithfulness.judge_sentence(record["question"], label["sentence"],
                                              record["context"])  # fmt: skip
        done += 1
        if verdict.supported is not None:
            evaluator.cache.put(key, {"supported": verdict.supported,
                                      "ms": (time.perf_counter() - started) * 1000})  # fmt: skip
            logger.info("audit: FaithfulnessEvaluator says %s for %r", verdict.supported,
                        label["sentence"][:60])  # fmt: skip


def current_records(entries: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The row records to report, by key: each row's at its current k (a k chosen again, over
    more k, leaves stale ones), one per row and question (the last written: the same answer may
    be recorded under an older key)."""
    chosen = {(v["dataset"], v["label"]): v["k"] for v in entries.values()
              if isinstance(v, dict) and v.get("kind") == "row-choice"}  # fmt: skip
    latest: dict[tuple[str, str, str], tuple[str, dict[str, Any]]] = {}
    for key, v in entries.items():
        if not (isinstance(v, dict) and v.get("dataset")) or v.get("kind") == "row-choice":
            continue
        if chosen.get((v["dataset"], v["pipeline"]), v["k"]) != v["k"]:
            continue
        latest[(v["dataset"], v["pipeline"], v["question_id"])] = (key, v)
    return dict(latest.values())


def show_sentences(limit: int) -> int:
    """Print answer sentences not labelled yet, with their question, gold answer and context
    (from the working cache, which keeps the dataset text), for labelling by reading."""
    entries = load_entries(WORK_DIR / "cache")
    labelled = {(x["row_key"], x["sentence_index"]) for x in read_labels()}
    from llama_index_ext_advrag.evaluation.answer_metrics import answer_sentences

    shown = 0
    for key, record in current_records(entries).items():
        if not (isinstance(record, dict) and record.get("dataset") and record.get("context")):
            continue
        for index, sentence in enumerate(answer_sentences(record["answer"])):
            if (key, index) in labelled or shown >= limit:
                continue
            verdict = (record.get("verdicts") or [{}])[index] if record.get("verdicts") else {}
            print(json.dumps({"row_key": key, "sentence_index": index, "sentence": sentence,
                              "row": record["pipeline"], "question": record["question"],
                              "gold": record.get("gold"), "judge": verdict,
                              "context": record["context"]}, ensure_ascii=False))  # fmt: skip
            shown += 1
    return 0


def kappa(pairs: list[tuple[bool, bool]]) -> float | None:
    """Cohen's kappa of (label, judge) pairs.

    >>> kappa([(True, True), (False, False), (True, False), (True, True)])
    0.5
    """
    n = len(pairs)
    if not n:
        return None
    observed = sum(a == b for a, b in pairs) / n
    p_label = sum(a for a, _ in pairs) / n
    p_judge = sum(b for _, b in pairs) / n
    expected = p_label * p_judge + (1 - p_label) * (1 - p_judge)
    return None if expected == 1 else (observed - expected) / (1 - expected)


def agreement(entries: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Confusion tables and Cohen's kappa of each judge against the hand labels."""
    labels = [x for x in read_labels() if x.get("label") in ("supported", "unsupported")]
    lines = [f"## support judges against {len(labels)} hand-labelled answer sentences"]
    data: dict[str, Any] = {"labelled": len(labels)}
    judges: dict[str, list[tuple[bool, bool]]] = {"prefix judge": [], "FaithfulnessEvaluator": []}
    scored: list[tuple[bool, float]] = []  # (label, the prefix judge's P(yes))
    for label in labels:
        truth = label["label"] == "supported"
        record = entries.get(label["row_key"]) or {}
        verdicts = record.get("verdicts") or []
        if label["sentence_index"] < len(verdicts):
            judged = verdicts[label["sentence_index"]].get("supported")
            if judged is not None:
                judges["prefix judge"].append((truth, bool(judged)))
            p_yes = verdicts[label["sentence_index"]].get("p_yes")
            if p_yes is not None:
                scored.append((truth, float(p_yes)))
        audited = entries.get(audit_key(label))
        if audited is not None:
            judges["FaithfulnessEvaluator"].append((truth, bool(audited["supported"])))
    for name, pairs in judges.items():
        if not pairs:
            lines.append(f"{name}: no judged labelled sentence yet")
            continue
        table = {(t, j): sum(1 for a, b in pairs if (a, b) == (t, j))
                 for t in (True, False) for j in (True, False)}  # fmt: skip
        value = kappa(pairs)
        lines.append(
            f"{name}: n={len(pairs)}; label supported -> judge yes {table[(True, True)]} / "
            f"no {table[(True, False)]}; label unsupported -> judge yes {table[(False, True)]} "
            f"/ no {table[(False, False)]}; agreement "
            f"{sum(a == b for a, b in pairs) / len(pairs):.2f}, Cohen's kappa "
            + (f"{value:.2f}" if value is not None else "-")
        )
        data[name] = {"n": len(pairs), "kappa": value,
                      "confusion": {f"label {'yes' if t else 'no'}, judge {'yes' if j else 'no'}":
                                    c for (t, j), c in table.items()}}  # fmt: skip
    # hallucination by hand: the share of answers (all sentences labelled) with an unsupported one
    by_answer: dict[str, list[bool]] = {}
    for label in labels:
        by_answer.setdefault(label["row_key"], []).append(label["label"] == "supported")
    by_row: dict[str, list[bool]] = {}
    for key, flags in by_answer.items():
        record = entries.get(key) or {}
        if record.get("sentences") == len(flags):
            by_row.setdefault(f"{record['dataset']}:{record['pipeline']}", []).append(
                not all(flags)
            )
    for row, flags in sorted(by_row.items()):
        lines.append(f"hallucination by hand, {row}: {sum(flags)}/{len(flags)} answers with an "
                     "unsupported sentence")  # fmt: skip
    data["hand hallucination"] = {row: [sum(f), len(f)] for row, f in by_row.items()}
    positives = [p for t, p in scored if t]
    negatives = [p for t, p in scored if not t]
    if positives and negatives:  # threshold-free: how well P(yes) ranks the labels
        auc = sum((a > b) + 0.5 * (a == b) for a in positives for b in negatives) / (
            len(positives) * len(negatives)
        )
        lines.append(f"prefix judge P(yes): ROC AUC {auc:.2f} against the labels "
                     f"({len(positives)} supported, {len(negatives)} unsupported)")  # fmt: skip
        data["prefix judge AUC"] = auc
    return lines, data


# --- prompt tokens evaluated per call (the server's log) ---------------------------------------

_SERVER_LINE = re.compile(r"prompt (\d+) tokens, evaluated (\d+), completion (\d+), ([\d.]+) s")


def server_stats(log: Path) -> dict[str, Any] | None:
    """Per kind of call, from ``llm_server.py``'s log: a judgement is a call that evaluated
    under half its prompt (the rest was the generation's cached prefix)."""
    if not log.is_file():
        return None
    kinds: dict[str, list[tuple[int, int, float]]] = {"prefix judgement": [], "full prompt": []}
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _SERVER_LINE.search(line)
        if match:
            prompt, evaluated, _, seconds = match.groups()
            kind = "prefix judgement" if int(evaluated) < int(prompt) / 2 else "full prompt"
            kinds[kind].append((int(prompt), int(evaluated), float(seconds)))
    return {kind: {"calls": len(rows),
                   "mean_prompt_tokens": sum(r[0] for r in rows) / len(rows),
                   "mean_evaluated_tokens": sum(r[1] for r in rows) / len(rows),
                   "mean_seconds": sum(r[2] for r in rows) / len(rows)}
            for kind, rows in kinds.items() if rows}  # fmt: skip


# --- report -----------------------------------------------------------------------------------


def load_entries(cache_dir: Path) -> dict[str, Any]:
    """The snapshot's entries updated with the working cache's."""
    entries: dict[str, Any] = {}
    if SNAPSHOT.is_file():
        with gzip.open(SNAPSHOT, "rt", encoding="utf-8") as handle:
            for line in handle:
                if line.strip():
                    entry = json.loads(line)
                    entries[entry["key"]] = entry["value"]
    if (cache_dir / "answers.jsonl").is_file():
        entries.update(AnswerCache(cache_dir)._entries)
    return entries


def _result(record: dict[str, Any]) -> Any:
    from llama_index_ext_advrag.evaluation.answers import AnswerResult
    from llama_index_ext_advrag.evaluation.support_judge import SupportVerdict

    fields = {f.name for f in dataclasses.fields(AnswerResult)}
    values = {k: v for k, v in record.items() if k in fields}
    values["verdicts"] = tuple(SupportVerdict(**v) for v in record.get("verdicts", []))
    values["llm_calls"] = record.get("calls_total", values.get("llm_calls", 0))
    return AnswerResult(**values)


def report(args: argparse.Namespace) -> int:
    from llama_index_ext_advrag.evaluation.answer_report import (
        answer_differences,
        summarize_answers,
    )

    entries = load_entries(WORK_DIR / "cache")
    records = list(current_records(entries).values())
    # every generation and judgement records its milliseconds ("ms"); rows record "latency_ms"
    llm_seconds = (
        sum(float(v["ms"]) for v in entries.values() if isinstance(v, dict) and "ms" in v) / 1000
    )
    lines: list[str] = []
    data: dict[str, Any] = {"rows": {}, "differences": {}}
    for dataset in ("covidqa", "cmrc"):
        mine = [r for r in records if r["dataset"] == dataset]
        if not mine:
            continue
        order = [row for group in DEFAULT_GROUPS for row in group if row.startswith(dataset)]
        rank = {r.split(":", 1)[1]: i for i, r in enumerate(order)}
        mine.sort(key=lambda r: (rank.get(r["pipeline"], 99), r["pipeline"], r["question_id"]))
        results = [_result(r) for r in mine]
        summaries = summarize_answers(results)
        lines.append(f"## {dataset}: {len({r.question_id for r in results})} questions answered")
        header = (f"{'row':22s} {'n':>4s} {'halluc':>7s} {'EM':>6s} {'F1':>6s} {'lat p50':>8s} "
                  f"{'ctx tok':>8s} {'ans tok':>8s} {'calls/q':>8s} {'trunc':>6s} {'err':>4s} "
                  f"{'judged':>6s} {'refused':>7s}")  # fmt: skip
        lines += [header, "-" * len(header)]
        for s in summaries:
            rows = [r for r in results if r.pipeline == s.pipeline]
            truncated = sum(r.truncated for r in rows)
            lines.append(
                f"{s.pipeline:22s} {s.questions:4d} {_pct(s.hallucination_rate)} "
                f"{_pct(s.fact_recall)} {_num(s.token_f1)} {_num(s.p50_latency_ms, 8, 0)} "
                f"{_num(s.mean_context_tokens, 8, 0)} {_num(s.mean_answer_tokens, 8, 1)} "
                f"{s.llm_calls / max(1, s.questions):8.2f} {truncated:6d} {s.errors:4d} "
                f"{s.judged:6d} {s.refused:7d}"
            )
            data["rows"][f"{dataset}:{s.pipeline}"] = {**dataclasses.asdict(s),
                                                        "truncated": truncated}  # fmt: skip
        for s in summaries:
            if s.pipeline.endswith(" unanswerable"):
                rows = [r for r in results if r.pipeline == s.pipeline and r.error is None]
                # any declining answer: the pipeline's own refusal or the LLM's phrasing
                declined = sum(bool(REFUSAL.search(r.answer)) for r in rows)
                lines.append(f"{s.pipeline}: declined {declined}/{len(rows)} unanswerable "
                             f"questions, {s.llm_calls / max(1, s.questions):.2f} LLM calls each")  # fmt: skip
                data["rows"][f"{dataset}:{s.pipeline}"]["declined"] = declined
        # Self-RAG against always-retrieve with the same model and retrieval: hybrid at k=5
        compared = {"baseline@520": None, "baseline-1024@1050": None, "hybrid": ("self-rag",)}
        for baseline, only in compared.items():
            if not any(r.pipeline == baseline for r in results):
                continue
            lines.append(f"\npaired against {baseline} (difference, 95% bootstrap interval):")
            for d in answer_differences(results, baseline):
                if d.interval is None or (only is not None and d.pipeline not in only):
                    continue
                lines.append(
                    f"  {d.pipeline:22s} {d.metric:18s} n={d.questions:3d} "
                    f"{d.interval.mean:+.3f} [{d.interval.low:+.3f}, {d.interval.high:+.3f}]"
                )
                data["differences"][f"{dataset}:{d.pipeline} vs {baseline}:{d.metric}"] = {
                    "n": d.questions, "mean": d.interval.mean, "low": d.interval.low,
                    "high": d.interval.high}  # fmt: skip
        lines.append("")
    stats = server_stats(WORK_DIR / "server.log")
    if stats:  # kept in the cache, so a report from the committed copy still shows it
        AnswerCache(WORK_DIR / "cache").put(cache_key("server-stats"), stats)
    else:
        stats = entries.get(cache_key("server-stats"))
    if stats:
        lines.append(
            "## prompt tokens evaluated per call (llm_server.py's log, this machine; "
            "full prompts are generations and FaithfulnessEvaluator audits)"
        )
        for kind, row in stats.items():
            lines.append(f"{kind}: {row['calls']} calls, prompt {row['mean_prompt_tokens']:.0f} "
                         f"tokens, evaluated {row['mean_evaluated_tokens']:.1f}, "
                         f"{row['mean_seconds']:.1f} s on average")  # fmt: skip
        lines.append("")
        data["server"] = stats
    agreement_lines, data["agreement"] = agreement(entries)
    lines += agreement_lines + [""]
    lines.append(f"LLM time (every generation and judgement in the cache): "
                 f"{llm_seconds / 3600:.2f} h")  # fmt: skip
    data["llm_hours"] = llm_seconds / 3600
    text = "\n".join(lines)
    print(text)
    write_results(args.name, text, data)
    return 0


def _pct(value: float | None) -> str:
    return f"{value * 100:6.1f}%" if value is not None else f"{'-':>7s}"


def _num(value: float | None, width: int = 6, digits: int = 3) -> str:
    return f"{value:{width}.{digits}f}" if value is not None else f"{'-':>{width}s}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_run = sub.add_parser("run", help="generate and judge (resumes from the cache)")
    p_run.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    p_run.add_argument("--gguf", type=Path, default=None, help="start a server on this model")
    p_run.add_argument("--port", type=int, default=DEFAULT_PORT)
    p_run.add_argument("--threads", type=int, default=1, help="LLM server threads (1: on a "
                       "loaded 2-core machine 2 threads decoded ~15x slower, measured)")  # fmt: skip
    p_run.add_argument("--timeout", type=float, default=900.0, help="seconds per LLM call")
    p_run.add_argument("--rows", default="", help="extra rows after the default groups, e.g. "
                       "covidqa:compress@520,cmrc:compress@520")  # fmt: skip
    p_run.add_argument("--snapshot-every", type=float, default=20.0, help="minutes")
    p_run.add_argument("--keep-server", action="store_true")
    p_run.add_argument("--audit-per-question", type=int, default=1, help="labelled sentences "
                       "judged by FaithfulnessEvaluator before each question index")  # fmt: skip
    sub.add_parser("snapshot", help="write benchmarks/results/answers_cache.jsonl.gz")
    p_show = sub.add_parser("sentences", help="print answer sentences not labelled yet")
    p_show.add_argument("--limit", type=int, default=20)
    p_report = sub.add_parser("report", help="tables from the cache (no LLM)")
    p_report.add_argument("--name", default="answers_table")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("bm25s", "jieba", "milvus_lite", "faiss", "httpx", "openai"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    if args.command == "run":
        return run(args)
    if args.command == "sentences":
        return show_sentences(args.limit)
    if args.command == "snapshot":
        print(snapshot(WORK_DIR / "cache"))
        return 0
    return report(args)


if __name__ == "__main__":
    tempfile.tempdir = tempfile.gettempdir()
    sys.exit(main())
