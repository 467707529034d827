"""The piece-merging helpers shared by the neighbour postprocessors, checked by hand."""

from __future__ import annotations

from llama_index.core.schema import NodeWithScore, TextNode

from llama_index_ext_advrag.layout import Location
from llama_index_ext_advrag.postprocessor.pieces import (
    Member,
    Piece,
    dedupe_hits,
    join_texts,
    merge_pieces,
)


def member(text: str, first: int, start: int | None = None, doc: str = "d") -> Member:
    node = TextNode(
        text=text, start_char_idx=start, end_char_idx=None if start is None else start + len(text)
    )
    return Member(node, Location(doc, first, first + 1), "hit")


def test_join_texts_marks_gaps_and_removes_overlap() -> None:
    assert join_texts([member("A.", 0), member("B.", 1), member("D.", 3)]) == "A. B. ... D."
    # overlapping windows "one two" [0, 7) and "two three" [4, 13) of "one two three"
    overlapping = [member("one two", 0, start=0), member("two three", 1, start=4)]
    assert join_texts(overlapping) == "one two three"


def test_merge_pieces_joins_touching_pieces_and_orders_documents_by_best_rank() -> None:
    def piece(doc: str, first: int, last: int, rank: int) -> Piece:
        return Piece(doc, first, last, rank)

    merged = merge_pieces([piece("b", 5, 6, 0), piece("a", 0, 2, 1), piece("b", 1, 2, 3),
                           piece("a", 2, 3, 2), piece("b", 6, 8, 4)])  # fmt: skip
    assert [(p.doc_id, p.first, p.last, p.rank) for p in merged] == [
        ("b", 1, 2, 3), ("b", 5, 8, 0), ("a", 0, 3, 1)
    ]  # fmt: skip
    assert [
        (p.first, p.last)
        for p in merge_pieces([piece("a", 0, 1, 0), piece("a", 3, 4, 1)], max_gap=2)
    ] == [(0, 4)]


def test_dedupe_hits_keeps_the_first_occurrence_in_order() -> None:
    a, b = TextNode(text="a", id_="a"), TextNode(text="b", id_="b")
    hits = [
        NodeWithScore(node=a, score=0.9),
        NodeWithScore(node=b, score=0.5),
        NodeWithScore(node=a, score=0.1),
    ]
    kept = dedupe_hits(hits)
    assert [(h.node.node_id, h.score) for h in kept] == [("a", 0.9), ("b", 0.5)]
    assert dedupe_hits([]) == []
