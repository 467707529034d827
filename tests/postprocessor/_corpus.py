"""Small hand-written documents cut into sentence nodes by the pack's parser, for the tests."""

from __future__ import annotations

from collections.abc import Sequence

from advrag_testing import HashEmbedding
from llama_index.core import Document
from llama_index.core.schema import (
    BaseNode,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)
from llama_index.core.storage.docstore import SimpleDocumentStore

from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser

HARBOUR = (
    "# The harbour\n\n"
    "The harbour of Velmar was built in 1820. "
    "Its stone piers shelter forty fishing boats. "
    "The harbour master keeps a ledger of every boat. "
    "In 1901 a storm destroyed the northern pier. "
    "After the storm the town rebuilt the pier in granite. "
    "The granite pier still stands today.\n\n"
    "# The bakery\n\n"
    "Velmar also has a famous bakery. "
    "The bakery sells rye bread and almond cakes. "
    "Tourists queue for the almond cakes every morning."
)
LIGHTHOUSE = (
    "The lighthouse stands on a cliff. "
    "Its lamp was electrified in 1935. "
    "Keepers lived in the cottage below. "
    "The last keeper retired in 1990."
)


def sentence_nodes(embed: bool = True, dim: int = 64) -> list[BaseNode]:
    """One node per sentence (``window_size=1, stride=1``) with vectors from ``HashEmbedding``."""
    parser = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1)
    documents = [Document(text=HARBOUR, id_="harbour"), Document(text=LIGHTHOUSE, id_="lighthouse")]
    nodes = parser.get_nodes_from_documents(documents)
    if embed:
        model = HashEmbedding(dim=dim)
        vectors = model.get_text_embedding_batch([n.get_content() for n in nodes])
        for node, vector in zip(nodes, vectors, strict=True):
            node.embedding = vector
    return nodes


def plain_nodes(texts: Sequence[str], doc_id: str = "plain") -> list[TextNode]:
    """Nodes without position metadata, linked only by PREVIOUS/NEXT (like core parsers)."""
    nodes = [TextNode(id_=f"{doc_id}-{i}", text=t) for i, t in enumerate(texts)]
    for left, right in zip(nodes, nodes[1:], strict=False):
        left.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=right.node_id)
        right.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=left.node_id)
    return nodes


def docstore_of(nodes: Sequence[BaseNode]) -> SimpleDocumentStore:
    docstore = SimpleDocumentStore()
    docstore.add_documents(list(nodes))
    return docstore


def by_text(nodes: Sequence[BaseNode], start: str) -> BaseNode:
    """The node whose text starts with ``start``."""
    return next(n for n in nodes if n.get_content().startswith(start))


def hits(nodes: Sequence[BaseNode], *starts: str, score: float = 0.5) -> list[NodeWithScore]:
    """Retrieval results (copies without vectors, like a vector store returns them)."""
    results = []
    for rank, start in enumerate(starts):
        node = by_text(nodes, start).model_copy(deep=True)
        node.embedding = None
        results.append(NodeWithScore(node=node, score=score - rank * 0.01))
    return results
