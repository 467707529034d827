"""Self-RAG's critiques keep what they read: the reply excerpt on every path (log-probabilities,
parsed, default), why a reply was not read (no completion, the failure's own error, empty,
unparsable), no token read from a response that is not a completion; extractive answers in
reading order; first lines keep their letters (kills the mutants of
query_engine/self_rag_critique.py that the engine tests leave)."""

from __future__ import annotations

import math

import pytest
from llama_index.core.base.llms.types import CompletionResponse, LogProb

from llama_index_ext_advrag.query_engine import self_rag_critique as critique
from llama_index_ext_advrag.query_engine.self_rag_critique import Critique

LONG = "Fully supported: " + "the passage says so in as many words. " * 5


def test_the_reply_excerpt_is_kept_on_every_path() -> None:
    parsed = critique.read_support(CompletionResponse(text=LONG))
    assert parsed == Critique(1.0, "parsed", "fully", LONG.strip()[:120])
    rating = critique.read_usefulness(CompletionResponse(text="4 of 5"))
    assert rating == Critique(0.5, "parsed", "4", "4 of 5")
    retrieve = critique.read_retrieve(CompletionResponse(text="Yes, look it up"), 0.5)
    assert retrieve == Critique(1.0, "parsed", "yes", "Yes, look it up")
    logprobs = CompletionResponse(
        text="fully",
        logprobs=[[LogProb(token="Full", logprob=math.log(0.9), bytes=[])]],
    )
    assert critique.read_support(logprobs).reply == "fully"


@pytest.mark.parametrize(
    ("response", "reason"),
    [
        (None, "no completion (NoneType)"),
        (TimeoutError("slow"), "no completion (TimeoutError)"),
        (type("Failed", (), {"error": "server down"})(), "server down"),
        (CompletionResponse(text="  "), "empty reply"),
        (CompletionResponse(text="perhaps"), "unparsable reply"),
    ],
)
def test_why_a_reply_was_not_read(response: object, reason: str) -> None:
    reply = "perhaps" if isinstance(response, CompletionResponse) and response.text.strip() else ""
    assert critique.read_support(response) == Critique(0.0, "default", None, reply, reason)
    assert critique.read_usefulness(response) == Critique(0.0, "default", None, reply, reason)
    assert critique.read_retrieve(response, 0.5) == Critique(1.0, "default", None, reply, reason)


def test_extractive_answers_are_in_reading_order() -> None:
    pool = [(1, 0, "C."), (0, 1, "B."), (0, 0, "A.")]  # not in reading order
    assert critique.extractive_answer(pool, [1.0, 1.0, 1.0], 3) == ("A. B. C.", [2, 1, 0])
    assert critique.extractive_answer([(0, 1, "A."), (0, 0, "B.")], [1.0, 1.0], 2)[0] == "B. A."


def test_first_line_keeps_its_letters() -> None:
    from llama_index_ext_advrag.queries import read_rewrite

    assert read_rewrite('\n  "Xenon lamps"  \nsecond') == "Xenon lamps"
    assert read_rewrite("`XX`") == "XX"


def test_no_token_is_read_from_a_response_that_is_not_a_completion() -> None:
    odd = type("Odd", (), {"logprobs": [[LogProb(token="Full", logprob=0.0, bytes=[])]]})()
    assert critique.read_support(odd) == Critique(0.0, "default", None, "", "no completion (Odd)")
    says_no = type("Odd", (), {"logprobs": [[LogProb(token="No", logprob=0.0, bytes=[])]]})()
    assert critique.read_retrieve(says_no, 0.5) == Critique(
        1.0, "default", None, "", "no completion (Odd)"
    )
