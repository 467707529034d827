"""Full-text search options: which backends have it (by version), which analyzer ``auto``
picks for a corpus, what ``open_vector_store(full_text=...)`` refuses, and (Milvus Lite) that
the pack's terms are written by every writer and never exceed Milvus' limit silently."""

from __future__ import annotations

import pytest
from advrag_testing import HashEmbedding
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.milvus import count_rows, flush, open_vector_store
from llama_index_ext_advrag.milvus import vector_store as vector_store_module
from llama_index_ext_advrag.milvus.full_text import (
    TERMS_FIELD,
    FullTextAnalyzer,
    backend_support,
    parse_version,
    resolve_analyzer,
    store_options,
)
from llama_index_ext_advrag.milvus.vector_store import full_text_options, terms_of
from llama_index_ext_advrag.retrievers import MilvusBM25Retriever

ENGLISH = ["The incubation period of the virus is usually five days."] * 3
CHINESE = ["新冠病毒的潜伏期一般为三到七天。"] * 3


@pytest.mark.parametrize(
    ("version", "supported", "named"),
    [
        ("v2.3.21", False, "Milvus server 2.3.21 has no full-text search (needs >= 2.5.0)"),
        ("v2.3.5-lite", False, "Milvus server 2.3.5"),  # the milvus package's embedded server
        ("v2.4.9", False, "2.4.9"),
        ("v2.5.0", True, "Milvus server 2.5.0 has full-text search"),
        ("2.6.3", True, "2.6.3"),
        ("milvus_lite-3.2.2", True, "Milvus Lite 3.2.2 has full-text search"),
        ("milvus_lite-2.4.11", False, "Milvus Lite 2.4.11 has no full-text search"),
        ("nightly", False, "'nightly' is unreadable"),
    ],
)
def test_backend_support_is_decided_by_the_version(version, supported, named) -> None:
    support = backend_support(version)
    assert support.supported is supported
    assert named in support.reason


def test_parse_version() -> None:
    assert parse_version("v2.5.4") == (2, 5, 4)
    assert parse_version("2.6") == (2, 6, 0)
    assert parse_version("") is None


@pytest.mark.parametrize(
    ("version", "sample", "expected"),
    [
        ("milvus_lite-3.2.2", ENGLISH, "pack"),
        ("milvus_lite-3.2.2", CHINESE, "pack"),
        ("milvus_lite-3.2.2", None, "pack"),
        ("v2.6.0", CHINESE, "pack"),
        ("v2.5.4", CHINESE, "jieba"),  # no whitespace tokenizer: Milvus' own, by language
        ("v2.5.4", ENGLISH, "standard"),
        ("v2.5.4", None, "standard"),
    ],
)
def test_auto_analyzer_follows_the_backend_and_the_corpus_language(
    version, sample, expected
) -> None:
    analyzer, why = resolve_analyzer("auto", sample, backend_support(version))
    assert analyzer.value == expected
    assert why.startswith(f"analyzer {expected} (auto: ")


def test_explicit_analyzers_and_their_errors() -> None:
    assert resolve_analyzer("jieba")[0] is FullTextAnalyzer.JIEBA
    with pytest.raises(ValueError, match="full_text analyzer.*pack, standard, jieba, auto"):
        resolve_analyzer("icu")
    with pytest.raises(ValueError, match=r"'pack' needs Milvus >= 2\.6\.0.*2\.5\.4"):
        resolve_analyzer("pack", None, backend_support("v2.5.4"))


def test_store_options_use_the_integrations_bm25_function() -> None:
    from llama_index.vector_stores.milvus.utils import BM25BuiltInFunction

    lite = store_options(FullTextAnalyzer.PACK, lite=True)
    function = lite["sparse_embedding_function"]
    assert isinstance(function, BM25BuiltInFunction)
    assert function.input_field_names == [TERMS_FIELD]
    assert function.analyzer_params == {"tokenizer": "standard"}
    assert lite["scalar_field_names"] == [TERMS_FIELD]
    assert lite["sparse_index_config"] == {"bm25_k1": 1.5, "bm25_b": 0.75}
    server = store_options(FullTextAnalyzer.PACK, lite=False)
    assert server["sparse_embedding_function"].analyzer_params == {"tokenizer": "whitespace"}
    jieba = store_options(FullTextAnalyzer.JIEBA)["sparse_embedding_function"]
    assert jieba.input_field_names == ["text"] and "jieba" in str(jieba.analyzer_params)
    with pytest.raises(ValueError, match="resolve the 'auto' analyzer"):
        store_options(FullTextAnalyzer.AUTO)


def test_full_text_options_on_a_backend_without_it(monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(
        vector_store_module, "lite_support", lambda: backend_support("milvus_lite-2.4.11")
    )
    uri = str(tmp_path / "old.db")
    options, support = full_text_options(uri, "", "auto")
    assert options == {} and "2.4.11" in support.reason  # falls back: no sparse field
    with pytest.raises(ValueError, match=r"full_text='jieba': Milvus Lite 2\.4\.11 has no"):
        full_text_options(uri, "", "jieba")
    assert full_text_options(uri, "", None)[0] == {}


def test_full_text_refuses_arguments_it_sets(tmp_path) -> None:
    with pytest.raises(ValueError, match="sets enable_sparse itself"):
        open_vector_store(tmp_path / "x.db", "c", dim=8, full_text="auto", enable_sparse=True)


def test_terms_are_the_tokenizers_and_too_long_terms_are_refused() -> None:
    node = TextNode(text="The viruses were spreading 潜伏期", id_="a")
    assert terms_of([node]) == ["virus were spread 潜伏 潜伏期 潜 伏 期"]
    long = TextNode(text="潜伏期" * 8000, id_="long")  # 24 KB of text, words + characters
    with pytest.raises(ValueError, match="node 'long': its BM25 terms take .* at most 65535"):
        terms_of([node, long])


@pytest.mark.milvus_lite
async def test_every_writer_writes_the_terms(tmp_path) -> None:
    """A store reopened without full_text (another process, another writer) still fills
    the terms field, sync and async; an oversized node stops the call before any row."""
    uri = str(tmp_path / "fts.db")
    embed = HashEmbedding(dim=8)

    def nodes(*pairs: tuple[str, str]) -> list[TextNode]:
        return [TextNode(text=t, id_=i, embedding=embed.get_text_embedding(t)) for i, t in pairs]

    first = open_vector_store(uri, "docs", dim=8, full_text="pack")
    first.add(nodes(("cats", "Cats purr when content.")))
    other = open_vector_store(uri, "docs", dim=8)  # no full_text: the collection decides
    other.add(nodes(("leave", "员工每年享有带薪年假十天。")))
    await other.async_add(nodes(("masks", "Masks reduce the spread of viruses.")))
    with pytest.raises(ValueError, match="node 'huge'"):
        other.add(nodes(("ok", "fine"), ("huge", "潜伏期" * 8000)))
    flush(other)
    assert count_rows(other.client, "docs") == 3
    leg = MilvusBM25Retriever(other)
    assert [r.node.node_id for r in leg.retrieve("带薪年假有几天")] == ["leave"]
    assert [r.node.node_id for r in await leg.aretrieve("virus spreading")] == ["masks"]
