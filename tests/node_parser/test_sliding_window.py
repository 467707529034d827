"""AdaptiveSlidingWindowNodeParser on small hand-made documents (unit tier: no network)."""

from __future__ import annotations

import asyncio

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document
from llama_index.core.postprocessor import MetadataReplacementPostProcessor
from llama_index.core.schema import MetadataMode, NodeRelationship, NodeWithScore, TextNode

from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
from llama_index_ext_advrag.node_parser.sliding_window import (
    AUTO_EMBEDDING_MIN_CJK_SHARE,
    BreakpointSignal,
    EmbedUnit,
    WindowMode,
)
from llama_index_ext_advrag.text import split_sentences
from llama_index_ext_advrag.text.words import cjk_share
from llama_index_ext_advrag.trace import TRACE_KEY

FIVE = "Alpha one. Beta two. Gamma three. Delta four. Epsilon five."
SECTIONED = (
    "# Install\nRun the installer. Accept the licence. Restart the machine.\n\n"
    "# Configure\nOpen the settings. Set the port. Save the file."
)
CHINESE = "黑神话悟空是一款动作游戏。它由游戏科学开发。游戏于2024年发售。首月销量超过两千万份。玩家扮演天命人。"


def parse(parser, text, doc_id="doc-1", **metadata):
    return parser.get_nodes_from_documents([Document(text=text, id_=doc_id, metadata=metadata)])


def texts(nodes):
    return [n.get_content(metadata_mode=MetadataMode.NONE) for n in nodes]


# --- defaults, validation, serialisation -----------------------------------------------------


def test_defaults():
    parser = AdaptiveSlidingWindowNodeParser()
    assert (parser.window_size, parser.stride) == (3, 1)
    assert parser.mode is WindowMode.FIXED and parser.embed_unit is EmbedUnit.WINDOW
    assert parser.preset is None and not parser.uses_breakpoints
    assert parser.min_embed_tokens == 0 and parser.split_at_paragraphs is False
    assert parser.class_name() == "AdaptiveSlidingWindowNodeParser"


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"window_size": 0}, "window_size"),
        ({"stride": 0}, "stride"),
        ({"window_size": 2, "stride": 3}, "stride"),
        ({"mode": "dynamic"}, "mode"),
        ({"embed_unit": "paragraph"}, "embed_unit"),
        ({"preset": "medical"}, "medical"),
        ({"max_window_tokens": 0}, "max_window_tokens"),
        ({"stride_ratio": 0.0}, "stride_ratio"),
        ({"stride_ratio": 1.5}, "stride_ratio"),
        ({"breakpoint_percentile": 100.0}, "breakpoint_percentile"),
        ({"breakpoint_threshold": 2.0}, "breakpoint_threshold"),
        ({"forward_ratio": 1.5}, "forward_ratio"),
        ({"min_embed_tokens": -1}, "min_embed_tokens"),
        ({"min_embed_tokens": 513}, "min_embed_tokens"),
        ({"min_embed_tokens": 8}, "min_embed_tokens=8"),  # window unit: nothing to extend
        ({"split_at_paragraphs": "maybe"}, "split_at_paragraphs"),
    ],
)
def test_invalid_arguments_raise_value_error_naming_the_value(kwargs, named):
    with pytest.raises(ValueError, match=named):
        AdaptiveSlidingWindowNodeParser(**kwargs)


def test_stride_error_names_both_values():
    with pytest.raises(ValueError, match=r"window_size=2, got 3"):
        AdaptiveSlidingWindowNodeParser(window_size=2, stride=3)


def test_preset_selects_adaptive_settings_and_explicit_fields_override():
    qa = AdaptiveSlidingWindowNodeParser(preset="qa")
    assert qa.mode is WindowMode.ADAPTIVE and qa.keep_questions_with_answers
    assert qa.max_window_tokens == 192
    general = AdaptiveSlidingWindowNodeParser(preset="general")
    assert general.max_window_tokens == 128 and general.stride_ratio == 0.5  # fitted to bge-small
    assert AdaptiveSlidingWindowNodeParser(preset="article").max_window_tokens == 160
    legal = AdaptiveSlidingWindowNodeParser(preset="legal", max_window_tokens=300)
    assert legal.max_window_tokens == 300 and legal.stride_ratio == 0.75
    forced = AdaptiveSlidingWindowNodeParser(preset="general", mode="fixed")
    assert forced.mode is WindowMode.FIXED


