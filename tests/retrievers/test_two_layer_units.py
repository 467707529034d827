"""Units and routing of the two-layer retriever (unit tier: no Milvus, no network)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from advrag_testing import ScriptedLLM
from llama_index.core import Document
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.retrievers._routing import (
    KEY_FIELD,
    NAME_FIELD,
    PART_FIELD,
    RouteHit,
    fetched_details,
    rank_routes,
    searched_details,
)
from llama_index_ext_advrag.retrievers._two_layer_store import summarise_with_llm, unit_nodes
from llama_index_ext_advrag.retrievers._units import (
    UnitGranularity,
    UnitKind,
    document_units,
    split_by_bytes,
    table_unit,
    workbook_units,
    year_tokens,
)
from llama_index_ext_advrag.retrievers.two_layer import DetailsMode, TwoLayerMilvusRetriever

QUOTED = 'Q3 "draft" it\'s'  # Excel forbids \ / ? * [ ] : in sheet names


def make_workbook(path: Path) -> Path:
    frames = {
        "2023年10大首富": pd.DataFrame(
            {"Name": ["Ada\nLovelace", "Bo | Chen"], "Net_Worth": ["$10 billion", "$9 billion"]}
        ),
        QUOTED: pd.DataFrame({"Item": ["pens", "ink"], "Count": [3, 4]}),
        "Empty": pd.DataFrame(),
    }
    with pd.ExcelWriter(path) as writer:
        for name, frame in frames.items():
            frame.to_excel(writer, sheet_name=name, index=False)
    return path


def test_workbook_units_keep_names_whole_tables_and_years(tmp_path: Path) -> None:
    units = workbook_units(make_workbook(tmp_path / "book.xlsx"))
    assert [u.key for u in units] == ["2023年10大首富", QUOTED]  # the empty sheet is skipped
    rich = units[0]
    assert rich.kind is UnitKind.TABLE and len(rich.details) == 1
    table = rich.details[0]
    assert "| Ada Lovelace | $10 billion |" in table  # embedded newline flattened
    assert "| Bo / Chen | $9 billion |" in table  # a pipe cannot break the table
    assert rich.summary.splitlines()[:2] == ["Table: 2023年10大首富", "Year: 2023 (2023年)"]
    assert "Columns: Name, Net_Worth" in rich.summary and "2 rows." in rich.summary
    assert rich.metadata["num_rows"] == 2


def test_summary_rows_limit(tmp_path: Path) -> None:
    unit = table_unit("T", ["a"], [[i] for i in range(10)], summary_rows=2)
    assert "a: 1" in unit.summary and "a: 2" not in unit.summary
    assert "| 9 |" in unit.details[0]


def test_split_by_bytes_keeps_header_and_every_line() -> None:
    lines = [f"| row {i} | {'汉' * 10} |" for i in range(50)]
    parts = split_by_bytes("Table: T\n| a | b |", lines, max_bytes=300)
    assert len(parts) > 1
    assert all(p.startswith("Table: T\n| a | b |") and len(p.encode()) <= 300 for p in parts)
    body = [line for p in parts for line in p.splitlines()[2:]]
    assert body == lines
    huge = split_by_bytes("H", ["x" * 1000], max_bytes=100)
    assert "".join(p.removeprefix("H\n") for p in huge) == "x" * 1000
    with pytest.raises(ValueError, match="no room"):
        split_by_bytes("H" * 80, ["x"], max_bytes=100)


def test_year_tokens() -> None:
    assert year_tokens("2019年 vs 2023, not 12345 or 1750") == ["2019", "2023"]


def test_document_units_per_document_and_per_section() -> None:
    text = (
        "# Manual\n\nIntro sentence one. Intro two.\n\n## Setup\n\nPlug it in. Press start.\n\n"
        "## Empty\n\n## Care\n\nClean it weekly."
    )
    docs = [Document(text=text, id_="m"), Document(text="  ", id_="blank")]
    whole = document_units(docs, UnitGranularity.DOCUMENT, chunk_tokens=8)
    assert [u.key for u in whole] == ["m"] and whole[0].name == "Manual"
    assert whole[0].summary.startswith("Manual\nIntro sentence one.")
    assert len(whole[0].details) > 1  # chunked at 8 tokens, sentence-aligned
    sections = document_units(docs, UnitGranularity.SECTION, chunk_tokens=64)
    assert [u.name for u in sections] == ["Manual", "Manual / Setup", "Manual / Care"]
    assert sections[1].details == ("## Setup\n\nPlug it in. Press start.",)
    assert all(u.key.startswith("m#") for u in sections)


@pytest.mark.parametrize("granularity", list(UnitGranularity))
def test_documents_sharing_an_id_get_distinct_units(granularity: UnitGranularity) -> None:
    docs = [
        Document(text="# A\n\nFirst text here.", id_="x"),
        Document(text="# B\n\nSecond text here.", id_="x#1"),
        Document(text="# C\n\nThird text here.", id_="x"),
    ]
    units = document_units(docs, granularity, chunk_tokens=32)
    keys = [u.key for u in units]
    assert len(keys) == 3 == len(set(keys))
    assert [u.metadata["document_id"] for u in units] == ["x", "x#1", "x#2"]
    assert [u.details[0].split()[-3] for u in units] == ["First", "Second", "Third"]


def test_document_title_from_metadata() -> None:
    doc = Document(text="Plain text without heading.", id_="d", metadata={"title": "Policy"})
    assert document_units([doc], UnitGranularity.DOCUMENT, 32)[0].name == "Policy"


def hit(key: str, name: str | None = None) -> TextNode:
    return TextNode(id_=f"s-{key}", text=key, metadata={KEY_FIELD: key, NAME_FIELD: name or key})


def test_rank_routes_adds_cue_overlap_and_dedupes() -> None:
    nodes = [hit("2022年10大首富"), hit("2023年10大首富"), hit("2023年10大首富")]
    route = rank_routes(nodes, [0.50, 0.45, 0.40], "richest people in 2023", 2, cue_weight=0.3)
    assert [r.unit_key for r in route] == ["2023年10大首富", "2022年10大首富"]
    assert route[0].score == pytest.approx(0.45 + 0.3 * 1.0)  # query cues {2023} all matched
    assert route[0].cue_overlap == 1.0 and route[1].cue_overlap == 0.0
    dense = rank_routes(nodes, [0.50, 0.45, 0.40], "richest people in 2023", 1, cue_weight=0.0)
    assert [r.unit_key for r in dense] == ["2022年10大首富"]
    assert rank_routes([], [], "anything", 3, 0.3) == []


def test_fetched_and_searched_details_order() -> None:
    route = [RouteHit("b", "b", 0.9, 0.9, 0.0), RouteHit("a", "a", 0.5, 0.5, 0.0)]

    def part(key: str, index: int) -> TextNode:
        return TextNode(id_=f"{key}{index}", text="x", metadata={KEY_FIELD: key, PART_FIELD: index})

    fetched = fetched_details(route, [part("a", 1), part("b", 1), part("a", 0), part("z", 0)])
    assert [(n.node.node_id, n.score) for n in fetched] == [("b1", 0.9), ("a0", 0.5), ("a1", 0.5)]
    searched = searched_details(route, [part("a", 0), part("b", 0), part("z", 0)], [0.2, 0.7, 0.9])
    assert [n.node.node_id for n in searched] == ["b0", "a0"]  # z is not routed


def test_unit_nodes_share_the_key_and_hide_metadata_from_embedder(tmp_path: Path) -> None:
    units = workbook_units(make_workbook(tmp_path / "book.xlsx"))
    summaries, details = unit_nodes(units, ["heuristic"] * len(units), "coll")
    assert [s.metadata[KEY_FIELD] for s in summaries] == [u.key for u in units]
    assert {d.metadata[KEY_FIELD] for d in details} == {u.key for u in units}
    assert summaries[0].get_content(metadata_mode="embed") == units[0].summary
    assert "unit_name" in summaries[0].get_content(metadata_mode="llm")
    assert len({n.node_id for n in [*summaries, *details]}) == len(summaries) + len(details)
    again, _ = unit_nodes(units, ["heuristic"] * len(units), "coll")
    assert [n.node_id for n in again] == [n.node_id for n in summaries]  # deterministic ids


def test_llm_summary_used_and_fallbacks(tmp_path: Path) -> None:
    unit = workbook_units(make_workbook(tmp_path / "book.xlsx"))[0]
    llm = ScriptedLLM(["The richest people of 2023 with their net worth and sources."])
    summarised, source = summarise_with_llm(unit, llm)
    assert source == "llm" and summarised.summary.startswith(unit.summary)
    assert summarised.summary.endswith("net worth and sources.")
    assert "2023年10大首富" in llm.prompts[0]
    short, source = summarise_with_llm(unit, ScriptedLLM(["ok"]))
    assert source == "heuristic" and short == unit

    def broken(prompt: str) -> str:
        raise RuntimeError("server down")

    failed, source = summarise_with_llm(unit, ScriptedLLM(broken))
    assert source == "heuristic" and failed == unit
    assert summarise_with_llm(unit, None) == (unit, "heuristic")


def test_settings_defaults_and_invalid_values() -> None:
    retriever = TwoLayerMilvusRetriever()  # no stores: the settings alone
    assert (retriever.route_top_k, retriever.details_top_k, retriever.cue_weight) == (2, 4, 0.3)
    assert retriever.details_mode is None
    searching = TwoLayerMilvusRetriever(details_mode="search")
    assert searching.details_mode is DetailsMode.SEARCH
    for bad in ({"route_top_k": 0}, {"cue_weight": -1}, {"details_top_k": 0}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            TwoLayerMilvusRetriever(**bad)
    with pytest.raises(ValueError, match="scan"):
        TwoLayerMilvusRetriever(details_mode="scan")
    with pytest.raises(ValueError, match="unknown_option"):
        TwoLayerMilvusRetriever(unknown_option=1)
    with pytest.raises(ValueError, match="unknown_option"):
        retriever.with_settings(unknown_option=1)
    with pytest.raises(ValueError, match="uri"):
        retriever.uri = "elsewhere.db"  # where the index lives is fixed
