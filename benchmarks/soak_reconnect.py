"""Soak: Milvus Lite calls after real idle and busy gaps of several minutes (not in ``make test``).

Long ingests (minutes of embedding between Milvus calls) and notebooks (minutes between cells)
lost their Milvus Lite connection: pymilvus pings every 10 s with no call in flight, the Lite
server answers with GOAWAY "too_many_pings", and a later call could fail. This soak opens, in
one process, two Lite files side by side:

* ``pack``: ``open_vector_store`` (this pack's reconnecting clients and keepalive settings);
* ``baseline``: a plain ``MilvusVectorStore`` with pymilvus' defaults (same data, same calls).

Then, ``--rounds`` times, it waits ``--gap`` seconds (idle ``sleep``, or busy numpy work that
releases the GIL like an embedding model does, alternating) and runs the same calls on both:
a sync search, an async search, a fetch by id, an insert and a flush. A round fails when a call
raises or a search differs from the first round's. It counts the GOAWAY "too_many_pings" lines
gRPC writes to stderr, per store (by the server port in the line), and the pack's reconnects.

Usage::

    nohup .venv/bin/python benchmarks/soak_reconnect.py > soak.log 2>&1 &   # ~16 minutes
    .venv/bin/python benchmarks/soak_reconnect.py --gap 40 --rounds 1        # quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DIM = 32
ROWS = 200
GOAWAY = re.compile(r"127\.0\.0\.1:(\d+).*too_many_pings")


def vector(i: int) -> list[float]:
    rng = np.random.default_rng(i)
    values = rng.normal(size=DIM)
    return [float(v) for v in values / np.linalg.norm(values)]


def nodes(start: int, stop: int) -> list[Any]:
    from llama_index.core.schema import TextNode

    return [
        TextNode(id_=f"n{i}", text=f"row {i}", metadata={"i": i}, embedding=vector(i))
        for i in range(start, stop)
    ]


def lite_port(path: str) -> int:
    from milvus_lite.server_manager import server_manager_instance

    endpoint = server_manager_instance.start_and_get_uri(path) or ""
    return int(endpoint.rsplit(":", 1)[-1])


def open_stores(folder: Path) -> dict[str, Any]:
    from llama_index.vector_stores.milvus import MilvusVectorStore

    from llama_index_ext_advrag.milvus import flush, open_vector_store

    pack_uri, baseline_uri = str(folder / "pack.db"), str(folder / "baseline.db")
    stores = {
        "pack": open_vector_store(pack_uri, "soak", DIM, overwrite=True, index_preset="FLAT"),
        "baseline": MilvusVectorStore(
            uri=baseline_uri, collection_name="soak", dim=DIM, overwrite=True
        ),
    }
    for store in stores.values():
        store.add(nodes(0, ROWS))
        flush(store)
    return stores


def run_calls(store: Any, round_index: int, loop: asyncio.AbstractEventLoop) -> list[str]:
    """The calls of one round; returns the ids the sync search found."""
    from llama_index.core.vector_stores.types import VectorStoreQuery

    from llama_index_ext_advrag.milvus import fetch_nodes, flush

    query = VectorStoreQuery(query_embedding=vector(7), similarity_top_k=5)
    found = store.query(query)
    ids = [node.node_id for node in found.nodes or []]
    async_found = loop.run_until_complete(store.aquery(query))
    if [node.node_id for node in async_found.nodes or []] != ids:
        raise AssertionError(f"async search differs: {async_found.ids} vs {ids}")
    fetched = fetch_nodes(store, ["n1", "n2"])
    if sorted(fetched) != ["n1", "n2"]:
        raise AssertionError(f"fetch returned {sorted(fetched)}")
    start = ROWS + 10 * round_index
    store.add(nodes(start, start + 10))
    flush(store)
    return ids


def busy(seconds: float) -> None:
    """Numpy work that releases the GIL, as an embedding model does."""
    deadline = time.monotonic() + seconds
    matrix = np.random.default_rng(0).normal(size=(256, 256))
    while time.monotonic() < deadline:
        matrix = np.tanh(matrix @ matrix.T / 256.0)


def child(args: argparse.Namespace) -> None:
    from llama_index_ext_advrag.milvus import count_reconnects

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s %(message)s")
    folder = Path(tempfile.mkdtemp(prefix="advrag-soak-"))
    stores = open_stores(folder)
    loop = asyncio.new_event_loop()  # one loop: plain pymilvus async clients are bound to it
    expected = {name: run_calls(store, 0, loop) for name, store in stores.items()}
    ports = {name: {lite_port(str(folder / f"{name}.db"))} for name in stores}
    rounds = []
    for index in range(1, args.rounds + 1):
        kind = "idle" if index % 2 else "busy"
        started = time.monotonic()
        time.sleep(args.gap) if kind == "idle" else busy(args.gap)
        gap = time.monotonic() - started
        row: dict[str, Any] = {"round": index, "gap": kind, "gap_seconds": round(gap, 1)}
        for name, store in stores.items():
            try:
                ok = run_calls(store, index, loop) == expected[name]
                row[name] = "ok" if ok else "wrong results"
            except Exception as error:  # a failure is what this soak counts
                row[name] = f"{type(error).__name__}: {str(error)[:200]}"
            ports[name].add(lite_port(str(folder / f"{name}.db")))
        row["pack_reconnects"] = count_reconnects(stores["pack"])
        rounds.append(row)
        print(json.dumps(row), flush=True)
    summary = {"rounds": rounds, "ports": {k: sorted(v) for k, v in ports.items()}}
    print("RESULT " + json.dumps(summary), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gap", type=float, default=305.0, help="seconds between call rounds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    command = [sys.executable, __file__, "--child", "--gap", str(args.gap)]
    command += ["--rounds", str(args.rounds)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    result_lines = [x for x in completed.stdout.splitlines() if x.startswith("RESULT ")]
    if completed.returncode != 0 or not result_lines:
        print(completed.stdout + completed.stderr[-5000:])
        raise SystemExit(f"soak child failed with exit code {completed.returncode}")
    summary = json.loads(result_lines[-1][len("RESULT ") :])
    goaways = Counter(int(port) for port in GOAWAY.findall(completed.stderr))
    warnings = [x for x in completed.stderr.splitlines() if "reconnect" in x and "WARNING" in x]
    for row in summary["rounds"]:
        print(
            f"round {row['round']} ({row['gap']} {row['gap_seconds']} s): pack {row['pack']}, "
            f"baseline {row['baseline']}, pack reconnects so far {row['pack_reconnects']}"
        )
    for name in ("pack", "baseline"):
        failures = sum(row[name] != "ok" for row in summary["rounds"])
        count = sum(goaways[port] for port in summary["ports"][name])
        print(
            f"{name}: {failures} failed rounds of {len(summary['rounds'])}, "
            f"{count} GOAWAY too_many_pings"
        )
    print(f"pack reconnect warnings: {len(warnings)}")
    for line in warnings:
        print("  " + line[:300])


if __name__ == "__main__":
    main()
