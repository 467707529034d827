"""Every hostile program, end to end through the public API: ``from_excel(workbook, llm=L)``.

``L`` is a scripted LLM that answers the pandas prompt (and the retry prompt) with the hostile
program. Each run must leave the sentinel folder, the working directory and the workbook's
folder as they were, must not show the secret file's content (or a shell's output) anywhere -
answer, trace, logs, prompts - must return (pytest-timeout guards hangs), and every refused
program must be in the trace with its reason.
"""

from __future__ import annotations

import json
import logging
import os
import re
import unicodedata
import uuid
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from tables.hostile_corpus import (
    ACCEPTED,
    CORPUS,
    REFUSAL_FAMILIES,
    REFUSED_BY,
    fill,
    programs,
)

from llama_index_ext_advrag.retrievers import RecursiveIndexNodeRetriever
from llama_index_ext_advrag.tables.pandas_check import refusal_reason
from llama_index_ext_advrag.tables.pandas_sandbox import SandboxLimits
from llama_index_ext_advrag.trace import TRACE_KEY

LIMITS = SandboxLimits(timeout_seconds=60, cpu_seconds=3, memory_mb=256)


@dataclass
class Arena:
    workbook: Path
    sentinel: Path
    secret: Path
    token: str
    cwd: Path

    def snapshot(self) -> dict[str, list[str]]:
        return {
            str(place): sorted(os.listdir(place))
            for place in (self.sentinel, self.cwd, self.workbook.parent, self.secret.parent)
        }


@pytest.fixture
def arena(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Arena:
    book = tmp_path / "book"
    book.mkdir()
    workbook = book / "people.xlsx"
    pd.DataFrame(
        {"Name": ["Ann", "Bo", "Cy"], "Age": [70, 50, 65], "City": ["Oslo", "Rome", "Oslo"]}
    ).to_excel(workbook, sheet_name="people", index=False)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    vault = tmp_path / "vault"
    vault.mkdir()
    token = f"SECRET-{uuid.uuid4().hex}"
    secret = vault / "secret.txt"
    secret.write_text(f"{token}\n{token},{token}\n")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return Arena(workbook, sentinel, secret, token, cwd)


def test_the_corpus_is_large_and_covers_every_category() -> None:
    assert len(programs()) >= 150
    assert all(len(items) >= 4 for items in CORPUS.values())
    # the examples are in it
    joined = "\n".join(t for _, t in programs())
    for example in ('df.agg("to_"+"csv", 0,', 'df.agg("ev"+"al", 0,', "np.ones((100000, 100000))"):
        assert example in joined


def refusal_family(reason: str) -> tuple[str, str | None]:
    """The family of a refusal reason and the name it gives (a method, a function), if any."""
    for family, pattern in REFUSAL_FAMILIES.items():
        match = re.fullmatch(pattern, reason)
        if match:
            named = [v for k, v in match.groupdict().items() if k.startswith("name") and v]
            return family, (named[0] if named else None)
    raise AssertionError(f"a refusal of no known family: {reason!r}")


@pytest.mark.parametrize(("category", "template"), programs())
def test_each_refusal_is_of_its_categorys_kind_and_names_the_culprit(
    category: str, template: str
) -> None:
    """The rule that refused a program is one its category expects, and the method, function
    or builtin it names is in the program; exactly the programs of ACCEPTED are accepted."""
    code = fill(template, "/sentinel", "/vault/secret.txt")
    reason = refusal_reason(code)
    if template in ACCEPTED:
        assert reason is None, f"{template!r} is listed as accepted but refused: {reason}"
        return
    assert reason is not None, f"{template!r} was accepted but is not in ACCEPTED"
    family, named = refusal_family(reason)
    assert family in REFUSED_BY[category], (category, template, reason)
    if named is not None:  # Python reads identifiers NFKC-normalised (ｔｏ_csv is to_csv)
        assert named in unicodedata.normalize("NFKC", code), (template, reason)


def test_the_expectations_cover_the_corpus() -> None:
    assert set(REFUSED_BY) == set(CORPUS)
    listed = {template for _, template in programs()}
    assert set(ACCEPTED) <= listed
    outcomes = {outcome for outcome, _ in ACCEPTED.values()}
    assert outcomes == {"answered", "failed", "limit"}  # every kind of sandbox outcome is used


def everything_said(results, llm: ScriptedLLM, caplog: pytest.LogCaptureFixture) -> str:
    nodes = [{"text": r.node.get_content(), "metadata": r.node.metadata} for r in results]
    return "\n".join(
        [json.dumps(nodes, default=str, ensure_ascii=False), caplog.text, *llm.prompts]
    )


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("category", "template"), programs())
def test_hostile_program_end_to_end(
    category: str, template: str, arena: Arena, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    code = fill(template, str(arena.sentinel), str(arena.secret))
    llm = ScriptedLLM(lambda prompt: f"```python\n{code}\n```")
    before = arena.snapshot()
    retriever = RecursiveIndexNodeRetriever.from_excel(
        arena.workbook,
        llm=llm,
        summarize=False,
        embed_model=HashEmbedding(dim=64),
        similarity_top_k=1,
        limits=LIMITS,
    )
    results = retriever.retrieve("How old is the oldest person?")

    assert arena.snapshot() == before, "a file was written"
    said = everything_said(results, llm, caplog)
    assert arena.token not in said, "the secret came back"
    assert "uid=" not in said, "a shell command ran"

    answer = results[0]
    trace = answer.node.metadata[TRACE_KEY]["pandas"]
    reason = refusal_reason(code)
    if reason is not None:  # refused: retried once with the reason, then the description
        assert trace["outcome"] == "refused"
        assert [a["refused"] for a in trace["attempts"]] == [reason, reason]
        assert code.startswith(trace["attempts"][0]["code"].strip()[:50])
        assert len(llm.prompts) == 2 and reason in llm.prompts[1]
        assert answer.node.get_content().startswith("No answer was computed from table 'people'")
        assert "Table 'people' (3 rows)" in answer.node.get_content()
    else:  # accepted: ran in the child, which answered, failed or hit the expected limit
        runs = [a["run"] for a in trace["attempts"]]
        assert runs and all("files_left" not in run for run in runs)
        expected, detail = ACCEPTED[template]
        if expected == "answered":
            assert trace["outcome"] == "answered" and len(runs) == 1
            value = detail.replace("{F}", str(arena.secret)) if isinstance(detail, str) else detail
            assert trace["value"] == value
        elif expected == "failed":  # an ordinary error: retried once, failing the same way
            assert trace["outcome"] == "failed" and len(runs) == 2
            assert all(not run["ok"] and "limit" not in run for run in runs)
            assert all(run["error"].startswith(f"{detail}:") for run in runs), runs
        else:  # a limit: not retried (the same program would hit it again)
            assert trace["outcome"] == "failed" and len(runs) == 1, runs
            assert runs[0]["limit"] in (detail if isinstance(detail, tuple) else (detail,)), runs
