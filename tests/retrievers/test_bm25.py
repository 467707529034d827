"""JiebaBM25Retriever: Chinese and English lexical retrieval, persistence, invalid arguments."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

from llama_index_ext_advrag.retrievers import JiebaBM25Retriever
from llama_index_ext_advrag.retrievers.bm25 import bm25_persist_dir, top_k_indices
from llama_index_ext_advrag.text.words import WordTokenizer
from llama_index_ext_advrag.trace import TRACE_KEY

TEXTS = {
    "zh1": "2023年世界首富是伯纳德·阿尔诺，他来自法国。",
    "zh2": "埃隆·马斯克在2022年成为世界首富，他来自美国。",
    "zh3": "新冠病毒的潜伏期一般为三到七天。",
    "en1": "The incubation period of the virus is usually five days.",
    "en2": "Masks reduce the spread of respiratory viruses.",
    "en3": "Cats purr when they are content.",
}


@pytest.fixture
def nodes() -> list[TextNode]:
    result = [TextNode(text=t, id_=i, metadata={"lang": i[:2]}) for i, t in TEXTS.items()]
    result[0].relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id="zh2")
    return result


def ids(results) -> list[str]:
    return [r.node.node_id for r in results]


def test_defaults_and_class_name(nodes) -> None:
    retriever = JiebaBM25Retriever(nodes)
    assert retriever.similarity_top_k == 10
    assert retriever.tokenizer == WordTokenizer()
    assert (retriever.k1, retriever.b, retriever.method) == (1.5, 0.75, "lucene")
    assert JiebaBM25Retriever.class_name() == "JiebaBM25Retriever"


async def test_the_former_name_still_works_and_warns(nodes, tmp_path: Path) -> None:
    import warnings

    import llama_index_ext_advrag
    from llama_index_ext_advrag.retrievers import BM25Retriever

    assert llama_index_ext_advrag.BM25Retriever is BM25Retriever
    assert "BM25Retriever" not in llama_index_ext_advrag.__all__
    with pytest.warns(DeprecationWarning, match="renamed JiebaBM25Retriever") as caught:
        old = BM25Retriever(nodes, similarity_top_k=3)
    assert caught[0].filename == __file__  # the warning points at the caller's line
    new = JiebaBM25Retriever(nodes, similarity_top_k=3)
    assert isinstance(old, JiebaBM25Retriever)
    query = "世界首富来自哪里"
    expected = [(r.node.node_id, r.score) for r in new.retrieve(query)]
    assert [(r.node.node_id, r.score) for r in old.retrieve(query)] == expected
    assert [(r.node.node_id, r.score) for r in await old.aretrieve(query)] == expected
    old.persist(tmp_path / "old")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new name never warns
        reloaded = JiebaBM25Retriever.from_persist_dir(tmp_path / "old")
    assert [(r.node.node_id, r.score) for r in reloaded.retrieve(query)] == expected


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"similarity_top_k": 0}, "0"),
        ({"k1": -1.0}, "-1.0"),
        ({"b": 1.5}, "1.5"),
        ({"method": "tfidf"}, "'tfidf'"),
    ],
)
def test_invalid_arguments_name_the_value(nodes, kwargs, named) -> None:
    with pytest.raises(ValueError, match=named):
        JiebaBM25Retriever(nodes, **kwargs)


def test_duplicate_ids_rejected() -> None:
    with pytest.raises(ValueError, match="'x'"):
        JiebaBM25Retriever([TextNode(text="a", id_="x"), TextNode(text="b", id_="x")])


def test_chinese_query_finds_chinese_words(nodes) -> None:
    results = JiebaBM25Retriever(nodes, similarity_top_k=3).retrieve("哪一年马斯克成为首富？")
    assert ids(results)[0] == "zh2"
    # Character terms: zh3 shares only 一 (一般) with the question, so it trails, but scores.
    assert ids(results) == ["zh2", "zh1", "zh3"]
    assert results[2].score < results[1].score / 2
    words_only = WordTokenizer(chinese_characters=False)
    results = JiebaBM25Retriever(nodes, tokenizer=words_only).retrieve("哪一年马斯克成为首富？")
    assert set(ids(results)) <= {"zh1", "zh2"}  # only nodes sharing a word score > 0
    assert JiebaBM25Retriever(nodes).retrieve("潜伏期多长")[0].node.node_id == "zh3"


def test_english_query_is_stemmed(nodes) -> None:
    results = JiebaBM25Retriever(nodes, similarity_top_k=2).retrieve("How do viruses spread?")
    assert ids(results)[0] == "en2"  # "viruses"/"spread" match "viruses"/"spread" stems


def test_mixed_query(nodes) -> None:
    assert set(ids(JiebaBM25Retriever(nodes).retrieve("incubation 潜伏期"))) == {"zh3", "en1"}


def test_results_are_copies_with_trace(nodes) -> None:
    results = JiebaBM25Retriever(nodes).retrieve("首富")
    assert results[0].node.metadata[TRACE_KEY]["bm25"] == {"rank": 1, "score": results[0].score}
    assert all(TRACE_KEY not in n.metadata for n in nodes)
    assert all(r.score and r.score > 0 for r in results)
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)


def test_empty_corpus_and_unmatched_query(nodes) -> None:
    assert JiebaBM25Retriever([]).retrieve("anything") == []
    assert JiebaBM25Retriever(nodes).retrieve("zebra 乌龟") == []  # no shared word or character
    assert JiebaBM25Retriever(nodes).retrieve("。？") == []


async def test_sync_and_async_agree(nodes) -> None:
    retriever = JiebaBM25Retriever(nodes)
    sync = retriever.retrieve("世界首富来自哪里")
    asynchronous = await retriever.aretrieve("世界首富来自哪里")
    assert [(r.node.node_id, r.score) for r in sync] == [
        (r.node.node_id, r.score) for r in asynchronous
    ]


def test_persist_and_reload_round_trip(nodes, tmp_path: Path) -> None:
    tokenizer = WordTokenizer(chinese_mode="accurate")
    retriever = JiebaBM25Retriever(nodes, similarity_top_k=4, tokenizer=tokenizer, k1=1.2, b=0.6)
    folder = retriever.persist(tmp_path / "bm25")
    loaded = JiebaBM25Retriever.from_persist_dir(folder)
    assert (loaded.similarity_top_k, loaded.k1, loaded.b) == (4, 1.2, 0.6)
    assert loaded.tokenizer == tokenizer
    for query in ("世界首富", "virus incubation", "cats"):
        before, after = retriever.retrieve(query), loaded.retrieve(query)
        assert [(r.node.node_id, r.score) for r in before] == [
            (r.node.node_id, r.score) for r in after
        ]
    node = {n.node_id: n for n in loaded.nodes}["zh1"]
    assert node.metadata == {"lang": "zh"} and node.text == TEXTS["zh1"]
    assert node.relationships[NodeRelationship.NEXT].node_id == "zh2"
    assert JiebaBM25Retriever.from_persist_dir(folder, similarity_top_k=1).similarity_top_k == 1


def test_persist_empty_and_missing_dir(tmp_path: Path) -> None:
    JiebaBM25Retriever([]).persist(tmp_path / "empty")
    assert JiebaBM25Retriever.from_persist_dir(tmp_path / "empty").retrieve("x") == []
    with pytest.raises(FileNotFoundError, match="nowhere"):
        JiebaBM25Retriever.from_persist_dir(tmp_path / "nowhere")


def test_persist_dir_beside_vector_store(tmp_path: Path) -> None:
    lite = str(tmp_path / "milvus.db")
    assert bm25_persist_dir(lite, "docs") == Path(f"{lite}.bm25") / "docs"
    assert bm25_persist_dir("http://127.0.0.1:19530", "docs", tmp_path) == tmp_path / "docs"
    with pytest.raises(ValueError, match="http://127.0.0.1:19530"):
        bm25_persist_dir("http://127.0.0.1:19530", "docs")
    with pytest.raises(ValueError, match="'a/b'"):
        bm25_persist_dir(lite, "a/b")


def test_top_k_indices_positive_only_and_ties_by_index() -> None:
    scores = np.array([0.0, 2.0, 1.0, 2.0, -1.0])
    assert top_k_indices(scores, 10) == [1, 3, 2]
    assert top_k_indices(scores, 2) == [1, 3]
    assert top_k_indices(np.zeros(3), 2) == []
