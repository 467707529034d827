"""Segmentation on the shared public corpora: invariants at scale (speed relative to core is
measured in benchmarks/bench_sentence_split.py, never asserted here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_ext_advrag.text import split_sentences

pytestmark = pytest.mark.dataset


def squad_contexts(path: Path) -> list[str]:
    if not path.exists():
        pytest.skip(f"{path} not present")
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    return [paragraph["context"] for article in data for paragraph in article["paragraphs"]]


def assert_partition(text: str) -> None:
    previous_end = 0
    covered = 0
    for sentence in split_sentences(text):
        assert text[sentence.start : sentence.end] == sentence.text
        assert sentence.start >= previous_end
        previous_end = sentence.end
        covered += sum(not char.isspace() for char in sentence.text)
    assert covered == sum(not char.isspace() for char in text)


@pytest.mark.parametrize(
    ("relative_path", "max_chars"),
    [("covidqa/200423_covidQA.json", 2000), ("cmrc2018/cmrc2018_dev.json", 400)],
)
def test_real_corpora_are_partitioned_into_sentences_of_sane_size(
    shared_datasets: Path, relative_path: str, max_chars: int
) -> None:
    contexts = squad_contexts(shared_datasets / relative_path)
    lengths = []
    for context in contexts:
        assert_partition(context)
        lengths.extend(len(sentence.text) for sentence in split_sentences(context))
    lengths.sort()
    assert lengths[-1] <= max_chars
    assert lengths[len(lengths) // 2] >= 20  # no shredding into fragments


def test_seed_article_keeps_titles_apart_from_paragraphs(shared_datasets: Path) -> None:
    path = shared_datasets / "seed_scenarios" / "wukong_wiki.txt"
    if not path.exists():
        pytest.skip(f"{path} not present")
    text = path.read_text(encoding="utf-8")
    assert_partition(text)
    sentences = [sentence.text for sentence in split_sentences(text)]
    assert "玩法" in sentences
    assert any(
        sentence.startswith("《黑神话：悟空》是一款动作角色扮演游戏") for sentence in sentences
    )
