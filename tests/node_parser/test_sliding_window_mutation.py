"""AdaptiveSlidingWindowNodeParser: behaviours pinned for mutation testing (unit tier).

Each test checks an observable result of the public parser (nodes, ids, traces, stats, the
parse event, the log lines) that an earlier mutation run left unchecked.
"""

from __future__ import annotations

import logging

import pytest
from advrag_testing import HashEmbedding, instrumented
from llama_index.core import Document

from llama_index_ext_advrag.layout import DEFAULT_ID_UNIT, deterministic_node_id
from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.node_parser.sliding_window import BreakpointSignal
from llama_index_ext_advrag.trace import TRACE_KEY

pytestmark = pytest.mark.unit

FIVE = "Alpha one. Beta two. Gamma three. Delta four. Epsilon five."
CHINESE = "黑神话悟空是一款动作游戏。它由游戏科学开发。游戏于2024年发售。首月销量超过两千万份。"
LOGGER = "llama_index_ext_advrag.node_parser.sliding_window"


def trace(node):
    return node.metadata[TRACE_KEY]["sliding_window"]


def docs(*texts, ids=None):
    ids = ids or [f"doc-{i}" for i in range(len(texts))]
    return [Document(text=t, id_=i) for t, i in zip(texts, ids, strict=True)]


# --- ids ------------------------------------------------------------------------------------


def test_window_node_ids_derive_from_the_document_and_span():
    nodes = AdaptiveSlidingWindowNodeParser().get_nodes_from_documents(docs(FIVE))
    assert [n.node_id for n in nodes] == [
        deterministic_node_id("doc-0", DEFAULT_ID_UNIT, first, last)
        for first, last in (n.metadata["sentence_span"] for n in nodes)
    ]


def test_sentence_node_ids_name_their_centre():
    parser = AdaptiveSlidingWindowNodeParser(embed_unit="sentence")
    nodes = parser.get_nodes_from_documents(docs(FIVE))
    assert len(nodes) == 5
    for centre, node in enumerate(nodes):
        first, last = node.metadata["sentence_span"]
        assert node.node_id == deterministic_node_id("doc-0", f"sentence{centre}", first, last)


# --- traces ---------------------------------------------------------------------------------


def test_repeated_document_ids_are_traced_on_the_repeat_only():
    nodes = AdaptiveSlidingWindowNodeParser().get_nodes_from_documents(
        docs(FIVE, FIVE, ids=["same", "same"])
    )
    first = [n for n in nodes if n.metadata["document_id"] == "same"]
    second = [n for n in nodes if n.metadata["document_id"] == "same#1"]
    assert first and second
    assert all("duplicate_document_id" not in trace(n) for n in first)
    assert all(trace(n)["duplicate_document_id"] == "same" for n in second)


def test_cut_sentences_are_counted_per_window():
    long = "word " * 60
    text = f"Short one. {long.strip()}. Short two. Short three. Short four."
    parser = AdaptiveSlidingWindowNodeParser(max_sentence_chars=100, window_size=2, stride=2)
    nodes = parser.get_nodes_from_documents(docs(text))
    cuts = [trace(n).get("cut_sentences") for n in nodes]
    # the long sentence became pieces flagged as cut; windows without a piece carry no count
    spans = [n.metadata["sentence_span"] for n in nodes]
    assert any(c for c in cuts) and None in cuts
    # the long sentence (with "Short one." before it) became 4 pieces, sentences 0-3; windows
    # of 2 with stride 2 partition the 7 sentences
    assert parser.last_parse_stats.sentences == 7
    assert spans == [[0, 2], [2, 4], [4, 6], [6, 7]]
    assert cuts == [2, 2, None, None]


def test_section_title_is_the_middle_sentence_of_an_even_window():
    text = "# A\nOne. Two.\n\n# B\nThree. Four."
    nodes = AdaptiveSlidingWindowNodeParser(window_size=4, stride=4).get_nodes_from_documents(
        docs(text)
    )
    assert nodes[0].metadata["sentence_span"] == [0, 4]
    # (0 + 4 - 1) // 2 = 1: the second sentence, in section A
    assert nodes[0].metadata["section_title"] == "A"


