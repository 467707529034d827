"""Index presets: parameter rules (unit) and every preset built and searched on Milvus Lite
and the Milvus server."""

from __future__ import annotations

import doctest
import logging
import math

import pytest
from pymilvus import DataType

from llama_index_ext_advrag.milvus import (
    IndexPreset,
    build_index_params,
    build_search_params,
    flush,
    is_server_uri,
)
from llama_index_ext_advrag.milvus import connection as connection_module
from llama_index_ext_advrag.milvus import filters as filters_module
from llama_index_ext_advrag.milvus import indexes as indexes_module
from llama_index_ext_advrag.milvus.connection import ensure_loaded
from llama_index_ext_advrag.milvus.indexes import (
    parse_preset,
    plan_from_description,
    resolve_index,
    suggest_nlist,
    suggest_nprobe,
    suggest_pq_m,
    warn_if_untrainable,
)

# --- unit ------------------------------------------------------------------------------------


@pytest.mark.parametrize("module", [connection_module, filters_module, indexes_module])
def test_docstring_examples_run(module) -> None:
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0


@pytest.mark.parametrize(
    ("rows", "nlist"),
    [(None, 128), (0, 1), (20, 1), (1_000, 25), (10_000, 256), (100_000, 1265), (10**6, 4000)],
)
def test_nlist_is_four_sqrt_rows_within_the_training_rule(rows: int | None, nlist: int) -> None:
    assert suggest_nlist(rows) == nlist


def test_nlist_is_clamped_at_65536() -> None:
    assert suggest_nlist(10**12) == 65_536


@pytest.mark.parametrize("rows", [500, 10_000, 123_456, 10**7])
def test_suggested_nlist_is_trainable(rows: int) -> None:
    nlist = suggest_nlist(rows)
    assert rows >= 39 * nlist
    assert nlist <= round(4 * math.sqrt(rows))


@pytest.mark.parametrize(("nlist", "nprobe"), [(1, 1), (4, 4), (16, 8), (128, 16), (4000, 500)])
def test_nprobe(nlist: int, nprobe: int) -> None:
    assert suggest_nprobe(nlist) == nprobe


