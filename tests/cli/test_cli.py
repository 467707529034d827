"""The ``advrag`` entry point: its commands, the Milvus uri default, one-line errors."""

from __future__ import annotations

import pytest

from llama_index_ext_advrag import cli
from llama_index_ext_advrag.evaluation.session import DEFAULT_URI


@pytest.mark.parametrize("command", [["compare"], ["ask", "a question"]])
def test_the_uri_defaults_to_the_environment_then_the_lite_file(monkeypatch, command) -> None:
    monkeypatch.delenv("ADVRAG_MILVUS_URI", raising=False)
    assert cli.build_parser().parse_args(command).uri == DEFAULT_URI
    monkeypatch.setenv("ADVRAG_MILVUS_URI", "http://127.0.0.1:19531")
    assert cli.build_parser().parse_args(command).uri == "http://127.0.0.1:19531"
    given = cli.build_parser().parse_args([*command, "--uri", "x.db"])
    assert given.uri == "x.db"  # a flag beats the environment


def test_only_compare_and_ask_are_commands(capsys) -> None:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["run", "--data", "data"])  # the former single-baseline command
    assert stopped.value.code == 2
    assert "invalid choice: 'run' (choose from" in capsys.readouterr().err
