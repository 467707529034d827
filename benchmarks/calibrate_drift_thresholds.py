"""Drift-window thresholds (``min_sim`` / ``prune_sim``) per embedding model and language.

``calibrate_thresholds`` on COVID-QA (English) and CMRC 2018 (Chinese): 500 random corpus
sentences against held-out dataset questions (the last ``--questions`` of the file, which no
tuning used). Each model's rows give the defaults the drift window uses for it (bge-small
and all-MiniLM: the English row; multilingual-e5-small: both).

    python benchmarks/calibrate_drift_thresholds.py --models bge,minilm,e5
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    CACHE_DIR,
    DEFAULT_DATASETS,
    cached_bge_embedding,
    cached_minilm_embedding,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)

from llama_index_ext_advrag.embeddings import CachedEmbedding  # noqa: E402
from llama_index_ext_advrag.postprocessor.calibration import calibrate_thresholds  # noqa: E402
from llama_index_ext_advrag.text.sentences import split_sentences  # noqa: E402


def model_by_name(name: str):
    if name == "bge":
        return cached_bge_embedding()
    if name == "minilm":
        return cached_minilm_embedding()
    if name == "e5":
        from llama_index_ext_advrag.embeddings import MultilingualE5Embedding

        return CachedEmbedding(
            MultilingualE5Embedding(), path=CACHE_DIR, model_key="multilingual-e5-small-q4",
            model_name="cached:multilingual-e5-small-q4",
        )  # fmt: skip
    raise SystemExit(f"unknown model {name!r} (bge, minilm, e5)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--models", default="bge,minilm,e5")
    parser.add_argument("--questions", type=int, default=200, help="held-out questions (tail)")
    parser.add_argument("--sentences", type=int, default=500)
    parser.add_argument("--name", default="drift_thresholds")
    args = parser.parse_args()
    corpora = {
        "COVID-QA (en)": load_squad(covidqa_path(args.datasets)),
        "CMRC 2018 dev (zh)": load_squad(cmrc_path(args.datasets)),
    }
    lines = [f"{'model':<8} {'corpus':<20} {'min_sim':>8} {'prune_sim':>9}  quantiles"]
    rows = []
    for model_name in args.models.split(","):
        model = model_by_name(model_name)
        for label, corpus in corpora.items():
            sentences = [
                s.text for text in corpus.documents.values() for s in split_sentences(text)
            ]
            held_out = [q.question for q in corpus.questions[-args.questions :]]
            result = calibrate_thresholds(
                sentences, model, queries=held_out, num_sentences=args.sentences,
                num_queries=args.questions,
            )  # fmt: skip
            rows.append({"model": model_name, "corpus": label, **result.__dict__})
            lines.append(
                f"{model_name:<8} {label:<20} {result.min_sim:>8.3f} {result.prune_sim:>9.3f}"
                f"  {result.quantiles}"
            )
            print(lines[-1], flush=True)
    text = "\n".join(
        [
            f"calibrate_thresholds: {args.sentences} sentences x {args.questions} held-out "
            "questions per corpus",
            *lines,
        ]  # fmt: skip
    )
    write_results(args.name, text, {"args": vars(args), "rows": rows})


if __name__ == "__main__":
    main()
