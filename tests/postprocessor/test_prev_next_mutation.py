"""Prev-next expansion's decisions and record, exactly (kills the mutants of
postprocessor/prev_next.py that test_prev_next.py leaves): all three direction words at once,
the pieces of a fetch, neighbours of hits without a score, a given vector store checked, the
layout handed to the store, the LLM's context without hidden metadata, the unparsable-answer
line and the raw answer cut at 200 characters, a failing LLM falling back (trace and warning),
the record's keys, the separator, and prompt replacement through _update_prompts. Sync and async
where both exist."""

from __future__ import annotations

import asyncio
import logging

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.prompts import PromptTemplate
from llama_index.core.schema import NodeWithScore, QueryBundle
from postprocessor._corpus import by_text, docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.layout import NodeLayout
from llama_index_ext_advrag.postprocessor._neighbours import FetchResult, Neighbourhood
from llama_index_ext_advrag.postprocessor.prev_next import (
    Direction,
    PrevNextPostprocessor,
    expansion_pieces,
    parse_direction,
)
from llama_index_ext_advrag.trace import get_trace

QUERY = QueryBundle("What happened to the pier after the storm?")
MODES = ["sync", "async"]
LOGGER = "llama_index_ext_advrag.postprocessor.prev_next"


@pytest.fixture
def nodes():
    return sentence_nodes(embed=False)


def run(post: PrevNextPostprocessor, mode: str, found, bundle=QUERY) -> list[NodeWithScore]:
    if mode == "sync":
        return post.postprocess_nodes(found, bundle)
    return asyncio.run(post.apostprocess_nodes(found, bundle))


def trace_of(results: list[NodeWithScore]) -> dict:
    return get_trace(results[0].node, "prev_next")


def test_all_three_direction_words_mean_both() -> None:
    assert parse_direction("before, after or both") is Direction.BOTH


def test_expansion_pieces_one_per_hit_with_the_hit_score(nodes) -> None:
    found = hits(nodes, "In 1901")
    before, after = by_text(nodes, "The harbour master"), by_text(nodes, "After the storm")
    fetched = FetchResult([Neighbourhood(found[0].node, [before], [after])], 1, 2)
    (piece,) = expansion_pieces(found, fetched, NodeLayout())
    assert {m.role: m.score for m in piece.members.values()} == {"hit": 0.5, "neighbour": 0.5}
    assert len(piece.members) == 3
    with pytest.raises(ValueError):
        expansion_pieces(found, FetchResult([], 0, 0), NodeLayout())


@pytest.mark.parametrize("mode", MODES)
def test_unmerged_neighbours_of_hits_without_a_score(nodes, mode: str) -> None:
    expand = PrevNextPostprocessor(docstore=docstore_of(nodes), merge=False)
    found = [NodeWithScore(node=hits(nodes, "In 1901")[0].node, score=None)]
    assert [r.score for r in run(expand, mode, found)] == [None, None, None]


def test_a_given_vector_store_is_checked() -> None:
    with pytest.raises(ValueError, match="vector_store must be a MilvusVectorStore, got str"):
        PrevNextPostprocessor(vector_store="not a store")


@pytest.mark.parametrize("mode", MODES)
def test_the_layout_reaches_the_store(nodes, mode: str) -> None:
    for node in nodes:
        node.metadata["doc"] = node.metadata.pop("document_id")
    expand = PrevNextPostprocessor(
        docstore=docstore_of(nodes), num_nodes=2, layout=NodeLayout(document_id_key="doc")
    )
    output = run(expand, mode, hits(nodes, "In 1901"))
    assert trace_of(output)["round_trips"] == 1  # computed ids: no walk, one query


