"""The piece helpers exactly, on their own (kills the mutants of postprocessor/pieces.py that
test_pieces.py leaves; the neighbour postprocessors' tests reach them only through whole
outputs): building a piece from members, which member wins, merging at the gap bound and the
order of documents, joining, character spans, the text join's separators and overlap, one
output node per piece (text, vector, annotations, spans, relationships, score, trace) and the
expansion event."""

from __future__ import annotations

from llama_index.core.schema import (
    Document,
    NodeRelationship,
    NodeWithScore,
    RelatedNodeInfo,
    TextNode,
)

from llama_index_ext_advrag.layout import ANNOTATION_KEYS, Location, NodeLayout
from llama_index_ext_advrag.postprocessor.pieces import (
    GAP_MARKER,
    Member,
    Piece,
    _join,
    add_member,
    char_span,
    expansion_event,
    join_texts,
    merge_pieces,
    ordered_members,
    piece_from_members,
    piece_to_node,
)
from llama_index_ext_advrag.trace import get_trace


def node(text: str, node_id: str, start: int | None = None, **metadata) -> TextNode:
    end = None if start is None else start + len(text)
    return TextNode(
        text=text, id_=node_id, start_char_idx=start, end_char_idx=end, metadata=metadata
    )


def member(node_id: str, first: int, role: str = "hit", doc: str = "d", width: int = 1) -> Member:
    return Member(node(node_id.upper() + ".", node_id), Location(doc, first, first + width), role)


def hit(node_id: str, score: float | None) -> NodeWithScore:
    return NodeWithScore(node=node(node_id.upper() + ".", node_id), score=score)


def test_piece_from_members_spans_them_in_any_order() -> None:
    members = [member("c", 4, width=2), member("a", 1), member("b", 2, "neighbour")]
    record = {"why": 1}
    piece = piece_from_members(members, hit("c", 0.5), 3, record)
    assert (piece.doc_id, piece.first, piece.last, piece.rank) == ("d", 1, 6, 3)
    assert list(piece.members) == ["c", "a", "b"]
    assert [h.node.node_id for h in piece.hits] == ["c"]
    assert piece.records == [record]
    assert piece_from_members(members, hit("c", 0.5), 0).records == []


def test_add_member_lets_a_hit_win_over_a_neighbour_only() -> None:
    piece = Piece("d", 0, 3, 0)
    add_member(piece, member("a", 0, "neighbour"))
    first = piece.members["a"]
    add_member(piece, member("a", 0, "after"))
    assert piece.members["a"] is first  # neither is a hit: the first stays
    add_member(piece, member("a", 0, "hit"))
    assert piece.members["a"].role == "hit"
    hit_member = piece.members["a"]
    add_member(piece, member("a", 0, "neighbour"))
    assert piece.members["a"] is hit_member
    add_member(piece, member("a", 0, "hit"))
    assert piece.members["a"] is hit_member  # a second hit does not replace the first


def test_merge_pieces_at_the_gap_bound() -> None:
    def two(gap: int, max_gap: int) -> list[tuple[int, int]]:
        pieces = [Piece("a", 0, 2, 0), Piece("a", 2 + gap, 4 + gap, 1)]
        return [(p.first, p.last) for p in merge_pieces(pieces, max_gap)]

    assert two(0, 0) == [(0, 4)]  # touching
    assert two(1, 0) == [(0, 2), (3, 5)]
    assert two(2, 2) == [(0, 6)]
    assert two(3, 2) == [(0, 2), (5, 7)]
    # by default only touching or overlapping pieces merge
    apart = [Piece("a", 0, 2, 0), Piece("a", 3, 5, 1)]
    assert [(p.first, p.last) for p in merge_pieces(apart)] == [(0, 2), (3, 5)]
    # overlapping pieces sorted by start, then end
    overlapping = [Piece("a", 1, 5, 0), Piece("a", 1, 2, 1), Piece("a", 0, 1, 2)]
    assert [(p.first, p.last, p.rank) for p in merge_pieces(overlapping)] == [(0, 5, 0)]


def test_merge_pieces_orders_documents_by_best_rank_then_name() -> None:
    pieces = [Piece("b", 0, 1, 2), Piece("a", 5, 6, 2), Piece("a", 0, 1, 3), Piece("c", 0, 1, 1)]
    assert [(p.doc_id, p.first) for p in merge_pieces(pieces)] == [
        ("c", 0), ("a", 0), ("a", 5), ("b", 0)
    ]  # fmt: skip
    # a document's best rank is its best piece's, wherever that piece lies
    pieces = [Piece("z", 0, 1, 2), Piece("z", 5, 6, 4), Piece("b", 0, 1, 3)]
    assert [(p.doc_id, p.first) for p in merge_pieces(pieces)] == [("z", 0), ("z", 5), ("b", 0)]


