"""Checks of ``advrag compare`` / ``advrag ask`` arguments that run before anything loads.

A bad output folder, Milvus uri, pipeline name or number is reported in a second, naming the
value and what is allowed, instead of after the embedding model loaded and the documents were
read. Nothing here writes to disk, except that the Milvus Lite file's folder (or the nearest
one above it that exists) is tried with an empty file, removed at once: some folders refuse new
files whatever their permission bits say (``/proc``, a read-only mount), and Milvus Lite would
fail there only after its server started, with a traceback of its own.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llama_index_ext_advrag.milvus.connection import check_uri, is_server_uri

LANGUAGES = ("auto", "en", "multi")
DOC_TYPES = ("auto", "general", "technical", "legal", "qa", "article")


def folder_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a folder could not be created or written at ``path``, or ``None``.

    Looks at the path and its nearest existing parent only: ``path`` must be a folder or not
    exist yet, and that parent must be a folder this process may write into.

    Example:
        >>> import tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> folder_problem(os.path.join(folder, "new", "report")) is None
        True
        >>> open(os.path.join(folder, "notes.txt"), "w").close()
        >>> folder_problem(os.path.join(folder, "notes.txt", "report"))[-24:]
        'notes.txt is a file here'
    """
    target = Path(path).expanduser()
    if target.exists() and not target.is_dir():
        return f"{str(target)!r} is a file, not a folder"
    parent = target
    while not parent.exists():
        if parent.parent == parent:
            return f"no existing folder above {str(target)!r}"
        parent = parent.parent
    if not parent.is_dir():
        return f"it would be a folder under {str(parent)!r}, but {parent.name} is a file here"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"{str(parent)!r} cannot be written by this user (permission denied)"
    return None


def check_folder(path: str | os.PathLike[str], option: str) -> None:
    """Raise ``ValueError`` naming ``option`` and ``path`` when :func:`folder_problem` finds one."""
    problem = folder_problem(path)
    if problem is not None:
        raise ValueError(f"{option} {str(path)!r} cannot be used as a folder: {problem}")


def check_milvus_uri(uri: str, option: str = "--uri") -> None:
    """A server URL, or a Milvus Lite ``*.db`` path whose folder can be created and written.

    Raises:
        ValueError: an unsupported scheme, a Lite path not ending in ``.db``, or a Lite file
            whose folder cannot be made (the message names the value and what is allowed).
    """
    try:
        checked = check_uri(uri)
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None
    if not is_server_uri(checked):
        folder = Path(checked).expanduser().parent
        problem = folder_problem(folder) or new_file_problem(folder)
        if problem is not None:
            raise ValueError(f"{option} {uri!r}: the Milvus Lite file's folder: {problem}")


def new_file_problem(folder: str | os.PathLike[str]) -> str | None:
    """Why no file can be created in ``folder`` (or the nearest existing folder above it), or
    ``None``; tried with an empty file that is removed at once."""
    existing = Path(folder)
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    try:
        handle, name = tempfile.mkstemp(prefix=".advrag-check-", dir=existing)
    except OSError as exc:
        return f"{str(existing)!r} does not accept new files ({exc.strerror or exc})"
    os.close(handle)
    os.unlink(name)
    return None


def check_document_paths(paths: Sequence[str | os.PathLike[str]]) -> None:
    """Every ``--docs`` path exists (nothing is read).

    Raises:
        ValueError: no path given.
        FileNotFoundError: a path does not exist (named).
    """
    if not paths:
        raise ValueError("no document path given: pass folders or files with --docs")
    for raw in paths:
        if not Path(raw).exists():
            raise FileNotFoundError(f"document path {str(raw)!r} does not exist")


def check_pipeline_names(names: Sequence[str] | None) -> None:
    """``None`` (every pipeline) or a non-empty list of registered names.

    Raises:
        ValueError: an empty list (the registered names are listed).
        SpecError: an unknown name (the registered names are listed).
    """
    from llama_index_ext_advrag.evaluation.registry import get_pipeline, registered_pipelines

    if names is None:
        return
    if not [n for n in names if str(n).strip()]:
        raise ValueError(
            f"pipelines {list(names)!r} names no pipeline: give one or more of "
            f"{', '.join(registered_pipelines())} (or leave it out for all)"
        )
    for name in names:
        get_pipeline(name)


def check_common(options: Any) -> None:
    """The arguments ``advrag compare`` and ``advrag ask`` share: documents, store, language."""
    check_document_paths(options.docs)
    check_milvus_uri(options.uri)
    check_folder(options.state_dir, "--state-dir")
    if options.doc_type not in DOC_TYPES:
        raise ValueError(
            f"--doc-type must be one of {', '.join(DOC_TYPES)}, got {options.doc_type!r}"
        )
    if str(getattr(options.language, "value", options.language)) not in LANGUAGES:
        raise ValueError(f"language {options.language!r} is not one of {list(LANGUAGES)}")
    if isinstance(options.embed_model, str):
        from llama_index_ext_advrag.models import embed_model_string_problem

        problem = embed_model_string_problem(options.embed_model)
        if problem is not None:
            raise ValueError(f"--embed-model {problem}")


def check_compare_options(options: Any) -> None:
    """Every argument of a comparison, before a model loads or a document is read.

    Raises:
        ValueError: a bad value (named, with what is allowed).
        FileNotFoundError: a document path, question or spec file that does not exist.
    """
    if options.k < 1 or any(k < 1 for k in options.ks):
        raise ValueError(f"k must be >= 1, got k={options.k}, ks={list(options.ks)}")
    if options.max_questions is not None and options.max_questions < 1:
        raise ValueError(
            f"--max-questions must be >= 1 (or left out for all), got {options.max_questions}"
        )
    if options.probes < 1:
        raise ValueError(f"--probes must be >= 1, got {options.probes}")
    check_common(options)
    check_folder(options.out, "--out")
    check_pipeline_names(options.pipelines)
    check_answer_options(options)
    questions = options.questions
    if questions is not None and not Path(questions).is_file():
        if Path(questions).exists():
            raise ValueError(f"questions file {str(questions)!r} is not a file")
        raise FileNotFoundError(f"questions file {str(questions)!r} does not exist")


def check_answer_options(options: Any) -> None:
    """The answer-level settings: a budget and a timeout > 0, a cache folder that can be made.

    Raises:
        ValueError: a bad value (named, with what is allowed).
    """
    budget = options.answer_budget
    if budget is not None and not (isinstance(budget, (int, float)) and budget > 0):
        raise ValueError(
            f"--answer-budget must be a number of tokens > 0 (or left out), got {budget!r}"
        )
    timeout = options.llm_timeout
    if not (isinstance(timeout, (int, float)) and 0 < timeout <= 3600):
        raise ValueError(f"--llm-timeout must be seconds in (0, 3600], got {timeout!r}")
    if options.answers and options.answer_cache is not None:
        check_folder(options.answer_cache, "--answer-cache")
    if not options.answers and budget is not None:
        raise ValueError("--answer-budget is a setting of --answers: add --answers or drop it")
    judge = getattr(options, "support_judge", "faithfulness")
    if isinstance(judge, str) and judge not in ("faithfulness", "prefix"):
        raise ValueError(f"--support-judge must be faithfulness or prefix, got {judge!r}")
    if not options.answers and judge != "faithfulness":
        raise ValueError("--support-judge is a setting of --answers: add --answers or drop it")


__all__ = [
    "check_answer_options",
    "check_common",
    "check_compare_options",
    "check_document_paths",
    "check_folder",
    "check_milvus_uri",
    "check_pipeline_names",
    "folder_problem",
    "new_file_problem",
]
