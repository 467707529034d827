"""The candidate scan finds exactly the sentence-end candidates of ``_BOUNDARY.finditer``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llama_index_ext_advrag.text.sentences import _BOUNDARY, _boundaries

PIECES = [
    *"。！？｡；…⋯!?.,;:'\"”’）」』]）[【 \n\t\u3000",
    "..",
    "...",
    "[1]",
    "[3,4]",
    "http://",
    "https://",
    "ftp://",
    "www.",
    "htt",
    "ww.",
    "x.org/a?b=1.",
    "e.g.",
    "Dr.",
    "3.14",
    "Hello",
    "the",
    "中文",
    "A",
    "z",
    "h",
    "f",
    "w",
]
texts = st.one_of(
    st.text(),
    st.lists(st.sampled_from(PIECES), max_size=40).map("".join),
    st.text(alphabet="。.!?…hftpw:/ \n1a中」["),
)


def found(matches) -> list[tuple[int, int, str | None]]:
    return [(match.start(), match.end(), match.lastgroup) for match in matches]


@settings(max_examples=500, deadline=None)
@given(texts, st.integers(0, 50), st.integers(0, 50))
def test_scan_matches_finditer_on_any_text_and_range(text: str, start: int, length: int) -> None:
    start = min(start, len(text))
    end = min(len(text), start + length)
    assert found(_boundaries(text, start, end)) == found(_BOUNDARY.finditer(text, start, end))
    assert found(_boundaries(text, 0, len(text))) == found(_BOUNDARY.finditer(text))


def test_scan_matches_finditer_on_hand_made_cases() -> None:
    text = "See www.x.org. Then https://a.b/c?d=1. Also ftp://f.g! Yes?! 好。[9][10] End... Fig. 3"
    assert found(_boundaries(text, 0, len(text))) == found(_BOUNDARY.finditer(text))
    assert [text[a:b] for a, b, _ in found(_boundaries(text, 0, len(text)))][:3] == [
        "www.x.org",
        ".",
        "https://a.b/c?d=1",
    ]
    # The lookbehind sees the character before the range, as finditer's does.
    assert found(_boundaries("a..b", 2, 4)) == found(_BOUNDARY.finditer("a..b", 2, 4)) == []


def test_scan_matches_finditer_on_sample_data(data_dir: Path) -> None:
    for path in sorted(data_dir.glob("*.md")):
        text = path.read_text(encoding="utf-8")
        assert found(_boundaries(text, 0, len(text))) == found(_BOUNDARY.finditer(text)), path


@pytest.mark.dataset
def test_scan_matches_finditer_on_covidqa(shared_datasets: Path) -> None:
    path = shared_datasets / "covidqa" / "200423_covidQA.json"
    if not path.exists():
        pytest.skip(f"{path} not present")
    data = json.loads(path.read_text(encoding="utf-8"))["data"]
    for article in data:
        for paragraph in article["paragraphs"]:
            text = paragraph["context"]
            assert found(_boundaries(text, 0, len(text))) == found(_BOUNDARY.finditer(text))
