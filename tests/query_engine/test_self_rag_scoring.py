"""Self-RAG's critique arithmetic and reply reading, by hand (found by mutation testing).

``w_rel * ISREL + w_sup * ISSUP + w_use * ISUSE`` with each weight on its own term, the
retrieve decision's threshold and defaults, the label distribution from log-probabilities, and
the small helpers that build prompts and the extractive answer.
"""

from __future__ import annotations

import math

import pytest
from llama_index.core.base.llms.types import CompletionResponse, LogProb

from llama_index_ext_advrag.queries import read_rewrite, rewrite_avoid
from llama_index_ext_advrag.query_engine import self_rag_critique as critique


def reply(text: str, alternatives: list[tuple[str, float]] | None = None) -> CompletionResponse:
    """A completion whose first token has ``(token, probability)`` alternatives."""
    logprobs = (
        [[LogProb(token=t, logprob=math.log(p), bytes=[]) for t, p in alternatives]]
        if alternatives
        else None
    )
    return CompletionResponse(text=text, logprobs=logprobs)


# --- the score -----------------------------------------------------------------------------------


def test_default_weights_are_the_papers() -> None:
    assert critique.DEFAULT_WEIGHTS == (1.0, 1.0, 0.5)
    assert critique.candidate_score(0.8, 0.5, 0.5) == pytest.approx(0.8 + 0.5 + 0.25)


@pytest.mark.parametrize(
    ("weights", "expected"),
    [
        ((1.0, 0.0, 0.0), 0.3),  # ISREL only
        ((0.0, 1.0, 0.0), 0.5),  # ISSUP only
        ((0.0, 0.0, 1.0), -1.0),  # ISUSE only
        ((2.0, 3.0, 4.0), 2 * 0.3 + 3 * 0.5 - 4 * 1.0),
    ],
)
def test_each_weight_scales_its_own_term(weights: tuple[float, ...], expected: float) -> None:
    assert critique.candidate_score(0.3, 0.5, -1.0, weights) == pytest.approx(expected)


def test_unknown_isrel_counts_one_half() -> None:
    assert critique.UNKNOWN_ISREL == 0.5
    assert critique.isrel_value(None) == 0.5
    assert critique.isrel_value(0.0) == 0.0
    assert critique.isrel_value(0.9) == 0.9


def test_best_candidate_skips_unscored_and_unsupported() -> None:
    def made(score: float | None, support: float | None) -> critique.Candidate:
        issup = None if support is None else critique.Critique(support, "parsed")
        return critique.Candidate("a", [0], 1.0, issup=issup, score=score)

    # no ISSUP counts as unparsable (0.0): below any positive minimum, at a minimum of 0
    assert critique.best_candidate([made(2.0, None), made(1.0, 0.5)], 0.1) == 1
    assert critique.best_candidate([made(2.0, None), made(1.0, 0.5)], 0.0) == 0
    assert critique.best_candidate([made(None, 1.0), made(0.1, 1.0)], 0.5) == 1
    # a later, higher score wins; a score of 0 can still be the best
    assert critique.best_candidate([made(0.0, 1.0), made(0.5, 1.0)], 0.5) == 1
    assert critique.best_candidate([made(0.0, 1.0)], 0.5) == 0
    assert critique.best_candidate([made(-0.5, 1.0), made(-0.2, 1.0)], 0.5) == 1
    assert critique.best_candidate([], 0.0) is None


# --- the retrieve decision -------------------------------------------------------------------


def test_retrieve_threshold_default_and_inclusive() -> None:
    assert critique.DEFAULT_RETRIEVE_THRESHOLD == 0.2
    at = critique.read_retrieve(reply("no", [("yes", 0.25), ("no", 0.75)]), 0.25)
    assert (at.value, at.method, at.label, at.reason) == (1.0, "logprobs", "yes", "P(yes)=0.2500")
    below = critique.read_retrieve(reply("yes", [("yes", 0.25), ("no", 0.75)]), 0.26)
    assert (below.value, below.label, below.reply) == (0.0, "no", "yes")


def test_retrieve_reads_the_reply_without_logprobs() -> None:
    yes = critique.read_retrieve(reply("Yes, it does."), 0.2)
    assert (yes.value, yes.method, yes.label) == (1.0, "parsed", "yes")
    no = critique.read_retrieve(reply("No."), 0.2)
    assert (no.value, no.method, no.label) == (0.0, "parsed", "no")
    # logprobs without a yes or no token: the text decides
    other = critique.read_retrieve(reply("no", [("maybe", 0.9)]), 0.2)
    assert (other.value, other.method) == (0.0, "parsed")


def test_unreadable_retrieve_reply_retrieves() -> None:
    assert critique.UNPARSABLE_RETRIEVE is True
    garbage = critique.read_retrieve(reply("banana"), 0.2)
    assert (garbage.value, garbage.method, garbage.label) == (1.0, "default", None)
    assert garbage.reason == "unparsable reply" and garbage.reply == "banana"
    empty = critique.read_retrieve(reply("  "), 0.2)
    assert (empty.value, empty.reason) == (1.0, "empty reply")
    failed = critique.read_retrieve(None, 0.2)
    assert (failed.value, failed.reason, failed.reply) == (1.0, "no completion (NoneType)", "")