def test_article_preset_is_the_benchmarked_sentence_unit():
    article = AdaptiveSlidingWindowNodeParser(preset="article")
    explicit = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", embed_unit="sentence", max_window_tokens=160, forward_ratio=0.75,
        min_embed_tokens=16, split_at_paragraphs=True, breakpoint_percentile=None,
    )  # fmt: skip
    text = (
        "Title of a paper\n\nShort one. "
        + "A longer sentence about the virus and its spread. " * 30
    )
    text += "\n\nAnother paragraph starts here. It ends here."
    assert article.embed_unit is EmbedUnit.SENTENCE and article.breakpoint_percentile is None
    assert [n.get_content() for n in parse(article, text)] == [
        n.get_content() for n in parse(explicit, text)
    ]
    assert [n.metadata for n in parse(article, text)] == [n.metadata for n in parse(explicit, text)]


@pytest.mark.parametrize("preset", [None, "general", "technical", "legal", "qa"])
def test_serialisation_round_trip(preset):
    parser = AdaptiveSlidingWindowNodeParser(
        preset=preset,
        window_size=4,
        stride=2,
        embed_unit="sentence",
        min_embed_tokens=12,
        split_at_paragraphs=True,
        embed_model=HashEmbedding(),
    )
    restored = AdaptiveSlidingWindowNodeParser.from_dict(parser.to_dict())
    assert restored.model_dump() == parser.model_dump()
    assert restored.embed_model is None  # models are not serialised
    assert AdaptiveSlidingWindowNodeParser.from_json(parser.to_json()).model_dump() == (
        parser.model_dump()
    )
    assert "embed_model" not in parser.to_dict()


def test_custom_id_func_cannot_be_restored_silently():
    parser = AdaptiveSlidingWindowNodeParser(id_func=lambda i, doc: f"{doc.node_id}-{i}")
    with pytest.raises(ValueError, match="id_func"):
        AdaptiveSlidingWindowNodeParser.from_dict(parser.to_dict())


# --- window arithmetic on text ---------------------------------------------------------------


def test_a_to_e_window_three_stride_one():
    nodes = parse(AdaptiveSlidingWindowNodeParser(window_size=3, stride=1), FIVE)
    assert texts(nodes) == [
        "Alpha one. Beta two. Gamma three.",
        "Beta two. Gamma three. Delta four.",
        "Gamma three. Delta four. Epsilon five.",
    ]
    assert [n.metadata["sentence_span"] for n in nodes] == [[0, 3], [1, 4], [2, 5]]
    # A fact split across B|C is whole in two windows.
    assert sum("Beta two. Gamma three." in t for t in texts(nodes)) == 2


def test_stride_two_and_last_partial_window():
    six = FIVE + " Zeta six."
    nodes = parse(AdaptiveSlidingWindowNodeParser(window_size=3, stride=2), six)
    assert [n.metadata["sentence_span"] for n in nodes] == [[0, 3], [2, 5], [4, 6]]
    assert texts(nodes)[-1] == "Epsilon five. Zeta six."


def test_offsets_metadata_and_prev_next():
    nodes = parse(AdaptiveSlidingWindowNodeParser(), FIVE, source="unit-test")
    for node in nodes:
        start, end = node.metadata["char_span"]
        assert (node.start_char_idx, node.end_char_idx) == (start, end)
        assert FIVE[start:end] == node.text
        assert node.metadata["document_id"] == "doc-1"
        assert node.metadata["source"] == "unit-test"  # document metadata is inherited
        assert node.ref_doc_id == "doc-1"
        assert node.metadata[TRACE_KEY]["sliding_window"]["mode"] == "fixed"
    assert NodeRelationship.PREVIOUS not in nodes[0].relationships
    assert nodes[0].next_node.node_id == nodes[1].node_id
    assert nodes[1].prev_node.node_id == nodes[0].node_id
    assert nodes[2].prev_node.node_id == nodes[1].node_id
    assert NodeRelationship.NEXT not in nodes[2].relationships
    # Bookkeeping stays out of what is embedded and what the LLM reads.
    embedded = nodes[0].get_content(metadata_mode=MetadataMode.EMBED)
    assert "char_span" not in embedded and TRACE_KEY not in embedded and "source" in embedded


