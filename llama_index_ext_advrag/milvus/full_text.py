"""Full-text search (BM25) inside Milvus: what a backend supports, the analyzers, the schema.

Milvus computes BM25 itself when a collection has a ``BM25`` function from an analysed
``VARCHAR`` field into a ``SPARSE_FLOAT_VECTOR`` field (Milvus server >= 2.5, Milvus Lite
>= 2.5; the 2.3 servers have neither functions nor sparse vectors). The schema is written by
``llama-index-vector-stores-milvus`` itself (``enable_sparse`` + ``BM25BuiltInFunction``);
this module chooses its options and reads them back from a collection:

* :func:`full_text_support` decides, from the backend's version and the collection's own
  functions, whether a collection can serve the lexical leg; it never tries and catches.
* :class:`FullTextAnalyzer` says how text becomes terms. ``pack``: the pack's
  :class:`~llama_index_ext_advrag.text.words.WordTokenizer` terms (jieba words + characters,
  stemmed English without stop words), written space-separated into an ``advrag_terms``
  field that Milvus' ``standard`` tokenizer splits back on the spaces; ``standard`` and
  ``jieba``: Milvus' own analyzers over the node text. Milvus Lite 3.2.2 offers only the
  ``standard`` and ``jieba`` tokenizers and ignores the ``stemmer`` filter (an unknown filter
  name too), so its English terms are unstemmed and its Chinese terms are jieba words without
  the character back-off: measured in docs/milvus.md, the pack's terms are the default for
  both languages (:data:`AUTO_ANALYZERS`).
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
from collections.abc import Iterable
from enum import Enum
from typing import Any, NamedTuple

from llama_index_ext_advrag._enums import parse_enum
from llama_index_ext_advrag.text.charsets import ENGLISH_STOP_WORDS

logger = logging.getLogger(__name__)

FULL_TEXT_MIN_SERVER_VERSION = (2, 5, 0)
FULL_TEXT_MIN_LITE_VERSION = (2, 5, 0)
# The pack analyzer needs a tokenizer that splits at spaces only: Milvus Lite's ``standard``
# (``\w+``: the terms hold letters, digits and Han characters only) or a server's
# ``whitespace`` tokenizer (documented from Milvus 2.6; a server's ``standard`` tokenizer
# splits Han words into characters).
PACK_MIN_SERVER_VERSION = (2, 6, 0)
TERMS_FIELD = "advrag_terms"
SPARSE_FIELD = "sparse_embedding"  # the integration's default sparse field name
DEFAULT_K1 = 1.5  # bm25s' (and JiebaBM25Retriever's) defaults, so both legs score alike
DEFAULT_B = 0.75
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


class FullTextAnalyzer(str, Enum):
    """How a node's text becomes BM25 terms inside Milvus."""

    PACK = "pack"  # the pack's WordTokenizer terms in TERMS_FIELD, split on spaces by Milvus
    STANDARD = "standard"  # Milvus' standard tokenizer + English stop words, over the text
    JIEBA = "jieba"  # Milvus' jieba tokenizer (search mode), over the text
    AUTO = "auto"  # by the corpus language: AUTO_ANALYZERS


# The analyzer ``auto`` picks per corpus language ("zh": mostly-CJK documents, see
# embeddings.language.needs_multilingual). Milvus' analyzers fall short of the pack's terms on
# both datasets measured (COVID-QA: no stemming; CMRC: no single characters), so both are PACK.
AUTO_ANALYZERS: dict[str, FullTextAnalyzer] = {
    "en": FullTextAnalyzer.PACK,
    "zh": FullTextAnalyzer.PACK,
}

# The analyzer ``auto`` falls back to, per corpus language, on a server without PACK.
MILVUS_ANALYZERS: dict[str, FullTextAnalyzer] = {
    "en": FullTextAnalyzer.STANDARD,
    "zh": FullTextAnalyzer.JIEBA,
}
PACK_SERVER_PARAMS: dict[str, Any] = {"tokenizer": "whitespace"}

# Milvus analyzer parameters of the analysed field, per analyzer (Milvus Lite's for PACK).
ANALYZER_PARAMS: dict[FullTextAnalyzer, dict[str, Any]] = {
    FullTextAnalyzer.PACK: {"tokenizer": "standard"},
    FullTextAnalyzer.STANDARD: {
        "tokenizer": "standard",
        # the Lucene list the pack's tokenizer drops (Milvus Lite reads "_english_" as a word)
        "filter": ["lowercase", {"type": "stop", "stop_words": sorted(ENGLISH_STOP_WORDS)}],
    },
    FullTextAnalyzer.JIEBA: {"tokenizer": {"type": "jieba", "mode": "search"}},
}


