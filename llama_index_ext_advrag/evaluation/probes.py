"""Probe questions made from the documents, for corpora without labelled questions.

A probe is a proxy, not a labelled question: a sentence is sampled from the corpus and its
gold (answer and evidence) is the sentence itself, so coverage means "the sampled sentence is
inside the context". Probes are reported apart from labelled runs.

- Offline (no LLM): the query is the sentence's most distinctive words (highest inverse
  sentence frequency in the corpus), ordered by distinctiveness rather than as written, so the
  sentence's own wording is not handed to the retriever verbatim.
- With an LLM: the LLM writes a question that the sentence answers (one call per probe; an
  empty or echoing answer falls back to the keyword query, recorded in ``extra``).
"""

from __future__ import annotations

import logging
import math
import random
from collections import Counter
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import Document

from llama_index_ext_advrag.evaluation.questions import Question
from llama_index_ext_advrag.llm_calls import complete_within
from llama_index_ext_advrag.text import count_tokens, split_sentences

logger = logging.getLogger(__name__)

DEFAULT_PROBE_LLM_TIMEOUT = 120.0

DEFAULT_PROBES = 40
MIN_SENTENCE_TOKENS = 12
MAX_SENTENCE_TOKENS = 80
KEYWORDS = 6
QUESTION_PROMPT = (
    "Write one question, in the language of the sentence, that is answered by the sentence "
    "below. Do not copy the sentence. Reply with the question only.\n\nSentence: {sentence}\n"
    "Question:"
)


def surface_tokenizer() -> Any:
    """Words as written (jieba words for Chinese), lower-cased, stop words dropped."""
    from llama_index_ext_advrag.text.words import WordTokenizer

    return WordTokenizer(stem=False, chinese_characters=False)


def _terms(text: str, tokenizer: Any) -> list[str]:
    return [t for t in tokenizer(text) if len(t) > 1 or not t.isascii()]


def keyword_query(
    sentence: str, document_frequency: Counter[str], sentences: int, tokenizer: Any = None
) -> str:
    """The sentence's ``KEYWORDS`` most distinctive terms, most distinctive first."""
    seen = list(dict.fromkeys(_terms(sentence, tokenizer or surface_tokenizer())))
    scored = sorted(
        seen,
        key=lambda t: (-math.log((sentences + 1) / (document_frequency[t] + 1)), seen.index(t)),
    )
    chosen = scored[:KEYWORDS]
    joiner = "" if all(not t.isascii() for t in chosen) else " "
    return joiner.join(chosen)


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


def make_probe_questions(
    documents: Sequence[Document],
    count: int = DEFAULT_PROBES,
    llm: Any = None,
    seed: int = 0,
    llm_timeout: float | None = DEFAULT_PROBE_LLM_TIMEOUT,
) -> list[Question]:
    """Probe questions for ``documents`` (see the module docstring). An LLM call that fails
    or takes over ``llm_timeout`` seconds gives the keyword question (``llm_fallback``)."""
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
        query = keyword_query(sentence, frequency, total, tokenizer)
        extra: dict[str, Any] = {"probe_kind": "keywords"}
        if llm is not None:
            try:
                prompt = QUESTION_PROMPT.format(sentence=sentence)
                reply = complete_within(llm, prompt, llm_timeout)
                written, failure = str(reply.text or "").strip(), None
            except Exception as exc:  # a failed call falls back to keywords, recorded
                logger.warning("probe question %d: the LLM call failed: %r", index, exc)
                written, failure = "", f"LLM error: {exc!r}"
            written = written.splitlines()[0].strip() if written else ""
            if len(written) >= 5 and written.casefold() != sentence.casefold():
                query, extra = written, {"probe_kind": "llm"}
            else:
                extra = {"probe_kind": "keywords", "llm_fallback": (failure or written)[:200]}
        if not query.strip():
            continue
        probes.append(
            Question(
                id=f"probe{index:03d}",
                question=query,
                answer_groups=((sentence,),),
                evidence_texts=(sentence,),
                evidence_docs=(doc_id,),
                type="probe",
                source=doc_id,
                probe=True,
                extra=extra,
            )
        )
    logger.info("Made %d probe questions (%s)", len(probes), "llm" if llm else "keywords")
    return probes


__all__ = ["keyword_query", "make_probe_questions", "sample_sentences"]
