"""A Milvus server with authorization on: the pack connects with the right token wherever a uri
is accepted (functions, retrievers, the CLI and its environment variables); a wrong or missing
token is a clear authentication error, never a retry storm, never a fall back to Milvus Lite.

The shared test server (127.0.0.1:19530) runs without authentication, and Milvus 2.3
standalone holds a pid lock in /run/milvus and binds etcd's peer port 2380, so a second server
needs its own mount namespace and ports: the ``auth_server`` fixture starts one that way (root
and ``unshare`` needed), or uses ``ADVRAG_MILVUS_AUTH_URI`` when set, and skips otherwise.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document
from milvus_service import bindable, installed, milvus_server_command

from llama_index_ext_advrag.cli import main as cli_main
from llama_index_ext_advrag.milvus import (
    MilvusAuthenticationError,
    open_client,
    open_vector_store,
)
from llama_index_ext_advrag.retrievers import (
    HierarchicalAutoMergingRetriever,
    TwoLayerMilvusRetriever,
)

pytestmark = [pytest.mark.milvus_server, pytest.mark.timeout(900)]
ROOT_TOKEN = "root:Milvus"  # Milvus' default root credentials
# Below Linux's ephemeral range (32768-60999 by default): a port in it can be taken for minutes
# by any outgoing connection's local end (the shared server's own gRPC links, say), which
# failed a fresh-clone CI run at 39579.
BASE_PORT = 29_500
PORTS = {  # milvus-server option -> port, away from the shared server's
    "--etcd-port": BASE_PORT + 79,
    "--proxy-port": BASE_PORT + 30,
    "--proxy-internal-port": BASE_PORT + 29,
    "--root-coord-port": BASE_PORT + 100,
    "--query-coord-port": BASE_PORT + 31,
    "--query-node-port": BASE_PORT + 123,
    "--index-coord-port": BASE_PORT + 130,
    "--index-node-port": BASE_PORT + 121,
    "--data-coord-port": BASE_PORT + 133,
    "--data-node-port": BASE_PORT + 124,
}
ETCD_PEER_PORT = PORTS["--etcd-port"] + 1
ETCD_CONFIG = """name: advrag-auth
data-dir: {data}/data/etcd.data
listen-peer-urls: http://127.0.0.1:{peer}
listen-client-urls: http://127.0.0.1:{client}
advertise-client-urls: http://127.0.0.1:{client}
initial-advertise-peer-urls: http://127.0.0.1:{peer}
initial-cluster: advrag-auth=http://127.0.0.1:{peer}
"""


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _serving(uri: str, deadline: float) -> bool:
    from pymilvus import MilvusClient

    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            MilvusClient(uri=uri, token=ROOT_TOKEN, timeout=30).list_collections()
            return True
        time.sleep(2)
    return False


class OwnedServer:
    """A Milvus server this module started (and so may stop and restart)."""

    def __init__(self) -> None:
        self.data = Path(tempfile.mkdtemp(prefix="advrag-milvus-auth-"))
        self.process: subprocess.Popen | None = None
        self.log = open(self.data / "server.log", "ab")  # noqa: SIM115 - closed in close()

    def start(self) -> None:
        # Ports held in TIME_WAIT by the killed server count as free (milvus_service.bindable);
        # a port some process still listens on does not, and the wrapper would move off it.
        deadline = time.monotonic() + 180
        wanted = {**PORTS, "etcd peer": ETCD_PEER_PORT}
        while time.monotonic() < deadline and not all(map(bindable, wanted.values())):
            time.sleep(2)
        busy = [f"{name} {port}" for name, port in wanted.items() if not bindable(port)]
        if busy:
            raise RuntimeError(f"ports still in use after 180 s, the server would move: {busy}")
        etcd = self.data / "etcd.yaml"
        etcd.write_text(
            ETCD_CONFIG.format(data=self.data, peer=ETCD_PEER_PORT, client=PORTS["--etcd-port"])
        )
        options = " ".join(f"{name} {port}" for name, port in PORTS.items())
        command = milvus_server_command(self.data, "--authorization-enabled", "true")
        script = "mount -t tmpfs tmpfs /run/milvus && exec " + shlex.join(command) + " " + options
        self.process = subprocess.Popen(
            ["unshare", "-m", "sh", "-c", script],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ETCD_CONFIG_PATH": str(etcd)},
            start_new_session=True,
        )

    def stop(self) -> None:
        """Kill the server's whole process group at once (a crash: Milvus' own shutdown on
        SIGTERM outlives its wrapper for minutes) and wait until its port is closed."""
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None
        deadline = time.monotonic() + 60
        while _port_open(PORTS["--proxy-port"]) and time.monotonic() < deadline:
            time.sleep(1)

    def close(self) -> None:
        self.stop()
        self.log.close()
        shutil.rmtree(self.data, ignore_errors=True)


@pytest.fixture(scope="module")
def auth_server_process() -> Iterator[tuple[str, OwnedServer | None]]:
    """``(uri, server)``: a Milvus 2.3 server with authorization on (root token
    ``root:Milvus``); ``server`` is ``None`` when it is not this module's to restart."""
    given = os.environ.get("ADVRAG_MILVUS_AUTH_URI")
    if given:
        yield given, None
        return
    uri = f"http://127.0.0.1:{PORTS['--proxy-port']}"
    if _port_open(PORTS["--proxy-port"]):  # one started earlier on this machine
        if not _serving(uri, time.monotonic() + 120):
            pytest.skip(f"something listens on {uri} but does not serve Milvus with auth")
        yield uri, None
        return
    if os.geteuid() != 0 or shutil.which("unshare") is None or not installed():
        pytest.skip("a second Milvus server needs root, unshare and milvus-server")
    server = OwnedServer()
    try:
        server.start()
        if not _serving(uri, time.monotonic() + 600):
            pytest.skip(f"the authenticated Milvus server did not serve at {uri} in 600 s")
        yield uri, server
    finally:
        server.close()


