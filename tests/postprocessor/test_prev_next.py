"""PrevNextPostprocessor: fixed and LLM-directed neighbour expansion."""

from __future__ import annotations

import asyncio
import copy

import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.node_parser import SentenceWindowNodeParser
from llama_index.core.postprocessor import PrevNextNodePostprocessor
from llama_index.core.schema import Document, NodeWithScore, QueryBundle
from postprocessor._corpus import HARBOUR, docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.postprocessor import PrevNextPostprocessor
from llama_index_ext_advrag.postprocessor.prev_next import Direction, PrevNextMode, parse_direction
from llama_index_ext_advrag.trace import get_trace

QUERY = QueryBundle("What happened to the pier after the storm?")


@pytest.fixture
def nodes():
    return sentence_nodes(embed=False)


@pytest.fixture
def docstore(nodes):
    return docstore_of(nodes)


def texts(results: list[NodeWithScore]) -> list[str]:
    return [r.node.get_content() for r in results]


def test_defaults(docstore) -> None:
    expand = PrevNextPostprocessor(docstore=docstore)
    assert expand.mode is PrevNextMode.FIXED and expand.num_nodes == 1
    assert expand.direction is Direction.BOTH and expand.fallback_direction is Direction.BOTH
    assert expand.merge and expand.llm is None
    assert PrevNextPostprocessor.class_name() == "PrevNextPostprocessor"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "sideways"}, "mode='sideways'"),
        ({"direction": "up"}, "direction='up'"),
        ({"num_nodes": -1}, "num_nodes"),
        ({"num_nodes": 51}, "num_nodes"),
    ],
)
def test_invalid_arguments_name_the_value(docstore, kwargs, message) -> None:
    with pytest.raises(ValueError, match=message):
        PrevNextPostprocessor(docstore=docstore, **kwargs)


def test_a_store_is_required() -> None:
    with pytest.raises(ValueError, match="exactly one of vector_store"):
        PrevNextPostprocessor()


def test_empty_input(docstore) -> None:
    assert PrevNextPostprocessor(docstore=docstore).postprocess_nodes([], QUERY) == []


def test_fixed_expansion_merges_overlaps_in_reading_order(nodes, docstore) -> None:
    results = hits(nodes, "After the storm", "Its lamp", "In 1901")
    output = PrevNextPostprocessor(docstore=docstore).postprocess_nodes(results, QUERY)
    assert texts(output) == [
        "The harbour master keeps a ledger of every boat. In 1901 a storm destroyed the northern "
        "pier. After the storm the town rebuilt the pier in granite. The granite pier still "
        "stands today.",
        "The lighthouse stands on a cliff. Its lamp was electrified in 1935. Keepers lived in "
        "the cottage below.",
    ]
    assert [r.score for r in output] == [0.5, 0.49]
    trace = get_trace(output[0].node, "prev_next")
    assert trace["direction"] == "both" and trace["source"] == "fixed"
    assert trace["round_trips"] == 1
    assert [m["role"] for m in trace["members"]] == ["neighbour", "hit", "hit", "neighbour"]
    assert output[0].node.metadata["sentence_span"] == [3, 7]
    assert output[0].node.start_char_idx == HARBOUR.index("The harbour master")


def test_callers_nodes_are_not_modified(nodes, docstore) -> None:
    results = hits(nodes, "In 1901", "Its lamp")
    before = copy.deepcopy([(r.node.get_content(), r.node.metadata, r.score) for r in results])
    PrevNextPostprocessor(docstore=docstore, num_nodes=2).postprocess_nodes(results, QUERY)
    assert [(r.node.get_content(), r.node.metadata, r.score) for r in results] == before


@pytest.mark.parametrize(
    ("direction", "expected"),
    [
        ("next", "In 1901 a storm destroyed the northern pier. After the storm the town rebuilt "
                 "the pier in granite. The granite pier still stands today."),
        ("previous", "Its stone piers shelter forty fishing boats. The harbour master keeps a "
                     "ledger of every boat. In 1901 a storm destroyed the northern pier."),
        ("none", "In 1901 a storm destroyed the northern pier."),
    ],
)  # fmt: skip
def test_fixed_directions(nodes, docstore, direction, expected) -> None:
    expand = PrevNextPostprocessor(docstore=docstore, num_nodes=2, direction=direction)
    assert texts(expand.postprocess_nodes(hits(nodes, "In 1901"), QUERY)) == [expected]