# --- support and usefulness ------------------------------------------------------------------


def test_unreadable_support_and_usefulness_take_their_defaults() -> None:
    support = critique.read_support(reply("banana"))
    assert (support.value, support.method, support.label) == (0.0, "default", None)
    usefulness = critique.read_usefulness(reply("great"))
    assert (usefulness.value, usefulness.method) == (0.0, "default")
    assert critique.read_usefulness(None).reason == "no completion (NoneType)"


def test_parsed_support_and_usefulness_values() -> None:
    assert critique.read_support(reply("Partially.")).value == 0.5
    assert critique.read_support(reply("Fully")).label == "fully"
    five = critique.read_usefulness(reply("Rating: 5"))
    assert (five.value, five.method, five.label) == (1.0, "parsed", "5")
    assert critique.read_usefulness(reply("1")).value == -1.0


def test_logprob_label_is_the_most_probable_one() -> None:
    read = critique.read_support(reply("no", [("part", 0.2), ("full", 0.5), ("no", 0.3)]))
    assert read.label == "fully" and read.method == "logprobs"
    assert read.value == pytest.approx(0.5 * 1.0 + 0.2 * 0.5)


def test_label_distribution_normalises_and_skips_unknown_tokens() -> None:
    def digit(token: str) -> str | None:
        return token if token in {"1", "2"} else None

    found = critique.label_distribution(
        [(" 1", math.log(0.2)), ("2", math.log(0.2)), ("1 ", math.log(0.2)), ("x", 0.0)], digit
    )
    assert found == pytest.approx({"1": 2 / 3, "2": 1 / 3})
    assert critique.label_distribution([("x", 0.0)], digit) is None
    assert critique.label_distribution([("1", -math.inf)], digit) is None
    assert critique.label_distribution([], digit) is None


def test_critique_to_dict_leaves_out_what_is_unset() -> None:
    assert critique.Critique(0.5, "parsed", "partially").to_dict() == {
        "value": 0.5,
        "method": "parsed",
        "label": "partially",
    }
    full = critique.Critique(1.0, "default", None, reply="r", reason="why").to_dict()
    assert full == {"value": 1.0, "method": "default", "label": None, "reply": "r", "reason": "why"}


def test_reply_text_and_excerpt() -> None:
    assert critique.reply_text(reply("  hi \n")) == "hi"
    assert critique.reply_text("not a completion") == ""
    long = critique.read_retrieve(reply("x" * 200), 0.2)
    assert long.reply == "x" * 120


# --- prompts and the extractive answer ---------------------------------------------------------


def test_format_passages_numbers_from_one_and_cuts() -> None:
    assert critique.format_passages(["abcdef", "gh"], 3) == "abc\n\ngh"
    assert rewrite_avoid(["a", "b"]) == "Not: a\nNot: b\n"
    assert rewrite_avoid([]) == ""


def test_first_line_skips_blank_and_quote_only_lines() -> None:
    assert read_rewrite('\n  \n"`"\n "FX-40 sync" \nmore') == "FX-40 sync"
    assert read_rewrite("") == ""


def test_sentence_pool_skips_headings() -> None:
    pool = critique.sentence_pool(["# Title\nOne. Two.", "Three."])
    assert pool == [(0, 1, "One."), (0, 2, "Two."), (1, 0, "Three.")]


def test_extractive_answer_unknown_last_and_reading_order() -> None:
    pool = [(0, 0, "A."), (0, 1, "B."), (1, 0, "C."), (1, 1, "D.")]
    assert critique.extractive_answer(pool, [None, 0.0, 0.5, 0.5], 2) == ("C. D.", [2, 3])
    assert critique.extractive_answer(pool, [None, 0.0, 0.5, 0.5], 3) == ("B. C. D.", [1, 2, 3])
    assert critique.extractive_answer(pool, [0.1, None, 0.9, 0.2], 4)[1] == [0, 1, 2, 3]
    assert critique.extractive_answer(pool, [0.1, 0.1, 0.1, 0.1], 1) == ("A.", [0])


def test_first_tokens_are_read_lower_case_by_prefix_then_by_word() -> None:
    # "Nope" starts like "no"; "Yes" and "Supported" are read by the support parser.
    nope = critique.read_support(reply("fully", [("Nope", 0.9)]))
    assert (nope.value, nope.method, nope.label) == (0.0, "logprobs", "no")
    yes = critique.read_support(reply("no", [("Yes", 0.8), ("No", 0.2)]))
    assert yes.value == pytest.approx(0.8) and yes.label == "fully"
    supported = critique.read_support(reply("no", [(" Supported", 0.5)]))
    assert (supported.value, supported.method) == (1.0, "logprobs")