def test_no_sentence_is_cut():
    text = "Dr. Smith measured 3.5 mg. The U.S. team agreed. Results e.g. above were clear. Done."
    boundaries = {(s.start, s.end) for s in split_sentences(text)}
    starts = {s for s, _ in boundaries}
    ends = {e for _, e in boundaries}
    for parser in (
        AdaptiveSlidingWindowNodeParser(window_size=2),
        AdaptiveSlidingWindowNodeParser(
            mode="adaptive", max_window_tokens=5, breakpoint_percentile=None
        ),
    ):
        for node in parse(parser, text):
            assert node.start_char_idx in starts and node.end_char_idx in ends


def test_ids_are_deterministic_and_depend_on_document_and_span():
    parser = AdaptiveSlidingWindowNodeParser()
    first = [n.node_id for n in parse(parser, FIVE)]
    again = [n.node_id for n in parse(AdaptiveSlidingWindowNodeParser(), FIVE)]
    other_doc = [n.node_id for n in parse(parser, FIVE, doc_id="doc-2")]
    assert first == again
    assert len(set(first)) == 3
    assert not set(first) & set(other_doc)
    sentence_ids = [
        n.node_id for n in parse(AdaptiveSlidingWindowNodeParser(embed_unit="sentence"), FIVE)
    ]
    assert not set(first) & set(sentence_ids)


def test_user_id_func_is_honoured():
    parser = AdaptiveSlidingWindowNodeParser(id_func=lambda i, doc: f"{doc.node_id}-{i}")
    assert [n.node_id for n in parse(parser, FIVE)] == ["doc-1-0", "doc-1-1", "doc-1-2"]


@pytest.mark.parametrize("text", ["", "   \n\t  "])
@pytest.mark.parametrize("mode", ["fixed", "adaptive"])
def test_empty_documents_give_no_nodes(text, mode):
    parser = AdaptiveSlidingWindowNodeParser(mode=mode, embed_model=HashEmbedding())
    assert parse(parser, text) == []
    assert parser.last_parse_stats.nodes == 0
    assert parser.get_nodes_from_documents([]) == []


def test_storage_expansion_reported():
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, stride=1)
    parse(parser, FIVE)
    stats = parser.last_parse_stats
    window_chars = sum(len(t) for t in texts(parse(parser, FIVE)))
    assert stats.window_chars == window_chars
    assert stats.storage_expansion == pytest.approx(window_chars / len(FIVE))
    assert 1.5 < stats.storage_expansion < 3.0
    parse(AdaptiveSlidingWindowNodeParser(window_size=1), FIVE)


def test_chinese_sentences_are_windowed():
    nodes = parse(AdaptiveSlidingWindowNodeParser(window_size=2, stride=1), CHINESE)
    assert texts(nodes)[0] == "黑神话悟空是一款动作游戏。它由游戏科学开发。"
    assert len(nodes) == 4
    assert all(t.endswith("。") for t in texts(nodes))


# --- sentence unit ---------------------------------------------------------------------------


def test_sentence_unit_keeps_window_for_metadata_replacement():
    parser = AdaptiveSlidingWindowNodeParser(window_size=3, embed_unit="sentence")
    nodes = parse(parser, FIVE)
    assert texts(nodes) == [s.text for s in split_sentences(FIVE)]
    assert nodes[2].metadata["window"] == "Beta two. Gamma three. Delta four."
    assert nodes[2].metadata["original_text"] == "Gamma three."
    assert "Beta two" not in nodes[2].get_content(metadata_mode=MetadataMode.EMBED)
    assert "Beta two" not in nodes[2].get_content(metadata_mode=MetadataMode.LLM)
    replaced = MetadataReplacementPostProcessor(target_metadata_key="window").postprocess_nodes(
        [NodeWithScore(node=nodes[2], score=1.0)]
    )
    assert replaced[0].node.get_content() == "Beta two. Gamma three. Delta four."


