"""The base install (``pip install llama-index-ext-advrag``, no extra) pulls no model and no torch.

The wheel of this checkout is installed by pip into a fresh virtual environment with its base
dependencies and nothing else, offline: every dependency comes as a wheel made from the
distribution installed in the test environment (``pip install --no-index --find-links``), so
pip resolves the wheel's own requirements and version ranges, and a requirement the test
environment cannot satisfy fails the install. There the test imports every public name, runs a
node parser, BM25 (sync and async) and fusion without any model, checks that the model loaders
name their extras, and that torch, transformers and sentence-transformers are absent.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import zipfile
from email.parser import Parser
from importlib.metadata import Distribution, PackageNotFoundError, distribution
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from wheel_env import (
    build_wheel,
    create_environment,
    offline_pip_env,
    run_python,
    wheel_from_installed,
)

logger = logging.getLogger(__name__)

# Heavy model stacks that the base install must never bring.
MODEL_STACKS = (
    "torch",
    "transformers",
    "sentence-transformers",
    "llama-index-embeddings-huggingface",
)

BASE_INSTALL_CHECK = r"""
import asyncio, importlib.util, json, pkgutil
from importlib.metadata import version
import llama_index_ext_advrag as pkg
from llama_index.core import Document
from llama_index_ext_advrag.text.words import WordTokenizer

assert version("llama-index-ext-advrag") == pkg.__version__
public = {name: getattr(pkg, name) for name in pkg.__all__}  # every public name resolves
modules = [m.name for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + ".")]
for name in modules:
    importlib.import_module(name)  # no module needs an extra at import time

text = (
    "To reset the router, hold the RESET pinhole for 15 seconds. The lights blink twice. "
    "Then wait two minutes before you log in again.\n\n"
    "路由器的保修期为两年。保修不包括进水造成的损坏。"
)
parser = pkg.AdaptiveSlidingWindowNodeParser(preset="article")
nodes = parser.get_nodes_from_documents([Document(text=text, id_="manual")])
words = pkg.JiebaBM25Retriever(nodes, similarity_top_k=3)
characters = pkg.JiebaBM25Retriever(
    nodes, similarity_top_k=3, tokenizer=WordTokenizer(chinese_characters=True)
)
hybrid = pkg.HybridFusionRetriever([words, characters], leg_names=["words", "characters"])

def ranked(results):
    return [(r.node.node_id, round(r.score, 6)) for r in results]

result = {
    "nodes": len(nodes),
    "bm25": [r.node.get_content() for r in words.retrieve("RESET pinhole")],
    "bm25_async_same": ranked(asyncio.run(words.aretrieve("保修期"))) == ranked(words.retrieve("保修期")),
    "fusion": [r.node.get_content() for r in hybrid.retrieve("保修期多长")],
    "fusion_async_same": ranked(asyncio.run(hybrid.aretrieve("保修期多长")))
    == ranked(hybrid.retrieve("保修期多长")),
    "absent": [m for m in ("torch", "transformers", "sentence_transformers") if importlib.util.find_spec(m)],
}
from llama_index_ext_advrag.models import ModelResolutionError, load_packaged_embed_model, resolve_embed_model
for name, load in (("default", resolve_embed_model), ("minilm", load_packaged_embed_model)):
    try:
        load()
        result[name] = "loaded"
    except ModelResolutionError as error:
        result[name] = str(error)
from llama_index_ext_advrag.cli_compare import openai_like_llm
try:
    openai_like_llm("http://127.0.0.1:9/v1", None, 5.0)
    result["llm_server"] = "built"
except ModelResolutionError as error:
    result["llm_server"] = str(error)
print("RESULT" + json.dumps(result, ensure_ascii=False))
"""


def base_requirements(wheel: Path) -> list[Requirement]:
    """The wheel's Requires-Dist without the ones that only an extra asks for."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        metadata = Parser().parsestr(archive.read(name).decode("utf-8"))
    requirements = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    return [r for r in requirements if r.marker is None or r.marker.evaluate({"extra": ""})]


