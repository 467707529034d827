"""JiebaBM25Retriever pinned exactly (found by mutation testing, issue #39): persisting over an
existing index, a folder that cannot be removed, the files' encoding and format, the log line,
the reload's checks and the deprecated name's warning."""

from __future__ import annotations

import json
import locale
import logging
import os
import warnings
from pathlib import Path

import pytest
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.retrievers import BM25Retriever, JiebaBM25Retriever
from llama_index_ext_advrag.retrievers.bm25 import CONFIG_FILE, NODES_FILE, bm25_persist_dir

LOGGER = "llama_index_ext_advrag.retrievers.bm25"


def make_nodes(*texts: str) -> list[TextNode]:
    return [TextNode(text=t, id_=f"n{i}") for i, t in enumerate(texts)]


def hits(retriever: JiebaBM25Retriever, query: str) -> list[tuple[str, float]]:
    return [(r.node.node_id, r.score) for r in retriever.retrieve(query)]


def test_a_collection_name_with_a_backslash_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'a\\\\b' must be a plain, non-empty name"):
        bm25_persist_dir(str(tmp_path / "m.db"), "a\\b")


def test_persisting_over_an_index_replaces_it_and_leaves_no_folder_behind(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "bm25"
    JiebaBM25Retriever(make_nodes("cats purr")).persist(folder)
    JiebaBM25Retriever(make_nodes("dogs bark", "cats sleep")).persist(folder)
    assert [p.name for p in tmp_path.iterdir()] == ["bm25"]
    loaded = JiebaBM25Retriever.from_persist_dir(folder)
    assert [n.text for n in loaded.nodes] == ["dogs bark", "cats sleep"]
    assert [i for i, _ in hits(loaded, "cats")] == ["n1"]


def test_an_old_index_that_cannot_be_removed_does_not_fail_the_persist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "bm25"
    JiebaBM25Retriever(make_nodes("cats purr")).persist(folder)

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(os, "rmdir", refuse)  # shutil.rmtree's last step
    JiebaBM25Retriever(make_nodes("dogs bark")).persist(folder)
    monkeypatch.undo()
    assert [n.text for n in JiebaBM25Retriever.from_persist_dir(folder).nodes] == ["dogs bark"]


def test_a_failed_write_removes_its_staging_folder_and_raises_the_writes_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def full_disk(self: JiebaBM25Retriever, folder: Path) -> None:
        (folder / NODES_FILE).write_text("partial", encoding="utf-8")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(JiebaBM25Retriever, "_write", full_disk)
    with pytest.raises(OSError, match="No space left"):
        JiebaBM25Retriever(make_nodes("cats purr")).persist(tmp_path / "bm25")
    assert list(tmp_path.iterdir()) == []


def test_a_staging_folder_that_cannot_be_removed_still_raises_the_writes_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(self: JiebaBM25Retriever, folder: Path) -> None:
        raise RuntimeError("write failed")

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(JiebaBM25Retriever, "_write", failing)
    monkeypatch.setattr(os, "rmdir", refuse)
    with pytest.raises(RuntimeError, match="write failed"):
        JiebaBM25Retriever(make_nodes("cats purr")).persist(tmp_path / "bm25")


def test_persist_creates_missing_parent_folders_logs_and_prints_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "a" / "b" / "bm25"
    retriever = JiebaBM25Retriever(make_nodes("cats purr", "dogs bark"))
    capfd.readouterr()
    with caplog.at_level(logging.INFO, logger=LOGGER):
        assert retriever.persist(folder) == folder
    ours = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert ours == [f"Persisted BM25 index of 2 nodes to {folder}"]
    loaded = JiebaBM25Retriever.from_persist_dir(folder)
    assert hits(loaded, "cats") == hits(retriever, "cats")
    assert capfd.readouterr() == ("", "")  # no progress bars from bm25s


def test_the_saved_files_are_utf8_readable_json(tmp_path: Path) -> None:
    retriever = JiebaBM25Retriever(make_nodes("世界首富来自法国"), similarity_top_k=3)
    folder = retriever.persist(tmp_path / "bm25")
    assert "世界首富来自法国" in (folder / NODES_FILE).read_text(encoding="utf-8")
    config = (folder / CONFIG_FILE).read_text(encoding="utf-8")
    assert config.startswith('{\n  "format_version": 1,\n  "')
    assert json.loads(config)["similarity_top_k"] == 3


def test_the_index_is_written_and_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    # under the C locale open() without an encoding is ASCII (unless Python runs in UTF-8 mode)
    retriever = JiebaBM25Retriever(make_nodes("世界首富来自法国", "Cats purr"))
    previous = locale.setlocale(locale.LC_CTYPE)
    locale.setlocale(locale.LC_CTYPE, "C")
    try:
        folder = retriever.persist(tmp_path / "bm25")
        loaded = JiebaBM25Retriever.from_persist_dir(folder)
    finally:
        locale.setlocale(locale.LC_CTYPE, previous)
    assert [n.text for n in loaded.nodes] == ["世界首富来自法国", "Cats purr"]


def test_a_nodes_file_shorter_than_recorded_is_refused_naming_both_counts(tmp_path: Path) -> None:
    folder = JiebaBM25Retriever(make_nodes("cats purr", "dogs bark")).persist(tmp_path / "bm25")
    first = (folder / NODES_FILE).read_text(encoding="utf-8").splitlines()[0]
    (folder / NODES_FILE).write_text(first + "\n", encoding="utf-8")
    message = (
        f"BM25 index in {str(folder)!r} is incomplete: {CONFIG_FILE} records 2 nodes, "
        f"{NODES_FILE} holds 1; persist it again"
    )
    with pytest.raises(ValueError) as raised:
        JiebaBM25Retriever.from_persist_dir(folder)
    assert str(raised.value) == message


def test_a_config_without_a_node_count_loads(tmp_path: Path) -> None:
    folder = JiebaBM25Retriever(make_nodes("cats purr")).persist(tmp_path / "bm25")
    config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
    del config["num_nodes"]  # written by an older version
    (folder / CONFIG_FILE).write_text(json.dumps(config), encoding="utf-8")
    assert [i for i, _ in hits(JiebaBM25Retriever.from_persist_dir(folder), "cats")] == ["n0"]


def test_a_reloaded_index_reads_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = JiebaBM25Retriever(make_nodes("cats purr")).persist(tmp_path / "bm25")
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)  # a relative path (e.g. "None") resolves here, holding nothing
    assert [i for i, _ in hits(JiebaBM25Retriever.from_persist_dir(folder), "cats")] == ["n0"]