# --- adaptive --------------------------------------------------------------------------------


def test_adaptive_headings_are_not_crossed_and_titles_carried():
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", max_window_tokens=1000, breakpoint_percentile=None
    )
    nodes = parse(parser, SECTIONED)
    assert [n.metadata["section_title"] for n in nodes] == ["Install", "Configure"]
    assert "Open the settings" not in nodes[0].text and "Restart" not in nodes[1].text
    assert nodes[0].metadata[TRACE_KEY]["sliding_window"]["stop"] == "section"
    # Fixed mode ignores sections, by definition: exactly window_size sentences.
    fixed = parse(AdaptiveSlidingWindowNodeParser(window_size=4), SECTIONED)
    assert any("Restart" in n.text and "Configure" in n.text for n in fixed)


def test_adaptive_budget_adapts_window_length():
    long_sentence = "This sentence is deliberately long " + "and keeps going " * 20 + "until here."
    text = f"Short one. Short two. Short three. Short four. {long_sentence} Short five."
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", max_window_tokens=12, stride_ratio=1.0, breakpoint_percentile=None
    )
    nodes = parse(parser, text)
    assert texts(nodes)[0] == "Short one. Short two. Short three. Short four."
    assert texts(nodes)[1] == long_sentence  # kept whole although over budget


def test_adaptive_semantic_breakpoint_splits_topics():
    cats = "Cats purr softly. Cats purr loudly. Cats purr at night."
    rockets = "Rockets burn fuel fast. Rockets burn fuel hot. Rockets burn fuel loud."
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive",
        max_window_tokens=1000,
        breakpoint_signal="embedding",
        breakpoint_threshold=0.3,
        embed_model=HashEmbedding(dim=256),
    )
    nodes = parse(parser, f"{cats} {rockets}")
    assert texts(nodes) == [cats, rockets]
    assert nodes[0].metadata[TRACE_KEY]["sliding_window"]["stop"] == "breakpoint"
    no_breaks = parser.model_copy(
        update={"breakpoint_threshold": None, "breakpoint_percentile": None}
    )
    assert texts(parse(no_breaks, f"{cats} {rockets}")) == [f"{cats} {rockets}"]


def test_qa_preset_keeps_question_with_answer():
    faq = "What is the port? The port is 8080. How do I restart? Run the restart script."
    parser = AdaptiveSlidingWindowNodeParser(
        preset="qa", max_window_tokens=8, stride_ratio=1.0, embed_model=HashEmbedding()
    )
    nodes = parse(parser, faq)
    assert texts(nodes) == [
        "What is the port? The port is 8080.",
        "How do I restart? Run the restart script.",
    ]
    plain = parser.model_copy(update={"keep_questions_with_answers": False})
    assert "What is the port?" in texts(parse(plain, faq))


def test_embed_model_resolved_only_when_breakpoints_are_needed(spy):
    import llama_index_ext_advrag.node_parser.sliding_window as module

    calls = spy(
        module,
        "resolve_embed_model",
        record=lambda explicit=None: explicit,
        returns=HashEmbedding(),
    )
    AdaptiveSlidingWindowNodeParser(mode="fixed").get_nodes_from_documents([Document(text=FIVE)])
    AdaptiveSlidingWindowNodeParser(
        mode="adaptive", breakpoint_percentile=None
    ).get_nodes_from_documents([Document(text=FIVE)])
    AdaptiveSlidingWindowNodeParser(mode="adaptive").get_nodes_from_documents(
        [Document(text="Only one sentence here.")]
    )
    # The default (lexical) signal needs no model, in either language.
    for text in (FIVE, CHINESE):
        AdaptiveSlidingWindowNodeParser(mode="adaptive").get_nodes_from_documents(
            [Document(text=text)]
        )
    assert calls == []
    # "auto" compares an English document's words, a Chinese one's embeddings.
    auto = AdaptiveSlidingWindowNodeParser(mode="adaptive", breakpoint_signal="auto")
    auto.get_nodes_from_documents([Document(text=FIVE)])
    assert calls == []
    auto.get_nodes_from_documents([Document(text=CHINESE)])
    assert calls == [None]
    AdaptiveSlidingWindowNodeParser(
        mode="adaptive", breakpoint_signal="embedding"
    ).get_nodes_from_documents([Document(text=FIVE)])
    assert calls == [None, None]


