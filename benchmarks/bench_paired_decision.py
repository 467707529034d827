"""How often does the paired-bootstrap rule call a winner between two equally good pipelines?

Simulated questions, no retrieval: for two pipelines with the same true coverage, each question
is "candidate better" or "baseline better" with probability ``discordant / 2`` each and "same"
otherwise, and the rule of ``advrag compare`` (the 95% percentile interval of the mean
difference lies above 0) is applied with the same bootstrap. A calibrated rule calls the
candidate the winner in 2.5% of such runs; this measures it per number of questions, which is
what ``MIN_PAIRED_QUESTIONS`` rests on. It also measures how often a true gain (better on
``gain`` more of the questions than worse) is found.

Usage::

    OMP_NUM_THREADS=1 nice .venv/bin/python benchmarks/bench_paired_decision.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import write_results  # noqa: E402
from llama_index_ext_advrag.evaluation.paired import (  # noqa: E402
    MIN_PAIRED_QUESTIONS,
    MIN_RESAMPLES,
    paired_bootstrap_intervals,
)


def simulate(
    questions: int, discordant: float, gain: float, runs: int, resamples: int, seed: int
) -> float:
    """Share of ``runs`` simulated comparisons in which the rule calls the candidate better."""
    rng = np.random.default_rng(seed)
    better = discordant / 2 + gain / 2
    worse = discordant / 2 - gain / 2
    wins = 0
    for run in range(runs):
        draw = rng.random(questions)
        differences = np.where(draw < better, 1.0, np.where(draw < better + worse, -1.0, 0.0))
        [interval] = paired_bootstrap_intervals(differences, resamples=resamples, seed=run)
        wins += interval.low > 0
    return wins / runs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--resamples", type=int, default=MIN_RESAMPLES)
    args = parser.parse_args(argv)
    sizes = [5, 10, 20, 30, 50, 100, 200]
    lines = [
        f"Share of simulated comparisons the rule calls a winner ({args.runs} runs per cell, "
        f"{args.resamples} bootstrap resamples each; nominal 0.025 when there is no difference)",
        "",
        f"{'questions':>9s}  {'null, 10% discordant':>21s}  {'null, 30% discordant':>21s}  "
        f"{'gain 0.10 (30% disc.)':>21s}",
    ]
    table = {}
    for n in sizes:
        row = [
            simulate(n, 0.10, 0.0, args.runs, args.resamples, seed=1),
            simulate(n, 0.30, 0.0, args.runs, args.resamples, seed=2),
            simulate(n, 0.30, 0.10, args.runs, args.resamples, seed=3),
        ]
        table[n] = row
        lines.append(f"{n:>9d}  {row[0]:>21.3f}  {row[1]:>21.3f}  {row[2]:>21.3f}")
    lines.append(f"\nMIN_PAIRED_QUESTIONS = {MIN_PAIRED_QUESTIONS}")
    text = "\n".join(lines)
    print(text)  # the benchmark's report is its output
    write_results(
        "paired_decision",
        text,
        {"runs": args.runs, "resamples": args.resamples,
         "columns": ["null 10% discordant", "null 30% discordant", "gain 0.10, 30% discordant"],
         "rates": table},
    )  # fmt: skip


if __name__ == "__main__":
    main()
