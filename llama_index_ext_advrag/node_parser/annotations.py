"""Ingest-time annotations that spare the drift-aware window its text analysis at query time.

:class:`~llama_index_ext_advrag.postprocessor.DriftAwareWindowPostprocessor` needs, for every
sentence it looks at, its token count (the window budget) and its entity/keyword cues (topic
drift). Computing them while the user waits costs about a third of the postprocessor's time;
they depend on the text only, so they can be computed once when the nodes are ingested and
stored in the node metadata (kept out of the embedding and LLM text). Nodes without them still
work: the postprocessor then computes them itself. The keys are part of the layout contract
(:mod:`llama_index_ext_advrag.layout`), which also reads them back.

Example:
    >>> nodes = UnitAnnotator()(parser.get_nodes_from_documents(documents))  # doctest: +SKIP
    >>> index = VectorStoreIndex(nodes, storage_context=storage_context)  # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.schema import BaseNode, TransformComponent
from llama_index.core.utils import get_tqdm_iterable

from llama_index_ext_advrag.configuration import RefusesUnknownSettings
from llama_index_ext_advrag.layout import ANNOTATION_KEYS, UNIT_CUES_KEY, UNIT_TOKENS_KEY
from llama_index_ext_advrag.text import count_tokens, extract_cues

logger = logging.getLogger(__name__)
dispatcher = get_dispatcher(__name__)


def annotate_unit(node: BaseNode) -> BaseNode:
    """A copy of ``node`` whose metadata holds its token count and cues (hidden from the
    embedding and LLM text, so vectors and prompts do not change)."""
    text = node.get_content()
    annotated = node.model_copy()
    annotated.metadata = {
        **node.metadata,
        UNIT_TOKENS_KEY: count_tokens(text),
        UNIT_CUES_KEY: sorted(extract_cues(text)),
    }
    for attribute in ("excluded_embed_metadata_keys", "excluded_llm_metadata_keys"):
        keys = getattr(node, attribute)
        setattr(annotated, attribute, list(dict.fromkeys([*keys, *ANNOTATION_KEYS])))
    return annotated


class UnitAnnotator(TransformComponent, RefusesUnknownSettings):
    """Store each node's token count and entity cues in its metadata, for the drift window.

    Use it after the parser, before the nodes are embedded and stored (or in an
    ``IngestionPipeline``). The input nodes are not modified: annotated copies are returned.

    Example:
        >>> from llama_index.core import Document
        >>> from llama_index_ext_advrag.node_parser import AdaptiveSlidingWindowNodeParser
        >>> sentences = AdaptiveSlidingWindowNodeParser(window_size=1, stride=1).get_nodes_from_documents(
        ...     [Document(text="The WHO named COVID-19 in 2020. It spread fast.", id_="d")])
        >>> annotated = UnitAnnotator()(sentences)  # or in IngestionPipeline(transformations=[...])
        >>> annotated[0].metadata["unit_tokens"], sorted(annotated[0].metadata["unit_cues"])
        (11, ['2020', 'covid-19', 'who'])
    """

    @classmethod
    def class_name(cls) -> str:
        return "UnitAnnotator"

    @staticmethod
    def _annotate(nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        show_progress = bool(kwargs.get("show_progress", False))
        return [
            annotate_unit(node)
            for node in get_tqdm_iterable(nodes, show_progress, "Annotating units")
        ]

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        return self._annotate(nodes, **kwargs)

    @dispatcher.span
    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[BaseNode]:
        return self._annotate(nodes, **kwargs)  # CPU only: one span, not acall around __call__


__all__ = ["UnitAnnotator", "annotate_unit"]
