"""Word tokenisation contracts the main tests left open (found by mutation testing).

One stemmer per thread and language, the mode error naming the argument, the JSON-ready
``to_dict``, and ``cjk_share`` over several CJK runs.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from llama_index_ext_advrag.text.words import WordTokenizer, cjk_share, cut_chinese


def _in_fresh_thread(work: Any) -> Any:
    """Run ``work()`` in a new thread (its thread-local stemmer cache starts empty)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # re-raised in the calling thread
            box["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def stemmer_constructions(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Record every PyStemmer construction as ``(language, thread id)``."""
    import Stemmer

    made: list[tuple[str, int]] = []
    real = Stemmer.Stemmer

    def counting(language: str) -> Any:
        made.append((language, threading.get_ident()))
        return real(language)

    monkeypatch.setattr(Stemmer, "Stemmer", counting)
    return made


def test_a_new_thread_stems_without_an_earlier_call() -> None:
    # The thread-local cache is empty in a new thread: it must be created, then filled.
    tokens = _in_fresh_thread(lambda: WordTokenizer(stemmer_language="german")("Häuser Häusern"))
    assert tokens == ["haus", "haus"]


def test_one_stemmer_per_thread_and_language(
    stemmer_constructions: list[tuple[str, int]],
) -> None:
    def stem_twice() -> list[str]:
        tokenizer = WordTokenizer(stemmer_language="dutch")  # builds (and caches) the stemmer
        return tokenizer("fietsen lopen") + tokenizer("fietsen")

    assert _in_fresh_thread(stem_twice) == ["fiets", "lop", "fiets"]
    assert [language for language, _ in stemmer_constructions] == ["dutch"]
    # Another thread gets its own (PyStemmer objects are not thread-safe).
    _in_fresh_thread(stem_twice)
    assert [language for language, _ in stemmer_constructions] == ["dutch", "dutch"]


def test_unknown_stemmer_language_message_says_why() -> None:
    with pytest.raises(ValueError, match="'klingon' is not a PyStemmer language"):
        WordTokenizer(stemmer_language="klingon")


def test_cut_chinese_parses_a_mode_string_and_names_a_bad_one() -> None:
    assert cut_chinese("首富来自美国", "accurate") == ["首富", "来自", "美国"]
    with pytest.raises(ValueError, match=r"^mode='fast' is not one of: search, accurate$"):
        cut_chinese("首富来自美国", "fast")  # type: ignore[arg-type]


def test_to_dict_is_plain_json_data() -> None:
    data = WordTokenizer(chinese_mode="accurate").to_dict()
    assert type(data["chinese_mode"]) is str and data["chinese_mode"] == "accurate"
    assert json.loads(json.dumps(data)) == data


def test_cjk_share_counts_every_cjk_run_once() -> None:
    # 4 CJK letters (two runs of two) among 4 + 3 letters.
    assert cjk_share("中文 and 中文") == pytest.approx(4 / 7)
    assert cjk_share("中 a 文 b 字") == pytest.approx(3 / 5)


@pytest.mark.parametrize("mode", ["search", "accurate"])
def test_cut_chinese_finds_words_missing_from_the_dictionary(mode: str) -> None:
    # jieba's HMM joins 杭研, which its dictionary does not hold; without it: 杭, 研.
    words = cut_chinese("他来到了网易杭研大厦", mode)  # type: ignore[arg-type]
    assert "杭研" in words and "杭" not in words
