"""Validate the project's sample corpus and gold QA pairs in ``data/`` (unit tier, no network).

Checks that ``data/qa.jsonl`` is well formed, that every gold answer and evidence sentence occurs
verbatim in its source file (so "gold answer inside the retrieved context" is a meaningful
metric), that adjacent-multi-sentence evidence really is two consecutive sentences, that
distractor near-misses exist and do not contain the answer, and that every table-aggregation
answer equals a value recomputed here with pandas from ``data/tables.xlsx``.
"""

from __future__ import annotations

import json
import re
import types
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

pytestmark = pytest.mark.unit

DATA_DIR = Path(__file__).resolve().parents[2] / "data"
QA_PATH = DATA_DIR / "qa.jsonl"
XLSX_PATH = DATA_DIR / "tables.xlsx"
TEXT_SOURCES = ("zh_narrative.md", "en_manual.md", "en_policy.md")
SOURCES = (*TEXT_SOURCES, "tables.xlsx")

TYPES = (
    "single-hop",
    "adjacent-multi-sentence",
    "distractor",
    "table-aggregation",
    "unanswerable",
)
MIN_PER_TYPE = {
    "single-hop": 8,
    "adjacent-multi-sentence": 8,
    "distractor": 8,
    "table-aggregation": 6,
    "unanswerable": 6,
}
REQUIRED_KEYS = {"id", "question", "answers", "evidence", "source", "type", "lang"}
OPTIONAL_KEYS = {"near_miss"}
MAX_DATA_BYTES = 200 * 1024

CJK = re.compile(r"[\u4e00-\u9fff]")
SENTENCE_END = "。！？.!?"
# characters that may directly precede the first character of a sentence
SENTENCE_START_BEFORE = "。！？；：\n"

Sheets = dict[str, pd.DataFrame]


def _total(frame: pd.DataFrame, column: str) -> int:
    return int(frame[column].sum())


# id -> recomputation of the gold answer from the workbook (one entry per table question).
TABLE_CHECKS: dict[str, Callable[[Sheets], object]] = {
    "q048": lambda s: _total(s["2023年销售"][s["2023年销售"]["区域"] == "华东"], "销售额(万元)"),
    "q049": lambda s: _total(s["2022年销售"][s["2022年销售"]["产品"] == "云梯X1"], "销量(件)"),
    "q050": lambda s: int((s["2023年销售"]["销量(件)"] > 500).sum()),
    "q051": lambda s: (
        _total(s["2023年销售"], "销售额(万元)") - _total(s["2022年销售"], "销售额(万元)")
    ),
    "q052": lambda s: int((s["Staff"]["Department"] == "Engineering").sum()),
    "q053": lambda s: s["Staff"][s["Staff"]["City"] == "Lisbon"]["Annual Salary (EUR)"].mean(),
    "q054": lambda s: _total(
        s["Warehouses"][s["Warehouses"]["Temperature Controlled"] == "Yes"], "Capacity (m²)"
    ),
    "q055": lambda s: s["Warehouses"].loc[s["Warehouses"]["Staff"].idxmax(), "Code"],
    "q056": lambda s: int((s["Warehouses"]["Opened"] < 2015).sum()),
}

# id -> key terms of an unanswerable question that must stay absent from its source file.
UNANSWERABLE_ABSENT: dict[str, tuple[str, ...]] = {
    "q017": ("母亲",),
    "q018": ("雾隐城的常住人口", "雾隐城人口", "雾隐城的人口"),
    "q019": ("铁穹城城主", "铁穹城的城主"),
    "q035": ("MTBF", "mean time between failures"),
    "q036": ("price", "€", "EUR", "$"),
    "q037": ("tape", "LTO"),
    "q046": ("childcare", "child care", "children"),
    "q047": ("lounge",),
}


