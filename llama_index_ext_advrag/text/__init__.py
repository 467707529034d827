"""Text cutting shared by every component: sentences, sections, entity cues, token counts.

This package is the one place text is cut, so that all parsers, retrievers and
postprocessors agree on what a sentence, a section and a token are.
"""

from llama_index_ext_advrag.text.cues import cue_overlap, extract_cues
from llama_index_ext_advrag.text.sections import Section, find_sections
from llama_index_ext_advrag.text.sentences import Sentence, paragraph_breaks, split_sentences
from llama_index_ext_advrag.text.tokens import count_tokens

__all__ = [
    "Section",
    "Sentence",
    "count_tokens",
    "cue_overlap",
    "extract_cues",
    "find_sections",
    "paragraph_breaks",
    "split_sentences",
]
