"""Probe questions made from the documents, offline and with a (scripted) LLM."""

from __future__ import annotations

from collections import Counter

from advrag_testing import ScriptedLLM
from llama_index.core.schema import Document

from llama_index_ext_advrag.evaluation.probes import keyword_query, make_probe_questions

TEXT = (
    "The Ferro pump draws water from the lower tank through a stainless steel filter cartridge. "
    "The cooling fan of the housing starts automatically once the temperature reaches forty "
    "degrees Celsius. Operators must clean the intake filter cartridge every second week to "
    "keep the flow rate stable. 渡灯节是烬川最盛大的节日，在每年七月初七举行，人们把青焰灯放入河中祈福。"
)
DOCS = [Document(text=TEXT, id_="doc")]


def test_offline_probes_are_keyword_queries_with_the_sentence_as_gold() -> None:
    probes = make_probe_questions(DOCS, count=3, seed=1)
    assert len(probes) == 3
    for probe in probes:
        [[sentence]] = probe.answer_groups
        assert sentence in TEXT
        assert probe.evidence_texts == (sentence,) and probe.evidence_docs == ("doc",)
        assert probe.probe and probe.type == "probe"
        assert probe.question != sentence and probe.question not in sentence  # not verbatim
        words = probe.question.split() if probe.question.isascii() else [probe.question]
        assert all(w in sentence.lower() for w in words if w.isascii())
    assert [p.question for p in make_probe_questions(DOCS, count=3, seed=1)] == [
        p.question for p in probes
    ]  # same seed, same probes


def test_keyword_query_orders_by_distinctiveness() -> None:
    frequency = Counter({"pump": 1, "water": 5, "tank": 5, "ferro": 1, "draws": 4, "from": 9})
    query = keyword_query("The Ferro pump draws water from the tank.", frequency, sentences=10)
    words = query.split()
    assert set(words[:2]) == {"ferro", "pump"}  # rarest first
    assert "the" not in words  # stop word


def test_llm_probes_and_the_fallback_on_an_echo() -> None:
    llm = ScriptedLLM(lambda prompt: "How often must the filter be cleaned?")
    [probe] = make_probe_questions(DOCS[:1], count=1, llm=llm, seed=3)
    assert probe.question == "How often must the filter be cleaned?"
    assert probe.extra["probe_kind"] == "llm"
    assert len(llm.prompts) == 1
    echo = ScriptedLLM(lambda prompt: prompt.split("Sentence: ")[1].split("\n")[0])
    [fallback] = make_probe_questions(DOCS[:1], count=1, llm=echo, seed=3)
    assert fallback.extra["probe_kind"] == "keywords" and "llm_fallback" in fallback.extra
