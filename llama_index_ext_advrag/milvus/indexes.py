"""Vector index presets with parameters sized to the collection, for Lite and the server.

Presets: ``FLAT`` (exact), ``IVF_FLAT`` (k-means cells), ``HNSW`` (graph) and ``IVF_PQ``
(cells + product quantisation), plus ``AUTO``: ``FLAT`` below
10,000 rows or when the size is unknown, ``HNSW`` above.

Sizing rules:

* IVF ``nlist`` is about ``4 * sqrt(rows)``, at most ``rows // 39`` (faiss wants 39 training
  points per centroid) and within ``[1, 65536]``; 128 when the size is unknown. A warning is
  logged when the rows cannot train the cells (explicit ``nlist`` or tiny collections).
* HNSW: ``M=16``, ``efConstruction=200``; search ``ef=max(128, top_k)`` (the 2.3 server
  rejects ``ef < top_k``).
* IVF_PQ: ``m`` is the largest divisor of ``dim`` not above ``dim // 8`` (8-dimensional
  sub-vectors), ``nbits=8``.
* IVF search ``nprobe`` is ``nlist / 8``, at least 8 (capped at ``nlist``).

Milvus Lite 3.x (a pure-Python engine over faiss) builds FLAT, IVF_FLAT, IVF_SQ8, HNSW,
HNSW_SQ and AUTOINDEX, but not IVF_PQ: it accepts the index at creation and then fails when
the collection is loaded. ``IVF_PQ`` on Lite therefore falls back to ``IVF_FLAT`` with a
logged warning. Lite also reads build parameters only from a JSON ``params`` entry while
pymilvus sends them flattened, so :func:`build_index_params` sends both forms (the server
accepts both).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from pymilvus import MilvusClient
from pymilvus.milvus_client.index import IndexParams

from llama_index_ext_advrag._enums import parse_enum
from llama_index_ext_advrag.milvus.connection import is_lite_client

logger = logging.getLogger(__name__)

_AUTO_FLAT_MAX_ROWS = 10_000
DEFAULT_METRIC = "COSINE"
DEFAULT_NLIST = 128
MIN_NLIST = 1
MAX_NLIST = 65_536
FAISS_POINTS_PER_CENTROID = 39
DEFAULT_HNSW_M = 16
DEFAULT_HNSW_EF_CONSTRUCTION = 200
DEFAULT_HNSW_EF = 128
MIN_NPROBE = 8
PQ_SUBVECTOR_DIM = 8
PQ_NBITS = 8
METRICS = ("COSINE", "IP", "L2")
# Index types Milvus Lite 3.x can build and load (faiss-cpu is one of its dependencies).
_LITE_INDEX_TYPES = frozenset({"FLAT", "IVF_FLAT", "IVF_SQ8", "HNSW", "HNSW_SQ", "AUTOINDEX"})
_LITE_FALLBACKS = {"IVF_PQ": "IVF_FLAT"}
# Build parameters the server reports back as strings in describe_index.
_INT_BUILD_PARAMS = ("nlist", "M", "efConstruction", "m", "nbits")


class IndexPreset(str, Enum):
    """Named vector-index configurations; ``AUTO`` picks one from the collection size."""

    AUTO = "AUTO"
    FLAT = "FLAT"
    IVF_FLAT = "IVF_FLAT"
    HNSW = "HNSW"
    IVF_PQ = "IVF_PQ"


@dataclass(frozen=True)
class IndexPlan:
    """A resolved index: what to build and how to search it.

    Attributes:
        index_type: Milvus index type to build (after any Lite fallback).
        metric_type: ``COSINE``, ``IP`` or ``L2``.
        build_params: Build parameters (``nlist``, ``M``, ...), empty for FLAT.
        search_params: ``{"params": {...}}``, ready for ``MilvusClient.search(search_params=...)``
            and ``MilvusVectorStore(search_config=...)``.
        preset: The preset that was asked for.
        fallback_reason: Why ``index_type`` differs from the preset, if it does.
    """

    index_type: str
    metric_type: str
    build_params: dict[str, Any] = field(default_factory=dict)
    search_params: dict[str, Any] = field(default_factory=dict)
    preset: IndexPreset = IndexPreset.AUTO
    fallback_reason: str | None = None

    def to_vector_store_config(self) -> dict[str, Any]:
        """The ``index_config`` dict understood by ``MilvusVectorStore``."""
        return {
            "index_type": self.index_type,
            "metric_type": self.metric_type,
            **_wire_build_params(self.build_params),
        }


def _wire_build_params(build_params: dict[str, Any]) -> dict[str, Any]:
    # Flattened keys for the server, a nested "params" copy for Milvus Lite.
    if not build_params:
        return {}
    return {**build_params, "params": dict(build_params)}


def parse_preset(preset: IndexPreset | str) -> IndexPreset:
    """Return ``preset`` as an :class:`IndexPreset` (case-insensitive).

    Raises:
        ValueError: If ``preset`` is not one of the preset names; the message lists them.
    """
    return parse_enum(IndexPreset, preset, "preset", normalise=str.upper)


def parse_metric(metric: str) -> str:
    """Return ``metric`` upper-cased, or raise ``ValueError`` naming it."""
    upper = str(metric).upper()
    if upper not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; expected one of {', '.join(METRICS)}")
    return upper


def suggest_nlist(num_rows: int | None) -> int:
    """IVF cell count for ``num_rows`` vectors: ``4 * sqrt(rows)``, trainable, clamped.

    >>> suggest_nlist(1_000_000)
    4000
    >>> suggest_nlist(10_000)
    256
    >>> suggest_nlist(None)
    128
    """
    if num_rows is None:
        return DEFAULT_NLIST
    by_sqrt = round(4 * math.sqrt(max(num_rows, 0)))
    trainable = num_rows // FAISS_POINTS_PER_CENTROID
    return max(MIN_NLIST, min(by_sqrt, trainable, MAX_NLIST))


def suggest_nprobe(nlist: int) -> int:
    """Cells to scan per query: ``nlist / 8``, at least 8, at most ``nlist``."""
    return max(1, min(nlist, max(MIN_NPROBE, math.ceil(nlist / 8))))


def suggest_pq_m(dim: int) -> int:
    """PQ sub-quantiser count: the largest divisor of ``dim`` not above ``dim // 8``.

    >>> suggest_pq_m(384), suggest_pq_m(768), suggest_pq_m(100), suggest_pq_m(4)
    (48, 96, 10, 1)
    """
    if dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    target = max(1, dim // PQ_SUBVECTOR_DIM)
    return next(m for m in range(target, 0, -1) if dim % m == 0)


def warn_if_untrainable(nlist: int, num_rows: int | None, index_type: str = "IVF") -> bool:
    """Log a warning when ``num_rows`` is too small to train ``nlist`` cells; return it."""
    if num_rows is None:
        return False
    if nlist > num_rows or num_rows < FAISS_POINTS_PER_CENTROID * nlist:
        logger.warning(
            "%s index with nlist=%d on %d rows: faiss wants at least %d rows (%d per cell); "
            "recall will suffer, consider FLAT or fewer cells",
            index_type,
            nlist,
            num_rows,
            FAISS_POINTS_PER_CENTROID * nlist,
            FAISS_POINTS_PER_CENTROID,
        )
        return True
    return False


def build_search_params(
    index_type: str, build_params: dict[str, Any] | None = None, top_k: int | None = None
) -> dict[str, Any]:
    """Search parameters matching an index: ``nprobe`` for IVF, ``ef`` for HNSW.

    Args:
        index_type: The built index type (``FLAT``, ``IVF_FLAT``, ``HNSW``, ...).
        build_params: Its build parameters; ``nlist`` sizes ``nprobe``.
        top_k: Hits the query asks for; HNSW ``ef`` is raised to it (the 2.3 server requires it).

    Example:
        >>> build_search_params("IVF_FLAT", {"nlist": 256})
        {'params': {'nprobe': 32}}
        >>> build_search_params("HNSW", top_k=500)
        {'params': {'ef': 500}}
    """
    kind = index_type.upper()
    params: dict[str, Any] = {}
    if kind.startswith("IVF"):
        nlist = int((build_params or {}).get("nlist", DEFAULT_NLIST))
        params["nprobe"] = suggest_nprobe(nlist)
    elif kind.startswith("HNSW"):
        params["ef"] = max(DEFAULT_HNSW_EF, top_k or 0)
    return {"params": params}


def _auto_index_type(num_rows: int | None) -> str:
    if num_rows is None or num_rows < _AUTO_FLAT_MAX_ROWS:
        return "FLAT"
    return "HNSW"


def resolve_index(
    preset: IndexPreset | str = IndexPreset.AUTO,
    metric: str = DEFAULT_METRIC,
    num_rows: int | None = None,
    dim: int | None = None,
    lite: bool = False,
) -> IndexPlan:
    """Turn a preset into an :class:`IndexPlan` (pure: no I/O).

    Args:
        preset: An :class:`IndexPreset` or its name.
        metric: ``COSINE``, ``IP`` or ``L2``.
        num_rows: Expected number of vectors, ``None`` if unknown.
        dim: Vector dimension; required for ``IVF_PQ``.
        lite: Whether the target is Milvus Lite (which cannot build IVF_PQ).

    Example:
        >>> resolve_index("AUTO", num_rows=500).index_type
        'FLAT'
        >>> plan = resolve_index("IVF_PQ", num_rows=1_000_000, dim=384)
        >>> plan.build_params
        {'nlist': 4000, 'm': 48, 'nbits': 8}
    """
    chosen = parse_preset(preset)
    metric_type = parse_metric(metric)
    if num_rows is not None and num_rows < 0:
        raise ValueError(f"num_rows must be >= 0 or None, got {num_rows!r}")
    index_type = _auto_index_type(num_rows) if chosen is IndexPreset.AUTO else chosen.value
    fallback_reason = None
    if lite and index_type not in _LITE_INDEX_TYPES:
        replacement = _LITE_FALLBACKS.get(index_type, "FLAT")
        fallback_reason = f"Milvus Lite cannot build {index_type}; using {replacement}"
        logger.warning("%s (preset %s)", fallback_reason, chosen.value)
        index_type = replacement
    if index_type == "IVF_PQ" and dim is None:
        raise ValueError("the IVF_PQ preset needs dim (the vector dimension), got None")

    build_params: dict[str, Any] = {}
    if index_type.startswith("IVF"):
        build_params["nlist"] = suggest_nlist(num_rows)
        warn_if_untrainable(build_params["nlist"], num_rows, index_type)
    if index_type == "IVF_PQ" and dim is not None:
        build_params["m"] = suggest_pq_m(dim)
        build_params["nbits"] = PQ_NBITS
    if index_type == "HNSW":
        build_params.update(M=DEFAULT_HNSW_M, efConstruction=DEFAULT_HNSW_EF_CONSTRUCTION)
    return IndexPlan(
        index_type=index_type,
        metric_type=metric_type,
        build_params=build_params,
        search_params=build_search_params(index_type, build_params),
        preset=chosen,
        fallback_reason=fallback_reason,
    )


def build_index_params(
    client: MilvusClient,
    field_name: str,
    preset: IndexPreset | str = IndexPreset.AUTO,
    metric: str = DEFAULT_METRIC,
    num_rows: int | None = None,
    dim: int | None = None,
) -> IndexParams:
    """Index parameters for ``field_name``, ready for ``create_collection``/``create_index``.

    The backend (Lite or server) is read from ``client`` so Lite gets its fallback.

    Example:
        >>> client = open_client("./data/demo.db")  # doctest: +SKIP
        >>> params = build_index_params(client, "embedding", "IVF_FLAT", num_rows=50_000)  # doctest: +SKIP
        >>> client.create_index("docs", params)  # doctest: +SKIP
    """
    plan = resolve_index(preset, metric, num_rows, dim, lite=is_lite_client(client))
    index_params = client.prepare_index_params()
    index_params.add_index(
        field_name=field_name,
        index_type=plan.index_type,
        metric_type=plan.metric_type,
        params=_wire_build_params(plan.build_params),
    )
    return index_params


def plan_from_description(description: dict[str, Any], preset: IndexPreset | str) -> IndexPlan:
    """Rebuild an :class:`IndexPlan` from ``MilvusClient.describe_index`` output.

    Both backends are handled: the server reports flattened string values (``'nlist': '16'``),
    Lite a nested ``params`` dict.
    """
    build_params: dict[str, Any] = {}
    nested = description.get("params")
    if isinstance(nested, dict):
        build_params.update(nested)
    for key in _INT_BUILD_PARAMS:
        if key in description and key not in build_params:
            build_params[key] = description[key]
    for key in _INT_BUILD_PARAMS:
        if isinstance(build_params.get(key), str) and build_params[key].isdigit():
            build_params[key] = int(build_params[key])
    index_type = str(description.get("index_type", "FLAT")).upper()
    return IndexPlan(
        index_type=index_type,
        metric_type=str(description.get("metric_type", DEFAULT_METRIC)).upper(),
        build_params=build_params,
        search_params=build_search_params(index_type, build_params),
        preset=parse_preset(preset),
    )


__all__ = [
    "IndexPlan",
    "IndexPreset",
    "build_index_params",
    "build_search_params",
    "parse_preset",
    "plan_from_description",
    "resolve_index",
    "suggest_nlist",
    "suggest_nprobe",
    "suggest_pq_m",
]