@pytest.fixture(scope="module")
def auth_server(auth_server_process) -> str:
    return auth_server_process[0]


@pytest.fixture
def name() -> str:
    return f"auth_{uuid.uuid4().hex[:10]}"


DOCUMENTS = [
    Document(text="# Cats\n\nCats purr when content. They sleep.", id_="cats"),
    Document(text="# Dogs\n\nDogs bark at night. They guard.", id_="dogs"),
]
BAD_TOKENS = [pytest.param("root:wrong", id="wrong"), pytest.param("", id="missing")]


def test_the_right_token_works_everywhere(auth_server: str, name: str) -> None:
    client = open_client(auth_server, token=ROOT_TOKEN)
    try:
        store = open_vector_store(auth_server, name, dim=4, token=ROOT_TOKEN)
        assert client.has_collection(name) and store.client is not None
        merging = HierarchicalAutoMergingRetriever.from_documents(
            DOCUMENTS,
            uri=auth_server,
            token=ROOT_TOKEN,
            embed_model=HashEmbedding(),
            chunk_sizes=[32, 8],
            collection_name=name + "_am",
        )
        assert merging.retrieve("cats purr")
        reopened = HierarchicalAutoMergingRetriever.from_uri(
            auth_server, embed_model=HashEmbedding(), token=ROOT_TOKEN, collection_name=name + "_am"
        )
        assert reopened.retrieve("cats purr")
        two_layer = TwoLayerMilvusRetriever.from_documents(
            DOCUMENTS,
            uri=auth_server,
            token=ROOT_TOKEN,
            embed_model=HashEmbedding(),
            collection_name=name + "_tl",
        )
        assert two_layer.retrieve("cats purr")
    finally:
        for collection in client.list_collections():
            if collection.startswith(name):
                client.drop_collection(collection)