def test_sentence_embeddings_are_batched_across_documents():
    batches = []

    class CountingEmbedding(HashEmbedding):
        def _get_text_embeddings(self, texts):
            batches.append(len(texts))
            return [self._vector(t) for t in texts]

    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive",
        breakpoint_signal="embedding",
        embed_model=CountingEmbedding(embed_batch_size=100),
    )
    parser.get_nodes_from_documents([Document(text=FIVE), Document(text=CHINESE)])
    assert batches == [10]  # 5 English + 5 Chinese sentences in one call


@pytest.mark.parametrize("embed_unit", ["window", "sentence"])
def test_sync_and_async_give_the_same_nodes(embed_unit):
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", max_window_tokens=20, embed_unit=embed_unit, embed_model=HashEmbedding()
    )
    docs = [Document(text=SECTIONED, id_="a"), Document(text=CHINESE, id_="b")]
    sync_nodes = parser.get_nodes_from_documents(docs)
    async_nodes = asyncio.run(parser.aget_nodes_from_documents(docs))
    assert [(n.node_id, n.text, n.metadata) for n in sync_nodes] == [
        (n.node_id, n.text, n.metadata) for n in async_nodes
    ]


def test_input_documents_are_not_mutated():
    document = Document(text=FIVE, id_="d", metadata={"k": "v"}, excluded_llm_metadata_keys=["k"])
    before = document.model_dump()
    AdaptiveSlidingWindowNodeParser(embed_unit="sentence").get_nodes_from_documents([document])
    assert document.model_dump() == before


def test_text_nodes_can_be_parsed_too():
    node = TextNode(text=FIVE, id_="n1")
    nodes = AdaptiveSlidingWindowNodeParser()([node])
    assert len(nodes) == 3 and nodes[0].ref_doc_id == "n1"


def test_section_title_reaches_the_llm_but_not_the_embedding():
    parser = AdaptiveSlidingWindowNodeParser(mode="adaptive", breakpoint_percentile=None)
    node = parse(parser, SECTIONED)[1]
    assert "section_title: Configure" in node.get_content(metadata_mode=MetadataMode.LLM)
    assert "section_title" not in node.get_content(metadata_mode=MetadataMode.EMBED)
    untitled = parse(parser, FIVE)[0]
    assert "section_title" not in untitled.get_content(metadata_mode=MetadataMode.LLM)


# --- min_embed_tokens: short sentences embedded with what follows ------------------------------

SHORT_EN = "Results. The virus binds the ACE2 receptor on human lung cells. Table 3."
SHORT_ZH = "结果。黑神话悟空是一款动作游戏。它由游戏科学开发。"


@pytest.mark.parametrize(
    ("text", "min_tokens", "embedded", "original"),
    [
        (
            SHORT_EN,
            8,
            "Results. The virus binds the ACE2 receptor on human lung cells.",
            "Results.",
        ),
        (SHORT_ZH, 8, "结果。黑神话悟空是一款动作游戏。", "结果。"),
    ],
)
def test_short_sentence_is_embedded_with_the_next(text, min_tokens, embedded, original):
    parser = AdaptiveSlidingWindowNodeParser(embed_unit="sentence", min_embed_tokens=min_tokens)
    nodes = parse(parser, text)
    first = nodes[0]
    assert first.get_content(metadata_mode=MetadataMode.EMBED) == embedded
    assert first.metadata["original_text"] == original
    assert text[first.start_char_idx : first.end_char_idx] == embedded
    assert embedded in first.metadata["window"]
    assert first.metadata[TRACE_KEY]["sliding_window"]["embedded_sentences"] == [0, 2]
    # the long sentence stays alone, the last one has nothing after it to take
    assert [n.metadata["original_text"] for n in nodes[1:]] == texts(nodes[1:])
    assert len(nodes) == len(split_sentences(text))