@pytest.mark.parametrize("mode", MODES)
def test_the_llm_reads_the_hit_without_hidden_metadata(nodes, mode: str) -> None:
    found = hits(nodes, "In 1901")
    found[0].node.metadata["secret"] = "do-not-show"
    found[0].node.excluded_llm_metadata_keys.append("secret")
    llm = ScriptedLLM(["AFTER"])
    run(PrevNextPostprocessor(docstore=docstore_of(nodes), mode="auto", llm=llm), mode, found)
    assert "In 1901 a storm" in llm.prompts[0] and "do-not-show" not in llm.prompts[0]


@pytest.mark.parametrize("mode", MODES)
def test_an_unparsable_answer_is_logged_and_cut(nodes, mode: str, caplog) -> None:
    answer = "The passage talks about a harbour. " * 10  # 350 characters, no direction word
    llm = ScriptedLLM([answer])
    expand = PrevNextPostprocessor(
        docstore=docstore_of(nodes), mode="auto", llm=llm, fallback_direction="previous"
    )
    with caplog.at_level(logging.INFO, logger=LOGGER):
        output = run(expand, mode, hits(nodes, "In 1901"))
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        f"unparsable direction answer {answer[:80]!r}; using {Direction.PREVIOUS!s}"
    ]
    trace = trace_of(output)
    assert (trace["source"], trace["raw"]) == ("fallback", answer[:200])


@pytest.mark.parametrize("mode", MODES)
def test_a_parsed_answer_is_cut_at_200_characters(nodes, mode: str) -> None:
    answer = "AFTER" + " and so on" * 40
    expand = PrevNextPostprocessor(
        docstore=docstore_of(nodes), mode="auto", llm=ScriptedLLM([answer]), num_nodes=2
    )
    trace = trace_of(run(expand, mode, hits(nodes, "In 1901")))
    assert (trace["direction"], trace["raw"], trace["num_nodes"]) == ("next", answer[:200], 2)


def fail(prompt: str) -> str:
    raise RuntimeError("the server went away " + "x" * 300)


@pytest.mark.parametrize("mode", MODES)
def test_a_failing_llm_falls_back_and_says_so(nodes, mode: str, caplog) -> None:
    expand = PrevNextPostprocessor(
        docstore=docstore_of(nodes), mode="auto", llm=ScriptedLLM(fail),
        fallback_direction="previous",
    )  # fmt: skip
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        output = run(expand, mode, hits(nodes, "In 1901"))
    error = "the server went away " + "x" * 300
    assert [r.getMessage() for r in caplog.records if r.name == LOGGER] == [
        f"direction LLM failed (RuntimeError: {error}); using previous"
    ]
    trace = trace_of(output)
    assert {k: trace[k] for k in ("direction", "source", "error")} == {
        "direction": "previous",
        "source": "llm_error",
        "error": f"RuntimeError: {error}"[:200],
    }
    assert len(trace["error"]) == 200
    assert output[0].node.get_content().startswith("The harbour master")


@pytest.mark.parametrize("mode", MODES)
def test_the_separator_joins_the_expansion(nodes, mode: str) -> None:
    expand = PrevNextPostprocessor(docstore=docstore_of(nodes), separator="\n")
    (result,) = run(expand, mode, hits(nodes, "In 1901"))
    assert result.node.get_content().count("\n") == 2


def test_the_direction_prompt_is_replaced_through_prompt_mixin(nodes) -> None:
    expand = PrevNextPostprocessor(docstore=docstore_of(nodes), mode="auto")
    template = PromptTemplate("Q {query_str} C {context_str}")
    expand._update_prompts({"direction_prompt": template, "unrelated": template})
    assert expand._get_prompts()["direction_prompt"].get_template() == template.get_template()
    assert expand.direction_template.get_template() == template.get_template()
    expand._update_prompts({"other_prompt": PromptTemplate("X {query_str} {context_str}")})
    assert expand.direction_template.get_template() == template.get_template()
    with pytest.raises(ValueError, match="direction_template"):
        expand._update_prompts({"direction_prompt": PromptTemplate("only {query_str}")})
    assert expand.direction_template.get_template() == template.get_template()
