"""Probe questions made from the documents, for corpora without labelled questions.

A probe is a proxy, not a labelled question: a sentence is sampled from the corpus and its
gold evidence is the sentence itself. Probes are reported apart from labelled runs.

- Offline (no LLM), ``style="masked"`` (default): the query is the sentence with its
  ``MASKED_TERMS`` most distinctive words (highest inverse sentence frequency in the corpus)
  taken out, the rest left as written; the gold answer is the sentence. The rare words a
  lexical retriever would match exactly are what a real question usually does *not* know (they
  are the answer, or a name the asker does not have), so neither BM25 nor a dense retriever
  gets them handed over. ``"cloze"`` asks the same query with only the rarest word as the gold
  answer (like an extractive QA answer); ``"common"`` keeps only the sentence's
  ``COMMON_TERMS`` most frequent content words. How each style ranks pipelines compared with
  real questions is measured in docs/compare.md.
- With an LLM: LlamaIndex's question generator writes one question per sampled sentence
  (:class:`~llama_index.core.evaluation.DatasetGenerator`: ``generate_question_context_pairs``
  and ``RagDatasetGenerator`` are no longer in llama-index-core 0.14); a failed, empty or
  echoing reply falls back to the offline probe, recorded in ``extra``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import re
import warnings
from collections import Counter
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any

from llama_index.core.schema import Document, TextNode

from llama_index_ext_advrag._enums import parse_enum
from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.plan import plain_timeout, run_within
from llama_index_ext_advrag.text import count_tokens, split_sentences

logger = logging.getLogger(__name__)

DEFAULT_PROBE_LLM_TIMEOUT = 120.0

DEFAULT_PROBES = 40
MIN_SENTENCE_TOKENS = 12
MAX_SENTENCE_TOKENS = 80
MASKED_TERMS = 3
COMMON_TERMS = 6
QUESTION_QUERY = (
    "Write one question, in the language of the sentence, that is answered by the sentence "
    "above. Do not copy the sentence. Reply with the question only."
)
# what LlamaIndex's response synthesizer returns for an empty LLM reply: no question
LLAMA_INDEX_EMPTY_RESPONSE = "Empty Response"
QUESTION_TEMPLATE = "Sentence: {context_str}\n\n{query_str}\nQuestion:"


class ProbeStyle(str, Enum):
    """How an offline probe query is made from its sentence (module docstring)."""

    MASKED = "masked"
    CLOZE = "cloze"
    COMMON = "common"


DEFAULT_PROBE_STYLE = ProbeStyle.MASKED


def surface_tokenizer() -> Any:
    """Words as written (one jieba cut for Chinese), lower-cased, stop words dropped."""
    from llama_index_ext_advrag.text.words import ChineseMode, WordTokenizer

    return WordTokenizer(stem=False, chinese_mode=ChineseMode.ACCURATE, chinese_characters=False)


def _terms(text: str, tokenizer: Any) -> list[str]:
    return [t for t in tokenizer(text) if len(t) > 1 or not t.isascii()]


def terms_by_rarity(
    sentence: str, document_frequency: Counter[str], sentences: int, tokenizer: Any = None
) -> list[str]:
    """The sentence's distinct content terms, rarest in the corpus first (ties: reading order)."""
    seen = list(dict.fromkeys(_terms(sentence, tokenizer or surface_tokenizer())))
    return sorted(
        seen,
        key=lambda t: (-math.log((sentences + 1) / (document_frequency[t] + 1)), seen.index(t)),
    )


def mask_terms(sentence: str, terms: Sequence[str]) -> str:
    """``sentence`` with every occurrence of ``terms`` taken out (whole words, any case)."""
    text = sentence
    for term in terms:
        if term.isascii():
            text = re.sub(rf"(?<!\w){re.escape(term)}(?!\w)", " ", text, flags=re.IGNORECASE)
        else:
            text = text.replace(term, "")
    return re.sub(r"\s+", " ", text).strip()


def _join(terms: Sequence[str]) -> str:
    return "".join(terms) if all(not t.isascii() for t in terms) else " ".join(terms)


# style -> (query, answer) from (sentence, terms rarest first, terms in reading order)
_STYLES: dict[ProbeStyle, Callable[[str, list[str], list[str]], tuple[str, str]]] = {
    ProbeStyle.MASKED: lambda s, rare, _: (mask_terms(s, rare[:MASKED_TERMS]), s),
    ProbeStyle.CLOZE: lambda s, rare, _: (
        mask_terms(s, rare[:MASKED_TERMS]),
        rare[0] if rare else s,
    ),
    ProbeStyle.COMMON: lambda s, rare, order: (
        _join([t for t in order if t in set(rare[::-1][:COMMON_TERMS])]),
        s,
    ),
}


def offline_probe(
    sentence: str,
    document_frequency: Counter[str],
    sentences: int,
    style: ProbeStyle | str = DEFAULT_PROBE_STYLE,
    tokenizer: Any = None,
) -> tuple[str, str]:
    """``(query, gold answer)`` of an offline probe for ``sentence`` in ``style``."""
    chosen = parse_enum(ProbeStyle, style, "style")
    tokenizer = tokenizer or surface_tokenizer()
    rare = terms_by_rarity(sentence, document_frequency, sentences, tokenizer)
    order = list(dict.fromkeys(_terms(sentence, tokenizer)))
    return _STYLES[chosen](sentence, rare, order)


