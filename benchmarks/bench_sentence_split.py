"""Sentence splitting speed: relative to LlamaIndex core, and linear on pathological inputs.

1. Baseline (same process, same texts): core ``SentenceWindowNodeParser.from_defaults()``
   parsing the COVID-QA papers as documents. Ours: ``llama_index_ext_advrag.text.split_sentences``
   on the same texts. Printed: the best of ``--repeats`` timings of each and their ratio (ours /
   core; below 1.0 means faster).
2. The inputs that once made a regex backtrack (``PATHOLOGICAL_INPUTS`` of
   tests/text/test_properties.py) at 20,000 and 80,000 characters: the ratio of the two times
   should stay near 4 (linear); a backtracking blow-up shows as a much larger ratio.

Both moved here from the test suite: timing is measured, never asserted in tests.

    python benchmarks/bench_sentence_split.py
    python benchmarks/bench_sentence_split.py --limit 20 --repeats 5
"""

from __future__ import annotations

import argparse
import importlib.util
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
PROPERTY_TESTS = Path(__file__).resolve().parents[1] / "tests" / "text" / "test_properties.py"


def pathological_inputs() -> dict:
    """The builders of the property tests' pathological inputs (one list for both)."""
    spec = importlib.util.spec_from_file_location("text_properties", PROPERTY_TESTS)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.PATHOLOGICAL_INPUTS


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
    print()
    print("pathological inputs: time(80,000 chars) / time(20,000 chars), 4.0 = linear")
    for name, build in sorted(pathological_inputs().items()):
        small, large = build(20_000), build(80_000)
        ratio = best_seconds(lambda t=large: split_sentences(t), args.repeats) / max(
            best_seconds(lambda t=small: split_sentences(t), args.repeats), 1e-6
        )
        print(f"  {name:<32} {ratio:6.1f}")


if __name__ == "__main__":
    main()
