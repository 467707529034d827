"""The pandas code guard: hostile code is refused before anything runs; safe code runs."""

from __future__ import annotations

import threading
from pathlib import Path

import pandas as pd
import pytest
from advrag_testing import ScriptedLLM
from llama_index.core.schema import QueryBundle

from llama_index_ext_advrag.retrievers.pandas_guard import (
    GuardedPandasInstructionParser,
    GuardedPandasQueryEngine,
    extract_code,
    refusal_reason,
    run_pandas_code,
)
from llama_index_ext_advrag.retrievers.recursive import UnsafeCodeError, check_pandas_code

# "{s}" is a sentinel path: if any of these ran, it would create or touch that file.
HOSTILE = [
    "__import__('os').system('touch {s}')",
    "df.__class__.__mro__[-1].__subclasses__()",
    "open('/etc/passwd').read()",
    "open('{s}', 'w').write('x')",
    "pd.read_csv('http://127.0.0.1:9/x.csv')",
    "df.to_pickle('{s}')",
    "import os\nos.system('touch {s}')",
    "from subprocess import run\nrun(['touch', '{s}'])",
    "eval(\"__import__('os').system('touch {s}')\")",
    "exec(\"open('{s}', 'w')\")",
    "pd.io.common.os.getcwd()",
    "np.lib.npyio.os.listdir('/')",
    "pd.io.common.os.remove('{s}')",
    "getattr(df, 'to_csv')('{s}')",
    "'{{0.__class__}}'.format(df)",
    "f'{{df.__class__}}'",
    "df.to_string('{s}')",
    "df.info(buf=open('{s}', 'w'))",
    "df.info(**{{'buf': 1}})",
    "np.save('{s}', df.values)",
    "df.values.tofile('{s}')",
    "df.to_json(path_or_buf='{s}')",
    "pd.DataFrame.to_csv(df, '{s}')",
    "df.style.to_html('{s}')",
    "df.plot().figure.savefig('{s}')",
    "df.agg('to_pickle', '{s}')",
    "df.query(\"@pd.io.common.os.system('touch {s}')\")",
    'df.query("Age.__class__")',
    'pd.eval("1 + 1")',
    "(lambda: 0).__globals__['__builtins__']",
    "globals()['open']('{s}', 'w')",
    "compile('1', '{s}', 'exec')",
    "breakpoint()",
    "vars(df)",
    "type(df).mro()",
    "x = np\nx.lib.npyio.os.listdir('/')",
    "def f():\n    return 1\nf()",
    "class A:\n    pass",
    "while True:\n    pass",
    "for i in df['Age']:\n    pass",
    "with open('{s}', 'w') as f:\n    f.write('x')",
    "try:\n    1\nexcept Exception:\n    pass",
    "del df",
    "df.x = 1",
    "pd.set_option('display.max_rows', 1)",
    "np.memmap('{s}', mode='w+', shape=(3,))",
    "'a' * 10**10",
    "10**10**10",
    "np.ones(10**9)",
    "[x for x in iter(int, 1)]",
    "_secret = 1",
    "df.pipe(open, '{s}')",
    "async def f():\n    pass",
    "df[",  # not Python
]


@pytest.fixture
def df() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "Name": ["Ann", "Bo", "Cy", "Di"],
            "Age": [70, 50, 65, 40],
            "Nationality": ["United States", "France", "United States", "China"],
            "Net_Worth": ["$211 billion", "$180 billion", "$96.5 billion", "$80 billion"],
        }
    )


def test_at_least_twenty_hostile_strings() -> None:
    assert len(HOSTILE) >= 20


@pytest.mark.parametrize("template", HOSTILE)
def test_hostile_code_is_refused_and_nothing_runs(
    template: str, df: pd.DataFrame, tmp_path: Path, executions: list[str]
) -> None:
    sentinel = tmp_path / "sentinel"
    code = template.format(s=sentinel)
    with pytest.raises(UnsafeCodeError) as refused:
        check_pandas_code(code)
    assert refused.value.reason and refused.value.code == code
    with pytest.raises(UnsafeCodeError):
        run_pandas_code(code, df)
    assert executions == []
    assert not sentinel.exists()


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("len(df[df['Nationality'] == 'United States'])", 2),
        ("(df.head(3)['Nationality'] == 'United States').sum()", 2),
        ("df[df['Age'] > 60]['Name'].tolist()", ["Ann", "Cy"]),
        ("df.sort_values('Age').iloc[0]['Name']", "Di"),
        ("df.query('Age > 60 and `Nationality` == \"France\"').shape[0]", 0),
        (
            "w = df['Net_Worth'].str.replace('$', '').str.replace(' billion', '').astype(float)\n"
            "round(w.sum(), 1)",
            567.5,
        ),
        ("df.apply(lambda r: r['Age'] * 2, axis=1).max()", 140),
        ("int(np.mean(df['Age']))", 56),
        ("sum(a for a in df['Age'] if a > 60)", 135),
        ("x = 1", None),
    ],
)
def test_safe_code_runs_through_experimental(
    code: str, expected: object, df: pd.DataFrame, executions: list[str]
) -> None:
    check_pandas_code(code)
    assert run_pandas_code(code, df) == expected
    assert executions  # it really went through safe_exec/safe_eval


