"""The README quickstart runs as written: offline, without an LLM, and from the built wheel.

The quickstart is the first ``python`` block under "## Quickstart" in README.md. It runs in a
child process whose sockets may reach loopback only (the autouse guard of the test session does
not reach a child), with ``OPENAI_API_KEY`` removed, from a working folder holding ``data/``.

``test_wheel_installs_and_runs_the_quickstart`` proves the *contents* of the wheel: it builds the
wheel from this checkout without network (``python -m build --wheel --no-isolation``), installs it
with ``--no-deps --no-index`` into a fresh virtual environment whose dependencies come from the
test environment's site-packages, and runs the quickstart from a folder outside the checkout, so
the package can only be imported from the wheel. That the base dependencies resolve and pull no
model is proved by ``tests/packaging/test_base_install.py``, that the pins install together
from the registries by ``make run``'s own install.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from wheel_env import REPO_ROOT, build_wheel, create_environment, run_python

QUESTION_ANSWER = "15 seconds"  # the quickstart asks how long the RESET pinhole is held


def quickstart_code() -> str:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Quickstart", 1)[1]
    match = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert match, "README.md has no python block under '## Quickstart'"
    return match.group(1)


def working_folder(tmp_path: Path) -> Path:
    """A folder outside the checkout with the sample documents in ``data/``."""
    folder = tmp_path / "app"
    (folder / "data").mkdir(parents=True)
    for name in (
        "en_manual.md",
        "README.md",
    ):  # the answer is in the manual; one file keeps it fast
        shutil.copy(REPO_ROOT / "data" / name, folder / "data" / name)
    return folder


def test_quickstart_block_is_ten_lines_of_app() -> None:
    code = quickstart_code()
    statements = [line for line in code.splitlines() if line and not line.startswith(" ")]
    assert "as_query_engine(" in code and "MockLLM()" in code
    assert len(statements) <= 10, statements


RUN_BOTH = """
import contextlib
def run(code, folder, marker):
    with contextlib.chdir(folder):
        exec(compile(code, "quickstart", "exec"), {"__name__": "__main__"})
    print(marker, flush=True)
"""


@pytest.fixture(scope="module")
def quickstart_outputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The quickstart as written, then with ``Settings.llm = None``: each in a folder of its own,
    both in one child interpreter (one start-up and one model load for the two)."""
    as_written = quickstart_code() + "\nprint('RESPONSE', str(response)[:2000])\n"
    code = quickstart_code().replace("    llm=resolve_llm() or MockLLM(),", "")
    assert "llm=" not in code.split("as_query_engine(", 1)[1]
    settings_none = (
        "from llama_index.core import Settings\nSettings.llm = None\n"
        + code
        + "\nassert resolve_llm() is None, 'MockLLM must count as no LLM'\n"
    )
    folders = [working_folder(tmp_path_factory.mktemp(name)) for name in ("written", "none")]
    script = (
        RUN_BOTH
        + f"run({as_written!r}, {str(folders[0])!r}, 'END-AS-WRITTEN')\n"
        + f"run({settings_none!r}, {str(folders[1])!r}, 'END-SETTINGS-NONE')\n"
    )
    output = run_python(sys.executable, script, folders[0], pythonpath=str(REPO_ROOT))
    first, rest = output.split("END-AS-WRITTEN\n", 1)
    second, tail = rest.split("END-SETTINGS-NONE\n", 1)
    assert not tail.strip(), tail
    return first, second


def test_quickstart_runs_offline_without_an_llm(quickstart_outputs: tuple[str, str]) -> None:
    source, response = quickstart_outputs[0].split("RESPONSE", 1)
    assert QUESTION_ANSWER in source
    # MockLLM echoes its prompt: the answer holds the retrieved context and the question.
    assert "RESET pinhole" in response and QUESTION_ANSWER in response


def test_quickstart_with_settings_llm_none(quickstart_outputs: tuple[str, str]) -> None:
    """``Settings.llm = None`` (core installs a MockLLM): the engine runs, the pack sees no LLM."""
    assert QUESTION_ANSWER in quickstart_outputs[1]
    assert "RESPONSE" not in quickstart_outputs[1]  # its own run, not the first one's output


@pytest.mark.milvus_lite
def test_wheel_installs_and_runs_the_quickstart(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="needs the dev extra (build, hatchling)")
    pytest.importorskip("hatchling", reason="needs the dev extra (build, hatchling)")
    wheel = build_wheel(tmp_path / "dist")
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/", 1)[0] for name in archive.namelist()}
    assert top_level == {"llama_index_ext_advrag", wheel.name.split("-py3")[0] + ".dist-info"}
    if importlib.util.find_spec("twine") is not None:  # the metadata PyPI will read
        checked = subprocess.run(
            [sys.executable, "-m", "twine", "check", "--strict", str(wheel)],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert checked.returncode == 0 and "PASSED" in checked.stdout, (
            checked.stdout + checked.stderr
        )

    # A fresh environment; its dependencies are the test environment's installed packages,
    # listed in a .pth file. Only the site folder's own .pth files run, so the editable
    # install of this checkout (a .pth in the test environment) is not applied there.
    environment = tmp_path / "venv"
    python, site_packages = create_environment(environment)
    dependencies = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_packages / "test_dependencies.pth").write_text("\n".join(sorted(dependencies)) + "\n")
    subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )

    folder = working_folder(tmp_path)
    where = "import llama_index_ext_advrag as pkg\nprint('PACKAGE', pkg.__file__)\n"
    output = run_python(python, where + quickstart_code(), folder)
    package_file = Path(output.split("PACKAGE ", 1)[1].split("\n", 1)[0])
    assert package_file.is_relative_to(site_packages), package_file
    assert QUESTION_ANSWER in output
    script = environment / ("Scripts/advrag.exe" if os.name == "nt" else "bin/advrag")
    listed = subprocess.run(
        [str(script), "compare", "--list"], capture_output=True, text=True, timeout=300
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert "baseline" in listed.stdout