def test_embedded_sentences_trace_only_when_extended():
    parser = AdaptiveSlidingWindowNodeParser(embed_unit="sentence", window_size=3)
    nodes = parser.get_nodes_from_documents(docs(FIVE))
    assert all("embedded_sentences" not in trace(n) for n in nodes)
    extended = AdaptiveSlidingWindowNodeParser(
        embed_unit="sentence", window_size=3, min_embed_tokens=6
    ).get_nodes_from_documents(docs(FIVE))
    assert trace(extended[0])["embedded_sentences"][0] == 0
    assert trace(extended[0])["embedded_sentences"][1] > 1


# --- signals --------------------------------------------------------------------------------


def test_auto_signal_at_exactly_half_cjk_is_embedding():
    parser = AdaptiveSlidingWindowNodeParser(breakpoint_signal="auto")
    assert parser.signal_for("中文ab") is BreakpointSignal.EMBEDDING
    assert parser.signal_for("中abc") is BreakpointSignal.LEXICAL


def test_signal_counts_per_document():
    parser = AdaptiveSlidingWindowNodeParser(
        HashEmbedding(),
        mode="adaptive",
        breakpoint_percentile=80,
        breakpoint_signal="auto",
    )
    parser.get_nodes_from_documents(
        docs(FIVE, "Only one sentence here.", "One. Two.", FIVE, CHINESE)
    )
    # the one-sentence document places no breakpoints; two sentences are enough
    assert parser.last_parse_stats.breakpoint_signals == {"embedding": 1, "lexical": 3}


def test_no_signal_counts_without_breakpoints():
    parser = AdaptiveSlidingWindowNodeParser()
    parser.get_nodes_from_documents(docs(FIVE, CHINESE))
    assert parser.last_parse_stats.breakpoint_signals == {}


# --- stats, event, logs ---------------------------------------------------------------------


def test_stats_and_event_over_documents_with_an_empty_one():
    parser = AdaptiveSlidingWindowNodeParser(window_size=2, stride=1)
    with instrumented() as (events, _):
        nodes = parser.get_nodes_from_documents(docs(FIVE, "", "One. Two. Three."))
    stats = parser.last_parse_stats
    assert stats.documents == 3 and stats.nodes == len(nodes) == 6
    assert stats.window_chars == sum(len(n.get_content(metadata_mode="none")) for n in nodes)
    (event,) = [e for e in events if type(e).__name__ == "NodeParseEvent"]
    assert event.window_sizes == {2: 6}
    assert event.stops == {"size": 6} or sum(event.stops.values()) == 6
    assert set(event.stops) == {trace(n)["stop"] for n in nodes}


def test_event_window_sizes_count_each_size():
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=3)
    with instrumented() as (events, _):
        parser.get_nodes_from_documents(docs(FIVE))
    (event,) = [e for e in events if type(e).__name__ == "NodeParseEvent"]
    assert event.window_sizes == {2: 1, 3: 1}


def test_log_lines(caplog):
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", breakpoint_percentile=80, breakpoint_signal="lexical"
    )
    with caplog.at_level(logging.DEBUG, logger=LOGGER):
        parser.get_nodes_from_documents(docs(FIVE))
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    expansion = parser.last_parse_stats.storage_expansion
    assert messages == [
        "AdaptiveSlidingWindowNodeParser: breakpoint signals {'lexical': 1}",
        f"AdaptiveSlidingWindowNodeParser: {len(parser.get_nodes_from_documents(docs(FIVE)))}"
        f" nodes from 1 documents, storage expansion {expansion:.2f}x",
    ]


# --- breakpoints: each setting reaches the planner ------------------------------------------

TWO_TOPICS = (
    "The virus binds the host cell receptor. The virus then enters the host cell. "
    "Inside the cell the virus copies its genome. New virus particles leave the host cell. "
    "The court heard the contract case. The judge read the contract clause aloud. "
    "The court ruled the contract void. The judge closed the court session."
)
HALVES = [(0, 4), (4, 8)]
SINGLES = [(i, i + 1) for i in range(8)]


