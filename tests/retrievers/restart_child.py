"""Child process of the restart tests: build (or reopen) an index on a uri, query it, exit.

Usage: python restart_child.py {build|open} {auto_merging|two_layer} URI NAME OUT.json [XLSX]
The results (node ids, scores, texts, traces) are written as JSON to OUT.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ for advrag_testing

from advrag_testing import HashEmbedding  # noqa: E402
from llama_index.core import Document  # noqa: E402

from llama_index_ext_advrag.retrievers import (  # noqa: E402
    HierarchicalAutoMergingRetriever,
    TwoLayerMilvusRetriever,
)

AUTO_MERGING_QUERIES = ["glacier survey feature", "volcano region 1", "reef forest"]
TWO_LAYER_QUERIES = ["sales in 2023", "staff salary", "warehouse capacity 2022"]


def documents() -> list[Document]:
    topics = ["volcano", "glacier", "desert", "reef", "forest", "tundra"]
    docs = []
    for d in range(2):
        parts = [
            f"## Part {i} about {t}\n\n"
            + " ".join(
                f"The {t} in region {d} has feature {j} of the {t} survey." for j in range(6)
            )
            for i, t in enumerate(topics)
        ]
        docs.append(Document(text="\n\n".join(parts), id_=f"doc-{d}"))
    return docs


def main(action: str, kind: str, uri: str, name: str, out: str, xlsx: str = "") -> None:
    embed = HashEmbedding(dim=64)
    if kind == "auto_merging":
        if action == "build":
            retriever = HierarchicalAutoMergingRetriever.from_documents(
                documents(), uri=uri, collection_name=name, embed_model=embed,
                chunk_sizes=[256, 64, 24], similarity_top_k=8,
            )  # fmt: skip
        else:
            retriever = HierarchicalAutoMergingRetriever.from_uri(
                uri, embed_model=embed, collection_name=name, similarity_top_k=8
            )
        queries = AUTO_MERGING_QUERIES
    else:
        if action == "build":
            retriever = TwoLayerMilvusRetriever.from_excel(
                xlsx, uri=uri, collection_name=name, embed_model=embed
            )
        else:
            retriever = TwoLayerMilvusRetriever.from_uri(
                uri, embed_model=embed, collection_name=name
            )
        queries = TWO_LAYER_QUERIES
    results = {
        query: [
            {"id": n.node.node_id, "score": round(n.score or 0.0, 6), "text": n.node.text,
             "trace": n.node.metadata.get("advrag_trace")}
            for n in retriever.retrieve(query)
        ]
        for query in queries
    }  # fmt: skip
    Path(out).write_text(json.dumps(results, ensure_ascii=False, sort_keys=True), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
