"""Pipelines by name and spec files, rule by rule: registering (taken names, replace, specs and
their descriptions, flags), the built-in set's flags, building through compose, and every spec
error's message."""

from __future__ import annotations

import json
import locale
from pathlib import Path

import pytest
import yaml

from llama_index_ext_advrag.evaluation import judged, registry
from llama_index_ext_advrag.evaluation.compose import (
    POSTPROCESSORS,
    RETRIEVERS,
    Component,
    PipelineSpec,
    SpecError,
)
from llama_index_ext_advrag.evaluation.registry import (
    SPEC_KEYS,
    get_pipeline,
    load_spec,
    offline_pipeline_names,
    register_pipeline,
    registered_pipelines,
    spec_from_dict,
)


@pytest.fixture
def own_registry(monkeypatch):
    """A copy of the registry for the test, and compose replaced by a recorder."""
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    built: list[tuple[PipelineSpec, object]] = []

    def compose(spec, context):
        built.append((spec, context))
        return f"pipeline of {spec.name}"

    monkeypatch.setattr(registry, "compose", compose)
    return built


def test_the_built_in_flags() -> None:
    pipelines = registered_pipelines()
    assert offline_pipeline_names() == [
        "baseline", "baseline-1024", "sentence-window", "adaptive-window", "article",
        "auto-merging", "two-layer", "hybrid", "prev-next", "drift-window", "hybrid-rerank",
        "crag", "baseline-compress", "hybrid-compress", "baseline-second-hop",
        "baseline-second-hop-compress", "hybrid-second-hop",
    ]  # fmt: skip
    self_rag = pipelines["self-rag"]
    assert (self_rag.needs_llm, self_rag.generates, self_rag.by_name_only) == (True, True, True)
    assert [n for n, p in pipelines.items() if p.by_name_only] == [
        "hybrid-rerank", "crag", "baseline-compress", "hybrid-compress",
        "baseline-second-hop-compress", "hybrid-second-hop", "self-rag",
    ]  # fmt: skip
    assert pipelines["baseline"].description == "core SentenceSplitter(256) + dense retrieval"
    assert registry._c("dense", k=1) == Component("dense", {"k": 1})


def test_registered_pipelines_is_a_copy() -> None:
    copy = registered_pipelines()
    copy.pop("baseline")
    assert "baseline" in registered_pipelines()


def test_register_a_function_with_its_flags(own_registry) -> None:
    def build(context):
        return "built"

    register_pipeline("mine", build, description="Mine.", needs_llm=True, generates=True,
                      by_name_only=True)  # fmt: skip
    mine = get_pipeline("mine")
    assert (mine.name, mine.build, mine.description) == ("mine", build, "Mine.")
    assert (mine.needs_llm, mine.generates, mine.by_name_only) == (True, True, True)
    register_pipeline("plain", build)
    plain = get_pipeline("plain")
    assert (plain.description, plain.needs_llm, plain.generates, plain.by_name_only) == (
        "", False, False, False,
    )  # fmt: skip
    assert "plain" in offline_pipeline_names() and "mine" not in offline_pipeline_names()
    register_pipeline("asks", build, needs_llm=True)
    register_pipeline("answers", build, generates=True)
    assert "asks" not in offline_pipeline_names()
    assert "answers" not in offline_pipeline_names()


def test_a_taken_name_needs_replace(own_registry) -> None:
    with pytest.raises(ValueError) as caught:
        register_pipeline("baseline", lambda context: None)
    assert str(caught.value) == "a pipeline named 'baseline' is already registered"
    register_pipeline("baseline", lambda context: "new", description="New.", replace=True)
    assert get_pipeline("baseline").description == "New."


def test_a_spec_is_built_through_compose_with_its_description(own_registry) -> None:
    spec = PipelineSpec("s", Component("dense"), description="From the spec.")
    register_pipeline("s", spec)
    assert get_pipeline("s").description == "From the spec."
    assert get_pipeline("s").build("context") == "pipeline of s"
    assert own_registry == [(spec, "context")]
    register_pipeline("t", spec, description="Given.")
    assert get_pipeline("t").description == "Given."