def test_min_embed_tokens_never_reaches_past_the_window():
    parser = AdaptiveSlidingWindowNodeParser(
        window_size=1, embed_unit="sentence", min_embed_tokens=50
    )
    nodes = parse(parser, SHORT_EN)
    assert texts(nodes) == [s.text for s in split_sentences(SHORT_EN)]


def test_min_embed_tokens_in_adaptive_mode_stays_in_the_section():
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", embed_unit="sentence", min_embed_tokens=30, breakpoint_percentile=None
    )
    nodes = parse(parser, SECTIONED)
    by_original = {n.metadata["original_text"]: n for n in nodes}
    last_of_install = by_original["Restart the machine."]
    assert texts([last_of_install]) == ["Restart the machine."]  # the heading is not taken
    assert texts([by_original["Run the installer."]]) == [
        "Run the installer. Accept the licence. Restart the machine."
    ]


# --- split_at_paragraphs: windows stop at blank lines -------------------------------------------

PARAGRAPHS_EN = "Alpha one. Beta two.\n\nGamma three. Delta four."
PARAGRAPHS_ZH = "第一段的第一句。第一段的第二句。\n\n第二段的第一句。第二段的第二句。"


@pytest.mark.parametrize("text", [PARAGRAPHS_EN, PARAGRAPHS_ZH])
@pytest.mark.parametrize("embed_unit", ["sentence", "window"])
def test_split_at_paragraphs_keeps_windows_inside_paragraphs(text, embed_unit):
    first_paragraph, second_paragraph = text.split("\n\n")
    kwargs = {"mode": "adaptive", "embed_unit": embed_unit, "breakpoint_percentile": None}
    window_key = "window" if embed_unit == "sentence" else None

    def windows(nodes):
        return [n.metadata[window_key] if window_key else n.text for n in nodes]

    split = parse(AdaptiveSlidingWindowNodeParser(split_at_paragraphs=True, **kwargs), text)
    assert set(windows(split)) == {first_paragraph, second_paragraph}
    assert {n.metadata[TRACE_KEY]["sliding_window"]["stop"] for n in split} == {
        "paragraph",
        "document_end",
    }
    joined = parse(AdaptiveSlidingWindowNodeParser(**kwargs), text)
    assert windows(joined)[0] == text  # without the option one window spans the blank line


def test_documented_covid_configuration():
    """The example in docs/node_parsers.md gives what it says."""
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive",
        embed_unit="sentence",
        max_window_tokens=280,
        forward_ratio=0.75,
        breakpoint_percentile=None,
        split_at_paragraphs=True,
        min_embed_tokens=16,
    )
    text = (
        "Results.\nThe virus binds the ACE2 receptor on the surface of human lung cells. It enters them.\n\n"
        "Methods follow."
    )
    nodes = parse(parser, text, doc_id="paper")
    assert (
        nodes[0].text
        == "Results.\nThe virus binds the ACE2 receptor on the surface of human lung cells."
    )
    assert nodes[0].metadata["window"] == text.split("\n\n")[0]
    assert nodes[-1].metadata["window"] == "Methods follow."


def test_deterministic_ids_are_uuid5_of_document_and_position() -> None:
    """Ids stored by earlier versions must stay the same: they are uuid5 of the position key."""
    import uuid

    from llama_index_ext_advrag.layout import NODE_ID_NAMESPACE, deterministic_node_id

    for document_id, parts in (("doc", (0, 3)), ("论文-7", ("window", 12, 15)), ("", ())):
        key = "\x1f".join([document_id, *(str(part) for part in parts)])
        assert deterministic_node_id(document_id, *parts) == str(uuid.uuid5(NODE_ID_NAMESPACE, key))


# --- options checked by behaviour, not only by output digest (issue 20) ----------------------


def test_include_prev_next_rel_false_links_nothing():
    for mode, budget in (("fixed", {}), ("adaptive", {"max_window_tokens": 12})):
        linked = parse(AdaptiveSlidingWindowNodeParser(mode=mode, **budget), FIVE)
        assert linked[1].prev_node is not None and linked[0].next_node is not None
        nodes = parse(
            AdaptiveSlidingWindowNodeParser(mode=mode, include_prev_next_rel=False, **budget), FIVE
        )
        assert texts(nodes) == texts(linked) and len(nodes) > 1
        for node in nodes:
            assert NodeRelationship.PREVIOUS not in node.relationships
            assert NodeRelationship.NEXT not in node.relationships
            assert node.ref_doc_id == "doc-1"  # the SOURCE link stays


