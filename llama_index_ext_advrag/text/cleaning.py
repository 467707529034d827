"""Text every later stage can encode, and sentences short enough to store.

Two kinds of input pass the segmenter but break a later stage far from the cause:

* **lone surrogates** (``"\\ud800"``, left by a bad decode or a JSON ``\\ud83d`` escape): hashing,
  tokenizers, embedding models and Milvus all encode to UTF-8 and fail with a
  ``UnicodeEncodeError`` or a ``TypeError``. :func:`replace_lone_surrogates` joins surrogate
  pairs back into their character and replaces the others with U+FFFD, counting them.
* **sentences without an end**: 5 MB without punctuation, or one 200 KB "word", is one sentence,
  so one node, which Milvus then refuses ("VARCHAR exceeds 65535") after it was embedded.
  :func:`cut_long_sentences` cuts a sentence longer than a bound into pieces at whitespace (or,
  failing that, between characters), keeping the offsets exact.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from llama_index_ext_advrag.text.sentences import Sentence

logger = logging.getLogger(__name__)

REPLACEMENT_CHARACTER = "\ufffd"
# A window of three such sentences stays under Milvus' 65,535-byte VARCHAR limit even in CJK
# text (3 bytes a character), and a code block or a long legal sentence is rarely longer.
DEFAULT_MAX_SENTENCE_CHARS = 4_000
MIN_MAX_SENTENCE_CHARS = 100
_SURROGATE = re.compile("[\ud800-\udfff]")
# Where a long sentence is best cut, in order of preference (searched in its second half).
_SOFT_BREAKS = (re.compile(r"\s+"), re.compile(r"[,;:，、；：)）\]】」』》]"))


def has_lone_surrogates(text: str) -> bool:
    """Whether ``text`` holds a surrogate code point (it cannot be encoded to UTF-8).

    >>> has_lone_surrogates("ok"), has_lone_surrogates("bad \\ud800")
    (False, True)
    """
    return _SURROGATE.search(text) is not None


def replace_lone_surrogates(text: str) -> tuple[str, int]:
    """``text`` with surrogate pairs joined and lone surrogates replaced by U+FFFD.

    Returns:
        tuple[str, int]: The clean text and how many surrogate code points ``text`` held.

    Example:
        >>> replace_lone_surrogates("a\\ud800b")
        ('a\\ufffdb', 1)
        >>> replace_lone_surrogates("\\ud83d\\ude00") == ("\\U0001f600", 2)
        True
    """
    found = len(_SURROGATE.findall(text))
    if not found:
        return text, 0
    clean = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return clean, found


def check_text(text: Any, name: str = "text") -> tuple[str, int]:
    """``text`` with its lone surrogates replaced, and how many there were.

    Raises:
        TypeError: ``text`` is not a str (the message names ``name`` and the type).

    Example:
        >>> check_text("a\\ud800")
        ('a\\ufffd', 1)
    """
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return replace_lone_surrogates(text)


def check_texts(texts: Any, name: str = "texts") -> tuple[list[str], int]:
    """``texts`` as a new list of strings with lone surrogates replaced, and how many there were.

    Raises:
        TypeError: ``texts`` is a single str or not iterable, or an item is not a str (the
            message names its position and type, e.g. ``texts[3] must be a str, got NoneType``).

    Example:
        >>> check_texts(["ok", "bad \\ud800"])
        (['ok', 'bad \\ufffd'], 1)
    """
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a sequence of str, got a single str; wrap it in a list")
    try:
        items = list(texts)
    except TypeError:
        raise TypeError(f"{name} must be a sequence of str, got {type(texts).__name__}") from None
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise TypeError(f"{name}[{index}] must be a str, got {type(text).__name__}")
    cleaned, count = clean_value(items)
    return list(cleaned), count


def clean_value(value: Any) -> tuple[Any, int]:
    """``value`` with :func:`replace_lone_surrogates` applied to every string inside it (dict
    keys and values, list and tuple items); other values are returned as they are. The input
    is not modified."""
    if isinstance(value, str):
        return replace_lone_surrogates(value)
    if isinstance(value, Mapping):
        total, out = 0, {}
        for key, item in value.items():
            clean_key, key_count = clean_value(key)
            clean_item, item_count = clean_value(item)
            out[clean_key] = clean_item
            total += key_count + item_count
        return (out, total) if total else (value, 0)
    if isinstance(value, (list, tuple)):
        cleaned = [clean_value(item) for item in value]
        total = sum(count for _, count in cleaned)
        if not total:
            return value, 0
        items = [item for item, _ in cleaned]
        return (items if isinstance(value, list) else tuple(items)), total
    return value, 0


def _cut_point(text: str, start: int, limit: int) -> int:
    """Where to end the piece of ``text`` that starts at ``start`` and may reach ``limit``:
    after the last whitespace or clause punctuation in its second half, else at ``limit``
    moved back off a combining mark (a letter keeps its accents)."""
    floor = start + (limit - start) // 2
    for pattern in _SOFT_BREAKS:
        last = None
        for last in pattern.finditer(text, floor, limit):  # noqa: B007 - the last match
            pass
        if last is not None and last.end() > start:
            return last.end()
    cut = limit
    while cut > floor and unicodedata.combining(text[cut]):
        cut -= 1
    return cut


def cut_long_sentences(
    text: str, sentences: Sequence[Sentence], max_chars: int = DEFAULT_MAX_SENTENCE_CHARS
) -> tuple[list[Sentence], int]:
    """Cut every sentence longer than ``max_chars`` characters into pieces of at most
    ``max_chars``, at whitespace or clause punctuation where there is some.

    Each piece is a :class:`Sentence` of ``text`` (``text[p.start:p.end] == p.text``, no
    surrounding whitespace) with ``cut=True`` and the section of its sentence; a heading keeps
    ``is_heading`` on its first piece only.

    Args:
        text: The source the sentences were split from.
        sentences: :func:`~llama_index_ext_advrag.text.split_sentences` output for ``text``.
        max_chars: The longest sentence kept whole (at least :data:`MIN_MAX_SENTENCE_CHARS`).

    Returns:
        tuple[list[Sentence], int]: The sentences with the long ones replaced by their pieces, and
            how many were cut.

    Raises:
        ValueError: ``max_chars`` below :data:`MIN_MAX_SENTENCE_CHARS`.

    Example:
        >>> from llama_index_ext_advrag.text import split_sentences
        >>> source = "aaa bbb ccc ddd. Short."
        >>> pieces, cut = cut_long_sentences(source, split_sentences(source), max_chars=100)
        >>> cut
        0
    """
    if max_chars < MIN_MAX_SENTENCE_CHARS:
        raise ValueError(
            f"max_chars must be at least {MIN_MAX_SENTENCE_CHARS} characters, got {max_chars!r}"
        )
    if all(s.end - s.start <= max_chars for s in sentences):
        return list(sentences), 0
    out: list[Sentence] = []
    cut = 0
    for sentence in sentences:
        if sentence.end - sentence.start <= max_chars:
            out.append(sentence)
            continue
        cut += 1
        start = sentence.start
        while start < sentence.end:
            end = sentence.end if sentence.end - start <= max_chars else None
            if end is None:
                end = _cut_point(text, start, start + max_chars)
            piece = text[start:end]
            stripped = piece.strip()
            if stripped:
                offset = start + len(piece) - len(piece.lstrip())
                out.append(
                    replace(
                        sentence,
                        text=stripped,
                        start=offset,
                        end=offset + len(stripped),
                        is_heading=sentence.is_heading and not _follows_piece(out, sentence),
                        cut=True,
                    )
                )
            start = end
    return out, cut


def _follows_piece(out: Sequence[Sentence], sentence: Sentence) -> bool:
    """Whether the last sentence in ``out`` is a piece of ``sentence`` (same source span)."""
    return bool(out) and out[-1].cut and sentence.start <= out[-1].start < sentence.end


__all__ = [
    "DEFAULT_MAX_SENTENCE_CHARS",
    "MIN_MAX_SENTENCE_CHARS",
    "REPLACEMENT_CHARACTER",
    "check_text",
    "check_texts",
    "clean_value",
    "cut_long_sentences",
    "has_lone_surrogates",
    "replace_lone_surrogates",
]
