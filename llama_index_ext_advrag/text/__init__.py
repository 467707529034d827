"""Text cutting shared by every component: sentences, sections, entity cues, token counts.

This package is the one place text is cut, so that all parsers, retrievers and
postprocessors agree on what a sentence, a section and a token are.
"""

from llama_index_ext_advrag.text.cleaning import (
    DEFAULT_MAX_SENTENCE_CHARS,
    check_text,
    check_texts,
    clean_value,
    cut_long_sentences,
    has_lone_surrogates,
    replace_lone_surrogates,
)
from llama_index_ext_advrag.text.cues import cue_overlap, extract_cues
from llama_index_ext_advrag.text.sections import Section, find_sections
from llama_index_ext_advrag.text.sentences import Sentence, paragraph_breaks, split_sentences
from llama_index_ext_advrag.text.tokens import count_tokens, longest_prefix_within

__all__ = [
    "DEFAULT_MAX_SENTENCE_CHARS",
    "Section",
    "Sentence",
    "check_text",
    "check_texts",
    "clean_value",
    "count_tokens",
    "cut_long_sentences",
    "cue_overlap",
    "extract_cues",
    "find_sections",
    "has_lone_surrogates",
    "longest_prefix_within",
    "paragraph_breaks",
    "replace_lone_surrogates",
    "split_sentences",
]
