"""The ``advrag`` command: compare retrieval pipelines on your own documents, offline.

``advrag compare --docs DOCS`` ingests the documents once per parser (Milvus Lite by default),
runs every pipeline on the questions (``--questions FILE``, or probe questions made from the
documents) at several k, prints a table per pipeline and writes report.md, results.csv and
charts. ``advrag ask "question" --pipeline NAME`` shows one pipeline's context and decision
trace.

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
import sys

logger = logging.getLogger("llama_index_ext_advrag.cli")


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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