def test_the_callers_frame_is_not_modified(df: pd.DataFrame) -> None:
    before = df.copy()
    run_pandas_code("df['Age'] = 0\ndf['Age'].sum()", df)
    pd.testing.assert_frame_equal(df, before)


SLOW = "sum(1 for a in df['Age'] for b in df['Age'] for c in df['Age'] for d in df['Age'])"


def test_time_limit_in_the_main_thread() -> None:
    big = pd.DataFrame({"Age": range(400)})
    with pytest.raises(TimeoutError):
        run_pandas_code(SLOW, big, timeout_seconds=1)


def test_time_limit_in_a_worker_thread() -> None:
    big = pd.DataFrame({"Age": range(400)})
    outcome: list[BaseException | object] = []

    def work() -> None:
        try:
            outcome.append(run_pandas_code(SLOW, big, timeout_seconds=1))
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert isinstance(outcome[0], TimeoutError)


def test_worker_thread_runs_safe_code(df: pd.DataFrame) -> None:
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(run_pandas_code("len(df)", df)))
    thread.start()
    thread.join(timeout=60)
    assert outcome == [4]


def test_extract_code_and_refusal_reason() -> None:
    assert extract_code("Here:\n```python\nlen(df)\n```\nDone") == "len(df)"
    assert extract_code("`len(df)`") == "len(df)"
    assert refusal_reason("```\nlen(df)\n```") is None
    assert "open" in (refusal_reason("open('x')") or "")


def test_parser_turns_refusals_and_errors_into_messages(df: pd.DataFrame, tmp_path) -> None:
    parser = GuardedPandasInstructionParser(df)
    assert parser.parse("```python\nlen(df)\n```") == "4"
    sentinel = tmp_path / "s"
    message = parser.parse(f"```python\nopen('{sentinel}', 'w')\n```")
    assert message.startswith("Refused to run the generated pandas code") and not sentinel.exists()
    assert parser.parse("df['missing']").startswith("Error running the generated pandas code")


def test_engine_refuses_hostile_llm_code(df: pd.DataFrame, tmp_path, executions) -> None:
    sentinel = tmp_path / "s"
    llm = ScriptedLLM([f"```python\n__import__('os').system('touch {sentinel}')\n```"])
    engine = GuardedPandasQueryEngine(df, "people", llm=llm)
    response = engine.query("delete everything")
    assert str(response).startswith("Refused to run the generated pandas code")
    assert response.metadata["pandas_refused"] and response.metadata["table"] == "people"
    assert executions == [] and not sentinel.exists()


async def test_engine_answers_sync_and_async(df: pd.DataFrame) -> None:
    llm = ScriptedLLM(["```python\nlen(df[df['Age'] > 60])\n```"])
    engine = GuardedPandasQueryEngine(df, "people", llm=llm)
    sync = engine.query(QueryBundle("how many are over 60?"))
    asynchronous = await engine.aquery(QueryBundle("how many are over 60?"))
    assert str(sync) == str(asynchronous) == "2"
    assert sync.metadata["pandas_code"] == "len(df[df['Age'] > 60])"
    assert sync.metadata["pandas_refused"] is None
    assert pd.get_option("display.max_rows") == 60  # experimental's global options put back


def test_engine_without_llm_returns_the_description(df, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    engine = GuardedPandasQueryEngine(df, "people", description="People table: 4 rows")
    response = engine.query("how many?")
    assert str(response) == "People table: 4 rows"
    assert response.metadata["pandas_skipped"]


@pytest.mark.parametrize(("kwargs", "named"), [({"timeout_seconds": 0}, "0"), ({"head": 0}, "0")])
def test_engine_invalid_arguments(df, kwargs, named) -> None:
    with pytest.raises(ValueError, match=named):
        GuardedPandasQueryEngine(df, **kwargs)
