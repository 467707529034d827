"""Probe questions, rule by rule: the surface tokenizer, the rarity order, the styles with a
given tokenizer, which sentences are sampled (length bounds, headings, table rows, sheets), the
LLM route's prompt, timeout and fallbacks, ids and logs."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.schema import Document

from llama_index_ext_advrag.evaluation.probes import (
    QUESTION_QUERY,
    llm_question,
    make_probe_questions,
    offline_probe,
    sample_sentences,
    surface_tokenizer,
    terms_by_rarity,
)
from llama_index_ext_advrag.text import count_tokens
from llama_index_ext_advrag.text.words import ChineseMode

LOGGER = "llama_index_ext_advrag.evaluation.probes"
SENTENCE = "The maintenance crew inspects the northern pumping station every Tuesday morning."


def sentence_of(word: str, tokens: int) -> str:
    """A sentence of ``word`` repeated, exactly ``tokens`` tokens long."""
    for n in range(1, 200):
        text = " ".join([word.capitalize()] + [word] * (n - 1)) + "."
        if count_tokens(text) == tokens:
            return text
    raise AssertionError(f"no sentence of {word!r} has {tokens} tokens")


def split_words(text: str) -> list[str]:
    return text.split()


# --- terms --------------------------------------------------------------------------------------


def test_the_surface_tokenizer_keeps_words_as_written_and_cuts_chinese_accurately() -> None:
    tokenizer = surface_tokenizer()
    assert tokenizer.stem is False
    assert tokenizer.chinese_mode == ChineseMode.ACCURATE
    assert tokenizer.chinese_characters is False
    assert tokenizer("The pumps running") == ["pumps", "running"]


def test_terms_drop_single_ascii_letters_but_keep_single_cjk_characters() -> None:
    rare = terms_by_rarity("a x ok pump 水 x", Counter(), 1, split_words)
    assert rare == ["ok", "pump", "水"]  # ties keep reading order, duplicates once


def test_rarer_terms_first_with_a_given_tokenizer() -> None:
    frequency = Counter({"the": 0, "pump": 5, "runs": 3, "fast": 1})
    # the given tokenizer keeps the stop word "the" (the surface tokenizer would drop it)
    assert terms_by_rarity("the pump runs fast", frequency, 1, split_words) == [
        "the",
        "fast",
        "runs",
        "pump",
    ]
    assert terms_by_rarity("the pump runs fast", frequency, 1) == ["fast", "runs", "pump"]


def test_offline_probe_uses_the_given_tokenizer_for_the_rarest_terms() -> None:
    frequency = Counter({"pump": 5, "runs": 5, "fast": 5, "daily": 9})
    query, answer = offline_probe("the pump runs fast daily", frequency, 9, "masked", split_words)
    assert (query, answer) == ("fast daily", "the pump runs fast daily")
    query, _ = offline_probe("the pump runs fast daily", frequency, 9, "masked")
    assert query == "the daily"  # the surface tokenizer never offers "the"


def test_a_common_probe_of_chinese_terms_is_joined_without_spaces() -> None:
    def words(text: str) -> list[str]:
        return ["渡灯节", "烬川", "节日"]

    query, _ = offline_probe("渡灯节是烬川最盛大的节日", Counter(), 1, "common", words)
    assert query == "渡灯节烬川节日"
    query, _ = offline_probe("pump runs 节日", Counter(), 1, "common", split_words)
    assert query == "pump runs 节日"  # mixed: spaced


def test_an_unknown_style_is_named() -> None:
    for call in (
        lambda: offline_probe("pump", Counter(), 1, "rarest"),
        lambda: make_probe_questions([Document(text=SENTENCE)], style="rarest"),
    ):
        with pytest.raises(ValueError) as caught:
            call()
        assert str(caught.value) == "style='rarest' is not one of: masked, cloze, common"


# --- sampling -----------------------------------------------------------------------------------


def test_sentences_between_the_token_bounds_are_sampled_in_reading_order() -> None:
    short, low, high, long = (
        sentence_of("pump", 11),
        sentence_of("valve", 12),
        sentence_of("seal", 80),
        sentence_of("hose", 81),
    )
    text = " ".join([short, low, high, long])
    assert sample_sentences([Document(text=text, id_="d")], 10) == [("d", low), ("d", high)]


def test_sheets_headings_and_table_rows_are_left_out_and_the_rest_still_read() -> None:
    ok_one, ok_two = sentence_of("valve", 14), sentence_of("seal", 14)
    table_row = "Name | age | city | country | phone | email | notes | more | cells | here."
    documents = [
        Document(text=sentence_of("pump", 14), id_="sheet", metadata={"sheet_name": "S"}),
        Document(text=f"{table_row} {ok_one}", id_="a"),
        Document(
            text=f"# A long heading of many words about the pump room of the northern station\n\n{ok_two}",
            id_="b",
        ),
    ]
    assert sample_sentences(documents, 10) == [("a", ok_one), ("b", ok_two)]


def test_the_default_seed_is_zero_and_the_pick_follows_the_seed() -> None:
    words = ["pump", "valve", "seal", "hose", "tank", "fan", "filter", "pipe"]
    documents = [Document(text=sentence_of(w, 14), id_=w) for w in words]
    assert sample_sentences(documents, 3) == sample_sentences(documents, 3, seed=0)
    assert sample_sentences(documents, 3, seed=0) != sample_sentences(documents, 3, seed=1)
    picked = [doc for doc, _ in sample_sentences(documents, 3, seed=1)]
    assert picked == sorted(picked, key=words.index)  # reading order, not draw order
    assert sample_sentences([Document(text="Too short.")], 3) == []


# --- probe questions ----------------------------------------------------------------------------


def test_probe_ids_sources_and_the_seed_reach_the_questions() -> None:
    words = ["pump", "valve", "seal", "hose", "tank", "fan"]
    documents = [Document(text=sentence_of(w, 14), id_=w) for w in words]
    probes = make_probe_questions(documents, count=2, seed=1)
    sampled = sample_sentences(documents, 2, seed=1)
    assert [p.id for p in probes] == ["probe001", "probe002"]
    assert [(p.source, p.evidence_texts[0]) for p in probes] == sampled
    assert [p.evidence_docs for p in probes] == [(doc,) for doc, _ in sampled]
    default = make_probe_questions(documents, count=2)
    assert [p.source for p in default] == [d for d, _ in sample_sentences(documents, 2, seed=0)]


def test_masked_probes_hide_the_corpus_rarest_terms() -> None:
    documents = [
        Document(
            text=f"{SENTENCE} The crew inspects it. The crew works every morning. "
            "The station opens every Tuesday. Crews inspect every station.",
            id_="d",
        )
    ]
    [probe] = make_probe_questions(documents, count=1)
    # only in SENTENCE: maintenance, northern, pumping (rarest, reading order)
    assert probe.question == "The crew inspects the station every Tuesday morning."
    [cloze] = make_probe_questions(documents, count=1, style="cloze")
    assert cloze.answer_groups == (("maintenance",),)


def test_a_probe_with_an_empty_query_is_skipped_and_the_next_still_made() -> None:
    only_stop_words = "It is and it is, and it was as it is, and it is."
    documents = [Document(text=f"{only_stop_words} {SENTENCE}", id_="d")]
    probes = make_probe_questions(documents, count=5, style="common")
    assert [p.evidence_texts[0] for p in probes] == [SENTENCE]
    assert [p.id for p in probes] == ["probe002"]  # numbered by the sampled sentence


def test_probe_logs_say_how_many_and_which_kind(caplog) -> None:
    documents = [Document(text=SENTENCE, id_="d")]
    with caplog.at_level(logging.INFO, logger=LOGGER):
        make_probe_questions(documents, count=1, style="cloze")
        make_probe_questions(documents, count=1, llm=ScriptedLLM(["What is inspected weekly?"]))
    made = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Made")]
    assert made == ["Made 1 probe questions (cloze)", "Made 1 probe questions (llm)"]


# --- the LLM route ------------------------------------------------------------------------------


def test_llm_question_sends_the_pack_prompt_and_logs_the_generator_warning(caplog) -> None:
    llm = ScriptedLLM(["1. Who inspects the station?\n2. When?"])
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        assert llm_question(llm, SENTENCE, timeout=30) == "Who inspects the station?"
    [prompt] = llm.prompts
    assert prompt.endswith(f"Sentence: {SENTENCE}\n\n{QUESTION_QUERY}\nQuestion:")
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert messages and all(m.startswith("DatasetGenerator: ") for m in messages)
    assert any("deprecated class DatasetGenerator" in m for m in messages)  # the warning's text


def test_an_empty_reply_gives_no_question() -> None:
    assert llm_question(ScriptedLLM([""]), SENTENCE, timeout=None) == ""


def test_llm_question_runs_in_its_own_thread_even_inside_an_event_loop() -> None:
    async def inside() -> str:
        return llm_question(ScriptedLLM(["Who inspects it?"]), SENTENCE, timeout=None)

    assert asyncio.run(inside()) == "Who inspects it?"


def test_a_slow_llm_times_out_with_a_plain_timeout_error() -> None:
    def slow(prompt: str) -> str:
        time.sleep(2)
        return "Too late?"

    with pytest.raises(TimeoutError) as caught:
        llm_question(ScriptedLLM(slow), SENTENCE, timeout=0.05)
    assert type(caught.value) is TimeoutError
    assert str(caught.value) == "the LLM gave no answer within 0.05 s"
    documents = [Document(text=SENTENCE, id_="d")]
    [probe] = make_probe_questions(documents, count=1, llm=ScriptedLLM(slow), llm_timeout=0.05)
    assert probe.extra["llm_fallback"] == (
        "LLM error: TimeoutError('the LLM gave no answer within 0.05 s')"
    )


def test_a_failing_llm_falls_back_and_is_logged(caplog) -> None:
    def fail(prompt: str) -> str:
        raise RuntimeError("boom")

    documents = [Document(text=SENTENCE, id_="d")]
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        [probe] = make_probe_questions(documents, count=1, llm=ScriptedLLM(fail))
    assert probe.extra == {
        "probe_kind": "masked",
        "llm_fallback": "LLM error: RuntimeError('boom')",
    }
    assert probe.question == make_probe_questions(documents, count=1)[0].question
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["probe question 1: the LLM call failed: RuntimeError('boom')"]


@pytest.mark.parametrize(
    ("reply", "kind", "fallback"),
    [
        ("What?", "llm", None),  # five characters: a question
        ("Why?", "masked", "Why?"),  # four: too short, kept as the reason
        ("", "masked", "empty reply"),
    ],
)
def test_short_replies_fall_back_with_the_reply_as_the_reason(
    reply: str, kind: str, fallback: str | None
) -> None:
    documents = [Document(text=SENTENCE, id_="d")]
    [probe] = make_probe_questions(documents, count=1, llm=ScriptedLLM([reply]))
    assert probe.extra["probe_kind"] == kind
    assert probe.extra.get("llm_fallback") == fallback
    if kind == "llm":
        assert probe.question == reply and probe.answer_groups == ((SENTENCE,),)


def test_an_echoed_long_sentence_is_cut_to_200_characters_in_the_reason() -> None:
    sentence = (
        "The maintenance crew inspects the northern pumping station, its filters, valves, "
        "seals, hoses, gauges, motors, bearings, couplings and control cabinets every Tuesday "
        "morning before sunrise, and records every reading in the logbook."
    )
    assert len(sentence) > 200 and 12 <= count_tokens(sentence) <= 80
    echo = ScriptedLLM([sentence.upper()])  # an echo in another case is still an echo
    [probe] = make_probe_questions([Document(text=sentence, id_="d")], count=1, llm=echo)
    assert probe.extra["llm_fallback"] == sentence.upper()[:200]
