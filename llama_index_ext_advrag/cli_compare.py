"""``advrag compare`` and ``advrag ask``: argument parsing and terminal output."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any

URI_ENV = "ADVRAG_MILVUS_URI"
TOKEN_ENV = "ADVRAG_MILVUS_TOKEN"
LLM_KEY_ENV = "ADVRAG_LLM_API_KEY"
DEFAULT_DOCS = "data"
LLM_SERVER_EXTRA = "pip install 'llama-index-ext-advrag[llm-server]'"


def _ks(value: str) -> list[int]:
    try:
        ks = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--ks takes comma-separated integers, got {value!r}"
        ) from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError(f"--ks values must be >= 1, got {value!r}")
    return ks


def _names(value: str) -> list[str]:
    names = [part.strip() for part in value.split(",") if part.strip()]
    if not names:
        from llama_index_ext_advrag.evaluation.registry import registered_pipelines

        raise argparse.ArgumentTypeError(
            f"--pipelines takes comma-separated names, got {value!r} (no name); registered: "
            f"{', '.join(registered_pipelines())}"
        )
    return names


def _common(parser: argparse.ArgumentParser) -> None:
    from llama_index_ext_advrag.evaluation.arguments import DOC_TYPES
    from llama_index_ext_advrag.evaluation.session import DEFAULT_STATE_DIR, DEFAULT_URI

    parser.add_argument(
        "--docs",
        nargs="+",
        default=None,
        help="folders or files (.md/.txt/.xlsx, or a SQuAD/HotpotQA/RGB/BEIR "
        f"dataset file whose corpus is used); default: the folder {DEFAULT_DOCS}/ when it "
        "exists here",
    )
    parser.add_argument(
        "--uri",
        default=os.environ.get(URI_ENV) or DEFAULT_URI,
        help=f"Milvus Lite file or http(s):// server URI (default: ${URI_ENV} or {DEFAULT_URI})",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV, ""),
        help=f"Milvus server token (default: ${TOKEN_ENV})",
    )
    parser.add_argument(
        "--state-dir",
        default=DEFAULT_STATE_DIR,
        help="index manifests and BM25 indexes (default %(default)s)",
    )
    parser.add_argument(
        "--doc-type",
        default="auto",
        choices=DOC_TYPES,
        help="preset of the adaptive-window pipeline (auto: guessed from the text)",
    )
    parser.add_argument(
        "--embed-model",
        default=None,
        help="an offline model by name (bge-small, all-MiniLM, multilingual-e5) or a "
        "LlamaIndex embed-model string (e.g. local:/path); default: chosen by --language",
    )
    parser.add_argument(
        "--language",
        default="auto",
        choices=("auto", "en", "multi"),
        help="default embedding model: en = bge-small-en-v1.5 int8 ONNX (English "
        "only, offline extra), multi = multilingual-e5-small (multilingual extra), auto = "
        "multi when the documents are mostly Chinese and it is installed",
    )
    parser.add_argument(
        "--no-llm",
        action="store_true",
        help="ignore any configured LLM (OPENAI_API_KEY, Settings.llm)",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild every index")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")


def add_compare_command(sub: Any) -> None:
    from llama_index_ext_advrag.evaluation.compare import DEFAULT_KS
    from llama_index_ext_advrag.evaluation.session import DEFAULT_OUT

    parser = sub.add_parser(
        "compare",
        help="compare retrieval pipelines on your documents (report, frontier chart)",
        description="Ingest the documents once per parser, run every pipeline on every "
        "question at several k, print a table per pipeline and write report.md, results.csv, "
        "frontier.csv and PNG charts. Without --questions, probe questions are made from the "
        "documents (a proxy, reported as such).",
    )
    _common(parser)
    parser.add_argument(
        "--questions",
        default=None,
        help="questions: qa.jsonl, SQuAD JSON, HotpotQA JSON, RGB JSONL or BEIR "
        "queries.jsonl (default: probe questions from the documents)",
    )
    parser.add_argument(
        "--questions-format",
        default=None,
        choices=("qa", "squad", "hotpot", "rgb", "beir"),
        help="the format of --questions (default: detected)",
    )
    parser.add_argument("--qrels", default=None, help="BEIR qrels TSV (default: qrels/test.tsv)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--pipelines",
        type=_names,
        default=None,
        help="comma-separated registered pipelines (default: all that can run)",
    )
    group.add_argument("--spec", default=None, help="YAML/JSON file composing pipelines")
    parser.add_argument("--out", default=DEFAULT_OUT, help="report folder (default %(default)s)")
    parser.add_argument("--k", type=int, default=5, help="k of the table (default %(default)s)")
    parser.add_argument(
        "--ks",
        type=_ks,
        default=list(DEFAULT_KS),
        help="k values of the frontier (default %(default)s)",
    )
    parser.add_argument(
        "--probes",
        type=int,
        default=None,
        help="probe questions to make without --questions (default 40)",
    )
    parser.add_argument("--max-questions", type=int, default=None, help="first N questions only")
    parser.add_argument("--seed", type=int, default=0, help="probe sampling seed")
    parser.add_argument("--list", action="store_true", help="list the registered pipelines")
    answers = parser.add_argument_group("answers (--answers: generate and score answers)")
    answers.add_argument(
        "--answers",
        action="store_true",
        help="generate an answer from each pipeline's context and report hallucination rate, "
        "fact recall, token F1, latency and tokens (needs an LLM: OPENAI_API_KEY or --llm-url)",
    )
    answers.add_argument(
        "--llm-url",
        default=None,
        help="an OpenAI-compatible server (llama.cpp's: http://127.0.0.1:8080/v1) used as the "
        f"LLM through OpenAILike (the llm-server extra); its key from ${LLM_KEY_ENV} (default "
        "none)",
    )
    answers.add_argument(
        "--llm-model", default=None, help="the model name to ask --llm-url for (default: local)"
    )
    answers.add_argument(
        "--llm-max-tokens",
        type=int,
        default=256,
        help="tokens the --llm-url model may generate per call (default %(default)s)",
    )
    answers.add_argument(
        "--llm-timeout",
        type=float,
        default=None,
        help="seconds one LLM call of the answer evaluation may take (default 120)",
    )
    answers.add_argument(
        "--answer-budget",
        type=float,
        default=None,
        help="context tokens to answer at: each pipeline at its k closest to it (default: "
        "the baseline's mean tokens at --k)",
    )
    answers.add_argument(
        "--support-judge",
        default="faithfulness",
        choices=("faithfulness", "prefix"),
        help="how each answer sentence is judged: faithfulness = LlamaIndex's "
        "FaithfulnessEvaluator (a new prompt with the whole context per sentence); prefix = the "
        "generation's chat continued with one yes/no question (first-token log-probabilities), "
        "so a local server that keeps its last prompt evaluates only the question (default "
        "%(default)s)",
    )
    answers.add_argument(
        "--answer-cache",
        default=None,
        help="folder of the generation/judgement cache (default: STATE_DIR/answers)",
    )
    parser.set_defaults(handler=command_compare)


def document_paths(docs: list[str] | None) -> list[str]:
    """``--docs`` as given, else ``data`` when that folder exists in the current folder.

    Raises:
        ValueError: no ``--docs`` and no ``data`` folder here (says what to pass).
    """
    if docs is not None:
        return docs
    if os.path.isdir(DEFAULT_DOCS):
        return [DEFAULT_DOCS]
    raise ValueError(
        f"no documents to read: pass them with --docs FOLDER_OR_FILE [...] (.md, .txt, .xlsx, "
        f"or a SQuAD/HotpotQA/RGB/BEIR dataset file); without --docs a {DEFAULT_DOCS}/ folder "
        f"in the current folder ({os.getcwd()}) is read, and there is none"
    )


def check_llm_settings(url: str | None, max_tokens: int) -> None:
    """``--llm-url`` and ``--llm-max-tokens`` (nothing is imported or contacted).

    Raises:
        ValueError: ``url`` is not an http(s) URL, or ``max_tokens`` < 1 (both named).
    """
    if url is not None and not url.startswith(("http://", "https://")):
        raise ValueError(f"--llm-url must start with http:// or https://, got {url!r}")
    if max_tokens < 1:
        raise ValueError(f"--llm-max-tokens must be >= 1, got {max_tokens}")


def openai_like_llm(url: str, model: str | None, timeout: float, max_tokens: int = 256) -> Any:
    """An ``OpenAILike`` chat LLM for an OpenAI-compatible server at ``url`` (temperature 0).

    Raises:
        ValueError: ``url`` is not an http(s) URL, or ``max_tokens`` < 1.
        ModelResolutionError: ``llama-index-llms-openai-like`` is not installed (names the
            ``llm-server`` extra).
    """
    check_llm_settings(url, max_tokens)
    try:
        from llama_index.llms.openai_like import OpenAILike
    except ImportError as exc:
        from llama_index_ext_advrag.models import ModelResolutionError

        raise ModelResolutionError(
            f"--llm-url needs llama-index-llms-openai-like, which is not installed ({exc}): "
            f"{LLM_SERVER_EXTRA}"
        ) from None

    return OpenAILike(
        model=model or "local",
        api_base=url,
        api_key=os.environ.get(LLM_KEY_ENV) or "not-needed",
        is_chat_model=True,
        temperature=0.0,
        max_tokens=max_tokens,
        timeout=timeout,
        max_retries=1,
    )


def list_pipelines() -> str:
    from llama_index_ext_advrag.evaluation.registry import registered_pipelines

    lines = []
    for entry in registered_pipelines().values():
        flag = " (needs an LLM)" if entry.needs_llm else ""
        flag += " (--answers only)" if entry.generates else ""
        flag += " (by name only)" if entry.by_name_only else ""
        lines.append(f"{entry.name:16s} {entry.description}{flag}")
    return "\n".join(lines)


def command_compare(args: argparse.Namespace) -> int:
    from llama_index_ext_advrag.evaluation.probes import DEFAULT_PROBES
    from llama_index_ext_advrag.evaluation.report import terminal_report
    from llama_index_ext_advrag.evaluation.session import CompareOptions, run_compare

    if args.list:
        print(list_pipelines())
        return 0
    from llama_index_ext_advrag.evaluation.answers import DEFAULT_LLM_TIMEOUT
    from llama_index_ext_advrag.evaluation.arguments import check_compare_options

    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    if args.llm_model and not args.llm_url:
        raise ValueError(f"--llm-model {args.llm_model!r} needs --llm-url (the server to ask)")
    if args.no_llm and (args.answers or args.llm_url):
        raise ValueError("--no-llm contradicts --answers / --llm-url: drop one")
    check_llm_settings(args.llm_url, args.llm_max_tokens)
    timeout = DEFAULT_LLM_TIMEOUT if args.llm_timeout is None else args.llm_timeout
    started = time.perf_counter()
    options = CompareOptions(
        docs=document_paths(args.docs),
        questions=args.questions,
        questions_format=args.questions_format,
        qrels=args.qrels,
        pipelines=args.pipelines,
        spec=args.spec,
        uri=args.uri,
        token=args.token,
        out=args.out,
        state_dir=args.state_dir,
        k=args.k,
        ks=args.ks,
        probes=DEFAULT_PROBES if args.probes is None else args.probes,
        max_questions=args.max_questions,
        doc_type=args.doc_type,
        embed_model=args.embed_model,
        language=args.language,
        use_llm=not args.no_llm,
        rebuild=args.rebuild,
        show_progress=not args.quiet,
        seed=args.seed,
        answers=args.answers,
        answer_budget=args.answer_budget,
        llm_timeout=timeout,
        answer_cache=args.answer_cache,
        support_judge=args.support_judge,
    )
    check_compare_options(options)  # every flag named with its value, before the LLM is built
    if args.llm_url:
        options.llm = openai_like_llm(args.llm_url, args.llm_model, timeout, args.llm_max_tokens)
    run, files = run_compare(options)
    print(terminal_report(run))
    print()
    print("written: " + ", ".join(str(p) for p in files.values()))
    print(f"finished in {time.perf_counter() - started:.1f}s")
    return 0


def add_ask_command(sub: Any) -> None:
    parser = sub.add_parser(
        "ask",
        help="one question through one pipeline: its context, decision trace (and answer)",
    )
    parser.add_argument("question", help="the question")
    parser.add_argument("--pipeline", default="baseline", help="registered pipeline name")
    parser.add_argument("--spec", default=None, help="YAML/JSON spec file (first pipeline)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    _common(parser)
    parser.set_defaults(handler=command_ask)


def command_ask(args: argparse.Namespace) -> int:
    from llama_index.core.schema import MetadataMode, QueryBundle

    from llama_index_ext_advrag.evaluation.arguments import check_common
    from llama_index_ext_advrag.evaluation.registry import get_pipeline, load_spec
    from llama_index_ext_advrag.evaluation.session import (
        CompareOptions,
        build_context,
        embed_model_label,
        prepare_models,
    )
    from llama_index_ext_advrag.evaluation.sources import load_corpus
    from llama_index_ext_advrag.layout import document_id_of
    from llama_index_ext_advrag.text import replace_lone_surrogates
    from llama_index_ext_advrag.trace import TRACE_KEY

    if args.k < 1:
        raise ValueError(f"--k must be >= 1, got {args.k}")
    if not args.question.strip():
        raise ValueError(f"the question is empty ({args.question!r}): nothing to ask")
    question, surrogates = replace_lone_surrogates(args.question)
    if surrogates:  # they reach no model, store or terminal: U+FFFD, said once
        print(f"advrag: {surrogates} lone surrogate(s) in the question replaced with U+FFFD",
              file=sys.stderr)  # fmt: skip
    options = CompareOptions(
        docs=document_paths(args.docs),
        uri=args.uri,
        token=args.token,
        state_dir=args.state_dir,
        doc_type=args.doc_type,
        embed_model=args.embed_model,
        language=args.language,
        use_llm=not args.no_llm,
        rebuild=args.rebuild,
        show_progress=not args.quiet,
    )
    check_common(options)  # before any model loads or document is read
    entry = load_spec(args.spec)[0] if args.spec else get_pipeline(args.pipeline)
    documents = load_corpus(options.docs)
    embed_model, llm, decision = prepare_models(options, documents)
    embedding = {"model": embed_model_label(embed_model), "reason": decision.reason}
    if not args.json:  # with --json it is in the object: stdout holds the JSON alone
        print(f"embedding model: {embedding['model']} ({embedding['reason']})")
    if entry.needs_llm and llm is None:
        raise ValueError(f"pipeline {entry.name!r} needs an LLM and none is set")
    context = build_context(options, documents, embed_model, llm)
    context.store.start_heartbeat()
    try:
        pipeline = entry.build(context)
        started = time.perf_counter()
        nodes = pipeline.retrieve(QueryBundle(question), args.k)
        latency = (time.perf_counter() - started) * 1000
    finally:
        context.store.close()
    answer = None
    if llm is not None:
        from llama_index.core import get_response_synthesizer

        answer = str(get_response_synthesizer(llm=llm).synthesize(question, nodes))
    result = {
        "pipeline": entry.name,
        "question": question,
        "k": args.k,
        "latency_ms": round(latency, 1),
        "embedding_model": embedding,
        "answer": answer,
        "context": [
            {
                "rank": rank,
                "score": n.score,
                "document": document_id_of(n.node),
                "text": n.node.get_content(metadata_mode=MetadataMode.NONE),
                "trace": n.node.metadata.get(TRACE_KEY, {}),
            }
            for rank, n in enumerate(nodes, start=1)
        ],
    }
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2, default=str))
        return 0
    print(f"pipeline {entry.name}, k={args.k}, {len(nodes)} context nodes, {latency:.1f} ms")
    for item in result["context"]:
        score = f"{item['score']:.3f}" if item["score"] is not None else "-"
        print(f"\n[{item['rank']}] score {score}  document {item['document']}")
        print(item["text"])
        if item["trace"]:
            print("  trace: " + json.dumps(item["trace"], ensure_ascii=False, default=str)[:1500])
    print()
    print(f"answer: {answer}" if answer is not None else "answer: (no LLM set: context only)")
    sys.stdout.flush()
    return 0


__all__ = [
    "add_ask_command",
    "add_compare_command",
    "check_llm_settings",
    "command_ask",
    "command_compare",
    "document_paths",
    "openai_like_llm",
]