def test_self_rag_wraps_the_hybrid_pipeline(own_registry, monkeypatch) -> None:
    made = []

    def self_rag(name, pipeline, context):
        made.append((name, pipeline, context))
        return "self-rag pipeline"

    monkeypatch.setattr(judged, "SelfRAGPipeline", self_rag)
    assert get_pipeline("self-rag").build("context") == "self-rag pipeline"
    assert made == [("self-rag", "pipeline of hybrid", "context")]
    assert own_registry == [(registry.HYBRID, "context")]


def test_an_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(SpecError) as caught:
        get_pipeline("nope")
    assert str(caught.value) == (
        f"unknown pipeline 'nope'; registered: {', '.join(registered_pipelines())}"
    )


# --- spec mappings ------------------------------------------------------------------------------


def test_a_full_spec_mapping() -> None:
    spec = spec_from_dict(
        {"name": " mine ", "retriever": {"type": "hybrid", "mode": "rrf"},
         "parser": "SentenceSplitter", "fetch_multiplier": 4, "annotate": 1,
         "postprocessors": ["WindowReplacementPostprocessor",
                            {"type": "PrevNextPostprocessor", "num_nodes": 2}],
         "description": 7},
        "w",
    )  # fmt: skip
    assert spec == PipelineSpec(
        name="mine",
        retriever=Component("hybrid", {"mode": "rrf"}),
        parser=Component("SentenceSplitter", {}),
        postprocessors=(
            Component("WindowReplacementPostprocessor", {}),
            Component("PrevNextPostprocessor", {"num_nodes": 2}),
        ),
        fetch_multiplier=4,
        annotate=True,
        description="7",
    )
    bare = spec_from_dict({"name": "b", "retriever": "dense"}, "w")
    assert (bare.parser, bare.postprocessors, bare.fetch_multiplier) == (None, (), 1)
    assert (bare.annotate, bare.description) == (False, "")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (["dense"], "w: a pipeline is a mapping or a registered name, got ['dense']"),
        ({"name": "a", "retriever": "dense", "zeta": 1, "alpha": 2},
         f"w: unknown key(s) ['alpha', 'zeta']; allowed {', '.join(SPEC_KEYS)}"),
        ({"name": " ", "retriever": "dense"}, "w: 'name' (a non-empty string) is required"),
        ({"name": 3, "retriever": "dense"}, "w: 'name' (a non-empty string) is required"),
        ({"name": "a"}, f"w (a): 'retriever' is required; one of {', '.join(RETRIEVERS)}"),
        ({"name": "a", "retriever": 3},
         f"w (a): retriever: expected a mapping with 'type' (one of {', '.join(RETRIEVERS)})"),
        ({"name": "a", "retriever": "sparse"},
         f"w (a): retriever: unknown type 'sparse'; allowed {', '.join(RETRIEVERS)}"),
        ({"name": "a", "retriever": "dense", "postprocessors": [3]},
         f"w (a): postprocessors[0]: expected a mapping with 'type' "
         f"(one of {', '.join(POSTPROCESSORS)})"),
        ({"name": "a", "retriever": "dense", "postprocessors": ["PrevNextPostprocessor", "X"]},
         f"w (a): postprocessors[1]: unknown type 'X'; allowed {', '.join(POSTPROCESSORS)}"),
        ({"name": "a", "retriever": "dense", "fetch_multiplier": True},
         "w (a): 'fetch_multiplier' must be an integer >= 1, got True"),
        ({"name": "a", "retriever": "dense", "fetch_multiplier": 1.5},
         "w (a): 'fetch_multiplier' must be an integer >= 1, got 1.5"),
        ({"name": "a", "retriever": "dense", "postprocessors": {}},
         "w (a): 'postprocessors' must be a list"),
    ],
)  # fmt: skip
def test_spec_errors(data: object, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_from_dict(data, "w")
    assert str(caught.value) == message


def test_fetch_multiplier_one_is_allowed() -> None:
    assert spec_from_dict({"name": "a", "retriever": "dense", "fetch_multiplier": 1}, "w")


# --- spec files ---------------------------------------------------------------------------------


def test_spec_files_build_through_compose(tmp_path: Path, own_registry) -> None:
    path = tmp_path / "stack.JSON"  # the suffix in any case
    path.write_text(
        json.dumps({"pipelines": ["baseline", {"name": "j", "retriever": "dense",
                                               "description": "J."}]}),
        encoding="utf-8",
    )  # fmt: skip
    baseline, mine = load_spec(str(path))
    assert baseline is get_pipeline("baseline")
    assert (mine.name, mine.description) == ("j", "J.")
    assert mine.build("context") == "pipeline of j"
    [(spec, context)] = own_registry
    assert (spec.name, context) == ("j", "context")
    listed = tmp_path / "list.yaml"
    listed.write_text("- baseline\n", encoding="utf-8")
    assert [p.name for p in load_spec(listed)] == ["baseline"]


def test_spec_file_errors_name_the_file(tmp_path: Path) -> None:
    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(bad_json)
    assert str(caught.value).startswith("bad.json: not valid JSON (Expecting property name")
    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("pipelines: [baseline\n  - x: {", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(bad_yaml)
    try:
        yaml.safe_load(bad_yaml.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        first = str(error).splitlines()[0]
    assert str(caught.value) == f"bad.yaml: not valid YAML ({first})"
    for text in ("pipelines: {}\n", "other: [baseline]\n", "3\n"):
        path = tmp_path / "shape.yaml"
        path.write_text(text, encoding="utf-8")
        with pytest.raises(SpecError) as caught:
            load_spec(path)
        assert str(caught.value) == "shape.yaml: expected a non-empty list under 'pipelines'"
    entry = tmp_path / "entry.yaml"
    entry.write_text("pipelines: [baseline, {name: a}]\n", encoding="utf-8")
    with pytest.raises(SpecError, match=r"^entry\.yaml: pipelines\[1\] \(a\): 'retriever'"):
        load_spec(entry)
    twice = tmp_path / "twice.yaml"
    twice.write_text(
        "pipelines: [baseline, hybrid, {name: hybrid, retriever: dense}, baseline]\n",
        encoding="utf-8",
    )
    with pytest.raises(SpecError) as caught:
        load_spec(twice)
    assert str(caught.value) == (
        "twice.yaml: pipeline name(s) ['baseline', 'hybrid'] occur more than once"
    )
    with pytest.raises(FileNotFoundError) as missing:
        load_spec(tmp_path / "gone.yaml")
    assert str(missing.value) == f"spec file {str(tmp_path / 'gone.yaml')!r} does not exist"


def test_a_yaml_error_without_text_is_named_by_its_type(tmp_path: Path, monkeypatch) -> None:
    def refuse(text: str) -> None:
        raise yaml.YAMLError()

    monkeypatch.setattr(yaml, "safe_load", refuse)
    path = tmp_path / "stack.yml"
    path.write_text("pipelines: [baseline]\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert str(caught.value) == "stack.yml: not valid YAML (YAMLError)"


def test_a_spec_file_is_read_as_utf8_whatever_the_locale(tmp_path: Path) -> None:
    path = tmp_path / "stack.yaml"
    path.write_text("pipelines: [{name: 泵, retriever: dense, description: 泵站}]\n",
                    encoding="utf-8")  # fmt: skip
    before = locale.setlocale(locale.LC_CTYPE)
    try:
        locale.setlocale(locale.LC_CTYPE, "C")  # the locale's encoding is ASCII
        [entry] = load_spec(path)
    finally:
        locale.setlocale(locale.LC_CTYPE, before)
    assert (entry.name, entry.description) == ("泵", "泵站")
