"""Child process of the restart tests: write a collection on a uri, then exit.

Usage: python restart_child.py {client|store} URI NAME [PRESET]

``client`` creates a collection with ``build_index_params`` and 300 rows ``{"id": i, "vec"}``
where row ``i``'s vector is ``one_hot(i % 8)`` plus a small ramp; ``store`` adds 40
``HashEmbedding`` nodes ``n0..n39`` through ``open_vector_store``. Both flush before exiting,
so the parent sees the collection as a restarted process would.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for advrag_testing

from advrag_testing import HashEmbedding  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402
from pymilvus import DataType  # noqa: E402

from llama_index_ext_advrag.milvus import (  # noqa: E402
    build_index_params,
    flush,
    open_client,
    open_vector_store,
)

DIM = 8
ROWS = 300
STORE_DIM = 32
STORE_NODES = 40


def client_vector(i: int) -> list[float]:
    vector = [0.01 * (i // DIM)] * DIM
    vector[i % DIM] = 1.0
    return vector


def store_node(i: int, embed: HashEmbedding) -> TextNode:
    text = f"node {i} talks about topic{i % 5} and item{i}"
    return TextNode(
        id_=f"n{i}",
        text=text,
        metadata={"index": i, "topic": f"topic{i % 5}"},
        embedding=embed.get_text_embedding(text),
    )


def write_client(uri: str, name: str, preset: str) -> None:
    client = open_client(uri)
    schema = client.create_schema(auto_id=False)
    schema.add_field("id", DataType.INT64, is_primary=True)
    schema.add_field("vec", DataType.FLOAT_VECTOR, dim=DIM)
    index_params = build_index_params(client, "vec", preset, num_rows=ROWS, dim=DIM)
    client.create_collection(name, schema=schema, index_params=index_params)
    client.insert(name, [{"id": i, "vec": client_vector(i)} for i in range(ROWS)])
    flush(client, name)
    client.close()


def write_store(uri: str, name: str, preset: str) -> None:
    store = open_vector_store(
        uri, name, dim=STORE_DIM, overwrite=True, index_preset=preset, expected_rows=STORE_NODES
    )
    embed = HashEmbedding(dim=STORE_DIM)
    store.add([store_node(i, embed) for i in range(STORE_NODES)])
    flush(store)
    store.client.close()


if __name__ == "__main__":
    mode, uri, name = sys.argv[1:4]
    preset = sys.argv[4] if len(sys.argv) > 4 else "FLAT"
    {"client": write_client, "store": write_store}[mode](uri, name, preset)
    print("ok")
