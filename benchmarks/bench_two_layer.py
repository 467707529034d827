"""Two-layer routing accuracy on workbooks, against one-layer LlamaIndex core indexes.

Workbooks: ``seed_scenarios/world_top10_billionaires.xlsx`` (five sheets named "2019年10大首富"
... "2023年10大首富", same columns, overlapping people: only the year tells them apart) with
30 questions written for this benchmark (six per year, four English and two Chinese), and the
project's ``data/tables.xlsx`` with the table questions of ``data/qa.jsonl``.

Pipelines (same embedding model, all-MiniLM-L6-v2 behind the shared cache):

* ``core one-layer (sheet chunks)``: a core ``VectorStoreIndex`` over one Document per sheet
  (the same Markdown table text, default ``SentenceSplitter``); the routed sheet is the sheet
  of the best chunk;
* ``core one-layer (rows)``: one node per row ("sheet: ...; column: value; ..."), the common
  way of embedding tables; the routed sheet is the best row's;
* ``two-layer, dense only``: :class:`TwoLayerMilvusRetriever` with ``cue_weight=0``;
* ``two-layer (default)``: with the default cue overlap between query and sheet name.

Routing accuracy@1 (the gold sheet is the top unit; for a question needing two sheets, both
among the top two) and hit@2 (a gold sheet among the top two), plus answer coverage: the gold
answer string inside what the top-1 route returns (for a whole-table fetch, the table).

Usage::

    .venv/bin/python benchmarks/bench_two_layer.py
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core import Document, VectorStoreIndex
from llama_index.core.schema import TextNode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.common import DEFAULT_DATASETS, REPO_ROOT, cached_minilm_embedding, write_results  # noqa: E402
from llama_index_ext_advrag.evaluation.metrics import answer_covered  # noqa: E402
from llama_index_ext_advrag.retrievers import TwoLayerMilvusRetriever  # noqa: E402
from llama_index_ext_advrag.retrievers._units import clean_cell, workbook_units  # noqa: E402

logger = logging.getLogger("bench_two_layer")

# (question, gold year, answer string found in that year's sheet)
BILLIONAIRE_QUESTIONS: list[tuple[str, int, str]] = [
    ("Who was the richest person in the world in 2023?", 2023, "Bernard Arnault"),
    ("What was Elon Musk's net worth in 2023?", 2023, "$180 billion"),
    ("How old was Warren Buffett in the 2023 ranking of billionaires?", 2023, "92"),
    ("Which companies are the source of Carlos Slim's fortune in the 2023 list?", 2023, "Telmex"),
    ("2023年世界首富的身家是多少？", 2023, "$211 billion"),
    ("2023年排名第十的富豪是谁？", 2023, "Steve Ballmer"),
    ("Who topped the list of the world's richest people in 2022?", 2022, "$219 billion"),
    ("What was Larry Page's net worth in 2022?", 2022, "$111 billion"),
    ("How old was Sergey Brin in the 2022 billionaire ranking?", 2022, "48"),
    ("What was Bill Gates' net worth in 2022?", 2022, "$129 billion"),
    ("2022年马斯克的身家是多少？", 2022, "$219 billion"),
    ("2022年十大富豪中有哪两位来自谷歌母公司？", 2022, "Alphabet"),
    ("Who was the richest person in 2021?", 2021, "Jeff Bezos"),
    ("What was Mark Zuckerberg's net worth in 2021?", 2021, "$97 billion"),
    ("How old was Elon Musk in the 2021 ranking?", 2021, "49"),
    ("What was Elon Musk's fortune in 2021?", 2021, "$151 billion"),
    ("2021年比尔·盖茨的净资产是多少？", 2021, "$124 billion"),
    ("2021年十大富豪中谁最年轻？", 2021, "Mark Zuckerberg"),
    (
        "Which Walton family members were among the ten richest people in 2020?",
        2020,
        "Alice Walton",
    ),
    ("What was Bill Gates' net worth in 2020?", 2020, "$98 billion"),
    ("How much was Amancio Ortega worth in 2020?", 2020, "$55.1 billion"),
    ("Who ranked third among the world's richest in 2020?", 2020, "Bernard Arnault"),
    ("2020年贝索斯的身家是多少？", 2020, "$113 billion"),
    ("2020年有几位沃尔玛家族成员进入前十？", 2020, "Walmart"),
    ("What was Jeff Bezos's net worth in 2019?", 2019, "$131 billion"),
    ("How old was Warren Buffett in the 2019 list of billionaires?", 2019, "88"),
    ("What was Carlos Slim's net worth in 2019?", 2019, "$64 billion"),
    ("Who was the tenth richest person in 2019?", 2019, "Larry Page"),
    ("2019年巴菲特的身家是多少？", 2019, "$82.5 billion"),
    ("2019年全球首富是谁？", 2019, "Jeff Bezos"),
]


@dataclass(frozen=True)
class RoutingQuestion:
    question: str
    sheets: tuple[str, ...]  # gold sheet(s)
    answer: str | None  # a string the gold sheet contains (None: a computed value)


def billionaire_questions() -> list[RoutingQuestion]:
    return [RoutingQuestion(q, (f"{y}年10大首富",), a) for q, y, a in BILLIONAIRE_QUESTIONS]


def table_questions(qa_path: Path) -> list[RoutingQuestion]:
    """``data/qa.jsonl`` table questions: gold sheets are the evidence; answers are computed
    values (not in the table), so only routing is scored."""
    items = [json.loads(line) for line in qa_path.read_text(encoding="utf-8").splitlines() if line]
    return [
        RoutingQuestion(i["question"], tuple(i["evidence"]), None)
        for i in items
        if i["source"] == "tables.xlsx" and i["evidence"]
    ]


Router = Callable[[str], tuple[list[str], str]]  # question -> (ranked sheets, returned text)


def core_routers(workbook: Path, embed_model: Any) -> dict[str, Router]:
    units = workbook_units(workbook)
    sheet_docs = [Document(text=u.details[0], metadata={"sheet": u.key}) for u in units]
    for doc in sheet_docs:
        doc.excluded_embed_metadata_keys = ["sheet"]
    chunks = VectorStoreIndex.from_documents(sheet_docs, embed_model=embed_model).as_retriever(
        similarity_top_k=8
    )
    import pandas as pd

    rows = []
    for name, frame in pd.read_excel(workbook, sheet_name=None).items():
        for record in frame.to_dict(orient="records"):
            text = f"sheet: {name}; " + "; ".join(
                f"{k}: {clean_cell(v)}" for k, v in record.items()
            )
            rows.append(TextNode(text=text, metadata={"sheet": str(name)}))
    for node in rows:
        node.excluded_embed_metadata_keys = ["sheet"]
    by_row = VectorStoreIndex(rows, embed_model=embed_model).as_retriever(similarity_top_k=20)

    def router(retriever: Any) -> Router:
        def route(question: str) -> tuple[list[str], str]:
            hits = retriever.retrieve(question)
            sheets = list(dict.fromkeys(h.node.metadata["sheet"] for h in hits))
            top = [h.node.get_content() for h in hits if h.node.metadata["sheet"] == sheets[0]]
            return sheets, "\n".join(top)

        return route

    return {
        "core one-layer (sheet chunks)": router(chunks),
        "core one-layer (rows)": router(by_row),
    }


def two_layer_routers(workbook: Path, embed_model: Any, uri: str) -> dict[str, Router]:
    built = TwoLayerMilvusRetriever.from_excel(
        workbook, uri=uri, embed_model=embed_model, route_top_k=2, overwrite=True
    )

    def router(cue_weight: float) -> Router:
        retriever = TwoLayerMilvusRetriever.from_dict(
            {**built.to_dict(), "cue_weight": cue_weight}, embed_model=embed_model
        )

        def route(question: str) -> tuple[list[str], str]:
            nodes = retriever.retrieve(question)
            if not nodes:
                return [], ""
            sheets = [
                r["unit_key"] for r in nodes[0].node.metadata["advrag_trace"]["two_layer"]["route"]
            ]
            top = [n.node.get_content() for n in nodes if n.node.metadata["unit_key"] == sheets[0]]
            return sheets, "\n".join(top)

        return route

    return {"two-layer, dense only": router(0.0), "two-layer (default cue_weight)": router(0.3)}


def score(name: str, route: Router, questions: Sequence[RoutingQuestion]) -> dict[str, Any]:
    top1 = hit2 = covered = answerable = 0
    misses = []
    for q in questions:
        sheets, text = route(q.question)
        gold = set(q.sheets)
        ok = set(sheets[: len(gold)]) == gold if len(gold) > 1 else sheets[:1] == list(gold)
        top1 += ok
        hit2 += bool(gold & set(sheets[:2]))
        if q.answer is not None:
            answerable += 1
            covered += answer_covered(text, [q.answer])
        if not ok:
            misses.append({"question": q.question, "gold": list(q.sheets), "routed": sheets[:2]})
    n = max(len(questions), 1)
    return {
        "pipeline": name,
        "questions": len(questions),
        "accuracy@1": top1 / n,
        "hit@2": hit2 / n,
        "answer_coverage@1": covered / answerable if answerable else None,
        "misses": misses,
    }


def format_rows(title: str, rows: list[dict[str, Any]]) -> str:
    baseline = rows[0]["accuracy@1"] or 1e-9
    lines = [
        title,
        f"{'pipeline':34s} {'n':>3s} {'acc@1':>6s} {'hit@2':>6s} {'cover':>6s} {'acc ratio':>9s}",
    ]
    for r in rows:
        cover = "   n/a" if r["answer_coverage@1"] is None else f"{r['answer_coverage@1']:6.3f}"
        lines.append(
            f"{r['pipeline']:34s} {r['questions']:3d} {r['accuracy@1']:6.3f} {r['hit@2']:6.3f} "
            f"{cover} {r['accuracy@1'] / baseline:9.3f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", type=Path, default=DEFAULT_DATASETS)
    parser.add_argument("--max-questions", type=int, default=None, help="per workbook")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    embed_model = cached_minilm_embedding()
    suites = [
        ("billionaires", args.datasets / "seed_scenarios" / "world_top10_billionaires.xlsx",
         billionaire_questions()),
        ("tables.xlsx", REPO_ROOT / "data" / "tables.xlsx", table_questions(REPO_ROOT / "data" / "qa.jsonl")),
    ]  # fmt: skip
    tables, figures = [], {}
    with tempfile.TemporaryDirectory(prefix="bench-two-layer-") as tmp:
        for index, (name, workbook, questions) in enumerate(suites):
            questions = questions[: args.max_questions]
            routers = {
                **core_routers(workbook, embed_model),
                **two_layer_routers(workbook, embed_model, str(Path(tmp) / f"w{index}.db")),
            }
            rows = [score(label, route, questions) for label, route in routers.items()]
            title = f"{name}: routing to the gold sheet (ratios vs {rows[0]['pipeline']})"
            tables.append(format_rows(title, rows))
            figures[name] = rows
    report = "\n\n".join(tables)
    print(report)  # noqa: T201 - a benchmark's report
    write_results("two_layer", report, figures)


if __name__ == "__main__":
    main()
