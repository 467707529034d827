"""Character classes, stop words and the jieba loader that every text function shares.

The classes are regex character-class bodies (ranges without the brackets), to be combined in
``[...]``: ``re.compile(f"[{HAN}]+")``. Each is defined once here; a function that needs a
narrower or wider set composes it from these parts and says why.

- :data:`CJK` is the union used wherever the question is "is this CJK text?" (sentence ends,
  list markers, the CJK share of a query): Han ideographs with their radicals, kana, bopomofo
  and Hangul syllables.
- :data:`HAN` and :data:`KANA` are what jieba cuts (:data:`JIEBA_CHARS`); Hangul and bopomofo
  are not in its dictionary.
- :data:`CJK_PUNCTUATION` and :data:`FULLWIDTH_FORMS` are the CJK symbol and full-width blocks
  (``。``, ``「``, ``，``, ``（``), which are not letters.
- :data:`CJK_TEXT` is :data:`CJK` with every CJK symbol block (punctuation, full-width forms,
  enclosed and compatibility characters, strokes): characters between which a space carries no
  meaning, and that no Latin-script token (a URL, an abbreviation) continues into.
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any

logger = logging.getLogger(__name__)

# --- character classes --------------------------------------------------------------------------

# Han ideographs: extension A, the unified block, compatibility ideographs, extensions B and up.
HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f"
CJK_RADICALS = "\u2e80-\u2fdf"  # CJK radicals supplement and Kangxi radicals
KANA = "\u3040-\u30ff"  # hiragana and katakana
BOPOMOFO = "\u3100-\u312f"
HANGUL = "\uac00-\ud7af"  # Hangul syllables
CJK = f"{CJK_RADICALS}{KANA}{BOPOMOFO}{HAN}{HANGUL}"
JIEBA_CHARS = f"{KANA}{HAN}"
CJK_PUNCTUATION = "\u3000-\u303f"  # CJK symbols and punctuation, with the ideographic space
FULLWIDTH_FORMS = "\uff00-\uffef"  # half-width and full-width forms

# Radicals to the end of the unified block (kana, bopomofo, the symbol blocks, Han extension
# A) and Hangul, compatibility ideographs, full-width forms, extensions B and up.
CJK_TEXT = f"\u2e80-\u9fff{HANGUL}\uf900-\ufaff{FULLWIDTH_FORMS}\U00020000-\U0002fa1f"

CJK_RUN = re.compile(f"[{CJK}]+")
HAN_RUN = re.compile(f"[{HAN}]+")


def is_cjk(char: str) -> bool:
    """Whether ``char`` belongs to :data:`CJK`.

    Example:
        >>> [is_cjk(c) for c in "a中か한。"]
        [False, True, True, True, False]
    """
    return CJK_RUN.fullmatch(char) is not None


def is_cjk_text(char: str) -> bool:
    """Whether ``char`` belongs to :data:`CJK_TEXT` (a CJK letter or CJK punctuation).

    Called once per candidate sentence end, so it compares code points instead of running a
    regex.

    Example:
        >>> [is_cjk_text(c) for c in "a中か한。，"]
        [False, True, True, True, True, True]
    """
    code = ord(char)  # the ranges of CJK_TEXT
    return (
        0x2E80 <= code <= 0x9FFF
        or 0xAC00 <= code <= 0xD7AF
        or 0xF900 <= code <= 0xFAFF
        or 0xFF00 <= code <= 0xFFEF
        or 0x20000 <= code <= 0x2FA1F
    )


# --- stop words ---------------------------------------------------------------------------------


def words(text: str) -> frozenset[str]:
    """A word list written as one whitespace-separated string."""
    return frozenset(text.split())


# Lucene's English stop words (the list bm25s ships as STOPWORDS_EN).
ENGLISH_STOP_WORDS = words(
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with"
)
# Chinese function words only: particles, pronouns, copulas, common prepositions. IDF handles
# the rest; a long list (bm25s ships 841 words) drops content words such as 上升 or 严重.
CHINESE_STOP_WORDS = words(
    "的 了 着 过 是 在 和 与 及 或 也 都 就 而 且 但 则 把 被 让 给 对 从 向 于 以 之 其 "
    "这 那 这个 那个 这些 那些 我 你 他 她 它 我们 你们 他们 她们 它们 吗 呢 吧 啊 呀 嘛 "
    "么 什么 哪 哪个 哪些 哪里 谁 怎么 怎样 如何 为什么 多少 几 有 没有 个 位 中 上 下 "
    "一个 所 为 由 等 并 又 还 很 更 最 已 已经 会 能 可以 将 要"
)

# --- jieba --------------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def load_jieba() -> Any:
    """Import jieba once, quietly, with its dictionary loaded; returns the ``jieba`` module.

    Loading the dictionary takes about a second; it happens on the first call, not at import.
    """
    import jieba
    import jieba.posseg  # noqa: F401 - the part-of-speech tables cues read

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba


__all__ = [
    "BOPOMOFO",
    "CHINESE_STOP_WORDS",
    "CJK",
    "CJK_PUNCTUATION",
    "CJK_RADICALS",
    "CJK_RUN",
    "CJK_TEXT",
    "ENGLISH_STOP_WORDS",
    "FULLWIDTH_FORMS",
    "HAN",
    "HAN_RUN",
    "HANGUL",
    "JIEBA_CHARS",
    "KANA",
    "is_cjk",
    "is_cjk_text",
    "load_jieba",
    "words",
]