def test_include_metadata_false_keeps_only_the_parsers_own_keys():
    with_doc = parse(AdaptiveSlidingWindowNodeParser(), FIVE, source="unit-test", lang="en")
    assert with_doc[0].metadata["source"] == "unit-test"
    nodes = parse(
        AdaptiveSlidingWindowNodeParser(include_metadata=False), FIVE, source="unit-test", lang="en"
    )
    assert texts(nodes) == texts(with_doc)
    for node in nodes:
        assert "source" not in node.metadata and "lang" not in node.metadata
        assert node.metadata["document_id"] == "doc-1"
        assert FIVE[slice(*node.metadata["char_span"])] == node.text
        assert "unit-test" not in node.get_content(metadata_mode=MetadataMode.EMBED)
        assert "unit-test" not in node.get_content(metadata_mode=MetadataMode.LLM)


def test_custom_window_keys_are_the_only_window_keys():
    parser = AdaptiveSlidingWindowNodeParser(
        window_size=3, embed_unit="sentence", window_metadata_key="ctx",
        original_text_metadata_key="sentence",
    )  # fmt: skip
    nodes = parse(parser, FIVE)
    assert nodes[2].metadata["ctx"] == "Beta two. Gamma three. Delta four."
    assert nodes[2].metadata["sentence"] == "Gamma three."
    for node in nodes:
        assert "window" not in node.metadata and "original_text" not in node.metadata
        # the window is hidden from the embedding and the LLM under its custom keys too
        for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            assert {"ctx", "sentence"} <= set(excluded)
    assert "Beta two" not in nodes[2].get_content(metadata_mode=MetadataMode.EMBED)
    assert "Beta two" not in nodes[2].get_content(metadata_mode=MetadataMode.LLM)
    replaced = MetadataReplacementPostProcessor(target_metadata_key="ctx").postprocess_nodes(
        [NodeWithScore(node=nodes[2], score=1.0)]
    )
    assert replaced[0].node.get_content() == "Beta two. Gamma three. Delta four."


TWO_TOPICS = (
    "The virus binds the host cell receptor. The virus then enters the host cell. "
    "Inside the cell the virus copies its genome. New virus particles leave the host cell. "
    "The court heard the contract case. The judge read the contract clause aloud. "
    "The court ruled the contract void. The judge closed the court session."
)
TWO_TOPICS_ZH = (
    "病毒结合宿主细胞的受体。病毒随后进入宿主细胞。病毒在细胞内复制基因组。新的病毒颗粒离开宿主细胞。"
    "法院审理了合同案件。法官宣读了合同条款。法院裁定合同无效。法官结束了法院的庭审。"
)


@pytest.mark.parametrize("text", [TWO_TOPICS, TWO_TOPICS_ZH])
def test_lexical_breakpoints_split_at_the_topic_change_without_any_model_call(text):
    class FailingEmbedding(HashEmbedding):
        def _get_text_embeddings(self, texts):
            raise AssertionError("lexical breakpoints must not call the embedding model")

    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive",
        max_window_tokens=400,
        stride_ratio=1.0,
        breakpoint_signal="lexical",
        breakpoint_buffer=2,
        breakpoint_threshold=0.05,
        embed_model=FailingEmbedding(),
    )
    nodes = parser.get_nodes_from_documents([Document(text=text)])
    assert len(nodes) == 2  # the whole text fits one window; the break alone splits it
    first, second = nodes
    assert ("virus" in first.text or "病毒" in first.text) and not (
        "court" in first.text or "法院" in first.text
    )
    assert ("court" in second.text or "法院" in second.text) and not (
        "virus" in second.text or "病毒" in second.text
    )
    assert first.metadata["advrag_trace"]["sliding_window"]["stop"] == "breakpoint"


