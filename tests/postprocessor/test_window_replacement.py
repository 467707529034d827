"""WindowReplacementPostprocessor: windows without repeats, against core's replacement."""

from __future__ import annotations

import asyncio
import copy

import pytest
from llama_index.core import Document
from llama_index.core.node_parser import SentenceWindowNodeParser
from llama_index.core.postprocessor import MetadataReplacementPostProcessor
from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.postprocessor import WindowReplacementPostprocessor
from llama_index_ext_advrag.postprocessor.window_replacement import select_windows
from llama_index_ext_advrag.trace import get_trace

TEXT = "Alpha one. Bravo two. Charlie three. Delta four. Echo five. Foxtrot six. Golf seven."


def ranked(nodes, *starts):
    by_start = {n.metadata["original_text"].strip(): n for n in nodes}
    return [NodeWithScore(node=by_start[s], score=1.0 - rank / 10) for rank, s in enumerate(starts)]


@pytest.fixture
def nodes():
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=1, embed_unit="sentence")
    return parser.get_nodes_from_documents([Document(text=TEXT, id_="doc")])


def test_select_windows_by_hand() -> None:
    hits = [("d", "B.", "A. B. C."), ("d", "C.", "B. C. D."), ("e", "B.", "B."), ("d", "Z.", "Z.")]
    assert select_windows(hits, None, True) == ([0, 2, 3], {1: 0})
    assert select_windows(hits, 2, True) == ([0, 2], {1: 0})
    assert select_windows(hits, None, False) == ([0, 1, 2, 3], {})
    assert select_windows([(None, "B.", "A. B."), (None, "B.", "B.")], None, True) == ([0, 1], {})
    assert select_windows([], 3, True) == ([], {})


def test_a_hit_inside_a_kept_window_gives_its_slot_to_the_next(nodes) -> None:
    hits = ranked(nodes, "Charlie three.", "Delta four.", "Golf seven.")
    before = copy.deepcopy([h.node.model_dump() for h in hits])
    output = WindowReplacementPostprocessor(top_n=2).postprocess_nodes(hits)
    assert [o.node.get_content() for o in output] == [
        "Bravo two. Charlie three. Delta four.",
        "Foxtrot six. Golf seven.",
    ]
    assert get_trace(output[0].node, "window_replacement") == {
        "rank": 0,
        "skipped_as_covered": [hits[1].node.node_id],
    }
    assert [h.node.model_dump() for h in hits] == before  # the caller's nodes are untouched
    assert [o.score for o in output] == [hits[0].score, hits[2].score]


def test_without_skipping_it_matches_core_replacement(nodes) -> None:
    hits = ranked(nodes, "Charlie three.", "Delta four.", "Golf seven.")
    ours = WindowReplacementPostprocessor(skip_covered=False).postprocess_nodes(hits)
    core = MetadataReplacementPostProcessor(target_metadata_key="window").postprocess_nodes(
        copy.deepcopy(hits)
    )
    assert [o.node.get_content() for o in ours] == [c.node.get_content() for c in core]


def test_works_on_core_sentence_window_nodes() -> None:
    parser = SentenceWindowNodeParser.from_defaults(window_size=1)
    core_nodes = parser.get_nodes_from_documents([Document(text=TEXT, id_="doc")])
    hits = [NodeWithScore(node=n, score=0.5) for n in core_nodes[2:4]]  # Charlie, Delta
    output = WindowReplacementPostprocessor().postprocess_nodes(hits)
    assert len(output) == 1 and "Delta four." in output[0].node.get_content()


def test_nodes_without_window_keep_their_text_and_sync_equals_async() -> None:
    plain = [NodeWithScore(node=TextNode(text="No window here."), score=0.3)]
    post = WindowReplacementPostprocessor(top_n=3)
    assert [o.node.get_content() for o in post.postprocess_nodes(plain)] == ["No window here."]
    assert post.postprocess_nodes([]) == []
    sync = post.postprocess_nodes(plain)
    async_ = asyncio.run(post.apostprocess_nodes(plain))
    assert [o.node.get_content() for o in sync] == [o.node.get_content() for o in async_]


@pytest.mark.parametrize("bad", [{"top_n": 0}, {"target_metadata_key": ""}])
def test_invalid_arguments_name_the_field(bad) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        WindowReplacementPostprocessor(**bad)


def test_to_dict_round_trip() -> None:
    post = WindowReplacementPostprocessor(top_n=5, skip_covered=False)
    restored = WindowReplacementPostprocessor.from_dict(post.to_dict())
    assert (restored.top_n, restored.skip_covered) == (5, False)
