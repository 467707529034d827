"""Re-ingesting a document into Milvus updates its window nodes instead of duplicating them.

Runs on Milvus Lite and on the Milvus server (the ``milvus_uri`` fixture); the same assertions
hold on both.
"""

from __future__ import annotations

from advrag_testing import HashEmbedding
from llama_index.core import Document
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode

from llama_index_ext_advrag.milvus import count_rows, fetch_nodes, flush, open_vector_store
from llama_index_ext_advrag.node_parser import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
)

DIM = 32
TEXT = (
    "Milvus stores vectors. Milvus Lite is a file. The server listens on a port. "
    "Collections hold rows. Indexes speed up search. Flushing seals segments."
)


def embed(nodes):
    model = HashEmbedding(dim=DIM)
    for node in nodes:
        node.embedding = model.get_text_embedding(
            node.get_content(metadata_mode=MetadataMode.EMBED)
        )
    return nodes


def ingest(store, nodes):
    store.add(embed(nodes))
    flush(store)
    return count_rows(store.client, store.collection_name)


def test_reingest_same_document_keeps_the_count(milvus_uri, collection_name):
    store = open_vector_store(milvus_uri, collection_name, dim=DIM, upsert_mode=True)
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=1)
    document = Document(text=TEXT, id_="manual.txt")
    first = ingest(store, parser.get_nodes_from_documents([document]))
    second = ingest(store, parser.get_nodes_from_documents([Document(text=TEXT, id_="manual.txt")]))
    assert first == second == 4  # 6 sentences, window 3, stride 1

    # An edited last sentence changes only the text of the windows that hold it.
    edited = TEXT.replace("Flushing seals segments.", "Flushing seals growing segments.")
    nodes = parser.get_nodes_from_documents([Document(text=edited, id_="manual.txt")])
    assert ingest(store, nodes) == 4
    stored = fetch_nodes(store, [n.node_id for n in nodes])
    assert "growing segments" in stored[nodes[-1].node_id].get_content()
    store.client.drop_collection(collection_name)


def test_reingest_hierarchy_and_sentence_unit(milvus_uri, collection_name):
    store = open_vector_store(milvus_uri, collection_name, dim=DIM, upsert_mode=True)
    for parser in (
        AdaptiveSlidingWindowNodeParser(embed_unit="sentence"),
        HierarchicalSentenceNodeParser(chunk_sizes=[40, 12]),
    ):
        nodes = parser.get_nodes_from_documents([Document(text=TEXT, id_=parser.class_name())])
        before = count_rows(store.client, collection_name)
        after_first = ingest(store, nodes)
        again = parser.get_nodes_from_documents([Document(text=TEXT, id_=parser.class_name())])
        assert ingest(store, again) == after_first == before + len(nodes)
    store.client.drop_collection(collection_name)


def test_random_ids_of_core_splitter_duplicate_for_contrast(milvus_uri, collection_name):
    store = open_vector_store(milvus_uri, collection_name, dim=DIM, upsert_mode=True)
    splitter = SentenceSplitter(chunk_size=16, chunk_overlap=0)
    first = ingest(store, splitter.get_nodes_from_documents([Document(text=TEXT, id_="m")]))
    second = ingest(store, splitter.get_nodes_from_documents([Document(text=TEXT, id_="m")]))
    assert second == 2 * first
    store.client.drop_collection(collection_name)
