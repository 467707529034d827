"""Spec files: YAML/JSON pipelines composed from allow-listed public classes; errors named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llama_index_ext_advrag.evaluation.compose import SpecError
from llama_index_ext_advrag.evaluation.registry import load_spec, spec_from_dict

YAML = """
pipelines:
  - baseline
  - name: my-stack
    parser: {type: AdaptiveSlidingWindowNodeParser, preset: article}
    retriever: {type: hybrid, mode: rrf}
    fetch_multiplier: 4
    postprocessors:
      - WindowReplacementPostprocessor
      - {type: ConsecutiveMergePostprocessor}
"""


def test_yaml_spec_composes_and_names_registered_pipelines(tmp_path: Path) -> None:
    path = tmp_path / "stack.yaml"
    path.write_text(YAML, encoding="utf-8")
    baseline, mine = load_spec(path)
    assert baseline.name == "baseline"
    assert mine.name == "my-stack"
    spec = spec_from_dict(
        {"name": "x", "parser": "SentenceSplitter", "retriever": {"type": "dense"}}, "w"
    )
    assert spec.parser is not None and spec.parser.type == "SentenceSplitter"
    assert spec.retriever.type == "dense" and spec.fetch_multiplier == 1


def test_json_spec(tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    path.write_text(json.dumps({"pipelines": [{"name": "j", "retriever": "two-layer"}]}))
    [entry] = load_spec(path)
    assert entry.name == "j"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"retriever": "dense"}, r"pipelines\[0\]: 'name' .* is required"),
        ({"name": "a"}, r"\(a\): 'retriever' is required; one of dense, hybrid"),
        ({"name": "a", "retriever": "sparse"}, r"retriever: unknown type 'sparse'; allowed dense"),
        ({"name": "a", "retriever": "dense", "parser": {"type": "os.system"}},
         r"parser: unknown type 'os.system'"),
        ({"name": "a", "retriever": "dense", "postprocessors": [{"type": "LLMRerank"}]},
         r"postprocessors\[0\]: unknown type 'LLMRerank'"),
        ({"name": "a", "retriever": "dense", "fetch_multiplier": 0},
         r"'fetch_multiplier' must be an integer >= 1, got 0"),
        ({"name": "a", "retriever": "dense", "top_k": 3}, r"unknown key\(s\) \['top_k'\]"),
        ({"name": "a", "retriever": "dense", "postprocessors": "WindowReplacementPostprocessor"},
         r"'postprocessors' must be a list"),
        ({"name": "a", "retriever": {"mode": "rrf"}}, r"retriever: expected a mapping with 'type'"),
    ],
)  # fmt: skip
def test_spec_errors_name_the_entry(tmp_path: Path, entry: dict, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"pipelines": [entry]}), encoding="utf-8")
    with pytest.raises(SpecError, match=r"bad\.json: pipelines\[0\]") as info:
        load_spec(path)
    assert info.match(message)


def test_file_level_errors(tmp_path: Path) -> None:
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("pipelines: [baseline\n  - x: {", encoding="utf-8")
    with pytest.raises(SpecError, match=r"bad\.yaml: not valid YAML"):
        load_spec(bad_yaml)
    empty = tmp_path / "empty.yaml"
    empty.write_text("pipelines: []\n", encoding="utf-8")
    with pytest.raises(SpecError, match="non-empty list under 'pipelines'"):
        load_spec(empty)
    unknown = tmp_path / "unknown.yaml"
    unknown.write_text("pipelines: [no-such-pipeline]\n", encoding="utf-8")
    with pytest.raises(
        SpecError, match="unknown pipeline 'no-such-pipeline'; registered: baseline"
    ):
        load_spec(unknown)
    twice = tmp_path / "twice.yaml"
    twice.write_text("pipelines: [baseline, baseline]\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"\['baseline'\] occur more than once"):
        load_spec(twice)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_spec(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("preset", "window"),
    [("article", 160), ("general", 128), ("auto", 128), ("technical", None), ("qa", None)],
)
def test_a_refitted_preset_window_enters_the_index_key(preset: str, window: int | None) -> None:
    """article and general windows were re-fitted to bge-small: an index parsed with the old
    windows (keyed by the preset name alone) is not reused; the other presets keep their keys."""
    from llama_index_ext_advrag.evaluation.compose import BuildContext, _index_name

    spec = spec_from_dict(
        {"name": "p", "retriever": "dense",
         "parser": {"type": "AdaptiveSlidingWindowNodeParser", "preset": preset}},
        "test",
    )  # fmt: skip
    context = BuildContext(store=None, llm=None, doc_type="general")  # type: ignore[arg-type]
    name = _index_name(spec, context)
    resolved = "general" if preset == "auto" else preset
    extra = "" if window is None else f'"max_window_tokens": {window}, '  # sorted keys
    assert name == f'AdaptiveSlidingWindowNodeParser:{{{extra}"preset": "{resolved}"}}:False'