def test_unmerged_output_is_deduplicated_in_reading_order(nodes, docstore) -> None:
    results = hits(nodes, "After the storm", "In 1901", "In 1901")
    expand = PrevNextPostprocessor(docstore=docstore, merge=False)
    output = expand.postprocess_nodes(results, QUERY)
    assert [t[:14] for t in texts(output)] == [
        "The harbour ma", "In 1901 a stor", "After the stor", "The granite pi"
    ]  # fmt: skip
    assert [get_trace(r.node, "prev_next")["role"] for r in output] == [
        "neighbour", "hit", "hit", "neighbour"
    ]  # fmt: skip
    assert [r.score for r in output] == [0.5, 0.49, 0.5, 0.5]


def test_sections_and_documents_never_leak_into_each_other(nodes, docstore) -> None:
    output = PrevNextPostprocessor(docstore=docstore, num_nodes=5).postprocess_nodes(
        hits(nodes, "The last keeper"), QUERY
    )
    assert texts(output)[0].startswith("The lighthouse stands")
    assert "bakery" not in texts(output)[0]


def test_same_context_as_core_prev_next_on_position_less_nodes() -> None:
    parser = SentenceWindowNodeParser()
    chunks = parser.get_nodes_from_documents([Document(text=HARBOUR, id_="h")])
    assert len(chunks) >= 5 and "sentence_span" not in chunks[0].metadata
    docstore = docstore_of(chunks)
    results = [NodeWithScore(node=chunks[2], score=0.9)]
    core = PrevNextNodePostprocessor(docstore=docstore, num_nodes=2, mode="both")
    ours = PrevNextPostprocessor(docstore=docstore, num_nodes=2, merge=False)
    assert texts(ours.postprocess_nodes(results, QUERY)) == texts(
        core.postprocess_nodes(results, QUERY)
    )
    merged = PrevNextPostprocessor(docstore=docstore, num_nodes=2).postprocess_nodes(results, QUERY)
    assert get_trace(merged[0].node, "prev_next")["round_trips"] == 2  # walked: one per hop
    assert len(merged) == 1


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        ("AFTER", Direction.NEXT),
        ("Answer: next.", Direction.NEXT),
        (" before", Direction.PREVIOUS),
        ("BOTH", Direction.BOTH),
        ("before and after", Direction.BOTH),
        ("NEITHER", Direction.NONE),
        ("none", Direction.NONE),
        ("BEFORE, AFTER, BOTH or NEITHER", None),
        ("I cannot tell", None),
        ("", None),
    ],
)
def test_parse_direction(answer, expected) -> None:
    assert parse_direction(answer) == expected


def test_auto_mode_follows_the_llm_once_per_query(nodes, docstore) -> None:
    llm = ScriptedLLM(["AFTER"])
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", llm=llm, num_nodes=2)
    output = expand.postprocess_nodes(hits(nodes, "In 1901", "Its lamp"), QUERY)
    assert len(llm.prompts) == 1
    assert QUERY.query_str in llm.prompts[0] and "In 1901 a storm" in llm.prompts[0]
    assert texts(output)[0].startswith("In 1901") and texts(output)[0].endswith("stands today.")
    trace = get_trace(output[0].node, "prev_next")
    assert (trace["direction"], trace["source"], trace["raw"]) == ("next", "llm", "AFTER")


def test_auto_mode_falls_back_on_an_unparsable_answer(nodes, docstore) -> None:
    llm = ScriptedLLM(["The passage talks about a harbour."])
    expand = PrevNextPostprocessor(
        docstore=docstore, mode="auto", llm=llm, fallback_direction="previous"
    )
    output = expand.postprocess_nodes(hits(nodes, "In 1901"), QUERY)
    assert texts(output) == [
        "The harbour master keeps a ledger of every boat. In 1901 a storm destroyed the northern pier."
    ]
    trace = get_trace(output[0].node, "prev_next")
    assert trace["source"] == "fallback" and trace["direction"] == "previous"


