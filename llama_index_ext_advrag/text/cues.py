"""Cheap entity and keyword cues, for telling whether two passages talk about the same things.

Chinese runs are cut with jieba (dictionary part-of-speech tags; words jieba's HMM discovers
outside its dictionary, typically names, are kept as proper nouns). Latin text contributes
capitalised terms that do not open a sentence, all-caps acronyms, identifiers (``snake_case``,
``CamelCase``, ``dotted.names``) and anything with a digit (``COVID-19``, ``2023``, ``3.14``).
Cues are lower-cased; stop words and one-character tokens are dropped.
"""

from __future__ import annotations

import logging
import re

from llama_index_ext_advrag.text.charsets import (
    CHINESE_STOP_WORDS,
    ENGLISH_STOP_WORDS,
    HAN_RUN,
    load_jieba,
    words,
)

logger = logging.getLogger(__name__)

MIN_CUE_CHARS = 2

_LATIN_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[.\-][A-Za-z0-9_]+)*")
_CAMEL_CASE = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_HAS_DIGIT = re.compile(r"\d")
# Reference markers such as "[12]" or "[3, 4]" are not content.
_CITATION = re.compile(r"\[\d{1,3}(?:\s?[,\-–]\s?\d{1,3})*\]")
# Skipped when looking back from a word for the end of the previous sentence.
_LEADING_NOISE = frozenset(" \t\r\u3000\"'“‘«([（【「『《*-•#>")
_SENTENCE_BREAKS = frozenset("\n.!?:;。！？；：…")
# jieba part-of-speech tags kept: nouns, person/place/organisation names, other proper nouns.
_KEPT_TAG_PREFIXES = ("n",)

# Never cues, on top of the stop words: pronouns, auxiliaries, connectives, reference words.
_ENGLISH_NON_CUES = words(
    """a about above after again against all also although am among an and another any are
    as at be because been before being below between both but by can could did do does doing
    down during each either et al etc e.g i.e eg ie few for from further had has have having he
    her here hers herself him himself his how however i if in into is it its itself just let
    may me might more most must my myself no nor not now of off on once one only or other our
    ours ourselves out over own same shall she should since so some such than that the their
    theirs them themselves then there therefore these they this those though through thus to
    too under until up upon us very via vs was we were what when where whereas whether which
    while who whom whose why will with within without would yet you your yours yourself
    fig figs figure figures table tables eq ref refs section chapter page pp vol no mr mrs ms dr
    prof"""
)
# Acronyms that collide with stop words: "WHO", "US", "IT".
_ACRONYM_EXCEPTIONS = frozenset({"who", "us", "it"})
# Generic nouns that name no entity (jieba tags them as nouns).
_CHINESE_NON_CUES = words(
    """时候 时间 方面 问题 情况 部分 东西 地方 方式 过程 结果 原因 内容 之一 其中 一种 一个 这一
    两人 目前 现在 以后 之后 之前 以前 当时 同时 人们 大家 有人 事情 样子 作用 意义 影响 关系 方法"""
)
ENGLISH_CUE_STOP_WORDS = ENGLISH_STOP_WORDS | _ENGLISH_NON_CUES
CHINESE_CUE_STOP_WORDS = CHINESE_STOP_WORDS | _CHINESE_NON_CUES


def _chinese_cues(text: str) -> set[str]:
    """Nouns and proper nouns of at least two characters from the Han runs of ``text``."""
    runs = HAN_RUN.findall(text)
    if not runs:
        return set()
    jieba = load_jieba()
    cut, tags = jieba.lcut, jieba.posseg.dt.word_tag_tab
    cues: set[str] = set()
    for run in runs:
        if len(run) < MIN_CUE_CHARS:
            continue
        for word in cut(run):
            if len(word) < MIN_CUE_CHARS or word in CHINESE_CUE_STOP_WORDS:
                continue
            tag = tags.get(word)
            # Words missing from the dictionary were found by jieba's HMM: mostly names.
            if tag is None or tag.startswith(_KEPT_TAG_PREFIXES):
                cues.add(word)
    return cues


def _opens_sentence(text: str, start: int) -> bool:
    """Whether the word at ``start`` is the first word of a sentence, line or list item."""
    index = start - 1
    while index >= 0 and text[index] in _LEADING_NOISE:
        index -= 1
    return index < 0 or text[index] in _SENTENCE_BREAKS


def _latin_cues(text: str) -> set[str]:
    """Capitalised terms, acronyms, identifiers and numbers from the Latin part of ``text``."""
    cues: set[str] = set()
    text = _CITATION.sub(" ", text)
    for match in _LATIN_TOKEN.finditer(text):
        token = match.group()
        if len(token) < MIN_CUE_CHARS or (token.isalpha() and token.islower()):
            continue  # a plain lower-case word is never a cue (the common case, checked first)
        lowered = token.lower()
        if lowered in ENGLISH_CUE_STOP_WORDS and not (
            lowered in _ACRONYM_EXCEPTIONS and token.isupper()
        ):
            continue
        if (
            _HAS_DIGIT.search(token)
            or "_" in token
            or "." in token
            or _CAMEL_CASE.search(token)
            or (token.isupper() and sum(c.isalpha() for c in token) >= MIN_CUE_CHARS)
            or (token[0].isupper() and not _opens_sentence(text, match.start()))
        ):
            cues.add(lowered)
    return cues


def extract_cues(text: str) -> frozenset[str]:
    """Extract lower-cased entity and keyword cues from ``text``.

    Args:
        text: Chinese, English or mixed text, typically a sentence or a short passage.

    Returns:
        frozenset[str]: The cues; empty for text without any.

    Example:
        >>> sorted(extract_cues("In 2020 the WHO named COVID-19 after Wuhan reports."))
        ['2020', 'covid-19', 'who', 'wuhan']
    """
    if not text or text.isspace():
        return frozenset()
    return frozenset(_latin_cues(text) | _chinese_cues(text))


def cue_overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """Overlap coefficient of two cue sets: ``|a & b| / min(|a|, |b|)``.

    Returns 0.0 when either set is empty, 1.0 when one contains the other.

    Example:
        >>> cue_overlap(frozenset({"a", "b"}), frozenset({"b", "c", "d"}))
        0.5
    """
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))
