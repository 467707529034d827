"""The ``advrag run`` main job, end to end on a tiny folder with a real Milvus Lite file."""

from __future__ import annotations

import json

import pytest

from llama_index_ext_advrag import cli


def test_bad_top_k_is_refused(capsys) -> None:
    assert cli.main(["run", "--top-k", "0"]) == 2
    assert "--top-k must be >= 1, got 0" in capsys.readouterr().err


@pytest.mark.milvus_lite
def test_run_prints_coverage_table(tmp_path, capsys, monkeypatch, embed_model) -> None:
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_default_embed_model", lambda: embed_model
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "pump.md").write_text(
        "# Pump\nThe Ferro pump runs at 3.5 bar.\n\n# Cooling\nThe fan starts at 40 degrees.\n",
        encoding="utf-8",
    )
    questions = [
        {
            "id": "1",
            "question": "At what pressure does the pump run?",
            "answers": ["3.5 bar"],
            "type": "single-hop",
        },
        {"id": "2", "question": "Who built the pump?", "answers": [], "type": "unanswerable"},
    ]
    (data / "qa.jsonl").write_text("\n".join(json.dumps(q) for q in questions), encoding="utf-8")
    code = cli.main(
        ["run", "--data", str(data), "--uri", str(tmp_path / "run.db"), "--top-k", "2", "--quiet"]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "1 documents, 2 questions" in out
    row = next(line for line in out.splitlines() if " all " in line)
    assert row.split()[-3] == "1.000"  # coverage of the one answerable question
    assert "(1 unanswerable questions are not scored for coverage)" in out