def dependency_closure(requirements: list[Requirement]) -> dict[str, Distribution]:
    """The installed distributions that ``requirements`` need, transitively (markers evaluated
    for this interpreter, requested extras followed), by canonical name."""
    dists: dict[str, Distribution] = {}
    extras: dict[str, set[str]] = {}
    queue = [(r, "") for r in requirements]
    while queue:
        requirement, extra = queue.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(requirement.name)
        new_extras = set(requirement.extras) - extras.get(key, set())
        if key in dists and not new_extras:
            continue
        if key not in dists:
            try:
                dists[key] = distribution(requirement.name)
            except PackageNotFoundError:
                pytest.fail(f"{requirement} is required but not installed in the test environment")
            new_extras.add("")  # the distribution's own requirements, once
        assert requirement.specifier.contains(dists[key].version, prereleases=True), (
            f"{requirement}: the test environment has {dists[key].version}, outside the range"
        )
        extras[key] = extras.get(key, set()) | new_extras
        for line in dists[key].requires or []:
            queue.extend((Requirement(line), wanted) for wanted in sorted(new_extras))
    return dists


@pytest.mark.milvus_lite
@pytest.mark.timeout(1800)
def test_the_base_install_runs_without_a_model_or_torch(tmp_path: Path) -> None:
    pytest.importorskip("build", reason="needs the dev group (build, hatchling)")
    pytest.importorskip("hatchling", reason="needs the dev group (build, hatchling)")
    wheel = build_wheel(tmp_path / "dist")
    closure = dependency_closure(base_requirements(wheel))
    assert not set(closure) & {canonicalize_name(n) for n in MODEL_STACKS}, sorted(closure)

    wheelhouse = tmp_path / "wheelhouse"
    wheelhouse.mkdir()
    for dist in closure.values():
        wheel_from_installed(dist, wheelhouse)
    environment = tmp_path / "venv"
    python, _ = create_environment(environment)
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-index", "--find-links", str(wheelhouse),
         "--no-compile", str(wheel)],
        env=offline_pip_env(), capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert installed.returncode == 0, installed.stdout[-2000:] + installed.stderr[-3000:]
    listed = subprocess.run(
        [str(python), "-m", "pip", "list", "--format", "json"],
        env=offline_pip_env(), capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    names = {canonicalize_name(p["name"]) for p in json.loads(listed.stdout)}
    assert "llama-index-ext-advrag" in names
    assert not names & {canonicalize_name(n) for n in MODEL_STACKS}, sorted(names)

    folder = tmp_path / "app"  # outside the checkout: the package can come only from the wheel
    folder.mkdir()
    output = run_python(python, BASE_INSTALL_CHECK, folder)
    result = json.loads(output.split("RESULT", 1)[1])
    assert result["nodes"] >= 2
    assert any("RESET pinhole" in text for text in result["bm25"][:1]), result["bm25"]
    assert "保修期为两年" in result["fusion"][0], result["fusion"]
    assert result["bm25_async_same"] and result["fusion_async_same"]
    assert result["absent"] == []
    assert "llama-index-ext-advrag[" in result["default"], result["default"]
    assert "pip install 'llama-index-ext-advrag[minilm]'" in result["minilm"], result["minilm"]
    # --llm-url without the llm-server extra: the extra is named (was ModuleNotFoundError)
    assert result["llm_server"].endswith("pip install 'llama-index-ext-advrag[llm-server]'")

    size = sum(
        f.stat().st_size for f in environment.rglob("*") if f.is_file() and not f.is_symlink()
    )
    logger.info(
        "base install: %d distributions, %.0f MB in a fresh environment", len(names), size / 1e6
    )
    shutil.rmtree(wheelhouse, ignore_errors=True)
