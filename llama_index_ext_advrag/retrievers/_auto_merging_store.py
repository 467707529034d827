"""Building and opening the Milvus collections of a hierarchical auto-merging index."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.indices.utils import embed_nodes
from llama_index.core.node_parser import NodeParser, get_leaf_nodes
from llama_index.core.schema import BaseNode

from llama_index_ext_advrag.milvus import check_storable_nodes, flush, open_vector_store
from llama_index_ext_advrag.milvus.registry import (
    PLACEHOLDER_DIM,
    PLACEHOLDER_VECTOR,
    load_layout,
    prepare_build,
    record_layout,
)
from llama_index_ext_advrag.retrievers._hierarchy import (
    assign_positions,
    with_hierarchy_metadata,
)

logger = logging.getLogger(__name__)

COMPONENT = "HierarchicalAutoMergingRetriever"
PARENT_SUFFIX = "_parents"


def default_node_parser(chunk_sizes: Sequence[int] | None) -> NodeParser:
    """The pack's sentence-aligned hierarchy parser with ``chunk_sizes`` (or its default)."""
    from llama_index_ext_advrag.node_parser.hierarchical import HierarchicalSentenceNodeParser

    if chunk_sizes:
        return HierarchicalSentenceNodeParser(chunk_sizes=list(chunk_sizes))
    return HierarchicalSentenceNodeParser()


def split_hierarchy(nodes: Sequence[BaseNode]) -> tuple[list[BaseNode], list[BaseNode]]:
    """``(leaves, parents)`` copies carrying reading positions; the input is left untouched."""
    if not nodes:
        raise ValueError("no nodes to index: the documents produced an empty hierarchy")
    ids = [n.node_id for n in nodes]
    if len(set(ids)) != len(ids):
        raise ValueError("node ids must be unique within a hierarchy")
    positions = assign_positions(nodes)
    leaf_ids = {n.node_id for n in get_leaf_nodes(list(nodes))}
    copies = [with_hierarchy_metadata(n, positions[n.node_id]) for n in nodes]
    leaves = [n for n in copies if n.node_id in leaf_ids]
    parents = [n for n in copies if n.node_id not in leaf_ids]
    return leaves, parents


def build_hierarchy_index(
    nodes: Sequence[BaseNode],
    *,
    uri: str,
    collection_name: str,
    embed_model: BaseEmbedding,
    token: str,
    overwrite: bool,
    index_preset: str,
    show_progress: bool,
    parser_name: str | None,
    chunk_sizes: list[int],
) -> tuple[dict[str, Any], Any, Any]:
    """Embed the leaves, store leaves and parents, record the layout last.

    Returns ``(layout, leaf_store, parent_store)``.
    """
    leaves, parents = split_hierarchy(nodes)
    parent_collection = collection_name + PARENT_SUFFIX
    prepare_build(
        uri, token, collection_name, [collection_name, parent_collection], overwrite, COMPONENT
    )
    check_storable_nodes([*leaves, *parents])  # before minutes of embedding, not after
    embeddings = embed_nodes(leaves, embed_model, show_progress=show_progress)
    for leaf in leaves:
        leaf.embedding = embeddings[leaf.node_id]
    dim = len(leaves[0].embedding or [])
    leaf_store = open_vector_store(
        uri,
        collection_name,
        dim,
        token=token,
        overwrite=True,
        index_preset=index_preset,
        expected_rows=len(leaves),
    )
    leaf_store.add(leaves)
    flush(leaf_store)
    parent_store = open_vector_store(
        uri, parent_collection, PLACEHOLDER_DIM, token=token, overwrite=True, index_preset="FLAT"
    )
    if parents:
        for parent in parents:
            parent.embedding = list(PLACEHOLDER_VECTOR)
        parent_store.add(parents)
        flush(parent_store)

    layout = {
        "component": COMPONENT,
        "leaf_collection": collection_name,
        "parent_collection": parent_collection,
        "chunk_sizes": chunk_sizes,
        "embed_dim": dim,
        "embed_model": embed_model.model_name,
        "node_parser": parser_name,
        "num_leaves": len(leaves),
        "num_parents": len(parents),
        "num_documents": len({n.ref_doc_id for n in leaves}),
    }
    record_layout(uri, token, collection_name, layout)
    logger.info(
        "built auto-merging index %r on %s: %d leaves, %d parents",
        collection_name,
        uri,
        len(leaves),
        len(parents),
    )
    return layout, leaf_store, parent_store


def open_hierarchy_stores(uri: str, collection_name: str, token: str) -> tuple[dict, Any, Any]:
    """Read the layout of ``collection_name`` and open both collections (loaded on open)."""
    layout = load_layout(uri, token, collection_name, COMPONENT)
    leaf_store = open_vector_store(uri, layout["leaf_collection"], layout["embed_dim"], token=token)
    parent_store = open_vector_store(
        uri, layout["parent_collection"], PLACEHOLDER_DIM, token=token, index_preset="FLAT"
    )
    return layout, leaf_store, parent_store
