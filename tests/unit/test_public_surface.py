"""The public surface, pinned: each package's ``__all__``, that every name in it resolves, that
the former names still resolve for one release with a ``DeprecationWarning``, and that the lazy
exports are written once (the ``TYPE_CHECKING`` block) and stay lazy.

A change to a list below is a change to the public API: update the docs and the changelog.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from llama_index_ext_advrag._lazy import Deprecated, lazy_exports, type_checking_exports

PACKAGE = "llama_index_ext_advrag"

PUBLIC: dict[str, list[str]] = {
    "": [
        "AdaptiveSlidingWindowNodeParser", "BaseRelevanceJudge", "BgeSmallOnnxEmbedding",
        "CRAGPostprocessor", "CachedEmbedding", "ColbertRelevanceJudge",
        "ConsecutiveMergePostprocessor", "ContextCompressionPostprocessor",
        "CrossEncoderRelevanceJudge", "DriftAwareWindowPostprocessor", "EmbeddingRelevanceJudge",
        "Grade", "GradeLabel", "HierarchicalAutoMergingRetriever", "HierarchicalSentenceNodeParser",
        "HybridFusionRetriever", "IndexLayoutError", "JiebaBM25Retriever",
        "JudgeRerankPostprocessor", "LLMRelevanceJudge", "LanguageRoutedJudge",
        "MilvusAuthenticationError", "MilvusBM25Retriever", "MilvusConnectionError",
        "ModelResolutionError", "MultilingualE5Embedding", "PrevNextPostprocessor",
        "RecursiveIndexNodeRetriever", "SafePandasQueryEngine", "SecondHopRetriever",
        "SelfRAGQueryEngine", "TRACE_KEY", "TwoLayerMilvusRetriever", "UnitAnnotator",
        "UnsafeCodeError", "WindowReplacementPostprocessor", "__version__", "decide_embed_model",
        "is_english_only", "resolve_embed_model", "resolve_llm", "split_sentences",
    ],
    "embeddings": [
        "BgeSmallOnnxEmbedding", "CacheStats", "CachedEmbedding", "MultilingualE5Embedding",
        "embedding_identity", "is_english_only",
    ],
    "evaluation": [
        "DocumentError", "Question", "QuestionFormatError", "SpecError", "answer_covered",
        "answer_groups_covered", "load_corpus", "load_questions", "normalize_for_match",
    ],
    "judges": [
        "BaseRelevanceJudge", "CRAGThresholds", "ColbertRelevanceJudge",
        "CrossEncoderRelevanceJudge", "EmbeddingRelevanceJudge", "Grade", "GradeLabel",
        "LLMRelevanceJudge", "LanguageRoutedJudge", "ScoreCalibration",
        "calibrate_judge_thresholds", "fit_calibration", "multilingual_e5_judge", "offline_judge",
        "pick_thresholds",
    ],
    "milvus": [
        "AsyncReconnectingClient", "IndexLayoutError", "IndexPreset", "MilvusAuthenticationError",
        "MilvusConnectionError", "ReconnectingClient", "afetch_nodes", "aquery_nodes",
        "build_index_params", "build_search_params", "check_storable_nodes", "count_reconnects",
        "count_rows", "eq_filter", "fetch_nodes", "flush", "in_filter", "is_server_uri",
        "open_client", "open_vector_store", "process_reconnects", "query_nodes",
    ],
    "node_parser": [
        "AdaptiveSlidingWindowNodeParser", "HierarchicalSentenceNodeParser", "UnitAnnotator",
    ],
    "postprocessor": [
        "CRAGPostprocessor", "ConsecutiveMergePostprocessor", "ContextCompressionPostprocessor",
        "DriftAwareWindowPostprocessor", "JudgeRerankPostprocessor", "PrevNextPostprocessor",
        "WindowReplacementPostprocessor",
    ],
    "query_engine": ["GenerationMode", "GenerationPassages", "SelfRAGQueryEngine"],
    "retrievers": [
        "HierarchicalAutoMergingRetriever", "HybridFusionRetriever", "JiebaBM25Retriever",
        "MilvusBM25Retriever", "RecursiveIndexNodeRetriever", "SecondHopRetriever",
        "TwoLayerMilvusRetriever",
    ],
    "tables": [
        "SafePandasQueryEngine", "SandboxLimits", "SandboxResult", "UnsafeCodeError",
        "arun_pandas_code", "check_pandas_code", "run_pandas_code",
    ],
    "text": [
        "DEFAULT_MAX_SENTENCE_CHARS", "Section", "Sentence", "check_text", "check_texts",
        "clean_value", "count_tokens", "cue_overlap", "cut_long_sentences", "extract_cues",
        "find_sections", "has_lone_surrogates", "longest_prefix_within", "paragraph_breaks",
        "replace_lone_surrogates", "split_sentences",
    ],
}  # fmt: skip

# Former public names, readable for one release: (package, name) -> where the object lives now.
DEPRECATED: dict[tuple[str, str], str] = {
    ("", "BM25Retriever"): "retrievers.bm25.BM25Retriever",
    ("retrievers", "BM25Retriever"): "retrievers.bm25.BM25Retriever",
    ("retrievers", "AutoMergingConfig"): "retrievers.auto_merging.AutoMergingConfig",
    ("retrievers", "BM25Config"): "retrievers.bm25.BM25Config",
    ("retrievers", "HybridFusionConfig"): "retrievers.hybrid.HybridFusionConfig",
    ("retrievers", "RecursiveConfig"): "retrievers.recursive.RecursiveConfig",
    ("retrievers", "TwoLayerConfig"): "retrievers.two_layer.TwoLayerConfig",
    **{
        ("query_engine", name): f"tables.{module}.{name}"
        for module, name in [
            ("pandas_engine", "SafePandasQueryEngine"),
            ("pandas_sandbox", "SandboxLimits"),
            ("pandas_sandbox", "SandboxResult"),
            ("pandas_sandbox", "run_pandas_code"),
            ("pandas_sandbox", "arun_pandas_code"),
            ("pandas_check", "UnsafeCodeError"),
            ("pandas_check", "check_pandas_code"),
        ]
    },
    ("milvus", "AsyncLoopBinding"): "milvus.vector_store.AsyncLoopBinding",
    ("milvus", "ensure_loaded"): "milvus.connection.ensure_loaded",
    ("milvus", "fetch_rows"): "milvus.nodes.fetch_rows",
    ("milvus", "load_layout"): "milvus.registry.load_layout",
    ("milvus", "prepare_build"): "milvus.registry.prepare_build",
    ("milvus", "record_layout"): "milvus.registry.record_layout",
    ("milvus", "PLACEHOLDER_DIM"): "milvus.registry.PLACEHOLDER_DIM",
    ("milvus", "PLACEHOLDER_VECTOR"): "milvus.registry.PLACEHOLDER_VECTOR",
    ("milvus", "LAYOUT_COLLECTION"): "milvus.registry._LAYOUT_COLLECTION",
    ("milvus", "list_layouts"): "milvus.registry._list_layouts",
    ("milvus", "read_layout"): "milvus.registry._read_layout",
    ("milvus", "write_layout"): "milvus.registry._write_layout",
}


def _package(sub: str):  # noqa: ANN202 - a module
    return importlib.import_module(f"{PACKAGE}.{sub}" if sub else PACKAGE)


def _object_at(path: str) -> object:
    module, _, name = f"{PACKAGE}.{path}".rpartition(".")
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("sub", sorted(PUBLIC))
def test_each_package_all_is_pinned(sub: str) -> None:
    names = list(_package(sub).__all__)
    assert sorted(names) == sorted(PUBLIC[sub])
    assert len(set(names)) == len(names)


def test_every_package_with_an_init_is_pinned() -> None:
    root = Path(_package("").__file__).parent
    subpackages = {path.parent.name for path in root.glob("*/__init__.py")}
    assert subpackages | {""} == set(PUBLIC)


@pytest.mark.parametrize(("sub", "name"), [(s, n) for s in sorted(PUBLIC) for n in PUBLIC[s]])
def test_every_public_name_resolves_without_warning(sub: str, name: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert getattr(_package(sub), name) is not None
    assert name in dir(_package(sub))


@pytest.mark.parametrize(("sub", "name"), sorted(DEPRECATED))
def test_a_former_name_warns_and_is_the_same_object(sub: str, name: str) -> None:
    package = _package(sub)
    with pytest.warns(DeprecationWarning, match=rf"{package.__name__}\.{name} is deprecated"):
        value = getattr(package, name)
    assert value is _object_at(DEPRECATED[(sub, name)])
    assert name not in package.__all__


def test_the_tables_names_left_the_query_engine() -> None:
    query_engine = _package("query_engine")
    with pytest.warns(DeprecationWarning, match="import it from llama_index_ext_advrag.tables"):
        engine = query_engine.SafePandasQueryEngine
    assert engine is _package("tables").SafePandasQueryEngine
    assert not set(query_engine.__all__) & set(PUBLIC["tables"])


@pytest.mark.parametrize("sub", sorted(PUBLIC))
def test_an_unknown_name_is_an_attribute_error(sub: str) -> None:
    with pytest.raises(AttributeError, match="NoSuchThing"):
        _ = _package(sub).NoSuchThing


def test_lazy_exports_are_read_from_the_type_checking_block(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from json import dumps as dumps\n"
        "    from .decoder import (\n        JSONDecoder as JSONDecoder,\n    )\n"
    )
    assert type_checking_exports(init.read_text(), "json") == {
        "dumps": "json",
        "JSONDecoder": "json.decoder",
    }
    getattr_, dir_, all_ = lazy_exports(
        "json",
        str(init),
        eager=("EXTRA",),
        deprecated={"old": Deprecated(".", "use dumps", "dumps")},
    )
    assert all_ == ["EXTRA", "JSONDecoder", "dumps"]
    assert getattr_("JSONDecoder") is importlib.import_module("json.decoder").JSONDecoder
    with pytest.warns(DeprecationWarning, match="json.old is deprecated.*use dumps"):
        assert getattr_("old") is importlib.import_module("json").dumps
    assert {"JSONDecoder", "dumps"} <= set(dir_())


@pytest.mark.parametrize(
    "line",
    [
        "import json",
        "from json import dumps",
        "from json import dumps as to_text",
        "from json import *",
        "X = 1",
    ],
)
def test_a_type_checking_line_that_is_not_an_explicit_reexport_is_refused(line: str) -> None:
    source = f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {line}\n"
    with pytest.raises(ValueError, match="TYPE_CHECKING"):
        type_checking_exports(source, "pkg")


def test_importing_the_package_loads_no_component() -> None:
    """The root stays lazy: plain imports there would load pymilvus and every component
    (about +0.8 s over the 1.4 s of llama_index.core, measured with -X importtime)."""
    code = (
        "import sys, llama_index_ext_advrag\n"
        "print(sorted(m for m in ('pymilvus', 'llama_index_ext_advrag.retrievers.hybrid',"
        " 'llama_index_ext_advrag.postprocessor.crag', 'pandas') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _records() -> list[tuple[object, str]]:
    from llama_index_ext_advrag.models import EmbedModelDecision
    from llama_index_ext_advrag.retrievers.milvus_bm25 import LexicalChoice
    from llama_index_ext_advrag.tables import SandboxResult

    decision = EmbedModelDecision(None, "m", "default", "en", True, None, "why")  # type: ignore[arg-type]
    return [
        (LexicalChoice("bm25s", "no sparse field"), "as_dict"),
        (decision, "as_dict"),
        (SandboxResult(False, error="e", limit="cpu", files_left=2), "as_record"),
    ]


@pytest.mark.parametrize("index", range(3))
def test_a_records_former_method_name_warns_and_gives_to_dict(index: int) -> None:
    """Records serialise with ``to_dict`` only; ``as_dict`` / ``as_record`` stay one release."""
    record, old = _records()[index]
    with pytest.warns(DeprecationWarning, match=rf"\.{old}\(\) is deprecated.*use to_dict\(\)"):
        value = getattr(record, old)()
    assert value == record.to_dict() and value  # type: ignore[attr-defined]


def test_no_record_serialises_under_another_name() -> None:
    """``to_dict`` is the one name: ``as_dict`` / ``as_record`` appear only as the deprecated
    aliases above."""
    root = Path(_package("").__file__).parent
    found = sorted(
        f"{path.relative_to(root)}: {line.strip()}"
        for path in root.rglob("*.py")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith(("def as_dict(", "def as_record(", "def to_record("))
    )
    assert found == [
        "models.py: def as_dict(self) -> dict[str, Any]:",
        "retrievers/milvus_bm25.py: def as_dict(self) -> LexicalChoiceRecord:",
        "tables/pandas_sandbox.py: def as_record(self) -> dict[str, Any]:",
    ]