def _format_value(value: object) -> str:
    """Render a recomputed value the way gold answers are written ("58000", not "58000.0")."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "item"):  # numpy scalar
        return _format_value(value.item())
    return str(value)


def _load_qa() -> list[dict]:
    rows = []
    with QA_PATH.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:  # pragma: no cover - failure path
                pytest.fail(f"qa.jsonl line {lineno} is not valid JSON: {exc}")
    return rows


QA = _load_qa()
QA_BY_ID = {row["id"]: row for row in QA}


def _ids(qtype: str | None = None, text_only: bool = False) -> list[str]:
    return [
        row["id"]
        for row in QA
        if (qtype is None or row["type"] == qtype)
        and (not text_only or row["source"] in TEXT_SOURCES)
    ]


@pytest.fixture(scope="module")
def texts() -> dict[str, str]:
    return {name: (DATA_DIR / name).read_text(encoding="utf-8") for name in TEXT_SOURCES}


@pytest.fixture(scope="module")
def sheets() -> Sheets:
    return pd.read_excel(XLSX_PATH, sheet_name=None)


def _sentence_bounded(text: str, piece: str) -> bool:
    """True if some occurrence of ``piece`` starts and ends on sentence/line boundaries."""
    start = text.find(piece)
    while start != -1:
        end = start + len(piece)
        before = text[start - 1] if start else "\n"
        after = text[end] if end < len(text) else "\n"
        starts_ok = before.isspace() or before in SENTENCE_START_BEFORE
        ends_ok = piece[-1] in SENTENCE_END or after.isspace()
        if starts_ok and ends_ok:
            return True
        start = text.find(piece, start + 1)
    return False


# --- structure ---------------------------------------------------------------------------------


def test_all_files_present_and_small() -> None:
    for name in (*SOURCES, "qa.jsonl", "README.md", "make_tables.py"):
        assert (DATA_DIR / name).is_file(), name
    total = sum(p.stat().st_size for p in DATA_DIR.rglob("*") if p.is_file())
    assert total < MAX_DATA_BYTES, f"data/ is {total} bytes"


def test_qa_schema() -> None:
    assert len(QA) >= 48
    for row in QA:
        keys = set(row)
        assert keys >= REQUIRED_KEYS, (row.get("id"), REQUIRED_KEYS - keys)
        assert keys <= REQUIRED_KEYS | OPTIONAL_KEYS, (row["id"], keys - REQUIRED_KEYS)
        assert re.fullmatch(r"q\d{3}", row["id"]), row["id"]
        assert isinstance(row["question"], str) and row["question"].strip()
        assert isinstance(row["answers"], list) and all(
            isinstance(a, str) and a for a in row["answers"]
        )
        assert isinstance(row["evidence"], list) and all(
            isinstance(e, str) and e for e in row["evidence"]
        )
        assert row["source"] in SOURCES, row["id"]
        assert row["type"] in TYPES, row["id"]
        assert row["lang"] in ("zh", "en"), row["id"]


def test_ids_unique() -> None:
    ids = [row["id"] for row in QA]
    assert len(ids) == len(set(ids))
    questions = [row["question"] for row in QA]
    assert len(questions) == len(set(questions))


def test_type_and_language_counts() -> None:
    types = Counter(row["type"] for row in QA)
    for qtype, minimum in MIN_PER_TYPE.items():
        assert types[qtype] >= minimum, (qtype, types[qtype])
    langs = Counter(row["lang"] for row in QA)
    share_zh = langs["zh"] / len(QA)
    assert 0.3 <= share_zh <= 0.5, langs


def test_lang_matches_question_script() -> None:
    for row in QA:
        has_cjk = bool(CJK.search(row["question"]))
        assert has_cjk == (row["lang"] == "zh"), row["id"]


def test_type_specific_shape() -> None:
    for row in QA:
        qtype = row["type"]
        if qtype == "unanswerable":
            assert row["answers"] == [] and row["evidence"] == [], row["id"]
            assert row["source"] in TEXT_SOURCES, row["id"]
        else:
            assert row["answers"] and row["evidence"], row["id"]
        if qtype == "table-aggregation":
            assert row["source"] == "tables.xlsx", row["id"]
            assert len(row["answers"]) == 1, row["id"]
        elif qtype != "unanswerable":
            assert row["source"] in TEXT_SOURCES, row["id"]
        if qtype == "adjacent-multi-sentence":
            assert len(row["evidence"]) >= 2, row["id"]
            assert len(row["answers"]) >= 2, row["id"]
        assert ("near_miss" in row) == (qtype == "distractor"), row["id"]


# --- verbatim grounding in the text corpus -----------------------------------------------------


@pytest.mark.parametrize("qid", _ids(text_only=True))
def test_answers_and_evidence_verbatim(qid: str, texts: dict[str, str]) -> None:
    row = QA_BY_ID[qid]
    text = texts[row["source"]]
    for answer in row["answers"]:
        assert answer in text, f"{qid}: answer {answer!r} not in {row['source']}"
        assert any(answer in ev for ev in row["evidence"]), f"{qid}: {answer!r} not in evidence"
    for ev in row["evidence"]:
        assert "\n" not in ev, qid
        assert ev in text, f"{qid}: evidence not verbatim in {row['source']}: {ev!r}"
        assert _sentence_bounded(text, ev), f"{qid}: evidence is not a whole sentence: {ev!r}"


@pytest.mark.parametrize("qid", _ids("adjacent-multi-sentence"))
def test_adjacent_evidence_is_consecutive(qid: str, texts: dict[str, str]) -> None:
    row = QA_BY_ID[qid]
    text = texts[row["source"]]
    evidence = row["evidence"]
    for first, second in zip(evidence, evidence[1:], strict=False):
        pattern = re.escape(first) + r"[ \t]*" + re.escape(second)
        assert re.search(pattern, text), f"{qid}: evidence sentences are not adjacent"
    # the answer is split across the sentences: each sentence carries at least one answer
    for ev in evidence:
        assert any(answer in ev for answer in row["answers"]), f"{qid}: {ev!r} has no answer"
    # ... and no single sentence carries all of them
    assert not any(all(a in ev for a in row["answers"]) for ev in evidence), qid


@pytest.mark.parametrize("qid", _ids("distractor"))
def test_distractor_near_miss(qid: str, texts: dict[str, str]) -> None:
    row = QA_BY_ID[qid]
    text = texts[row["source"]]
    assert row["near_miss"], qid
    for near in row["near_miss"]:
        assert near in text, f"{qid}: near-miss not verbatim: {near!r}"
        assert _sentence_bounded(text, near), qid
        assert near not in row["evidence"], qid
        for answer in row["answers"]:
            assert answer not in near, f"{qid}: near-miss contains the answer {answer!r}"


@pytest.mark.parametrize("qid", _ids("unanswerable"))
def test_unanswerable_terms_absent(qid: str, texts: dict[str, str]) -> None:
    assert qid in UNANSWERABLE_ABSENT, f"{qid}: add its key terms to UNANSWERABLE_ABSENT"
    text = texts[QA_BY_ID[qid]["source"]].lower()
    for term in UNANSWERABLE_ABSENT[qid]:
        assert term.lower() not in text, f"{qid}: {term!r} occurs in the source"


# --- workbook ------------------------------------------------------------------------------------


def test_workbook_sheets(sheets: Sheets) -> None:
    assert list(sheets) == ["2022年销售", "2023年销售", "Staff", "Warehouses"]
    for name, frame in sheets.items():
        assert 8 <= len(frame) <= 20, (name, len(frame))
        assert frame.notna().all().all(), name


def test_every_table_question_has_a_check() -> None:
    assert set(_ids("table-aggregation")) == set(TABLE_CHECKS)


@pytest.mark.parametrize("qid", _ids("table-aggregation"))
def test_table_answers_recomputed(qid: str, sheets: Sheets) -> None:
    row = QA_BY_ID[qid]
    for sheet_name in row["evidence"]:
        assert sheet_name in sheets, f"{qid}: no sheet {sheet_name!r}"
    assert row["answers"] == [_format_value(TABLE_CHECKS[qid](sheets))]


def test_generator_reproduces_workbook(tmp_path: Path, sheets: Sheets) -> None:
    # exec the generator's source instead of importing it, so no __pycache__ lands in data/
    script = DATA_DIR / "make_tables.py"
    module = types.ModuleType("advrag_make_tables")
    module.__file__ = str(script)
    exec(compile(script.read_text(encoding="utf-8"), str(script), "exec"), module.__dict__)
    regenerated = pd.read_excel(module.write_workbook(tmp_path / "t.xlsx"), sheet_name=None)
    assert list(regenerated) == list(sheets)
    for name, frame in sheets.items():
        pd.testing.assert_frame_equal(regenerated[name], frame, check_dtype=True)


# --- corpus size -----------------------------------------------------------------------------


def test_corpus_lengths(texts: dict[str, str]) -> None:
    zh_chars = len(CJK.findall(texts["zh_narrative.md"]))
    assert 3000 <= zh_chars <= 5000, zh_chars
    manual_words = len(texts["en_manual.md"].split())
    assert 3000 <= manual_words <= 5000, manual_words
    policy_words = len(texts["en_policy.md"].split())
    assert 1500 <= policy_words <= 2500, policy_words
    for name, text in texts.items():
        assert len(re.findall(r"^#{1,2} ", text, flags=re.M)) >= 4, name