def test_join_keeps_both_sides() -> None:
    left = piece_from_members(
        [member("a", 2, "neighbour"), member("z", 1, "neighbour")], hit("a", 0.2), 4, {"l": 1}
    )
    right = piece_from_members([member("a", 2), member("b", 3)], hit("b", 0.9), 1, {"r": 2})
    joined = _join(left, right)
    assert (joined.doc_id, joined.first, joined.last, joined.rank) == ("d", 1, 4, 1)
    assert {i: m.role for i, m in joined.members.items()} == {
        "a": "hit", "z": "neighbour", "b": "hit"
    }  # fmt: skip
    assert [h.node.node_id for h in joined.hits] == ["a", "b"]
    assert joined.records == [{"l": 1}, {"r": 2}]
    assert left.members["a"].role == "neighbour"  # the left piece's own members untouched
    wider = _join(Piece("d", 0, 9, 7), Piece("d", 3, 4, 5))
    assert (wider.first, wider.last, wider.rank) == (0, 9, 5)


def test_char_span_and_ordered_members() -> None:
    assert char_span(node("abc", "x", start=4)) == (4, 7)
    assert char_span(node("abc", "x")) == (None, None)
    assert char_span(Document(id_="i")) == (None, None)  # a node without character offsets
    piece = Piece("d", 0, 5, 0)
    for m in (member("c", 3), member("a", 0, width=3), member("b", 0, width=2)):
        add_member(piece, m)
    assert [m.node.node_id for m in ordered_members(piece)] == ["b", "a", "c"]


def test_join_texts_separators_overlap_and_empty_members() -> None:
    members = [member("a", 0), member("b", 1), member("c", 3)]
    assert join_texts(members, "\n") == "A.\nB. ... C."
    assert join_texts(members, "|", "~") == "A.|B.~C."
    assert join_texts(members) == "A. B." + GAP_MARKER + "C."
    # a member overlapping the previous one (first <= previous last) is contiguous
    assert join_texts([member("a", 0, width=3), member("b", 2)], "|") == "A.|B."
    empty = Member(node("", "e"), Location("d", 1, 2), "neighbour")
    assert join_texts([member("a", 0), empty, member("b", 2)], "|", "~") == "A.|B."
    assert join_texts([empty, member("a", 0)]) == "A."
    # overlap: "one two" [0, 7), "two three" [4, 13), "three four" [8, 18) of the same text
    overlapping = [
        Member(node("one two", "1", start=0), Location("d", 0, 2), "hit"),
        Member(node("two three", "2", start=4), Location("d", 1, 3), "hit"),
        Member(node("three four", "3", start=8), Location("d", 2, 4), "hit"),
    ]
    assert join_texts(overlapping, "|") == "one two|three|four"
    # a member inside what is already covered adds nothing; covered stays at the furthest end
    inside = [
        Member(node("one two three", "1", start=0), Location("d", 0, 3), "hit"),
        Member(node("two", "2", start=4), Location("d", 1, 2), "hit"),
        Member(node("three four", "3", start=8), Location("d", 2, 4), "hit"),
    ]
    assert join_texts(inside, "|") == "one two three|four"
    # a member starting exactly where the covered text ends keeps its own leading spaces
    touching = [
        Member(node("one", "1", start=0), Location("d", 0, 1), "hit"),
        Member(node("  two", "2", start=3), Location("d", 1, 2), "hit"),
    ]
    assert join_texts(touching, "|") == "one|  two"
    # a text whose span does not match its length is not cut
    shifted = node("two three", "2", start=4)
    shifted.end_char_idx = 20
    pair = [Member(node("one two", "1", start=0), Location("d", 0, 2), "hit"),
            Member(shifted, Location("d", 1, 3), "hit")]  # fmt: skip
    assert join_texts(pair, "|") == "one two|two three"


def chained(piece_nodes: list[TextNode]) -> None:
    for left, right in zip(piece_nodes, piece_nodes[1:], strict=False):
        left.relationships[NodeRelationship.NEXT] = RelatedNodeInfo(node_id=right.node_id)
        right.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id=left.node_id)