def spans_of(**settings):
    settings.setdefault("max_window_tokens", 400)
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", stride_ratio=1.0, embed_model=HashEmbedding(), **settings
    )
    nodes = parser.get_nodes_from_documents([Document(text=TWO_TOPICS, id_="d")])
    return [tuple(n.metadata["sentence_span"]) for n in nodes]


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        # percentile (the default threshold None): 10 cuts almost everywhere, 90 at the topic
        ({"breakpoint_percentile": 10, "breakpoint_buffer": 1}, [(0, 2), *SINGLES[2:]]),
        ({"breakpoint_percentile": 90, "breakpoint_buffer": 1}, HALVES),
        # the buffer: 2 differs from the lexical default 3 and from 1
        ({"breakpoint_percentile": 10, "breakpoint_buffer": 2}, [(0, 1), (1, 3), *SINGLES[3:]]),
        # threshold with the default percentile
        ({"breakpoint_threshold": 0.01, "breakpoint_buffer": 1}, HALVES),
        ({"breakpoint_threshold": 0.3, "breakpoint_buffer": 1}, [(0, 2), *SINGLES[2:]]),
    ],
)
def test_lexical_breakpoint_settings(settings, expected):
    assert spans_of(breakpoint_signal="lexical", **settings) == expected


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"breakpoint_percentile": 10, "breakpoint_buffer": 1}, [(0, 2), *SINGLES[2:]]),
        ({"breakpoint_percentile": 90, "breakpoint_buffer": 1}, HALVES),
        # the buffer: 3 differs from the embedding default 1
        ({"breakpoint_percentile": 10, "breakpoint_buffer": 3}, [(0, 1), (1, 3), *SINGLES[3:]]),
        ({"breakpoint_threshold": 0.3, "breakpoint_buffer": 1}, [(0, 8)]),
        ({"breakpoint_threshold": 0.9, "breakpoint_buffer": 1}, SINGLES),
    ],
)
def test_embedding_breakpoint_settings(settings, expected):
    assert spans_of(breakpoint_signal="embedding", **settings) == expected


def test_embedding_breakpoints_of_several_documents_match_each_alone():
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive",
        max_window_tokens=400,
        stride_ratio=1.0,
        breakpoint_signal="embedding",
        breakpoint_percentile=90,
        embed_model=HashEmbedding(),
    )
    documents = docs(FIVE, TWO_TOPICS, CHINESE)
    together = parser.get_nodes_from_documents(documents)
    alone = [n for d in documents for n in parser.get_nodes_from_documents([d])]
    assert [(n.node_id, n.text) for n in together] == [(n.node_id, n.text) for n in alone]


@pytest.mark.parametrize("embed_unit", ["sentence", "window"])
def test_max_window_sentences_bounds_adaptive_windows(embed_unit):
    spans = spans_of(
        embed_unit=embed_unit, max_window_sentences=2, breakpoint_percentile=90, breakpoint_buffer=1
    )
    assert spans and all(last - first <= 2 for first, last in spans)


def test_forward_ratio_reaches_centred_windows():
    def spans(ratio):
        return spans_of(
            embed_unit="sentence",
            max_window_tokens=30,
            forward_ratio=ratio,
            breakpoint_percentile=None,
        )

    assert spans(0.0)[:4] == [(0, 3), (0, 3), (0, 3), (1, 4)]
    assert spans(1.0)[:4] == [(0, 3), (1, 4), (2, 5), (3, 7)]


def test_section_title_of_a_centred_node_is_its_centres():
    # sentences: "One." (no section), "# B", "Two.", "Three.", "Four."
    text = "One.\n\n# B\nTwo. Three. Four."
    parser = AdaptiveSlidingWindowNodeParser(embed_unit="sentence", window_size=5)
    first = parser.get_nodes_from_documents(docs(text))[0]
    assert first.metadata["sentence_span"] == [0, 3]
    assert first.metadata["section_title"] is None


def test_section_title_of_an_odd_window_is_its_middle_sentence():
    text = "One.\n\n# B\nTwo. Three. Four."
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=3)
    first = parser.get_nodes_from_documents(docs(text))[0]
    assert first.metadata["sentence_span"] == [0, 3]
    assert first.metadata["section_title"] == "B"


# --- progress bars --------------------------------------------------------------------------


def test_progress_bars_only_when_asked(capsys):
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", breakpoint_signal="embedding", embed_model=HashEmbedding()
    )
    parser.get_nodes_from_documents(docs(FIVE))
    assert "Building windows" not in capsys.readouterr().err
    parser.get_nodes_from_documents(docs(FIVE), show_progress=True)
    err = capsys.readouterr().err
    assert "Building windows: 100%" in err
    assert "Generating embeddings" in err
