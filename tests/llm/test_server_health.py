"""The local model server must prove it generates; a broken one is one clear error with its log.

These start real processes on 127.0.0.1 (hence the ``local_llm`` tier): the real llama.cpp server
on a corrupt GGUF file, and a stand-in that answers ``/v1/models`` and then dies at its first
completion, as a native llama.cpp build does on a CPU with AMX.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

import pytest
from model_server import (
    LocalLLMServer,
    LocalLLMServerError,
    check_llm_server,
)

FAKE_SERVER = Path(__file__).with_name("fake_crashing_server.py")


@pytest.mark.local_llm
def test_server_that_dies_at_its_first_completion_fails_clearly() -> None:
    server = LocalLLMServer(
        command=[sys.executable, str(FAKE_SERVER), "{port}"], startup_timeout=180
    )
    with pytest.raises(LocalLLMServerError) as caught:
        server.start()
    message = str(caught.value)
    assert f"http://127.0.0.1:{server.port}/v1" in message
    assert "could not complete" in message
    assert "SIGSEGV" in message  # the exit is named
    assert "simulated general protection fault in libggml-cpu.so" in message  # the log tail
    assert "GGML_NATIVE=OFF" in message  # what to do about it
    assert server._process is None  # stopped, nothing left running


@pytest.mark.local_llm
def test_corrupt_model_file_fails_with_the_servers_log(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    corrupt = tmp_path / "corrupt.gguf"
    corrupt.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 4096)
    server = LocalLLMServer(corrupt, chat_format="gemma", startup_timeout=120)
    with pytest.raises(LocalLLMServerError) as caught:
        server.start()
    message = str(caught.value)
    assert "exited" in message
    assert "Last lines of its log:\n(empty)" not in message
    assert "corrupt.gguf" in message  # llama.cpp names the file it failed to load


@pytest.mark.local_llm
def test_check_names_the_url_of_a_server_that_is_not_there() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    with pytest.raises(LocalLLMServerError, match=rf"model server at {url} did not answer"):
        check_llm_server(url, timeout=5)


def test_arguments_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model_path"):
        LocalLLMServer()
    with pytest.raises(ValueError, match="startup_timeout"):
        LocalLLMServer(tmp_path / "m.gguf", startup_timeout=0)
    with pytest.raises(LocalLLMServerError, match="does not exist"):
        LocalLLMServer(tmp_path / "missing.gguf").start()


def test_command_port_placeholder_is_filled() -> None:
    server = LocalLLMServer(command=["serve", "--port", "{port}"], port=4321)
    assert server._build_command() == ["serve", "--port", "4321"]
    default = LocalLLMServer("m.gguf", chat_format="gemma", port=1234, alias="a")._build_command()
    assert default[1:3] == ["-m", "llama_cpp.server"]
    assert default[default.index("--port") + 1] == "1234"
    assert default[default.index("--chat_format") + 1] == "gemma"
    assert default[default.index("--model_alias") + 1] == "a"