class FullTextSupport(NamedTuple):
    """Whether a collection can serve full-text search, and why (for the trace)."""

    supported: bool
    reason: str
    input_field: str | None = None  # the analysed VARCHAR field
    output_field: str | None = None  # the sparse field the BM25 function writes
    analyzer: FullTextAnalyzer | None = None
    version: tuple[int, int, int] | None = None  # the backend's
    lite: bool = False  # Milvus Lite (else a server)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """``"v2.5.4"``, ``"milvus_lite-3.2.2"`` or ``"2.3"`` as a tuple; ``None`` if unreadable.

    >>> parse_version("milvus_lite-3.2.2"), parse_version("v2.3.5-lite"), parse_version("x")
    ((3, 2, 2), (2, 3, 5), None)
    """
    match = _VERSION.search(text)
    if match is None:
        return None
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def backend_support(version_text: str) -> FullTextSupport:
    """Whether the backend reporting ``version_text`` (``get_server_version()``) has the BM25
    function: Milvus Lite and servers from 2.5.

    >>> backend_support("v2.3.21").reason
    'Milvus server 2.3.21 has no full-text search (needs >= 2.5.0)'
    >>> backend_support("milvus_lite-3.2.2").supported
    True
    """
    lite = version_text.lower().startswith("milvus_lite")
    kind, needed = (
        ("Milvus Lite", FULL_TEXT_MIN_LITE_VERSION)
        if lite
        else (
            "Milvus server",
            FULL_TEXT_MIN_SERVER_VERSION,
        )
    )
    version = parse_version(version_text)
    if version is None:
        return FullTextSupport(False, f"{kind} version {version_text!r} is unreadable", lite=lite)
    if version < needed:
        return FullTextSupport(
            False,
            f"{kind} {_dotted(version)} has no full-text search (needs >= {_dotted(needed)})",
            version=version,
            lite=lite,
        )
    return FullTextSupport(
        True, f"{kind} {_dotted(version)} has full-text search", version=version, lite=lite
    )


def lite_support() -> FullTextSupport:
    """:func:`backend_support` of the installed Milvus Lite (read before a collection exists)."""
    try:
        version = importlib.metadata.version("milvus-lite")
    except importlib.metadata.PackageNotFoundError:
        return FullTextSupport(False, "milvus-lite is not installed")
    return backend_support(f"milvus_lite-{version}")


def _analyzer_of(field: dict[str, Any]) -> FullTextAnalyzer | None:
    """Which analyzer wrote ``field`` (a ``describe_collection`` field), or ``None`` if it is
    not one of ours (a collection made elsewhere: its query is sent as typed)."""
    if field.get("name") == TERMS_FIELD:
        return FullTextAnalyzer.PACK
    params = field.get("params", {}).get("analyzer_params")
    text = params if isinstance(params, str) else repr(params)
    if "jieba" in text:
        return FullTextAnalyzer.JIEBA
    return FullTextAnalyzer.STANDARD


def collection_support(client: Any, collection_name: str) -> FullTextSupport:
    """:func:`backend_support` of ``client``'s backend, then whether ``collection_name`` has a
    BM25 function (its input and output fields and analyzer when it has)."""
    from pymilvus import FunctionType

    backend = backend_support(str(client.get_server_version()))
    if not backend.supported:
        return backend
    description = client.describe_collection(collection_name)
    fields = {field.get("name"): field for field in description.get("fields", [])}
    for function in description.get("functions", []):
        if function.get("type") == FunctionType.BM25:
            source = function["input_field_names"][0]
            target = function["output_field_names"][0]
            return FullTextSupport(
                True,
                f"{backend.reason}; collection {collection_name!r} has a BM25 function "
                f"({source} -> {target})",
                source,
                target,
                _analyzer_of(fields.get(source, {"name": source})),
                backend.version,
                backend.lite,
            )
    return FullTextSupport(
        False,
        f"{backend.reason}, but collection {collection_name!r} has no BM25 function "
        "(open it with full_text=... when creating it)",
    )


def corpus_language(sample_texts: Iterable[str] | None) -> str | None:
    """``"zh"`` when the sample needs a Chinese reader (mostly-CJK documents, the rule that
    picks the multilingual embedding), ``"en"`` otherwise, ``None`` without a sample."""
    from llama_index_ext_advrag.embeddings.language import corpus_languages, needs_multilingual

    languages = corpus_languages(sample_texts)
    if languages is None:
        return None
    return "zh" if needs_multilingual(languages) else "en"


def pack_served(support: FullTextSupport) -> bool:
    """Whether the backend can split the pack's terms at spaces (Lite, or a server >= 2.6)."""
    return support.lite or (support.version or (0, 0, 0)) >= PACK_MIN_SERVER_VERSION


