"""Probe questions made from the documents, offline and with a (scripted) LLM through
LlamaIndex's ``DatasetGenerator``."""

from __future__ import annotations

from collections import Counter

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.schema import Document

from llama_index_ext_advrag.evaluation.probes import (
    MASKED_TERMS,
    ProbeStyle,
    make_probe_questions,
    mask_terms,
    offline_probe,
    terms_by_rarity,
)
from llama_index_ext_advrag.text.words import WordTokenizer

TEXT = (
    "The Ferro pump draws water from the lower tank through a stainless steel filter cartridge. "
    "The cooling fan of the housing starts automatically once the temperature reaches forty "
    "degrees Celsius. Operators must clean the intake filter cartridge every second week to "
    "keep the flow rate stable. 渡灯节是烬川最盛大的节日，在每年七月初七举行，人们把青焰灯放入河中祈福。"
)
DOCS = [Document(text=TEXT, id_="doc")]


def rarest(sentence: str, count: int) -> list[str]:
    """The sentence's rarest terms over DOCS, computed here from the sentences' word sets."""
    tokenizer = WordTokenizer(stem=False, chinese_mode="accurate", chinese_characters=False)
    from llama_index_ext_advrag.text import split_sentences

    units = [u.text for u in split_sentences(TEXT)]
    frequency = Counter(t for u in units for t in set(tokenizer(u)))
    return terms_by_rarity(sentence, frequency, len(units), tokenizer)[:count]


def test_offline_probes_do_not_hand_over_the_rarest_words() -> None:
    probes = make_probe_questions(DOCS, count=4, seed=1)
    assert len(probes) == 4
    for probe in probes:
        [[sentence]] = probe.answer_groups
        assert sentence in TEXT
        assert probe.evidence_texts == (sentence,) and probe.evidence_docs == ("doc",)
        assert probe.probe and probe.type == "probe" and probe.extra["probe_kind"] == "masked"
        assert probe.question != sentence
        hidden = rarest(sentence, MASKED_TERMS)
        assert hidden and not any(term in probe.question.lower() for term in hidden), (
            probe.question,
            hidden,
        )
        assert len(probe.question) >= len(sentence) / 3  # most of the sentence is still asked
    assert [p.question for p in make_probe_questions(DOCS, count=4, seed=1)] == [
        p.question for p in probes
    ]  # same seed, same probes


def test_mask_terms_takes_out_whole_words_in_any_case() -> None:
    assert (
        mask_terms("The Ferro pump, the ferrous pipe.", ["ferro"]) == "The pump, the ferrous pipe."
    )
    assert mask_terms("渡灯节在七月初七举行。", ["渡灯节", "七月初七"]) == "在举行。"


def test_styles_by_hand() -> None:
    frequency = Counter({"pump": 1, "water": 5, "tank": 5, "ferro": 1, "draws": 4, "lower": 8,
                         "from": 9})  # fmt: skip
    sentence = "The Ferro pump draws water from the lower tank."
    query, answer = offline_probe(sentence, frequency, 10, ProbeStyle.MASKED)
    # rarest: ferro, pump (1 sentence each), then draws (4): taken out
    assert query == "The water from the lower tank." and answer == sentence
    query, answer = offline_probe(sentence, frequency, 10, "cloze")
    assert query == "The water from the lower tank." and answer == "ferro"
    query, answer = offline_probe(sentence, frequency, 10, "common")
    assert query == "pump draws water from lower tank"  # all but the rarest (ferro)
    with pytest.raises(ValueError, match="style"):
        offline_probe(sentence, frequency, 10, "rarest")


def test_llm_probes_use_llamaindex_generation_and_fall_back_on_an_echo() -> None:
    llm = ScriptedLLM(lambda prompt: "1. How often must the filter be cleaned?")
    [probe] = make_probe_questions(DOCS[:1], count=1, llm=llm, seed=3)
    # LlamaIndex's DatasetGenerator strips the numbering of the reply
    assert probe.question == "How often must the filter be cleaned?"
    assert probe.extra["probe_kind"] == "llm"
    [[gold]] = probe.answer_groups
    assert gold in llm.prompts[0] and "Sentence: " in llm.prompts[0]
    assert len(llm.prompts) == 1
    echo = ScriptedLLM(lambda prompt: prompt.split("Sentence: ")[1].split("\n")[0])
    [fallback] = make_probe_questions(DOCS[:1], count=1, llm=echo, seed=3)
    assert fallback.extra["probe_kind"] == "masked" and "llm_fallback" in fallback.extra
    assert fallback.question == make_probe_questions(DOCS[:1], count=1, seed=3)[0].question