def test_from_defaults_indexes_the_nodes_with_the_settings() -> None:
    retriever = JiebaBM25Retriever.from_defaults(make_nodes("cats purr", "cats sleep"), k1=1.2)
    assert retriever.k1 == 1.2 and [n.node_id for n in retriever.nodes] == ["n0", "n1"]
    assert len(retriever.retrieve("cats")) == 2


def deprecation_warning() -> warnings.WarningMessage:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        BM25Retriever(make_nodes("cats purr"))
    (warning,) = [w for w in caught if w.category is DeprecationWarning]
    return warning


def test_the_deprecated_name_warns_with_the_whole_message() -> None:
    assert str(deprecation_warning().message) == (
        "BM25Retriever from llama_index_ext_advrag is renamed JiebaBM25Retriever (the old "
        "name clashes with llama-index-retrievers-bm25); the old name will be removed"
    )


def test_the_deprecation_warning_points_at_the_callers_line() -> None:
    # (mutmut's trampoline adds a frame: its full run deselects this; the CI sample runs it)
    assert deprecation_warning().filename == __file__


def test_top_k_indices_of_a_negative_k_is_empty() -> None:
    import numpy as np

    from llama_index_ext_advrag.retrievers.bm25 import top_k_indices

    assert top_k_indices(np.array([1.0, 2.0]), -1) == []


def test_metadata_is_not_indexed() -> None:
    node = TextNode(text="cats purr", id_="n0", metadata={"lang": "french"})
    assert JiebaBM25Retriever([node]).retrieve("french") == []


def test_k1_b_and_method_each_change_the_scores() -> None:
    texts = ["cats purr cats", "cats sleep all day long in the sun", "dogs bark", "birds sing"]
    nodes = make_nodes(*texts)
    base = hits(JiebaBM25Retriever(nodes), "cats")
    for setting in ({"k1": 0.5}, {"b": 0.2}, {"method": "bm25+"}):
        assert hits(JiebaBM25Retriever(nodes, **setting), "cats") != base, setting


def test_building_an_index_prints_nothing(capfd: pytest.CaptureFixture[str]) -> None:
    capfd.readouterr()
    JiebaBM25Retriever(make_nodes("cats purr", "dogs bark"))
    assert capfd.readouterr() == ("", "")


def test_a_query_with_a_lone_surrogate_is_cleaned_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    retriever = JiebaBM25Retriever(make_nodes("cats purr"))
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.queries"):
        assert [i for i, _ in hits(retriever, "cats \ud800")] == ["n0"]
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("JiebaBM25Retriever: the query holds 1 lone surrogate")


def test_no_match_is_logged_at_debug_naming_the_query(caplog: pytest.LogCaptureFixture) -> None:
    retriever = JiebaBM25Retriever(make_nodes("cats purr"))
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        retriever.retrieve("cats")
        retriever.retrieve("zebras")
    ours = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert ours == ["BM25 found no node sharing a term with 'zebras'"]


def test_a_duplicate_id_is_named_not_the_first_id() -> None:
    nodes = [TextNode(text="a", id_="first"), TextNode(text="b", id_="twice")]
    with pytest.raises(ValueError, match="^node id 'twice' occurs more than once$"):
        JiebaBM25Retriever([*nodes, TextNode(text="c", id_="twice")])
