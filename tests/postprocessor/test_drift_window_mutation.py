"""The drift-aware window's settings and refusals, exactly (kills the mutants of
postprocessor/drift_window.py that test_drift_window.py and test_drift_thresholds.py leave): a
given vector store checked, the layout handed to the store, ``Settings.embed_model`` consulted
for the thresholds, the uncalibrated warning word for word, a given ``prune_sim`` alone, the
conversation limits (the cap, the mean of several windows, nothing remembered without
``max_window_change``), the separator, the exact errors, the surrogate warning naming the
class, and light neighbour fetches."""

from __future__ import annotations

import asyncio
import logging

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Settings
from llama_index.core.schema import NodeWithScore, QueryBundle
from postprocessor._corpus import docstore_of, hits, sentence_nodes

from llama_index_ext_advrag.layout import NodeLayout
from llama_index_ext_advrag.postprocessor._neighbours import DocstoreNeighbourStore
from llama_index_ext_advrag.postprocessor.calibration import (
    BGE_SMALL_MIN_SIM,
    MINILM_MIN_SIM,
    MINILM_PRUNE_SIM,
)
from llama_index_ext_advrag.postprocessor.drift_window import DriftAwareWindowPostprocessor
from llama_index_ext_advrag.trace import get_trace

EMBED = HashEmbedding(dim=64)
MODES = ["sync", "async"]


def query(text: str) -> QueryBundle:
    return QueryBundle(text, embedding=EMBED.get_query_embedding(text))


def run(post: DriftAwareWindowPostprocessor, mode: str, found, bundle) -> list[NodeWithScore]:
    if mode == "sync":
        return post.postprocess_nodes(found, bundle)
    return asyncio.run(post.apostprocess_nodes(found, bundle))


def units(results: list[NodeWithScore]) -> list[int]:
    return [r["units"] for o in results for r in get_trace(o.node, "drift_window")["records"]]


@pytest.fixture
def nodes():
    return sentence_nodes()


def test_a_given_vector_store_is_checked() -> None:
    with pytest.raises(ValueError, match="vector_store must be a MilvusVectorStore, got str"):
        DriftAwareWindowPostprocessor(vector_store="not a store")


@pytest.mark.parametrize("mode", MODES)
def test_the_layout_reaches_the_store(nodes, mode: str) -> None:
    # nodes that name their document under another key: the store must compute neighbour ids
    # with the same layout (else it walks the relationships, one round trip per step)
    for node in nodes:
        node.metadata["doc"] = node.metadata.pop("document_id")
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(nodes), embed_model=EMBED, min_sim=-1.0, prune_sim=-1.0,
        layout=NodeLayout(document_id_key="doc"), max_expand_steps=3,
    )  # fmt: skip
    (result,) = run(post, mode, hits(nodes, "In 1901"), query("storm"))
    assert get_trace(result.node, "drift_window")["round_trips"] == 1


def test_settings_embed_model_decides_the_thresholds(nodes, monkeypatch) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(nodes))
    assert post.thresholds()[2] == "bge-small-en"
    monkeypatch.setattr(Settings, "_embed_model", HashEmbedding(model_name="all-MiniLM-L6-v2"))
    assert post.thresholds() == (MINILM_MIN_SIM, MINILM_PRUNE_SIM, "minilm")


class Nameless:
    """An embedding model without a model name."""


def test_the_uncalibrated_warning_word_for_word(nodes, caplog) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(nodes), embed_model=Nameless())
    name = "llama_index_ext_advrag.postprocessor.drift_window"
    with caplog.at_level(logging.WARNING, logger=name):
        assert post.thresholds() == (MINILM_MIN_SIM, MINILM_PRUNE_SIM, "uncalibrated")
    assert [r.getMessage() for r in caplog.records if r.name == name] == [
        "DriftAwareWindowPostprocessor: no calibrated thresholds for embedding model 'Nameless'; "
        f"using all-MiniLM-L6-v2's (min_sim={MINILM_MIN_SIM}, prune_sim={MINILM_PRUNE_SIM}). "
        "Run calibrate_thresholds(texts, embed_model, queries) and pass its values."
    ]


def test_a_given_prune_sim_alone_is_used(nodes) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(nodes), prune_sim=0.5)
    assert post.thresholds() == (BGE_SMALL_MIN_SIM, 0.5, "given+bge-small-en")