def test_piece_to_node_builds_one_node_from_its_members() -> None:
    annotations = dict.fromkeys(ANNOTATION_KEYS, 1)
    texts = [node("A b.", "a", 0), node("C d.", "b", 5), node("E f.", "c", 10), node("G.", "z", 15)]
    chained(texts)
    a, b, c, _ = texts
    for n, first in ((a, 0), (b, 1), (c, 2)):
        n.metadata.update({"sentence_span": [first, first + 1], **annotations})
    b.embedding = [1.0, 0.0]
    hits = [NodeWithScore(node=a, score=None), NodeWithScore(node=b, score=0.4),
            NodeWithScore(node=c, score=0.2)]  # fmt: skip
    piece = Piece("d", 0, 4, 2, hits=hits, records=[{"x": 1}])
    for n, first in ((c, 2), (a, 0), (b, 1)):
        add_member(piece, Member(n, Location("d", first, first + 1), "hit"))
    result = piece_to_node(piece, "comp", {"k": 1}, NodeLayout(), "|")
    out = result.node
    assert (out.node_id, result.score) == ("b", 0.4)  # the best score, None counting lowest
    assert out.get_content() == "A b.|C d.|E f."
    assert out.embedding is None and b.embedding == [1.0, 0.0]
    assert not set(ANNOTATION_KEYS) & set(out.metadata)
    assert set(ANNOTATION_KEYS) <= set(b.metadata)  # the caller's node is untouched
    assert (out.start_char_idx, out.end_char_idx) == (0, 14)
    assert out.metadata["sentence_span"] == [0, 3]  # the members' extent, not the piece's
    assert out.relationships[NodeRelationship.NEXT].node_id == "z"
    assert NodeRelationship.PREVIOUS not in out.relationships
    assert get_trace(out, "comp") == {
        "k": 1,
        "span": [0, 4],
        "members": [{"id": i, "role": "hit"} for i in "abc"],
        "hits": ["a", "b", "c"],
        "records": [{"x": 1}],
    }


def test_piece_to_node_keeps_what_it_cannot_recompute() -> None:
    # a member without a character span: the hit's own span stays
    a, b, c = node("A.", "a", 5), node("B.", "b"), node("C.", "c", 10)
    a.metadata["sentence_span"] = [0, 1]
    piece = Piece("d", 0, 3, 0, hits=[NodeWithScore(node=a, score=0.5)])
    add_member(piece, Member(a, Location("d", 0, 1), "hit"))
    add_member(piece, Member(b, Location("d", 1, 2), "neighbour"))
    add_member(piece, Member(c, Location("d", 2, 3), "neighbour"))
    out = piece_to_node(piece, "comp", {}, NodeLayout()).node
    assert (out.get_content(), out.start_char_idx, out.end_char_idx) == ("A. B. C.", 5, 7)
    assert out.metadata["sentence_span"] == [0, 3]
    # chain coordinates are not sentence spans: the metadata is left alone
    chain = Piece("chain:x", 0, 2, 0, hits=[NodeWithScore(node=a, score=0.5)])
    chain.members = dict(piece.members)
    assert piece_to_node(chain, "comp", {}, NodeLayout()).node.metadata["sentence_span"] == [0, 1]
    # one member: the text, vector and annotations are the hit's
    a.embedding = [0.5]
    a.metadata[ANNOTATION_KEYS[0]] = 3
    single = Piece("d", 0, 1, 0, hits=[NodeWithScore(node=a, score=0.5)])
    add_member(single, Member(a, Location("d", 0, 1), "hit"))
    out = piece_to_node(single, "comp", {}, NodeLayout()).node
    assert (out.get_content(), out.embedding, out.metadata[ANNOTATION_KEYS[0]]) == ("A.", [0.5], 3)


def test_expansion_event_splits_the_shared_decision_from_each_nodes_record() -> None:
    decision = {"direction": "both"}
    results = []
    for node_id in ("a", "b"):
        result = NodeWithScore(node=node(node_id, node_id), score=0.1)
        result.node.metadata["advrag_trace"] = {
            "prev_next": {**decision, "members": [node_id], "hits": [node_id]}
        }
        results.append(result)
    results.append(NodeWithScore(node=node("c", "c"), score=0.1))  # no record at all
    event = expansion_event("prev_next", decision, results)
    assert event.component == "prev_next"
    assert event.decision == decision and event.decision is not decision
    assert event.nodes == [
        {"node_id": "a", "members": ["a"], "hits": ["a"]},
        {"node_id": "b", "members": ["b"], "hits": ["b"]},
        {"node_id": "c"},
    ]