@pytest.mark.parametrize("dim", [1, 4, 7, 8, 100, 128, 384, 768, 1024, 1536])
def test_pq_m_divides_dim(dim: int) -> None:
    m = suggest_pq_m(dim)
    assert dim % m == 0
    assert 1 <= m <= max(1, dim // 8)


def test_pq_m_rejects_non_positive_dim() -> None:
    with pytest.raises(ValueError, match="0"):
        suggest_pq_m(0)


@pytest.mark.parametrize(("rows", "expected"), [(None, "FLAT"), (9_999, "FLAT"), (10_000, "HNSW")])
def test_auto_is_flat_for_small_or_unknown_collections(rows: int | None, expected: str) -> None:
    assert resolve_index("AUTO", num_rows=rows).index_type == expected


def test_flat_has_no_parameters() -> None:
    plan = resolve_index(IndexPreset.FLAT, num_rows=10**6)
    assert plan.build_params == {}
    assert plan.search_params == {"params": {}}


def test_hnsw_parameters() -> None:
    plan = resolve_index("hnsw", metric="ip")
    assert plan.index_type == "HNSW" and plan.metric_type == "IP"
    assert plan.build_params == {"M": 16, "efConstruction": 200}
    assert plan.search_params == {"params": {"ef": 128}}


def test_hnsw_ef_grows_with_top_k() -> None:
    assert build_search_params("HNSW", top_k=10) == {"params": {"ef": 128}}
    assert build_search_params("HNSW", top_k=500) == {"params": {"ef": 500}}


def test_ivf_flat_parameters_follow_the_row_count() -> None:
    plan = resolve_index("IVF_FLAT", num_rows=100_000)
    assert plan.build_params == {"nlist": 1265}
    assert plan.search_params == {"params": {"nprobe": 159}}


def test_ivf_pq_parameters() -> None:
    plan = resolve_index("IVF_PQ", num_rows=10**6, dim=384)
    assert plan.build_params == {"nlist": 4000, "m": 48, "nbits": 8}
    assert plan.search_params == {"params": {"nprobe": 500}}


def test_ivf_pq_needs_dim() -> None:
    with pytest.raises(ValueError, match="dim"):
        resolve_index("IVF_PQ", num_rows=1000)


def test_ivf_on_too_few_rows_warns(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.milvus.indexes"):
        resolve_index("IVF_FLAT", num_rows=20)
    assert "nlist=1 on 20 rows" in caplog.text


def test_ivf_with_enough_rows_or_unknown_size_does_not_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.milvus.indexes"):
        resolve_index("IVF_FLAT", num_rows=100_000)
        resolve_index("IVF_FLAT")
    assert caplog.text == ""


@pytest.mark.parametrize(
    ("nlist", "rows", "warns"), [(1024, 1000, True), (64, 2000, True), (16, 1000, False)]
)
def test_untrainable_rule(nlist: int, rows: int, warns: bool) -> None:
    assert warn_if_untrainable(nlist, rows) is warns


def test_lite_falls_back_from_ivf_pq_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.milvus.indexes"):
        plan = resolve_index("IVF_PQ", num_rows=50_000, dim=64, lite=True)
    assert plan.index_type == "IVF_FLAT"
    assert plan.preset is IndexPreset.IVF_PQ
    assert plan.fallback_reason and "IVF_PQ" in plan.fallback_reason
    assert plan.build_params == {"nlist": 894}
    assert "Milvus Lite cannot build IVF_PQ" in caplog.text


@pytest.mark.parametrize("preset", ["FLAT", "IVF_FLAT", "HNSW"])
def test_lite_keeps_the_presets_it_supports(preset: str) -> None:
    plan = resolve_index(preset, num_rows=50_000, dim=64, lite=True)
    assert plan.index_type == preset and plan.fallback_reason is None


def test_unknown_preset_and_metric_are_named() -> None:
    with pytest.raises(ValueError, match="'DISKANN'.*AUTO, FLAT, IVF_FLAT, HNSW, IVF_PQ"):
        parse_preset("DISKANN")
    with pytest.raises(ValueError, match="'hamming'"):
        resolve_index("FLAT", metric="hamming")
    with pytest.raises(ValueError, match="-1"):
        resolve_index("FLAT", num_rows=-1)


def test_vector_store_config_carries_flat_and_nested_parameters() -> None:
    config = resolve_index("HNSW").to_vector_store_config()
    assert config == {
        "index_type": "HNSW",
        "metric_type": "COSINE",
        "M": 16,
        "efConstruction": 200,
        "params": {"M": 16, "efConstruction": 200},
    }
    assert resolve_index("FLAT").to_vector_store_config() == {
        "index_type": "FLAT",
        "metric_type": "COSINE",
    }


def test_plan_from_server_and_lite_descriptions() -> None:
    server = {"index_type": "IVF_FLAT", "metric_type": "COSINE", "nlist": "16", "field_name": "v"}
    lite = {"index_type": "IVF_FLAT", "metric_type": "COSINE", "params": {"nlist": 16}}
    for description in (server, lite):
        plan = plan_from_description(description, "AUTO")
        assert plan.build_params == {"nlist": 16}
        assert plan.search_params == {"params": {"nprobe": 8}}
    hnsw = plan_from_description({"index_type": "HNSW", "M": "8", "efConstruction": "64"}, "AUTO")
    assert hnsw.build_params == {"M": 8, "efConstruction": 64}
    assert hnsw.search_params == {"params": {"ef": 128}}


# --- Milvus Lite and server ------------------------------------------------------------------

DIM = 8
ROWS = 600


def _vector(i: int) -> list[float]:
    vector = [0.001 * (i // DIM)] * DIM
    vector[i % DIM] = 1.0 + 0.01 * i
    return vector


@pytest.mark.parametrize("preset", ["FLAT", "IVF_FLAT", "HNSW", "IVF_PQ"])
def test_every_preset_builds_loads_and_searches(
    client, milvus_uri: str, collection_name: str, preset: str
) -> None:
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    index_params = build_index_params(client, "vec", preset, metric="L2", num_rows=ROWS, dim=DIM)
    client.create_collection(collection_name, schema=schema, index_params=index_params)
    client.insert(collection_name, [{"id": i, "vec": _vector(i)} for i in range(ROWS)])
    flush(client, collection_name)
    # a release + load builds the index on the flushed segments (where Lite rejects IVF_PQ)
    client.release_collection(collection_name)
    ensure_loaded(client, collection_name)

    description = client.describe_index(collection_name, client.list_indexes(collection_name)[0])
    lite = not is_server_uri(milvus_uri)
    expected = resolve_index(preset, metric="L2", num_rows=ROWS, dim=DIM, lite=lite)
    assert description["index_type"] == expected.index_type
    assert plan_from_description(description, preset).build_params == expected.build_params
    hits = client.search(
        collection_name,
        [_vector(42)],
        limit=3,
        search_params=expected.search_params,
        output_fields=["id"],
    )
    assert len(hits[0]) == 3
    if expected.index_type != "IVF_PQ":  # PQ is lossy; the others find the exact vector
        assert hits[0][0]["id"] == 42