def test_auto_mode_without_llm_or_query_uses_the_fallback(nodes, docstore, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", fallback_direction="next")
    output = expand.postprocess_nodes(hits(nodes, "In 1901"), QUERY)
    assert get_trace(output[0].node, "prev_next")["source"] == "no_llm"
    llm = ScriptedLLM(["BEFORE"])
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", llm=llm)
    output = expand.postprocess_nodes(hits(nodes, "In 1901"))
    assert get_trace(output[0].node, "prev_next")["source"] == "no_query" and not llm.prompts


def test_sync_and_async_agree(nodes, docstore) -> None:
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", llm=ScriptedLLM(["BOTH"]))
    results = hits(nodes, "After the storm", "Its lamp", "The bakery sells")
    sync = expand.postprocess_nodes(results, QUERY)
    async_ = asyncio.run(expand.apostprocess_nodes(results, QUERY))
    assert texts(sync) == texts(async_)
    assert [r.score for r in sync] == [r.score for r in async_]


@pytest.mark.parametrize(
    ("answer", "direction", "first", "last"),
    [("AFTER", "next", "In 1901", "in granite."), ("BEFORE", "previous", "The harbour", "pier."),
     ("NEITHER", "none", "In 1901", "pier.")],
)  # fmt: skip
def test_async_auto_mode_follows_the_llm_like_sync(nodes, docstore, answer, direction, first, last):
    # the fallback is "both", so an async path that ignored the answer would expand both sides
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", llm=ScriptedLLM([answer]))
    results = hits(nodes, "In 1901")
    async_ = asyncio.run(expand.apostprocess_nodes(results, QUERY))
    (text,) = texts(async_)
    assert text.startswith(first) and text.endswith(last)
    trace = get_trace(async_[0].node, "prev_next")
    assert (trace["direction"], trace["source"], trace["raw"]) == (direction, "llm", answer)
    sync = expand.postprocess_nodes(results, QUERY)
    assert texts(sync) == texts(async_)
    assert get_trace(sync[0].node, "prev_next") == trace


def test_to_dict_round_trip(docstore) -> None:
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", num_nodes=3, direction="next")
    data = expand.to_dict()
    assert data["class_name"] == "PrevNextPostprocessor" and "docstore" not in data
    restored = PrevNextPostprocessor.from_dict(data, docstore=docstore)
    assert restored.mode is PrevNextMode.AUTO and restored.num_nodes == 3
    assert restored.direction is Direction.NEXT
    assert restored.direction_template == expand.direction_template
    with pytest.raises(ValueError, match=r"direction_template lacks the variables \['query_str'\]"):
        PrevNextPostprocessor(docstore=docstore, direction_template="Where? {context_str}")


def test_prompt_can_be_replaced(nodes, docstore) -> None:
    llm = ScriptedLLM(["NEXT"])
    template = "Q {query_str} C {context_str}"
    expand = PrevNextPostprocessor(
        docstore=docstore, mode="auto", llm=llm, direction_template=template
    )
    assert expand._get_prompts()["direction_prompt"].get_template() == template
    expand.postprocess_nodes(hits(nodes, "In 1901"), QUERY)
    assert llm.prompts[0].startswith("Q What happened")


# --- storage tiers ----------------------------------------------------------------------------


def test_milvus_store_gives_the_docstore_result_in_one_query(milvus_uri, collection_name) -> None:
    from llama_index_ext_advrag.milvus import flush, open_vector_store

    nodes = sentence_nodes()
    vector_store = open_vector_store(milvus_uri, collection_name, dim=64)
    try:
        vector_store.add(nodes)
        flush(vector_store)
        results = hits(nodes, "After the storm", "Its lamp", "In 1901")
        from_milvus = PrevNextPostprocessor(vector_store=vector_store, num_nodes=2)
        from_docstore = PrevNextPostprocessor(docstore=docstore_of(nodes), num_nodes=2)
        output = from_milvus.postprocess_nodes(results, QUERY)
        assert texts(output) == texts(from_docstore.postprocess_nodes(results, QUERY))
        assert get_trace(output[0].node, "prev_next")["round_trips"] == 1
        assert texts(asyncio.run(from_milvus.apostprocess_nodes(results, QUERY))) == texts(output)
    finally:
        vector_store.client.drop_collection(collection_name)


# --- the real local model -----------------------------------------------------------------------


@pytest.mark.local_llm
def test_auto_mode_with_the_local_model_never_raises(local_llm, nodes, docstore) -> None:
    expand = PrevNextPostprocessor(docstore=docstore, mode="auto", llm=local_llm)
    output = expand.postprocess_nodes(hits(nodes, "In 1901"), QUERY)
    trace = get_trace(output[0].node, "prev_next")
    assert trace["source"] in {"llm", "fallback"}
    assert trace["direction"] in {d.value for d in Direction}
    assert "In 1901 a storm destroyed the northern pier." in texts(output)[0]
    async_ = asyncio.run(expand.apostprocess_nodes(hits(nodes, "In 1901"), QUERY))
    assert get_trace(async_[0].node, "prev_next")["source"] in {"llm", "fallback"}
