"""UnitAnnotator's progress bar: shown only when asked (show_progress=True, through __call__
and acall), under its own label. Kills the mutants of node_parser/annotations.py that
test_annotations leaves alive (mutation testing, issue #39)."""

from __future__ import annotations

import asyncio
import re

import pytest
from llama_index.core.schema import TextNode

from llama_index_ext_advrag.node_parser import UnitAnnotator

pytestmark = pytest.mark.unit

LABEL = r"(?:^|\r)Annotating units: "  # tqdm's "<desc>: " at the start of a redraw


def nodes() -> list[TextNode]:
    return [TextNode(text="The WHO named COVID-19 in 2020.", id_="a")]


def test_progress_is_shown_only_when_asked_under_its_label(capsys) -> None:
    annotated = UnitAnnotator()(nodes())
    assert annotated[0].metadata["unit_tokens"] > 0
    assert "Annotating units" not in capsys.readouterr().err
    UnitAnnotator()(nodes(), show_progress=True)
    assert re.search(LABEL, capsys.readouterr().err)


def test_async_progress_is_shown_only_when_asked(capsys) -> None:
    asyncio.run(UnitAnnotator().acall(nodes()))
    assert "Annotating units" not in capsys.readouterr().err
    annotated = asyncio.run(UnitAnnotator().acall(nodes(), show_progress=True))
    assert re.search(LABEL, capsys.readouterr().err)
    assert annotated[0].metadata["unit_cues"] == ["2020", "covid-19", "who"]
