"""TwoLayerMilvusRetriever on Milvus Lite and on the Milvus server (same assertions)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document

from llama_index_ext_advrag import IndexLayoutError
from llama_index_ext_advrag.milvus import query_nodes
from llama_index_ext_advrag.retrievers import TwoLayerMilvusRetriever
from llama_index_ext_advrag.retrievers import two_layer as two_layer_module
from llama_index_ext_advrag.retrievers._units import Unit, UnitKind
from llama_index_ext_advrag.retrievers.two_layer import DetailsMode
from llama_index_ext_advrag.trace import TRACE_KEY

CHILD = Path(__file__).with_name("restart_child.py")


def route_of(nodes) -> list[str]:
    return [r["unit_key"] for r in nodes[0].node.metadata[TRACE_KEY]["two_layer"]["route"]]


def summary(nodes) -> list[tuple[str, float]]:
    return [(n.node.node_id, round(n.score or 0.0, 5)) for n in nodes]


@pytest.fixture(scope="module")
def tables(module_milvus_uri: str, data_dir: Path) -> TwoLayerMilvusRetriever:
    """One index of data/tables.xlsx per backend, shared by the read-only tests below."""
    return TwoLayerMilvusRetriever.from_excel(
        data_dir / "tables.xlsx",
        uri=module_milvus_uri,
        collection_name=f"t_{uuid.uuid4().hex[:12]}",
        embed_model=HashEmbedding(dim=64),
        route_top_k=1,
    )


def location(retriever: TwoLayerMilvusRetriever) -> tuple[str, str]:
    data = retriever.to_dict()
    return data["uri"], data["collection_name"]


def test_routes_to_the_sheet_and_returns_the_whole_table(tables: TwoLayerMilvusRetriever) -> None:
    nodes = tables.retrieve("2023年销售 华东 销量")
    assert route_of(nodes) == ["2023年销售"]
    assert len(nodes) == 1 and nodes[0].node.metadata["unit_key"] == "2023年销售"
    text = nodes[0].node.get_content()
    assert (
        text.startswith("Table: 2023年销售") and text.count("\n| ") == 1 + 16
    )  # header + every row
    trace = nodes[0].node.metadata[TRACE_KEY]["two_layer"]
    assert trace["details_mode"] == "fetch" and trace["route_rank"] == 0
    assert trace["route"][0]["unit_name"] == "2023年销售" and trace["route"][0]["score"] > 0
    assert tables.layout["num_units"] == 4 and tables.layout["source"] == "excel:tables.xlsx"


def test_sync_async_and_reopen_agree(tables: TwoLayerMilvusRetriever) -> None:
    milvus_uri, collection_name = location(tables)
    query = "Staff salary by department"
    sync = tables.retrieve(query)
    assert route_of(sync) == ["Staff"]
    assert summary(asyncio.run(tables.aretrieve(query))) == summary(sync)
    reopened = TwoLayerMilvusRetriever.from_uri(
        milvus_uri, embed_model=HashEmbedding(dim=64), collection_name=collection_name,
        route_top_k=1,
    )  # fmt: skip
    assert summary(reopened.retrieve(query)) == summary(sync)
    clone = TwoLayerMilvusRetriever.from_dict(tables.to_dict(), embed_model=HashEmbedding(dim=64))
    assert clone.to_dict() == tables.to_dict()
    assert summary(clone.retrieve(query)) == summary(sync)


@pytest.mark.parametrize("mode", ["fetch", "search"])
def test_async_uses_only_the_async_client(
    tables: TwoLayerMilvusRetriever, forbid_blocking_milvus, mode: str
) -> None:
    retriever = TwoLayerMilvusRetriever.from_dict(
        {**tables.to_dict(), "details_mode": mode}, embed_model=HashEmbedding(dim=64)
    )
    expected = summary(retriever.retrieve("Warehouses capacity"))
    forbid_blocking_milvus(two_layer_module, "query_nodes")
    assert summary(asyncio.run(retriever.aretrieve("Warehouses capacity"))) == expected


def test_search_mode_within_routed_units(tables: TwoLayerMilvusRetriever) -> None:
    searching = TwoLayerMilvusRetriever.from_dict(
        {**tables.to_dict(), "details_mode": "search", "route_top_k": 2},
        embed_model=HashEmbedding(dim=64),
    )
    assert searching.details_mode is DetailsMode.SEARCH
    nodes = searching.retrieve("Warehouses capacity city")
    routed = route_of(nodes)
    assert len(routed) == 2 and "Warehouses" in routed
    assert {n.node.metadata["unit_key"] for n in nodes} <= set(routed)
    assert [n.score for n in nodes] == sorted((n.score for n in nodes), reverse=True)


def test_route_top_k_caps_the_units_routed(tables: TwoLayerMilvusRetriever) -> None:
    """On both backends: exactly ``route_top_k`` units (at most all of them), only their
    details, up to the bound (1,024, whose summary search asks Milvus for 1,024 hits); one
    past it is refused by name."""
    query = "Staff Warehouses 2023年销售 salary capacity"
    units = tables.layout["num_units"]
    for top_k in (1, 2, 3, 1024):
        retriever = TwoLayerMilvusRetriever.from_dict(
            {**tables.to_dict(), "route_top_k": top_k, "details_mode": "fetch"},
            embed_model=HashEmbedding(dim=64),
        )
        for nodes in (retriever.retrieve(query), asyncio.run(retriever.aretrieve(query))):
            routed = route_of(nodes)
            assert len(routed) == min(top_k, units) == len(set(routed)), (top_k, routed)
            assert [n.node.metadata["unit_key"] for n in nodes] == routed  # one table each
    for bad in (0, 1025):
        with pytest.raises(ValueError, match=rf"route_top_k[\s\S]*{'1024' if bad else '1'}"):
            TwoLayerMilvusRetriever.from_dict(
                {**tables.to_dict(), "route_top_k": bad}, embed_model=HashEmbedding(dim=64)
            )


def test_documents_sharing_an_id_are_both_kept(
    milvus_uri: str, collection_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """As the parsers and the other builders do: the second document is kept under "<id>#1"
    (warned), not refused."""
    docs = [
        Document(text="# Cats\n\nCats purr when they are content.", id_="same"),
        Document(text="# Dogs\n\nDogs bark at the postman.", id_="same"),
    ]
    with caplog.at_level("WARNING"):
        retriever = TwoLayerMilvusRetriever.from_documents(
            docs, uri=milvus_uri, collection_name=collection_name,
            embed_model=HashEmbedding(dim=64), route_top_k=1, cue_weight=0.0,
        )  # fmt: skip
    assert "'same'" in caplog.text and "'same#1'" in caplog.text
    assert retriever.layout["num_units"] == 2
    for query, key, text in (
        ("Cats purr when they are content", "same", "Cats purr"),
        ("Dogs bark at the postman", "same#1", "Dogs bark"),
    ):
        for nodes in (retriever.retrieve(query), asyncio.run(retriever.aretrieve(query))):
            assert route_of(nodes) == [key]
            assert text in nodes[0].node.get_content()
            assert nodes[0].node.metadata["document_id"] == key


def index_type(retriever: TwoLayerMilvusRetriever, collection: str) -> str:
    client = retriever._summary_store.client
    return str(client.describe_index(collection, client.list_indexes(collection)[0])["index_type"])


def test_tiny_collections_get_a_flat_index(tables: TwoLayerMilvusRetriever) -> None:
    for key in ("summary_collection", "details_collection"):
        assert index_type(tables, tables.layout[key]) == "FLAT"


def test_index_preset_applies(milvus_uri: str, collection_name: str) -> None:
    units = [
        Unit(f"u{i}", f"unit {i}", UnitKind.DOCUMENT, f"about {i}", (f"body {i}",))
        for i in range(3)
    ]
    hnsw = TwoLayerMilvusRetriever.from_units(
        units, uri=milvus_uri, collection_name=collection_name, embed_model=HashEmbedding(dim=64),
        index_preset="HNSW",
    )  # fmt: skip
    assert index_type(hnsw, hnsw.layout["summary_collection"]) == "HNSW"
    assert hnsw.retrieve("about 2")[0].node.metadata["unit_key"] == "u2"


def test_hostile_unit_keys_cannot_widen_the_filter(milvus_uri: str, collection_name: str) -> None:
    hostile = 'x" or unit_key != "'
    units = [
        Unit(hostile, hostile, UnitKind.DOCUMENT, "hostile quote unit", ("secret of hostile",)),
        Unit("back\\slash", "back\\slash", UnitKind.DOCUMENT, "backslash unit", ("slash body",)),
        Unit("plain", "plain", UnitKind.DOCUMENT, "plain unit", ("plain body",)),
    ]
    retriever = TwoLayerMilvusRetriever.from_units(
        units, uri=milvus_uri, collection_name=collection_name, embed_model=HashEmbedding(dim=64),
        route_top_k=1, cue_weight=0.0,
    )  # fmt: skip
    for query, key, body in (
        ("hostile quote unit", hostile, "secret of hostile"),
        ("backslash unit", "back\\slash", "slash body"),
    ):
        nodes = retriever.retrieve(query)
        assert route_of(nodes) == [key]
        assert [n.node.get_content() for n in nodes] == [body]  # not every unit's details


def test_from_documents_sections_search_mode(milvus_uri: str, collection_name: str) -> None:
    docs = [
        Document(
            text="# Pump manual\n\n## Priming\n\nOpen the valve. Fill the housing with water.\n\n"
            "## Storage\n\nDrain the pump before winter. Keep it dry.",
            id_="pump",
        ),
        Document(text="# Kettle guide\n\nDescale the kettle monthly with vinegar.", id_="kettle"),
    ]
    retriever = TwoLayerMilvusRetriever.from_documents(
        docs, uri=milvus_uri, collection_name=collection_name, embed_model=HashEmbedding(dim=64),
        granularity="section", detail_chunk_tokens=12, route_top_k=1, details_top_k=1,
    )  # fmt: skip
    assert retriever.details_mode is DetailsMode.SEARCH
    assert retriever.layout["num_units"] == 3
    nodes = retriever.retrieve("drain the pump before winter")
    assert route_of(nodes) == ["pump#3"]
    assert len(nodes) == 1 and "Drain the pump" in nodes[0].node.get_content()
    assert retriever.retrieve("descale kettle vinegar")[0].node.metadata["unit_key"] == "kettle#1"


def test_errors_are_named(tables: TwoLayerMilvusRetriever, data_dir: Path) -> None:
    milvus_uri, collection_name = location(tables)
    with pytest.raises(ValueError, match="already exist"):
        TwoLayerMilvusRetriever.from_excel(
            data_dir / "tables.xlsx", uri=milvus_uri, collection_name=collection_name,
            embed_model=HashEmbedding(dim=64),
        )  # fmt: skip
    with pytest.raises(IndexLayoutError, match=collection_name):
        TwoLayerMilvusRetriever.from_uri(milvus_uri, collection_name="t_missing")
    with pytest.raises(ValueError, match="32 dimensions"):
        TwoLayerMilvusRetriever.from_uri(
            milvus_uri, embed_model=HashEmbedding(dim=32), collection_name=collection_name
        ).retrieve("Staff")
    with pytest.raises(FileNotFoundError, match="nope.xlsx"):
        TwoLayerMilvusRetriever.from_excel("nope.xlsx", uri=milvus_uri)
    with pytest.raises(ValueError, match="route_top_k"):
        TwoLayerMilvusRetriever.from_uri(milvus_uri, collection_name=collection_name, route_top_k=0)


def test_two_layer_survives_restart(
    milvus_uri: str, collection_name: str, tmp_path: Path, data_dir: Path
) -> None:
    built, reopened = tmp_path / "built.json", tmp_path / "reopened.json"
    for action, out in (("build", built), ("open", reopened)):
        completed = subprocess.run(
            [sys.executable, str(CHILD), action, "two_layer", milvus_uri, collection_name,
             str(out), str(data_dir / "tables.xlsx")],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        assert completed.returncode == 0, completed.stderr[-3000:]
    first = json.loads(built.read_text(encoding="utf-8"))
    assert first == json.loads(reopened.read_text(encoding="utf-8"))
    assert all(first.values())


@pytest.mark.milvus_lite
@pytest.mark.dataset
def test_billionaires_route_by_year(shared_datasets: Path, tmp_path: Path, embed_model) -> None:
    retriever = TwoLayerMilvusRetriever.from_excel(
        shared_datasets / "seed_scenarios" / "world_top10_billionaires.xlsx",
        uri=str(tmp_path / "b.db"), embed_model=embed_model, route_top_k=1,
    )  # fmt: skip
    assert retriever.layout["num_units"] == 5
    for year in range(2019, 2024):
        nodes = retriever.retrieve(f"Who was the richest person in the world in {year}?")
        assert route_of(nodes) == [f"{year}年10大首富"]
        assert f"Table: {year}年10大首富" in nodes[0].node.get_content()


@pytest.mark.local_llm
def test_llm_summaries_with_the_local_model(local_llm, tmp_path: Path) -> None:
    docs = [
        Document(text="# Pump manual\n\nOpen the valve. Fill the housing with water.", id_="pump"),
        Document(text="# Kettle guide\n\nDescale the kettle monthly with vinegar.", id_="kettle"),
    ]
    retriever = TwoLayerMilvusRetriever.from_documents(
        docs, uri=str(tmp_path / "llm.db"), embed_model=HashEmbedding(dim=64), llm=local_llm,
        route_top_k=1,
    )  # fmt: skip
    rows = query_nodes(retriever._summary_store, 'unit_key != ""', limit=10)
    sources = {n.metadata["unit_key"]: n.metadata["summary_source"] for n in rows}
    assert set(sources) == {"pump", "kettle"}
    assert retriever.layout["summaries_from_llm"] == list(sources.values()).count("llm")
    for node in rows:  # an LLM summary is appended after the name, never replaces it
        assert node.get_content().startswith(node.metadata["unit_name"])
        if sources[node.metadata["unit_key"]] == "llm":
            assert len(node.get_content()) > len(node.metadata["unit_name"]) + 20
    assert retriever.retrieve("Pump manual valve")[0].node.metadata["unit_key"] == "pump"
