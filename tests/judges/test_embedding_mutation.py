"""EmbeddingRelevanceJudge's serialised name (from_dict refuses another class's dict by it).
Kills the class_name mutants of judges/embedding.py no selected test reached (mutation
testing, issue #39)."""

from __future__ import annotations

import pytest
from llama_index.core.embeddings import MockEmbedding

from llama_index_ext_advrag.judges import EmbeddingRelevanceJudge

pytestmark = pytest.mark.unit


def test_the_judge_serialises_under_its_class_name() -> None:
    judge = EmbeddingRelevanceJudge(embed_model=MockEmbedding(embed_dim=8))
    assert EmbeddingRelevanceJudge.class_name() == "EmbeddingRelevanceJudge"
    assert judge.to_dict()["class_name"] == "EmbeddingRelevanceJudge"
