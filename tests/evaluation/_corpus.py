"""A tiny bilingual corpus written for these tests, and questions about it."""

from __future__ import annotations

import json
from pathlib import Path

PUMP = (
    "# Pump\n\nThe Ferro pump runs at 3.5 bar in normal operation. It draws water from the lower "
    "tank through a steel filter. The filter must be cleaned every two weeks.\n\n"
    "# Cooling\n\nThe cooling fan starts when the housing reaches 40 degrees. Below that "
    "temperature the fan stays off to save power. A red lamp shows a fan fault.\n"
)
RIVER = (
    "# 烬川\n\n烬川发源于北方的雪岭，向南流入沸海。渡灯节在每年七月初七举行。"
    "节日当晚，人们把青焰灯放入河中。\n\n# 白砂城\n\n白砂城位于烬川下游，以驼商闻名。"
    "阿萝是白砂城一位驼商的孙女，精通十一种方言。\n"
)
QUESTIONS = [
    {"id": "e1", "question": "At what pressure does the Ferro pump run?", "answers": ["3.5 bar"],
     "evidence": ["The Ferro pump runs at 3.5 bar in normal operation."], "type": "single-hop"},
    {"id": "e2", "question": "When does the cooling fan start?", "answers": ["40 degrees"],
     "evidence": ["The cooling fan starts when the housing reaches 40 degrees."]},
    {"id": "z1", "question": "渡灯节在哪一天举行？", "answers": ["七月初七"], "lang": "zh"},
    {"id": "u1", "question": "Who designed the pump?", "answers": [], "type": "unanswerable"},
]  # fmt: skip


def write_corpus(folder: Path) -> tuple[Path, Path]:
    """Write the documents into ``folder/docs`` and the questions into ``folder/qa.jsonl``."""
    docs = folder / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "pump.md").write_text(PUMP, encoding="utf-8")
    (docs / "river.md").write_text(RIVER, encoding="utf-8")
    qa = folder / "qa.jsonl"
    qa.write_text("\n".join(json.dumps(q, ensure_ascii=False) for q in QUESTIONS), encoding="utf-8")
    return docs, qa
