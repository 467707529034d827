"""Pure routing logic of the two-layer retriever: rank units, order their details, trace."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from llama_index.core.schema import BaseNode, NodeWithScore

from llama_index_ext_advrag.text import cue_overlap, extract_cues

KEY_FIELD = "unit_key"
NAME_FIELD = "unit_name"
KIND_FIELD = "unit_kind"
PART_FIELD = "unit_part"


@dataclass(frozen=True)
class RouteHit:
    """A unit chosen by the summary search."""

    unit_key: str
    unit_name: str
    score: float  # similarity + cue_weight * cue_overlap
    similarity: float
    cue_overlap: float

    def as_trace(self) -> dict[str, object]:
        record = asdict(self)
        for key in ("score", "similarity", "cue_overlap"):
            record[key] = round(float(record[key]), 6)
        return record


def rank_routes(
    hits: Sequence[BaseNode],
    similarities: Sequence[float],
    query: str,
    route_top_k: int,
    cue_weight: float,
) -> list[RouteHit]:
    """Rank summary hits by similarity plus ``cue_weight`` times the overlap of the query's
    entity/number cues with the unit name's (a year asked about matches the sheet named after
    it, which a small English embedding model barely tells apart). One hit per unit."""
    query_cues = extract_cues(query) if cue_weight > 0 else frozenset()
    ranked: dict[str, RouteHit] = {}
    for node, similarity in zip(hits, similarities, strict=False):
        key = node.metadata.get(KEY_FIELD)
        if not isinstance(key, str) or key in ranked:
            continue
        name = str(node.metadata.get(NAME_FIELD, key))
        overlap = cue_overlap(query_cues, extract_cues(name)) if query_cues else 0.0
        score = float(similarity) + cue_weight * overlap
        ranked[key] = RouteHit(key, name, score, float(similarity), overlap)
    order = sorted(ranked.values(), key=lambda hit: (-hit.score, hit.unit_key))
    return order[:route_top_k]


def part_index(node: BaseNode) -> int:
    value = node.metadata.get(PART_FIELD)
    return value if isinstance(value, int) else 0


def fetched_details(route: Sequence[RouteHit], nodes: Sequence[BaseNode]) -> list[NodeWithScore]:
    """Fetched detail rows in route order, then part order; each scored with its unit's score."""
    rank = {hit.unit_key: i for i, hit in enumerate(route)}
    kept = [n for n in nodes if n.metadata.get(KEY_FIELD) in rank]
    kept.sort(key=lambda n: (rank[n.metadata[KEY_FIELD]], part_index(n), n.node_id))
    return [NodeWithScore(node=n, score=route[rank[n.metadata[KEY_FIELD]]].score) for n in kept]


def searched_details(
    route: Sequence[RouteHit], nodes: Sequence[BaseNode], similarities: Sequence[float]
) -> list[NodeWithScore]:
    """Searched detail rows of routed units, best similarity first."""
    keys = {hit.unit_key for hit in route}
    pairs = [
        NodeWithScore(node=n, score=float(s))
        for n, s in zip(nodes, similarities, strict=False)
        if n.metadata.get(KEY_FIELD) in keys
    ]
    pairs.sort(key=lambda p: (-(p.score or 0.0), p.node.node_id))
    return pairs