def resolve_analyzer(
    analyzer: FullTextAnalyzer | str,
    sample_texts: Iterable[str] | None = None,
    support: FullTextSupport | None = None,
) -> tuple[FullTextAnalyzer, str]:
    """The analyzer to build with on the backend ``support`` describes (Milvus Lite when not
    given), and why; ``auto`` reads the sample's language (:data:`AUTO_ANALYZERS`, or
    :data:`MILVUS_ANALYZERS` on a server below 2.6).

    Raises:
        ValueError: an unknown analyzer name (the allowed names are listed), or ``pack`` on a
            server below 2.6.

    >>> resolve_analyzer("auto", ["潜伏期一般为三到七天。"])[0].value
    'pack'
    >>> resolve_analyzer("auto", ["潜伏期一般为三到七天。"], backend_support("v2.5.4"))[0].value
    'jieba'
    """
    support = support or FullTextSupport(True, "Milvus Lite", lite=True)
    chosen = parse_enum(FullTextAnalyzer, analyzer, "full_text analyzer")
    served = pack_served(support)
    if chosen is FullTextAnalyzer.PACK and not served:
        raise ValueError(
            f"full_text='pack' needs Milvus >= {_dotted(PACK_MIN_SERVER_VERSION)} (its "
            f"whitespace tokenizer): {support.reason}; use 'auto', 'jieba' or 'standard'"
        )
    if chosen is not FullTextAnalyzer.AUTO:
        return chosen, f"analyzer {chosen.value} (given)"
    language = corpus_language(sample_texts)
    table = AUTO_ANALYZERS if served else MILVUS_ANALYZERS
    picked = table[language or "en"]
    seen = f"corpus language {language}" if language else "no sample text, English assumed"
    return picked, f"analyzer {picked.value} (auto: {seen})"


def store_options(
    analyzer: FullTextAnalyzer, lite: bool = True, k1: float = DEFAULT_K1, b: float = DEFAULT_B
) -> dict[str, Any]:
    """``MilvusVectorStore`` arguments that give a new collection a BM25 function with
    ``analyzer`` (the integration's ``enable_sparse`` + ``BM25BuiltInFunction``) on Milvus
    Lite (``lite``) or a server."""
    from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction
    from pymilvus import DataType

    if analyzer is FullTextAnalyzer.AUTO:
        raise ValueError("resolve the 'auto' analyzer first (resolve_analyzer)")
    options: dict[str, Any] = {
        "enable_sparse": True,
        "sparse_embedding_field": SPARSE_FIELD,
        "sparse_index_config": {"bm25_k1": k1, "bm25_b": b},
    }
    source = "text"
    if analyzer is FullTextAnalyzer.PACK:
        source = TERMS_FIELD
        options["scalar_field_names"] = [TERMS_FIELD]
        options["scalar_field_types"] = [DataType.VARCHAR]
    params = ANALYZER_PARAMS[analyzer]
    if analyzer is FullTextAnalyzer.PACK and not lite:
        params = PACK_SERVER_PARAMS
    options["sparse_embedding_function"] = BM25BuiltInFunction(
        input_field_names=source,
        output_field_names=SPARSE_FIELD,
        analyzer_params=params,
    )
    return options


__all__ = [
    "ANALYZER_PARAMS",
    "AUTO_ANALYZERS",
    "FULL_TEXT_MIN_LITE_VERSION",
    "FULL_TEXT_MIN_SERVER_VERSION",
    "MILVUS_ANALYZERS",
    "PACK_MIN_SERVER_VERSION",
    "FullTextAnalyzer",
    "FullTextSupport",
    "TERMS_FIELD",
    "backend_support",
    "collection_support",
    "corpus_language",
    "lite_support",
    "pack_served",
    "parse_version",
    "resolve_analyzer",
    "store_options",
]
