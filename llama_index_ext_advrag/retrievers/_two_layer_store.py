"""Building and opening the summary and details collections of a two-layer index."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.indices.utils import embed_nodes
from llama_index.core.llms import LLM
from llama_index.core.prompts import BasePromptTemplate, PromptTemplate
from llama_index.core.schema import BaseNode, TextNode

from llama_index_ext_advrag.milvus import check_storable_nodes, flush, open_vector_store
from llama_index_ext_advrag.milvus.registry import load_layout, prepare_build, record_layout
from llama_index_ext_advrag.retrievers._routing import KEY_FIELD, KIND_FIELD, NAME_FIELD, PART_FIELD
from llama_index_ext_advrag.retrievers._units import Unit, UnitKind

logger = logging.getLogger(__name__)

COMPONENT = "TwoLayerMilvusRetriever"
SUMMARY_SUFFIX = "_summary"
DETAILS_SUFFIX = "_details"
SUMMARY_SOURCE_KEY = "summary_source"
MIN_LLM_SUMMARY_CHARS = 20
LLM_INPUT_CHARS = 4_000
SUMMARY_PROMPT = (
    "Summarise the following {kind} in two sentences so that a search can route questions "
    "to it: say what it is about, the entities it lists and the period it covers.\n\n"
    "Name: {name}\n{content}\n\nSummary:"
)
SUMMARY_PROMPT_VARIABLES = ("kind", "name", "content")


def _stable_id(*parts: object) -> str:
    digest = hashlib.sha1("\x00".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def summarise_with_llm(
    unit: Unit, llm: LLM | None, template: BasePromptTemplate | None = None
) -> tuple[Unit, str]:
    """The unit with an LLM-written summary (name kept first; for tables the heuristic lines
    are kept too since they carry the year tokens), or unchanged when there is no LLM or it
    answers too little. ``template`` (variables ``kind``, ``name``, ``content``) defaults to
    :data:`SUMMARY_PROMPT`. Returns ``(unit, summary_source)``."""
    if llm is None:
        return unit, "heuristic"
    prompt = (template or PromptTemplate(SUMMARY_PROMPT)).format(
        kind=unit.kind.value, name=unit.name, content=unit.details[0][:LLM_INPUT_CHARS]
    )
    try:
        text = llm.complete(prompt).text.strip()
    except Exception as exc:  # an LLM failing is normal: keep the heuristic summary
        logger.warning("LLM summary of unit %r failed (%s); using the heuristic one", unit.key, exc)
        return unit, "heuristic"
    if len(text) < MIN_LLM_SUMMARY_CHARS:
        logger.info(
            "LLM summary of unit %r too short (%r); using the heuristic one", unit.key, text
        )
        return unit, "heuristic"
    base = unit.summary if unit.kind is UnitKind.TABLE else unit.name
    return replace(unit, summary=f"{base}\n{text}"), "llm"


def unit_nodes(
    units: Sequence[Unit], sources: Sequence[str], collection_name: str
) -> tuple[list[TextNode], list[TextNode]]:
    """Summary nodes (one per unit) and detail nodes (one per part), keyed by ``unit_key``.

    Metadata is hidden from the embedder (summaries and details embed their own text); the
    unit name stays visible to the LLM."""
    summaries, details = [], []
    for unit, source in zip(units, sources, strict=True):
        common = {KEY_FIELD: unit.key, NAME_FIELD: unit.name, KIND_FIELD: unit.kind.value}
        summary_meta = {**unit.metadata, **common, SUMMARY_SOURCE_KEY: source}
        summaries.append(
            TextNode(
                id_=_stable_id(collection_name, "summary", unit.key),
                text=unit.summary,
                metadata=summary_meta,
                excluded_embed_metadata_keys=list(summary_meta),
                excluded_llm_metadata_keys=[k for k in summary_meta if k != NAME_FIELD],
            )
        )
        for index, part in enumerate(unit.details):
            meta = {**unit.metadata, **common, PART_FIELD: index, "unit_parts": len(unit.details)}
            details.append(
                TextNode(
                    id_=_stable_id(collection_name, "details", unit.key, index),
                    text=part,
                    metadata=meta,
                    excluded_embed_metadata_keys=list(meta),
                    excluded_llm_metadata_keys=[k for k in meta if k != NAME_FIELD],
                )
            )
    return summaries, details


def _key_field_options() -> dict[str, Any]:
    from pymilvus import DataType

    return {"scalar_field_names": [KEY_FIELD], "scalar_field_types": [DataType.VARCHAR]}


def build_two_layer_index(
    units: Sequence[Unit],
    *,
    uri: str,
    collection_name: str,
    embed_model: BaseEmbedding,
    llm: LLM | None,
    token: str,
    overwrite: bool,
    index_preset: str,
    details_mode: str,
    source: str,
    show_progress: bool,
    summary_prompt: BasePromptTemplate | None = None,
) -> tuple[dict[str, Any], Any, Any]:
    """Summarise, embed and store the units; record the layout last.

    Returns ``(layout, summary_store, details_store)``."""
    if not units:
        raise ValueError("no units to index: the source produced no sheet, document or section")
    keys = [u.key for u in units]
    if len(set(keys)) != len(keys):
        raise ValueError(f"unit keys must be unique, got duplicates in {keys}")
    names = {
        "summary": collection_name + SUMMARY_SUFFIX,
        "details": collection_name + DETAILS_SUFFIX,
    }
    prepare_build(uri, token, collection_name, list(names.values()), overwrite, COMPONENT)

    summarised = [summarise_with_llm(unit, llm, summary_prompt) for unit in units]
    summaries, details = unit_nodes(
        [u for u, _ in summarised], [s for _, s in summarised], collection_name
    )
    check_storable_nodes([*summaries, *details])  # before embedding, not after
    stores = {}
    dim = 0
    for role, nodes in (("summary", summaries), ("details", details)):
        embeddings = embed_nodes(nodes, embed_model, show_progress=show_progress)
        for node in nodes:
            node.embedding = embeddings[node.node_id]
        dim = len(nodes[0].embedding or [])
        stores[role] = open_vector_store(
            uri,
            names[role],
            dim,
            token=token,
            overwrite=True,
            index_preset=index_preset,
            expected_rows=len(nodes),
            **_key_field_options(),
        )
        stores[role].add(list[BaseNode](nodes))
        flush(stores[role])

    layout = {
        "component": COMPONENT,
        "summary_collection": names["summary"],
        "details_collection": names["details"],
        "key_field": KEY_FIELD,
        "embed_dim": dim,
        "embed_model": embed_model.model_name,
        "index_preset": index_preset,
        "source": source,
        "details_mode": details_mode,
        "num_units": len(units),
        "num_details": len(details),
        "max_parts": max(len(u.details) for u in units),
        "summaries_from_llm": sum(s == "llm" for _, s in summarised),
    }
    record_layout(uri, token, collection_name, layout)
    logger.info("built two-layer index %r on %s: %d units", collection_name, uri, len(units))
    return layout, stores["summary"], stores["details"]


def open_two_layer_stores(uri: str, collection_name: str, token: str) -> tuple[dict, Any, Any]:
    """Read the layout of ``collection_name`` and open both collections (loaded on open)."""
    layout = load_layout(uri, token, collection_name, COMPONENT)
    stores = []
    for key in ("summary_collection", "details_collection"):
        stores.append(
            open_vector_store(
                uri, layout[key], layout["embed_dim"], token=token, **_key_field_options()
            )
        )
    return layout, stores[0], stores[1]
