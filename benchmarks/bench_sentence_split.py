"""Sentence splitting speed relative to LlamaIndex core, on the COVID-QA papers.

Baseline (same process, same texts): core ``SentenceWindowNodeParser.from_defaults()`` parsing
the papers as documents. Ours: ``llama_index_ext_advrag.text.split_sentences`` on the same
texts. Printed: the best of ``--repeats`` timings of each and their ratio (ours / core; below
1.0 means faster). Moved here from the test suite: timing is measured, never asserted in tests.

    python benchmarks/bench_sentence_split.py
    python benchmarks/bench_sentence_split.py --limit 20 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import DEFAULT_DATASETS  # noqa: E402
from llama_index.core import Document  # noqa: E402
from llama_index.core.node_parser import SentenceWindowNodeParser  # noqa: E402

from llama_index_ext_advrag.text import split_sentences  # noqa: E402

COVIDQA = "covidqa/200423_covidQA.json"


def best_seconds(run, repeats: int) -> float:
    """The fastest of ``repeats`` runs (the least disturbed by other load)."""
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--limit", type=int, default=None, help="papers to use (default all)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    data = json.loads((args.datasets / COVIDQA).read_text(encoding="utf-8"))["data"]
    contexts = [p["context"] for article in data for p in article["paragraphs"]][: args.limit]
    documents = [Document(text=context) for context in contexts]
    core = SentenceWindowNodeParser.from_defaults()
    core.get_nodes_from_documents(documents[:1])  # warm up (tokenizer, regexes)
    split_sentences(contexts[0])

    core_seconds = best_seconds(lambda: core.get_nodes_from_documents(documents), args.repeats)
    our_seconds = best_seconds(lambda: [split_sentences(c) for c in contexts], args.repeats)
    chars = sum(len(c) for c in contexts)
    print(f"COVID-QA: {len(contexts)} papers, {chars} characters, best of {args.repeats}")
    print(f"core SentenceWindowNodeParser  {core_seconds:8.3f} s   1.00")
    print(f"ours split_sentences           {our_seconds:8.3f} s   {our_seconds / core_seconds:.2f}")


if __name__ == "__main__":
    main()
