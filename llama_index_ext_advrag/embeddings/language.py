"""Which embedding models read only English, judged from the model's name, and which corpora
need one that reads Chinese, judged per document.

Hybrid fusion scales down a dense leg on Chinese text only when its model cannot read Chinese,
and :func:`~llama_index_ext_advrag.models.decide_embed_model` warns when such a model meets a
corpus with Chinese documents. Both ask :func:`is_english_only`; the corpus rule is
:func:`corpus_languages` + :func:`needs_multilingual`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from llama_index_ext_advrag.text.words import cjk_share

# A document counts as Chinese when at least half of its letters are CJK.
DEFAULT_MOSTLY_CJK = 0.5
# A corpus needs a model that reads Chinese when at least a fifth of its documents are Chinese:
# below that share an English model still serves most questions; at it, one question in five
# would meet passages the model cannot read (counting letters instead hid a corpus of half
# Chinese documents: long English documents made it 21% CJK by letters).
DEFAULT_CHINESE_DOCUMENTS = 0.2
SAMPLE_DOCUMENTS = 1_000  # documents read, spread evenly over the corpus
SAMPLE_CHARS = 2_000  # characters read from the start of each

# Checked first: a name with any of these reads Chinese (multilingual-e5-*, bge-m3, LaBSE,
# paraphrase-multilingual-*, bge-*-zh, text2vec-*-chinese, m3e, OpenAI's text-embedding-3).
MULTILINGUAL_PATTERNS = (
    r"multilingual",
    r"bge-m3",
    r"labse",
    r"xlm",
    r"-zh\b",
    r"\bzh-",
    r"chinese",
    r"m3e",
    r"text-embedding-3",
    r"jina-embeddings-v3",
    r"gte-multilingual",
)
# Then: known English-only families (all-MiniLM-*, all-mpnet-*, bge-*-en*, English e5-*-v2,
# gte-small/base/large, nomic-embed-text, msmarco-*, multi-qa-*).
ENGLISH_ONLY_PATTERNS = (
    r"minilm",
    r"mpnet",
    r"bge-[a-z]+-en",
    r"(^|/)e5-(small|base|large)",
    r"(^|/)gte-(small|base|large)",
    r"nomic-embed-text",
    r"msmarco",
    r"multi-qa",
)


def model_name_of(embed_model: Any) -> str:
    """The model name behind ``embed_model`` (a ``BaseEmbedding``, a wrapper exposing the
    wrapped model as ``inner``, or a name), lower-cased; ``""`` when it has none."""
    seen = 0
    while hasattr(embed_model, "inner") and seen < 10:  # unwrap caches and the like
        embed_model = embed_model.inner
        seen += 1
    name = embed_model if isinstance(embed_model, str) else getattr(embed_model, "model_name", "")
    return str(name or "").lower().replace("_", "-")


def is_english_only(embed_model: Any) -> bool:
    """Whether ``embed_model`` is known to read English only (so Chinese text is noise to it).

    Judged from the model name (a local folder's path counts, so the packaged
    all-MiniLM-L6-v2 is recognised): multilingual names (``multilingual``, ``bge-m3``,
    ``labse``, ``-zh``, ``chinese``, ...) are not English-only; known English families
    (``MiniLM``, ``mpnet``, ``bge-*-en``, English ``e5-*``, ...) are; an unknown name is not
    (nothing is muted on a guess). Wrappers with an ``inner`` model are looked through.

    Args:
        embed_model: a LlamaIndex ``BaseEmbedding``, a wrapper of one, or a model name.

    Example:
        >>> is_english_only("sentence-transformers/all-MiniLM-L6-v2")
        True
        >>> is_english_only("intfloat/multilingual-e5-small")
        False
        >>> is_english_only("BAAI/bge-m3")
        False
    """
    name = model_name_of(embed_model)
    if not name or any(re.search(p, name) for p in MULTILINGUAL_PATTERNS):
        return False
    return any(re.search(p, name) for p in ENGLISH_ONLY_PATTERNS)


@dataclass(frozen=True)
class CorpusLanguages:
    """How many documents of a corpus (sample) are mostly CJK.

    Attributes:
        documents: documents read that hold letters.
        chinese_documents: those whose letters are at least ``mostly_cjk`` CJK.
        letter_share: the CJK share of all letters read (for reference; not the rule).
        mostly_cjk: the per-document threshold used.
    """

    documents: int
    chinese_documents: int
    letter_share: float
    mostly_cjk: float = DEFAULT_MOSTLY_CJK

    @property
    def chinese_share(self) -> float:
        """The share of documents that are mostly CJK."""
        return self.chinese_documents / self.documents if self.documents else 0.0

    def describe(self) -> str:
        """One phrase for a decision's reason.

        >>> CorpusLanguages(10, 5, 0.21).describe()
        '5 of 10 documents mostly CJK (50%); letters 21% CJK'
        """
        return (
            f"{self.chinese_documents} of {self.documents} documents mostly CJK "
            f"({self.chinese_share:.0%}); letters {self.letter_share:.0%} CJK"
        )


def _spread(texts: Iterable[str], count: int) -> list[str]:
    """At most ``count`` texts, spread evenly over a sequence (a corpus sorted by language is
    read across, not only its start), or the first ``count`` of another iterable."""
    if isinstance(texts, Sequence) and not isinstance(texts, str) and len(texts) > count:
        step = len(texts) / count
        return [texts[int(i * step)] for i in range(count)]
    return list(islice(texts, count))


def corpus_languages(
    texts: Iterable[str] | None,
    mostly_cjk: float = DEFAULT_MOSTLY_CJK,
    max_documents: int = SAMPLE_DOCUMENTS,
    sample_chars: int = SAMPLE_CHARS,
) -> CorpusLanguages | None:
    """Count the mostly-CJK documents among ``texts`` (one text per document; at most
    ``max_documents`` spread over them, ``sample_chars`` from the start of each).

    Returns ``None`` without texts or without a letter in them.

    Example:
        >>> english = "The pump runs at 3.5 bar in normal operation. " * 20
        >>> found = corpus_languages([english] * 4 + ["渡灯节在每年七月初七举行。"])
        >>> found.chinese_documents, found.documents, found.letter_share < 0.05
        (1, 5, True)
    """
    if texts is None:
        return None
    documents = chinese = 0
    letters = cjk_letters = 0.0
    for text in _spread(texts, max_documents):
        head = text[:sample_chars]
        count = sum(map(str.isalpha, head))
        if not count:
            continue
        share = cjk_share(head)
        documents += 1
        chinese += share >= mostly_cjk
        letters += count
        cjk_letters += share * count
    if not documents:
        return None
    return CorpusLanguages(documents, chinese, round(cjk_letters / letters, 4), mostly_cjk)


def needs_multilingual(
    languages: CorpusLanguages | None, chinese_documents: float = DEFAULT_CHINESE_DOCUMENTS
) -> bool:
    """Whether a corpus needs an embedding model that reads Chinese: at least
    ``chinese_documents`` of its documents are mostly CJK.

    >>> needs_multilingual(CorpusLanguages(10, 2, 0.08)), needs_multilingual(CorpusLanguages(10, 1, 0.5))
    (True, False)
    """
    return languages is not None and languages.chinese_share >= chinese_documents


__all__ = [
    "DEFAULT_CHINESE_DOCUMENTS",
    "DEFAULT_MOSTLY_CJK",
    "ENGLISH_ONLY_PATTERNS",
    "MULTILINGUAL_PATTERNS",
    "CorpusLanguages",
    "corpus_languages",
    "is_english_only",
    "model_name_of",
    "needs_multilingual",
]
