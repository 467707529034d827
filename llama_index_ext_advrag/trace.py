"""The one trace key of the pack and helpers to record decisions without mutating inputs."""

from __future__ import annotations

import copy
from typing import Any

from llama_index.core.schema import BaseNode, NodeWithScore

TRACE_KEY = "advrag_trace"


_ATOMS = (str, int, float, bool, type(None))


def copy_metadata(value: Any) -> Any:
    """A deep copy of metadata: dicts and lists of plain values are copied directly (most
    metadata), anything else through ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {key: copy_metadata(item) for key, item in value.items()}
    if kind is list:
        return [copy_metadata(item) for item in value]
    if kind in _ATOMS:
        return value
    return copy.deepcopy(value)


def copy_node_with_score(node_with_score: NodeWithScore) -> NodeWithScore:
    """Return a deep-enough copy: a new node object and metadata dict, the caller's untouched."""
    node = node_with_score.node.model_copy(deep=False)
    node.metadata = copy_metadata(node_with_score.node.metadata)
    node.relationships = dict(node_with_score.node.relationships)
    node.excluded_llm_metadata_keys = list(node_with_score.node.excluded_llm_metadata_keys)
    node.excluded_embed_metadata_keys = list(node_with_score.node.excluded_embed_metadata_keys)
    return NodeWithScore(node=node, score=node_with_score.score)


def with_record(trace: Any, component: str, record: Any) -> dict[str, Any]:
    """A new trace dict: ``trace`` (when it is one) plus ``record`` under ``component``."""
    merged = dict(trace) if isinstance(trace, dict) else {}
    merged[component] = record
    return merged


def exclude_trace_key(excluded_keys: list[str]) -> None:
    """Append the trace key to an excluded-metadata-keys list that lacks it."""
    if TRACE_KEY not in excluded_keys:
        excluded_keys.append(TRACE_KEY)


def add_trace(node: BaseNode, component: str, record: Any) -> None:
    """Store ``record`` under ``node.metadata[TRACE_KEY][component]``.

    Call it on a node the component owns (a copy), never on a caller's node. The trace key is
    excluded from what the LLM and the embedding model see.
    """
    node.metadata[TRACE_KEY] = with_record(node.metadata.get(TRACE_KEY), component, record)
    exclude_trace_key(node.excluded_llm_metadata_keys)
    exclude_trace_key(node.excluded_embed_metadata_keys)


def get_trace(node: BaseNode, component: str | None = None) -> Any:
    """Return the whole trace dict of ``node``, or one component's record (``None`` if absent)."""
    trace = node.metadata.get(TRACE_KEY) or {}
    return trace if component is None else trace.get(component)


__all__ = [
    "TRACE_KEY",
    "add_trace",
    "copy_node_with_score",
    "exclude_trace_key",
    "get_trace",
    "with_record",
]