@pytest.mark.parametrize("mode", MODES)
def test_the_conversation_cap_and_the_mean_of_several_windows(nodes, mode: str) -> None:
    store = {"docstore": docstore_of(nodes), "embed_model": EMBED}
    post = DriftAwareWindowPostprocessor(**store, min_sim=0.99, prune_sim=0.99, max_window_change=1)
    assert units(run(post, mode, hits(nodes, "The harbour master"), query("pier"))) == [1]
    post.min_sim, post.prune_sim = -1.0, -1.0
    # one unit more than the previous turn's window at most
    assert units(run(post, mode, hits(nodes, "The harbour master"), query("pier"))) == [2]
    # two windows of 4 units: the next turn starts from their mean, 4 (not 4 + 4 or 4 * 2)
    post = DriftAwareWindowPostprocessor(
        **store, min_sim=-1.0, prune_sim=-1.0, max_window_change=0, max_expand_steps=3
    )
    first = run(post, mode, hits(nodes, "The lighthouse", "Velmar also has"), query("cakes"))
    assert units(first) == [4, 4]
    post.max_expand_steps, post.min_sim, post.prune_sim = 12, 0.99, 0.99
    assert units(run(post, mode, hits(nodes, "In 1901"), query("pier"))) == [4]


@pytest.mark.parametrize("mode", MODES)
def test_nothing_is_remembered_without_max_window_change(nodes, mode: str) -> None:
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(nodes), embed_model=EMBED, min_sim=-1.0, prune_sim=-1.0
    )
    assert units(run(post, mode, hits(nodes, "The harbour master"), query("pier"))) == [7]
    post.min_sim, post.prune_sim, post.max_window_change = 0.99, 0.99, 1
    assert units(run(post, mode, hits(nodes, "The harbour master"), query("pier"))) == [1]


@pytest.mark.parametrize("mode", MODES)
def test_the_separator_joins_the_window(nodes, mode: str) -> None:
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(nodes), embed_model=EMBED, min_sim=-1.0, prune_sim=-1.0,
        max_expand_steps=1, separator="\n",
    )  # fmt: skip
    (result,) = run(post, mode, hits(nodes, "Its lamp"), query("lamp"))
    assert result.node.get_content().count("\n") == 1


@pytest.mark.parametrize("mode", MODES)
def test_the_exact_errors(nodes, mode: str) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(nodes), embed_model=EMBED)
    found = hits(nodes, "In 1901")
    with pytest.raises(
        ValueError, match=r"^DriftAwareWindowPostprocessor needs the query \(query_bundle=None\)$"
    ):
        run(post, mode, found, None)
    message = (
        "^DriftAwareWindowPostprocessor grows windows towards the query, got an empty query '' "
        "without an embedding$"
    )
    with pytest.raises(ValueError, match=message):
        run(post, mode, found, QueryBundle("", custom_embedding_strs=[]))
    # a given embedding is enough, whatever the strings
    given = QueryBundle("", custom_embedding_strs=[], embedding=EMBED.get_query_embedding("x"))
    assert len(run(post, mode, found, given)) == 1


@pytest.mark.parametrize("mode", MODES)
def test_the_surrogate_warning_names_the_class(nodes, mode: str, caplog) -> None:
    post = DriftAwareWindowPostprocessor(docstore=docstore_of(nodes), embed_model=EMBED)
    bundle = QueryBundle("pier \ud800", embedding=EMBED.get_query_embedding("pier"))
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.queries"):
        run(post, mode, hits(nodes, "In 1901"), bundle)
    assert {r.getMessage().split(":")[0] for r in caplog.records} == {
        "DriftAwareWindowPostprocessor"
    }


class Recording(DocstoreNeighbourStore):
    def __init__(self, docstore) -> None:
        super().__init__(docstore)
        self.calls: list[str] = []

    def get_nodes(self, node_ids, with_embeddings):
        self.calls.append(f"nodes {with_embeddings}")
        return super().get_nodes(node_ids, with_embeddings)

    async def aget_nodes(self, node_ids, with_embeddings):
        self.calls.append(f"nodes {with_embeddings}")
        return await super().aget_nodes(node_ids, with_embeddings)

    def get_units(self, node_ids):
        self.calls.append("units")
        return super().get_nodes(node_ids, True)

    async def aget_units(self, node_ids):
        self.calls.append("units")
        return await super().aget_nodes(node_ids, True)


@pytest.mark.parametrize("mode", MODES)
def test_neighbours_are_fetched_as_light_units(nodes, mode: str) -> None:
    post = DriftAwareWindowPostprocessor(
        docstore=docstore_of(nodes), embed_model=EMBED, min_sim=-1.0, prune_sim=-1.0
    )
    store = Recording(post.docstore)
    post._store = store
    run(post, mode, hits(nodes, "In 1901"), query("storm"))
    assert store.calls == ["units"]