@pytest.mark.parametrize("token", BAD_TOKENS)
def test_a_bad_token_is_an_authentication_error_everywhere(
    auth_server: str, name: str, token: str, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # a fall back to Milvus Lite would leave a file here
    cases = {
        "open_client": lambda: open_client(auth_server, token=token).list_collections(),
        "open_vector_store": lambda: open_vector_store(auth_server, name, dim=4, token=token),
        "auto-merging from_documents": lambda: HierarchicalAutoMergingRetriever.from_documents(
            DOCUMENTS, uri=auth_server, token=token, embed_model=HashEmbedding()
        ),
        "auto-merging from_uri": lambda: HierarchicalAutoMergingRetriever.from_uri(
            auth_server, embed_model=HashEmbedding(), token=token
        ),
        "two-layer from_uri": lambda: TwoLayerMilvusRetriever.from_uri(
            auth_server, embed_model=HashEmbedding(), token=token
        ),
    }
    for case, run in cases.items():
        started = time.monotonic()
        with pytest.raises(MilvusAuthenticationError, match="authentication refused") as raised:
            run()
        assert auth_server in str(raised.value), case
        assert time.monotonic() - started < 120, f"{case}: retried instead of failing"
    assert list(tmp_path.iterdir()) == []


def test_the_cli_takes_the_uri_and_token_from_flags_and_environment(
    auth_server: str, tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setattr(
        "llama_index_ext_advrag.models.load_packaged_embed_model", lambda: HashEmbedding()
    )
    data = tmp_path / "data"
    data.mkdir()
    (data / "cats.txt").write_text("Cats purr when content. Dogs bark.", encoding="utf-8")
    questions = tmp_path / "qa.jsonl"
    questions.write_text(
        '{"id": "q1", "question": "Do cats purr?", "answers": ["purr"]}\n', encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ADVRAG_MILVUS_URI", auth_server)
    monkeypatch.setenv("ADVRAG_MILVUS_TOKEN", "root:wrong")
    compare = ["compare", "--docs", str(data), "--questions", str(questions), "--pipelines",
               "baseline", "--ks", "1", "--k", "1", "--no-llm", "--quiet"]  # fmt: skip
    assert cli_main(compare) == 1
    assert "authentication refused" in capsys.readouterr().err
    assert cli_main([*compare, "--token", ROOT_TOKEN]) == 0
    monkeypatch.setenv("ADVRAG_MILVUS_TOKEN", ROOT_TOKEN)
    assert cli_main(compare) == 0
    assert not list(tmp_path.glob("**/*.db"))  # never a Lite file


def test_a_server_stopped_mid_query_is_a_clear_error_and_the_next_query_after_restart_works(
    auth_server_process, name: str
) -> None:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode

    from llama_index_ext_advrag.milvus import MilvusConnectionError, flush

    uri, server = auth_server_process
    if server is None:
        pytest.skip("the authenticated server was not started by this module: not ours to stop")
    nodes = [TextNode(text=f"cats purr {i}", id_=f"n{i}") for i in range(20)]
    store = open_vector_store(uri, name, dim=64, token=ROOT_TOKEN, overwrite=True)
    index = VectorStoreIndex(
        nodes,
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=HashEmbedding(),
    )
    flush(store)
    retriever = index.as_retriever(similarity_top_k=3)
    expected = [r.node.node_id for r in retriever.retrieve("cats purr")]
    server.stop()
    with pytest.raises(MilvusConnectionError, match="127.0.0.1") as raised:
        retriever.retrieve("cats purr")
    assert "after reconnecting" in str(raised.value)
    server.start()
    assert _serving(uri, time.monotonic() + 600), "the server did not come back"
    assert [r.node.node_id for r in retriever.retrieve("cats purr")] == expected


def test_the_auth_server_ports_lie_below_the_ephemeral_range() -> None:
    """An outgoing connection may hold any port of the ephemeral range, so a fixed listening port
    there is taken at random on a busy machine (the CI failure this guards against)."""
    ranges = Path("/proc/sys/net/ipv4/ip_local_port_range")
    if not ranges.exists():
        pytest.skip("no Linux ephemeral port range to check against")
    low = int(ranges.read_text().split()[0])
    ports = {**PORTS, "etcd peer": ETCD_PEER_PORT}
    assert all(port < low for port in ports.values()), (ports, low)
