"""The ``advrag`` command: compare retrieval pipelines on your own documents, offline.

``advrag compare --docs DOCS`` ingests the documents once per parser (Milvus Lite by default),
runs every pipeline on the questions (``--questions FILE``, or probe questions made from the
documents) at several k, prints a table per pipeline and writes report.md, results.csv and
charts. ``advrag ask "question" --pipeline NAME`` shows one pipeline's context and decision
trace. ``advrag run --data data`` is the older single-baseline measurement.

Errors are reported on one line; ``-v`` shows the traceback.

The index goes to ``--uri`` (a Milvus Lite file or a server URL; default: the environment
variable ``ADVRAG_MILVUS_URI``, else ``.advrag/advrag.db``). A server with authentication needs
``--token user:password`` (default: ``ADVRAG_MILVUS_TOKEN``); a wrong or missing token is an
authentication error, never a fall back to Milvus Lite.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import time
from pathlib import Path

from llama_index.core import StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter

from llama_index_ext_advrag.evaluation.corpus import load_documents, load_qa
from llama_index_ext_advrag.evaluation.metrics import format_table, summarize_runs
from llama_index_ext_advrag.evaluation.runner import Pipeline, run_pipeline

logger = logging.getLogger("llama_index_ext_advrag.cli")

DEFAULT_URI = ".advrag/advrag.db"
DEFAULT_TOP_K = 5
URI_ENV = "ADVRAG_MILVUS_URI"
TOKEN_ENV = "ADVRAG_MILVUS_TOKEN"


def build_baseline(
    documents, embed_model, uri: str, top_k: int, token: str = "", show_progress: bool = True
) -> Pipeline:
    """LlamaIndex core's SentenceSplitter(256) + dense retrieval over Milvus: the baseline."""
    from llama_index_ext_advrag.milvus import flush, open_vector_store
    from llama_index_ext_advrag.models import DEFAULT_EMBED_DIM

    dim = len(embed_model.get_text_embedding("dimension probe")) or DEFAULT_EMBED_DIM
    store = open_vector_store(uri, "baseline_splitter256", dim=dim, token=token, overwrite=True)
    nodes = SentenceSplitter(chunk_size=256, chunk_overlap=20).get_nodes_from_documents(documents)
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
        show_progress=show_progress,
    )
    flush(store)
    retriever = index.as_retriever(similarity_top_k=top_k)
    return Pipeline(name=f"core SentenceSplitter(256) k={top_k}", retrieve=retriever.retrieve)


def command_run(args: argparse.Namespace) -> int:
    from llama_index_ext_advrag._progress import library_progress_bars
    from llama_index_ext_advrag.models import resolve_embed_model

    started = time.perf_counter()
    data = Path(args.data)
    qa_path = Path(args.qa) if args.qa else data / "qa.jsonl"
    documents = load_documents(data)
    questions = load_qa(qa_path)
    with library_progress_bars(not args.quiet):
        embed_model = resolve_embed_model()
    print(f"{len(documents)} documents, {len(questions)} questions, index at {args.uri}")
    pipelines = [
        build_baseline(documents, embed_model, args.uri, args.top_k, args.token, not args.quiet)
    ]
    runs = []
    for pipeline in pipelines:
        runs.extend(run_pipeline(pipeline, questions, show_progress=not args.quiet))
    print(format_table(summarize_runs(runs)))
    unanswerable = sum(not q.answerable for q in questions)
    print(f"({unanswerable} unanswerable questions are not scored for coverage)")
    print(f"finished in {time.perf_counter() - started:.1f}s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from llama_index_ext_advrag.cli_compare import add_ask_command, add_compare_command

    parser = argparse.ArgumentParser(
        prog="advrag", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="log at INFO level; tracebacks on errors"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    add_compare_command(sub)
    add_ask_command(sub)
    run = sub.add_parser("run", help="index a folder and measure the baseline pipeline")
    run.add_argument("--data", default="data", help="folder of .md/.txt/.xlsx documents")
    run.add_argument("--qa", default=None, help="questions in JSONL (default: DATA/qa.jsonl)")
    run.add_argument(
        "--uri",
        default=os.environ.get(URI_ENV) or DEFAULT_URI,
        help=f"Milvus Lite file or http:// server URI (default: ${URI_ENV} or {DEFAULT_URI})",
    )
    run.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV, ""),
        help=f"server credentials 'user:password' or an API key (default: ${TOKEN_ENV})",
    )
    run.add_argument("--top-k", type=int, default=DEFAULT_TOP_K)
    run.add_argument("--quiet", action="store_true", help="no progress bars")
    run.set_defaults(handler=command_run)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "top_k", 1) < 1:
        print(f"--top-k must be >= 1, got {args.top_k}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING)
    # Milvus Lite's in-process gRPC server logs a harmless "AllocTimestamp not implemented"
    # traceback whenever an index is created; keep the command's output readable.
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    if not args.verbose:
        # bm25s sets its own logger to DEBUG when it is imported: import it first, then quieten
        with contextlib.suppress(ImportError):
            import bm25s  # noqa: F401

        logging.getLogger("bm25s").setLevel(logging.WARNING)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("advrag: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # one line for the user; -v for the traceback
        if args.verbose:
            raise
        print(f"advrag: error: {one_line(exc)}", file=sys.stderr)
        return 1


def one_line(exc: BaseException) -> str:
    """The error as one line: its message's first line, prefixed by the type when unclear."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, FileNotFoundError) and exc.filename:
        message = f"no such file or folder: {exc.filename}"
    known = (FileNotFoundError, ValueError, PermissionError, IsADirectoryError)
    if not message:
        return type(exc).__name__
    return message if isinstance(exc, known) else f"{type(exc).__name__}: {message}"


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