def sample_sentences(
    documents: Sequence[Document], count: int, seed: int = 0
) -> list[tuple[str, str]]:
    """(document id, sentence) pairs: ``count`` sentences of moderate length, sampled with
    ``seed``, spread over the documents in proportion to their sentences; headings and
    table rows are left out."""
    pool: list[tuple[str, str]] = []
    for document in documents:
        if document.metadata.get("sheet_name"):
            continue
        for sentence in split_sentences(document.text):
            text = sentence.text.strip()
            if sentence.is_heading or "|" in text:
                continue
            if MIN_SENTENCE_TOKENS <= count_tokens(text) <= MAX_SENTENCE_TOKENS:
                pool.append((document.id_, text))
    if not pool:
        return []
    rng = random.Random(seed)
    chosen = rng.sample(pool, min(count, len(pool)))
    return sorted(chosen, key=pool.index)


def llm_question(llm: Any, sentence: str, timeout: float | None) -> str:
    """One question about ``sentence`` written by LlamaIndex's ``DatasetGenerator`` (the first
    line of the reply, numbering stripped by LlamaIndex); ``""`` when it wrote none.

    Raises:
        TimeoutError: no reply within ``timeout`` seconds; the LLM's own errors pass through.
    """
    from llama_index.core.evaluation import DatasetGenerator
    from llama_index.core.prompts import PromptTemplate

    def generate() -> list[str]:
        # DatasetGenerator forces a deprecation warning on every use: kept out of the terminal
        with warnings.catch_warnings(record=True) as caught:
            generator = DatasetGenerator(
                [TextNode(text=sentence)],
                llm=llm,
                num_questions_per_chunk=1,
                text_question_template=PromptTemplate(QUESTION_TEMPLATE),
                question_gen_query=QUESTION_QUERY,
            )
            # its sync method hides the LLM's RuntimeErrors behind "nested async": run the
            # async one in this worker thread's own loop instead
            questions = list(asyncio.run(generator.agenerate_questions_from_nodes()))
        for warning in caught:
            logger.debug("DatasetGenerator: %s", warning.message)
        return questions

    # in a thread of its own (never the caller's event loop), the wait bounded by ``timeout``
    written = [
        q.strip()
        for q in run_within(generate, timeout, "the LLM", thread=True, error=plain_timeout)
    ]
    written = [q for q in written if q and q != LLAMA_INDEX_EMPTY_RESPONSE]
    return written[0] if written else ""


def make_probe_questions(
    documents: Sequence[Document],
    count: int = DEFAULT_PROBES,
    llm: Any = None,
    seed: int = 0,
    llm_timeout: float | None = DEFAULT_PROBE_LLM_TIMEOUT,
    style: ProbeStyle | str = DEFAULT_PROBE_STYLE,
) -> list[Question]:
    """Probe questions for ``documents`` (see the module docstring). An LLM call that fails,
    takes over ``llm_timeout`` seconds or echoes the sentence gives the offline probe
    (``extra["llm_fallback"]`` says why).

    Raises:
        ValueError: an unknown ``style`` (the allowed ones are named).
    """
    chosen = parse_enum(ProbeStyle, style, "style")
    sampled = sample_sentences(documents, count, seed)
    tokenizer = surface_tokenizer()
    frequency: Counter[str] = Counter()
    total = 0
    for document in documents:
        for unit in split_sentences(document.text):
            frequency.update(set(_terms(unit.text, tokenizer)))
            total += 1
    probes = []
    for index, (doc_id, sentence) in enumerate(sampled, start=1):
        query, answer = offline_probe(sentence, frequency, total, chosen, tokenizer)
        extra: dict[str, Any] = {"probe_kind": chosen.value}
        if llm is not None:
            try:
                written, failure = llm_question(llm, sentence, llm_timeout), None
            except Exception as exc:  # a failed call falls back to the offline probe, recorded
                logger.warning("probe question %d: the LLM call failed: %r", index, exc)
                written, failure = "", f"LLM error: {exc!r}"
            if len(written) >= 5 and written.casefold() != sentence.casefold():
                query, answer, extra = written, sentence, {"probe_kind": "llm"}
            else:
                extra["llm_fallback"] = (failure or written or "empty reply")[:200]
        if not query.strip():
            continue
        probes.append(
            Question(
                id=f"probe{index:03d}",
                question=query,
                answer_groups=((answer,),),
                evidence_texts=(sentence,),
                evidence_docs=(doc_id,),
                type="probe",
                source=doc_id,
                probe=True,
                extra=extra,
            )
        )
    logger.info("Made %d probe questions (%s)", len(probes), "llm" if llm else chosen.value)
    return probes


__all__ = [
    "DEFAULT_PROBE_STYLE",
    "ProbeStyle",
    "llm_question",
    "make_probe_questions",
    "mask_terms",
    "offline_probe",
    "sample_sentences",
    "terms_by_rarity",
]
