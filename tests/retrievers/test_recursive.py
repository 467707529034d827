"""RecursiveIndexNodeRetriever: routing, depth limit, cycles, async, builders."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.response.schema import Response
from llama_index.core.retrievers import BaseRetriever
from llama_index.core.schema import IndexNode, NodeWithScore, QueryBundle, TextNode

from llama_index_ext_advrag.retrievers import RecursiveIndexNodeRetriever
from llama_index_ext_advrag.retrievers.recursive import (
    answer_id,
    clean_frame,
    describe_frame,
    pointer_as_text,
)
from llama_index_ext_advrag.trace import TRACE_KEY


class ListRetriever(BaseRetriever):
    def __init__(self, results: list[NodeWithScore]) -> None:
        self.results = results
        self.calls = 0
        super().__init__()

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        self.calls += 1
        return list(self.results)


class FixedEngine(BaseQueryEngine):
    """Answers with a fixed text and sources; optionally waits for a partner (concurrency)."""

    def __init__(self, answer: str, sources=(), events=None) -> None:
        self.answer, self.sources, self.events = answer, list(sources), events
        super().__init__(callback_manager=None)

    def _get_prompt_modules(self):
        return {}

    def _query(self, query_bundle: QueryBundle) -> Response:
        return Response(response=self.answer, source_nodes=self.sources, metadata={"e": 1})

    async def _aquery(self, query_bundle: QueryBundle) -> Response:
        if self.events:
            mine, partner = self.events
            mine.set()
            await asyncio.wait_for(partner.wait(), timeout=5)
        return self._query(query_bundle)


def text(node_id: str, score: float = 1.0) -> NodeWithScore:
    return NodeWithScore(node=TextNode(text=f"text of {node_id}", id_=node_id), score=score)


def pointer(node_id: str, target: str, score: float = 1.0, obj=None) -> NodeWithScore:
    node = IndexNode(text=f"pointer to {target}", index_id=target, id_=node_id, obj=obj)
    return NodeWithScore(node=node, score=score)


def ids(results) -> list[str]:
    return [r.node.node_id for r in results]


def route(result) -> dict:
    return result.node.metadata[TRACE_KEY]["recursive"]


@pytest.fixture
def tree() -> RecursiveIndexNodeRetriever:
    source = text("src", 0.4)
    root = ListRetriever([text("plain", 0.9), pointer("p-sub", "sub", 0.8), pointer("p-qe", "qe")])
    sub = ListRetriever([text("s1", 0.7), text("s2", 0.6)])
    return RecursiveIndexNodeRetriever(
        root_id="root",
        retriever_dict={"root": root, "sub": sub},
        query_engine_dict={"qe": FixedEngine("forty-two", [source])},
    )


def test_defaults_and_class_name(tree) -> None:
    assert tree.max_depth == 3 and tree.max_concurrency == 4 and tree.include_sub_sources
    assert RecursiveIndexNodeRetriever.class_name() == "RecursiveIndexNodeRetriever"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"root_id": "nope"}, "'nope'"),
        ({"max_depth": 0}, "0"),
        ({"max_concurrency": 0}, "0"),
        ({"query_engine_dict": {"root": FixedEngine("x")}}, "'root'"),
    ],
)
def test_invalid_arguments_name_the_value(kwargs, named) -> None:
    options = {"root_id": "root", "retriever_dict": {"root": ListRetriever([])}, **kwargs}
    with pytest.raises(ValueError, match=named):
        RecursiveIndexNodeRetriever(**options)


def test_routes_to_retrievers_and_engines_in_place(tree) -> None:
    results = tree.retrieve("q")
    assert ids(results) == ["plain", "s1", "s2", answer_id("qe", "q"), "src"]
    assert route(results[0]) == {"route": ["root"], "depth": 0}
    assert route(results[1]) == {
        "route": ["root", "sub"],
        "depth": 1,
        "kind": "retriever",
        "via": "p-sub",
    }
    answer = results[3]
    assert answer.node.get_content() == "forty-two" and answer.score == 1.0
    assert answer.node.metadata["answer_to"] == "q"
    assert route(answer)["answer"] is True and route(answer)["engine"] == {"e": 1}
    assert route(results[4])["source_of"] == "qe"
    assert results[4].score == 0.4


class TracingEngine(FixedEngine):
    def _query(self, query_bundle: QueryBundle) -> Response:
        metadata = {"e": 2, TRACE_KEY: {"pandas": {"outcome": "refused"}}}
        return Response(response=self.answer, metadata=metadata)


def test_engine_trace_records_move_into_the_answer_nodes_trace() -> None:
    root = ListRetriever([pointer("p-qe", "qe")])
    retriever = RecursiveIndexNodeRetriever(
        "root", {"root": root}, query_engine_dict={"qe": TracingEngine("no")}
    )
    answer = retriever.retrieve("q")[0]
    assert answer.node.metadata[TRACE_KEY]["pandas"] == {"outcome": "refused"}
    assert route(answer)["engine"] == {"e": 2}
    assert TRACE_KEY in answer.node.excluded_llm_metadata_keys


def test_sources_can_be_left_out(tree) -> None:
    tree.include_sub_sources = False
    assert "src" not in ids(tree.retrieve("q"))


def test_inputs_not_mutated(tree) -> None:
    tree.retrieve("q")
    root = tree.retriever_dict["root"]
    assert all(TRACE_KEY not in r.node.metadata for r in root.results)


def test_depth_limit_stops_and_returns_pointer_as_text() -> None:
    retrievers = {
        "root": ListRetriever([pointer("to-a", "a")]),
        "a": ListRetriever([text("a1"), pointer("to-b", "b")]),
        "b": ListRetriever([text("b1"), pointer("to-c", "c")]),
        "c": ListRetriever([text("c1")]),
    }
    results = RecursiveIndexNodeRetriever("root", retrievers, max_depth=2).retrieve("q")
    assert ids(results) == ["a1", "b1", "to-c"]
    stopped = results[-1]
    assert not isinstance(stopped.node, IndexNode)
    assert route(stopped)["stopped"] == "max_depth" and route(stopped)["index_id"] == "c"
    assert retrievers["c"].calls == 0
    deep = RecursiveIndexNodeRetriever("root", retrievers, max_depth=3).retrieve("q")
    assert ids(deep) == ["a1", "b1", "c1"] and route(deep[-1])["depth"] == 3


def test_cycle_is_detected() -> None:
    retrievers = {
        "root": ListRetriever([pointer("to-a", "a")]),
        "a": ListRetriever([text("a1"), pointer("back", "root"), pointer("self", "a")]),
    }
    results = RecursiveIndexNodeRetriever("root", retrievers, max_depth=10).retrieve("q")
    assert ids(results) == ["a1", "back", "self"]
    assert [route(r).get("stopped") for r in results] == [None, "cycle", "cycle"]
    assert retrievers["a"].calls == 1


def test_unknown_index_id_is_named() -> None:
    retriever = RecursiveIndexNodeRetriever(
        "root", {"root": ListRetriever([pointer("p", "ghost")])}
    )
    with pytest.raises(ValueError, match="'ghost'"):
        retriever.retrieve("q")


def test_pointer_obj_and_node_dict() -> None:
    inner = ListRetriever([text("inner")])
    retrievers = {"root": ListRetriever([pointer("p1", "x", obj=inner), pointer("p2", "n")])}
    nodes = {"n": TextNode(text="a single node", id_="single")}
    results = RecursiveIndexNodeRetriever("root", retrievers, node_dict=nodes).retrieve("q")
    assert ids(results) == ["inner", "single"]
    assert route(results[1])["kind"] == "node"


def test_duplicates_keep_the_first_and_empty_root() -> None:
    retrievers = {
        "root": ListRetriever([text("d"), pointer("p", "s")]),
        "s": ListRetriever([text("d")]),
    }
    assert ids(RecursiveIndexNodeRetriever("root", retrievers).retrieve("q")) == ["d"]
    assert RecursiveIndexNodeRetriever("root", {"root": ListRetriever([])}).retrieve("q") == []


async def test_async_matches_sync_and_runs_hops_concurrently() -> None:
    first, second = asyncio.Event(), asyncio.Event()
    engines = {
        "e1": FixedEngine("one", events=(first, second)),
        "e2": FixedEngine("two", events=(second, first)),
    }
    retrievers = {"root": ListRetriever([pointer("p1", "e1"), text("t"), pointer("p2", "e2")])}
    retriever = RecursiveIndexNodeRetriever("root", retrievers, query_engine_dict=engines)
    asynchronous = await retriever.aretrieve("q")
    sync = retriever.retrieve("q")
    assert [(r.node.node_id, r.node.get_content(), r.score) for r in asynchronous] == [
        (r.node.node_id, r.node.get_content(), r.score) for r in sync
    ]
    assert [r.node.get_content() for r in sync] == ["one", "text of t", "two"]


def test_pointer_as_text_keeps_identity() -> None:
    node = IndexNode(text="p", index_id="x", id_="pid", obj=ListRetriever([]))
    flat = pointer_as_text(node)
    assert type(flat) is TextNode and flat.node_id == "pid" and flat.get_content() == "p"


# --- builders ---------------------------------------------------------------------------------

FRAMES = {
    "2023 billionaires": pd.DataFrame(
        {"Name": ["Ann", "Bo"], "Nationality": ["United\nStates", "France"], "Age": [70, 50]}
    ),
    "fruit prices": pd.DataFrame({"Fruit": ["apple", "pear"], "Price": [1.5, 2.0]}),
}


def count_script(prompt: str) -> str:
    if "Summary:" in prompt:
        return "A table of people." if "Nationality" in prompt else "Fruit and their prices."
    return "```python\nlen(df[df['Nationality'] == 'United States'])\n```"


def test_clean_and_describe_frame() -> None:
    cleaned = clean_frame(FRAMES["2023 billionaires"])
    assert cleaned["Nationality"].tolist() == ["United States", "France"]
    assert FRAMES["2023 billionaires"]["Nationality"][0] == "United\nStates"  # input untouched
    description = describe_frame("t", cleaned)
    assert description.startswith("Table 't' (2 rows). Columns: Name (text)")
    assert "Age (integer)" in description and "Ann | United States | 70" in description


def test_from_dataframes_routes_to_the_right_table() -> None:
    llm = ScriptedLLM(count_script)
    retriever = RecursiveIndexNodeRetriever.from_dataframes(
        FRAMES, llm=llm, embed_model=HashEmbedding(dim=64), similarity_top_k=1
    )
    results = retriever.retrieve("How many 2023 billionaires are from the United States?")
    assert len(results) == 1
    assert results[0].node.get_content() == "1"
    trace = route(results[0])
    assert trace["route"] == ["root", "table::2023 billionaires"]
    pandas = results[0].node.metadata[TRACE_KEY]["pandas"]
    assert pandas["outcome"] == "answered" and pandas["value"] == 1
    assert "refused" not in pandas["attempts"][0]
    pointers = retriever.retriever_dict["root"].search._legs[1].nodes  # the BM25 leg's nodes
    assert pointers[0].get_content().startswith("A table of people.\nTable '2023 billionaires'")


def test_from_dataframes_without_llm(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    retriever = RecursiveIndexNodeRetriever.from_dataframes(
        FRAMES, embed_model=HashEmbedding(dim=64), similarity_top_k=1, lexical=False
    )
    results = retriever.retrieve("fruit prices apple pear")
    text = results[0].node.get_content()
    assert text.startswith("No answer was computed from table 'fruit prices' (no LLM")
    assert "Table 'fruit prices' (2 rows)" in text
    assert results[0].node.metadata[TRACE_KEY]["pandas"]["outcome"] == "no_llm"


def test_from_dataframes_explicit_summaries_win() -> None:
    retriever = RecursiveIndexNodeRetriever.from_dataframes(
        FRAMES,
        summaries={"fruit prices": "Greengrocer price list"},
        summarize=False,
        embed_model=HashEmbedding(dim=64),
    )
    texts = [n.get_content() for n in retriever.retriever_dict["root"].search._legs[1].nodes]
    assert texts[1].startswith("Greengrocer price list\nTable 'fruit prices'")


def test_builder_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="at least one"):
        RecursiveIndexNodeRetriever.from_dataframes({})
    with pytest.raises(FileNotFoundError, match="missing.xlsx"):
        RecursiveIndexNodeRetriever.from_excel(tmp_path / "missing.xlsx")
    with pytest.raises(ValueError, match="at least one"):
        RecursiveIndexNodeRetriever.from_topics({})
    with pytest.raises(ValueError, match="'t'"):
        RecursiveIndexNodeRetriever.from_topics({"t": ListRetriever([])})


def test_from_excel_reads_every_sheet(tmp_path: Path) -> None:
    path = tmp_path / "book.xlsx"
    with pd.ExcelWriter(path) as writer:
        for name, frame in FRAMES.items():
            frame.to_excel(writer, sheet_name=name[:31], index=False)
    retriever = RecursiveIndexNodeRetriever.from_excel(
        path, llm=ScriptedLLM(count_script), embed_model=HashEmbedding(dim=64)
    )
    assert sorted(retriever.query_engine_dict) == [
        "table::2023 billionaires",
        "table::fruit prices",
    ]


SHEETS = {
    "Staff": pd.DataFrame({"Name": ["Ann", "Bo", "Cy"], "City": ["Lisbon", "Oslo", "Lisbon"]}),
    "Warehouses": pd.DataFrame({"City": ["Lisbon", "Porto"], "Capacity": [120, 80]}),
    "2023年销售": pd.DataFrame({"地区": ["华东", "华北"], "销量": [10, 12]}),
}


@pytest.fixture
def workbook(tmp_path: Path) -> Path:
    path = tmp_path / "book.xlsx"
    with pd.ExcelWriter(path) as writer:
        for name, frame in SHEETS.items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return path


def row_count_llm() -> ScriptedLLM:
    """Answers every code prompt with ``len(df)``: each call is one sheet queried."""
    return ScriptedLLM(lambda prompt: "```python\nlen(df)\n```")


def answers(results) -> list[tuple[str, str, dict | None]]:
    """(routed table, answer, named_route trace) of each answer node."""
    return [
        (
            r.node.metadata["index_id"],
            r.node.get_content(),
            r.node.metadata[TRACE_KEY].get("named_route"),
        )
        for r in results
        if "answer_to" in r.node.metadata
    ]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("question", "sheet", "rows"),
    [
        ("How many people in Staff work in Lisbon?", "Staff", "3"),
        ("What is the capacity of the warehouses sheet in total?", "Warehouses", "2"),
        ("2023年销售的华东销量是多少？", "2023年销售", "2"),
    ],
)
def test_from_excel_queries_only_the_sheet_a_question_names(
    workbook: Path, mode: str, question: str, sheet: str, rows: str
) -> None:
    llm = row_count_llm()
    retriever = RecursiveIndexNodeRetriever.from_excel(
        workbook, llm=llm, summarize=False, embed_model=HashEmbedding(dim=64)
    )
    assert retriever.retriever_dict["root"].search.config.similarity_top_k == 2  # the default
    assert llm.prompts == []
    if mode == "sync":
        results = retriever.retrieve(question)
    else:
        results = asyncio.run(retriever.aretrieve(question))
    assert len(llm.prompts) == 1  # one sheet queried, one program written
    named = {"decision": "named", "names": [sheet]}
    assert answers(results) == [(f"table::{sheet}", rows, named)]
    assert route(results[0])["route"] == ["root", f"table::{sheet}"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_from_excel_searches_when_no_sheet_is_named(workbook: Path, mode: str) -> None:
    llm = row_count_llm()
    retriever = RecursiveIndexNodeRetriever.from_excel(
        workbook, llm=llm, summarize=False, embed_model=HashEmbedding(dim=64)
    )
    question = "Which city has the most capacity?"
    if mode == "sync":
        results = retriever.retrieve(question)
    else:
        results = asyncio.run(retriever.aretrieve(question))
    found = answers(results)
    assert len(found) == 2 and len(llm.prompts) == 2  # the two best pointers, as before
    assert all(trace == {"decision": "search"} for _, _, trace in found)
    assert found[0][0] == "table::Warehouses"


def test_a_question_naming_two_sheets_queries_both(workbook: Path) -> None:
    llm = row_count_llm()
    retriever = RecursiveIndexNodeRetriever.from_excel(
        workbook, llm=llm, summarize=False, embed_model=HashEmbedding(dim=64), similarity_top_k=1
    )
    results = retriever.retrieve("Compare Staff with Warehouses: which is longer?")
    named = {"decision": "named", "names": ["Staff", "Warehouses"]}
    assert answers(results) == [("table::Staff", "3", named), ("table::Warehouses", "2", named)]
    assert len(llm.prompts) == 2


def test_from_topics() -> None:
    topics = {
        "cats": ["Cats purr when content.", "Cats sleep most of the day."],
        "rockets": ["Rockets burn fuel to climb.", "Orbits need about 7.8 km/s."],
    }
    retriever = RecursiveIndexNodeRetriever.from_topics(
        topics, embed_model=HashEmbedding(dim=64), similarity_top_k=1, topic_top_k=1
    )
    results = retriever.retrieve("How fast must rockets go for orbits?")
    assert len(results) == 1 and route(results[0])["route"] == ["root", "topic::rockets"]
    assert (
        "rockets" in results[0].node.get_content().lower()
        or "orbit" in results[0].node.get_content().lower()
    )


class ClosableRetriever(ListRetriever):
    def __init__(self) -> None:
        super().__init__([])
        self.closed = 0
        self.aclosed = 0

    def close(self) -> None:
        self.closed += 1

    async def aclose(self) -> None:
        self.aclosed += 1


def test_closing_a_table_router_closes_the_search_behind_the_named_route() -> None:
    retriever = RecursiveIndexNodeRetriever.from_dataframes(
        FRAMES, summarize=False, embed_model=HashEmbedding(dim=64), lexical=False
    )
    router = retriever.retriever_dict["root"]
    search = ClosableRetriever()
    router.search = search  # the root search the named route falls back to
    retriever.close()
    assert (search.closed, search.aclosed) == (1, 0)
    asyncio.run(retriever.aclose())
    assert (search.closed, search.aclosed) == (1, 1)