def test_lexical_breakpoints_sync_and_async_agree_and_embedding_signal_still_embeds():
    docs = [Document(text=TWO_TOPICS, id_="a"), Document(text=TWO_TOPICS_ZH, id_="b")]
    lexical = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", max_window_tokens=400, breakpoint_signal="lexical", breakpoint_buffer=2
    )
    sync_nodes = lexical.get_nodes_from_documents(docs)
    async_nodes = asyncio.run(lexical.aget_nodes_from_documents(docs))
    assert [(n.node_id, n.text) for n in sync_nodes] == [(n.node_id, n.text) for n in async_nodes]
    calls = []

    class CountingEmbedding(HashEmbedding):
        def _get_text_embeddings(self, texts):
            calls.append(len(texts))
            return [self._vector(t) for t in texts]

    AdaptiveSlidingWindowNodeParser(
        mode="adaptive", breakpoint_signal="embedding", embed_model=CountingEmbedding()
    ).get_nodes_from_documents(docs)
    assert sum(calls) == 16  # 8 + 8 sentences embedded for the embedding signal


def test_auto_signal_embeds_only_the_chinese_document_and_uses_each_signals_buffer():
    calls: list[list[str]] = []

    class CountingEmbedding(HashEmbedding):
        def _get_text_embeddings(self, texts):
            calls.append(list(texts))
            return [self._vector(t) for t in texts]

    docs = [Document(text=TWO_TOPICS, id_="en"), Document(text=TWO_TOPICS_ZH, id_="zh")]
    assert AdaptiveSlidingWindowNodeParser().breakpoint_signal is BreakpointSignal.LEXICAL
    parser = AdaptiveSlidingWindowNodeParser(
        mode="adaptive", breakpoint_signal="auto", embed_model=CountingEmbedding()
    )
    assert parser.signal_for(TWO_TOPICS) is BreakpointSignal.LEXICAL
    assert parser.signal_for(TWO_TOPICS_ZH) is BreakpointSignal.EMBEDDING
    assert parser.buffer_for(BreakpointSignal.LEXICAL) == 3
    assert parser.buffer_for(BreakpointSignal.EMBEDDING) == 1
    nodes = parser.get_nodes_from_documents(docs)
    # One batch of the 8 Chinese sentences; no English sentence is embedded.
    assert [len(batch) for batch in calls] == [8]
    assert all("病毒" in t or "法院" in t or "法官" in t for t in calls[0])
    assert parser.last_parse_stats.breakpoint_signals == {"embedding": 1, "lexical": 1}
    # Each document got exactly the breaks its own signal gives it alone.
    for doc, signal, buffer in [
        (docs[0], "lexical", 3),
        (docs[1], "embedding", 1),
    ]:
        alone = AdaptiveSlidingWindowNodeParser(
            mode="adaptive",
            breakpoint_signal=signal,
            breakpoint_buffer=buffer,
            embed_model=HashEmbedding(),
        ).get_nodes_from_documents([doc])
        assert [n.text for n in nodes if n.ref_doc_id == doc.id_] == [n.text for n in alone]
    async_nodes = asyncio.run(parser.aget_nodes_from_documents(docs))
    assert [(n.node_id, n.text) for n in nodes] == [(n.node_id, n.text) for n in async_nodes]


def test_explicit_buffer_overrides_the_signals_default():
    parser = AdaptiveSlidingWindowNodeParser(mode="adaptive", breakpoint_buffer=2)
    assert parser.buffer_for(BreakpointSignal.LEXICAL) == 2
    assert parser.buffer_for(BreakpointSignal.EMBEDDING) == 2
    mixed = "Alpha beta gamma. " * 3 + "病毒结合受体。" * 3  # a third of the letters are CJK
    assert cjk_share(mixed) < AUTO_EMBEDDING_MIN_CJK_SHARE <= cjk_share("病毒结合受体。" * 5)
    fixed = AdaptiveSlidingWindowNodeParser(mode="adaptive", breakpoint_signal="lexical")
    assert fixed.signal_for("病毒结合受体。") is BreakpointSignal.LEXICAL


def test_unknown_breakpoint_signal_is_named():
    with pytest.raises(ValueError, match="breakpoint_signal"):
        AdaptiveSlidingWindowNodeParser(breakpoint_signal="bm25")
