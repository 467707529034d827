"""Ingest cost of each parser against the embedding-only floor, in the same run.

For every parser used by ``advrag compare``'s pipelines, on the same COVID-QA papers:

* ``floor``: the parser's node texts (what is embedded) embedded with nothing else;
* ``ingest``: parse + (ingest-time annotation) + embed + insert into Milvus Lite + flush, as
  ``advrag compare`` does it (``IndexStore.vector_index``, no embedding memo).

The ratio ingest / floor is the cost of everything that is not the embedding model; the target
for the pack's parsers is <= 1.15x. Floor and ingest alternate per parser (floor first), both
with the same model object, so machine load drifts affect both alike; ``--repeats`` takes the
best of several.

Usage::

    .venv/bin/python benchmarks/bench_ingest.py --max-documents 20
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llama_index.core import Document
from llama_index.core.node_parser import NodeParser, SentenceSplitter, SentenceWindowNodeParser
from llama_index.core.schema import MetadataMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import (  # noqa: E402
    DEFAULT_DATASETS,
    cmrc_path,
    covidqa_path,
    load_squad,
    write_results,
)
from llama_index_ext_advrag import (  # noqa: E402
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
    UnitAnnotator,
)
from llama_index_ext_advrag.evaluation.ingest import IndexStore  # noqa: E402
from llama_index_ext_advrag.models import load_packaged_embed_model  # noqa: E402

logger = logging.getLogger("bench_ingest")


def parsers(embed_model: Any) -> list[tuple[str, Callable[[], NodeParser], bool, bool]]:
    """(name, parser factory, annotate, pack parser?) as the registry's pipelines use them."""
    return [
        ("core SentenceSplitter(256)", lambda: SentenceSplitter(chunk_size=256, chunk_overlap=20), False, False),
        ("core SentenceWindowNodeParser(3)", lambda: SentenceWindowNodeParser.from_defaults(window_size=3), False, False),
        # the presets as shipped (breakpoint_signal="auto": words for non-CJK documents,
        # embeddings for CJK ones), then each signal forced
        ("ours adaptive, preset general", lambda: AdaptiveSlidingWindowNodeParser(preset="general", embed_model=embed_model), False, True),
        ("ours adaptive, preset technical", lambda: AdaptiveSlidingWindowNodeParser(preset="technical", embed_model=embed_model), False, True),
        ("ours adaptive, general, embedding signal", lambda: AdaptiveSlidingWindowNodeParser(preset="general", breakpoint_signal="embedding", embed_model=embed_model), False, True),
        ("ours adaptive, technical, embedding signal", lambda: AdaptiveSlidingWindowNodeParser(preset="technical", breakpoint_signal="embedding", embed_model=embed_model), False, True),
        ("ours adaptive, general, lexical signal", lambda: AdaptiveSlidingWindowNodeParser(preset="general", breakpoint_signal="lexical", embed_model=embed_model), False, True),
        ("ours adaptive, technical, lexical signal", lambda: AdaptiveSlidingWindowNodeParser(preset="technical", breakpoint_signal="lexical", embed_model=embed_model), False, True),
        ("ours adaptive, preset article", lambda: AdaptiveSlidingWindowNodeParser(preset="article"), False, True),
        ("ours sentences + UnitAnnotator", lambda: AdaptiveSlidingWindowNodeParser(window_size=1, stride=1), True, True),
        ("ours HierarchicalSentence leaves [1024,256,64]", lambda: HierarchicalSentenceNodeParser(chunk_sizes=[1024, 256, 64]), False, True),
    ]  # fmt: skip


def embed_floor(embed_model: Any, texts: list[str]) -> float:
    started = time.perf_counter()
    ordered = sorted(texts, key=len)  # the ingest path embeds in length order too
    embed_model.get_text_embedding_batch(ordered)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument(
        "--corpus",
        choices=["covidqa", "cmrc"],
        default="covidqa",
        help="COVID-QA papers (English) or CMRC 2018 passages (Chinese)",
    )
    parser.add_argument("--max-documents", type=int, default=20, help="documents (0: all)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--only", default="", help="substring of the parser names to run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    path = covidqa_path(args.datasets) if args.corpus == "covidqa" else cmrc_path(args.datasets)
    corpus = load_squad(path)
    items = list(corpus.documents.items())
    if args.max_documents > 0:
        items = items[: args.max_documents]
    documents = [Document(text=text, id_=doc_id) for doc_id, text in items]
    embed_model = load_packaged_embed_model(embed_batch_size=64)
    embed_model.get_text_embedding_batch(["warm up the model"] * 8)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        for name, make, annotate, ours in parsers(embed_model):
            if args.only and args.only not in name:
                continue
            best_floor = best_ingest = float("inf")
            nodes = 0
            for repeat in range(args.repeats):
                # the texts the parser embeds (parsing is not timed here)
                parsed = make().get_nodes_from_documents(documents)
                if annotate:
                    parsed = UnitAnnotator()(parsed)
                texts = [n.get_content(metadata_mode=MetadataMode.EMBED) for n in parsed]
                floor = embed_floor(embed_model, texts)
                # a fresh Lite file per parser: reopening a file whose Lite server stopped can
                # fail in pymilvus' connection recovery (the reconnect work in milvus/)
                store = IndexStore(documents, str(Path(tmp) / f"p{len(rows)}r{repeat}.db"), embed_model,
                                   state_dir=Path(tmp) / "state", rebuild=True,
                                   show_progress=False)  # fmt: skip
                store.warm_up()
                store.start_heartbeat()  # as advrag compare does (Lite and idle channels)
                try:
                    built = store.vector_index(
                        f"{name}:{repeat}", make, {"repeat": repeat},
                        UnitAnnotator() if annotate else None,
                    )  # fmt: skip
                finally:
                    store.close()
                best_floor = min(best_floor, floor)
                best_ingest = min(best_ingest, built.record.seconds)
                nodes = built.record.nodes
            rows.append({"parser": name, "ours": ours, "nodes": nodes, "floor_s": best_floor,
                         "ingest_s": best_ingest, "ratio": best_ingest / best_floor})  # fmt: skip
            logger.info("%s", rows[-1])
    size = sum(len(d.text) for d in documents)
    label = "COVID-QA papers" if args.corpus == "covidqa" else "CMRC 2018 passages"
    lines = [
        f"Ingest vs embedding-only floor: {len(documents)} {label} ({size / 1e6:.2f} M "
        f"chars), all-MiniLM-L6-v2 on CPU, Milvus Lite, best of {args.repeats}",
        f"{'parser':48s} {'nodes':>6s} {'floor s':>8s} {'ingest s':>9s} {'ratio':>6s}",
    ]
    for r in rows:
        mark = "" if not r["ours"] else ("  ok" if r["ratio"] <= 1.15 else "  > 1.15")
        lines.append(f"{r['parser']:48s} {r['nodes']:6d} {r['floor_s']:8.1f} {r['ingest_s']:9.1f} "
                     f"{r['ratio']:6.2f}{mark}")  # fmt: skip
    lines.append("ratio = (parse + annotate + embed + insert + flush) / (embed the same texts)")
    text = "\n".join(lines)
    print(text)  # the benchmark's report is its output
    write_results(
        "ingest" if args.corpus == "covidqa" else "ingest_cmrc",
        text,
        {"args": {k: str(v) for k, v in vars(args).items()}, "rows": rows},
    )


if __name__ == "__main__":
    main()
