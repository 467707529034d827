"""embeddings/language.py beyond test_language.py: the model name read through wrappers (ten at
most), from a name attribute or none, normalised; a letterless document skipped, not ending
the count; a document exactly at the CJK threshold; the threshold kept in the result (kills the
module's mutants those tests leave)."""

from __future__ import annotations

from typing import Any

from llama_index_ext_advrag.embeddings.language import (
    corpus_languages,
    is_english_only,
    model_name_of,
)


class Named:
    def __init__(self, model_name: Any) -> None:
        self.model_name = model_name


class Wrapper:
    """A cache or similar wrapper: no name of its own, the wrapped model as ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner


def wrapped(model: Any, times: int) -> Any:
    for _ in range(times):
        model = Wrapper(model)
    return model


def test_the_name_is_read_lower_cased_with_dashes() -> None:
    assert model_name_of(Named("BAAI/bge_small_EN_v1.5")) == "baai/bge-small-en-v1.5"
    assert model_name_of("Intfloat/Multilingual_E5") == "intfloat/multilingual-e5"
    assert model_name_of(Named(None)) == "" and model_name_of(object()) == ""
    assert is_english_only(Named("all_MiniLM_L6_v2"))


def test_up_to_ten_wrappers_are_looked_through() -> None:
    model = Named("BAAI/bge-small-en-v1.5")
    assert model_name_of(wrapped(model, 1)) == "baai/bge-small-en-v1.5"
    assert model_name_of(wrapped(model, 10)) == "baai/bge-small-en-v1.5"
    assert model_name_of(wrapped(model, 11)) == ""  # the eleventh wrapper has no name
    assert is_english_only(wrapped(model, 3)) and not is_english_only(wrapped(model, 11))


def test_a_document_without_letters_is_skipped_not_the_end() -> None:
    found = corpus_languages(["123", "Plain English text.", "渡灯节"])
    assert (found.documents, found.chinese_documents) == (2, 1)


def test_a_document_exactly_at_the_threshold_is_chinese_and_the_threshold_is_kept() -> None:
    found = corpus_languages(["ab巴黎"])  # 2 CJK of 4 letters
    assert found.chinese_documents == 1 and found.mostly_cjk == 0.5
    assert corpus_languages(["ab巴黎"], mostly_cjk=0.6).mostly_cjk == 0.6
