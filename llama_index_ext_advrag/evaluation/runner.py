"""Run retrieval pipelines over a QA set and measure coverage, context size and latency."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
from tqdm.auto import tqdm

from llama_index_ext_advrag.evaluation.corpus import QAItem
from llama_index_ext_advrag.evaluation.metrics import QuestionRun, answer_covered
from llama_index_ext_advrag.text import count_tokens

logger = logging.getLogger(__name__)

RetrieveFn = Callable[[QueryBundle], Sequence[NodeWithScore]]


@dataclass
class Pipeline:
    """A named retrieval pipeline: a query goes in, the context nodes for the LLM come out."""

    name: str
    retrieve: RetrieveFn


def context_text(nodes: Sequence[NodeWithScore]) -> str:
    """The context as the LLM sees it (node text only, no metadata header)."""
    return "\n\n".join(n.node.get_content(metadata_mode=MetadataMode.NONE) for n in nodes)


def run_pipeline(
    pipeline: Pipeline, questions: Sequence[QAItem], show_progress: bool = True
) -> list[QuestionRun]:
    """Answer each answerable question's retrieval with ``pipeline`` and record the metrics."""
    runs = []
    answerable = [q for q in questions if q.answerable]
    for item in tqdm(answerable, desc=pipeline.name, disable=not show_progress, leave=False):
        start = time.perf_counter()
        nodes = pipeline.retrieve(QueryBundle(item.question))
        latency_ms = (time.perf_counter() - start) * 1000
        context = context_text(nodes)
        runs.append(
            QuestionRun(
                pipeline=pipeline.name,
                question_id=item.id,
                question_type=item.type,
                covered=answer_covered(context, item.answers),
                context_tokens=count_tokens(context),
                latency_ms=latency_ms,
            )
        )
    return runs
