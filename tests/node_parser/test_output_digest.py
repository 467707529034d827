"""Parser output pinned by digest: speed work must not change a single id, text, metadata value or
relationship (unit tier: no network).

Each configuration parses the sample documents in ``data/`` and a synthetic English + Chinese
text; every node is serialised with ``to_dict`` (ids, texts, offsets, metadata, excluded keys,
relationships with their hashes), plus the fields it was built with and whether a relationship
shares its metadata dict with the node. The digests were computed on the code before the
throughput work (commit 295de5e) and must not move; a deliberate output change must update them
and say so in its commit message.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from advrag_testing import HashEmbedding
from llama_index.core import Document
from llama_index.core.schema import BaseNode, RelatedNodeInfo

from llama_index_ext_advrag.node_parser import (
    AdaptiveSlidingWindowNodeParser,
    HierarchicalSentenceNodeParser,
)

DATA_DIR = Path(__file__).resolve().parents[2] / "data"

SYNTHETIC = "\n".join(
    [
        "# Overview",
        "",
        "The Ferrobox syncs files between sites. It was released in 2021, i.e. after the FX-20. "
        "Dr. Smith et al. reported a 3.5 GB/s peak. What was the main finding? "
        "The peak held for 10 minutes. Table 3.",
        "",
        "A very long sentence follows that keeps going with many clauses, "
        + ", ".join(f"clause number {i} about replication and checksums" for i in range(60))
        + ", and finally ends here.",
        "",
        "## 安装",
        "",
        "黑神话悟空是一款动作游戏。它由游戏科学开发！游戏于2024年发售？首月销量超过两千万份。"
        "玩家扮演天命人，踏上西行之路。",
        "",
        "Q: How long does a full sync take? About two hours on a 1 Gb/s link.",
        "",
        "- First item of a list.",
        "- Second item, with a continuation",
        "  that wraps onto the next line.",
        "",
        "## Mixed 混合",
        "",
        "The team met in 北京 on 3 May. 会议讨论了 FX-40 的固件 v2.3.1。 Short. Yes. No. "
        "Then it rained. 然后下雨了。",
        "",
        "Last paragraph without a heading change. It has three sentences. Done.",
    ]
)


def _documents() -> list[Document]:
    documents = [
        Document(
            text=(DATA_DIR / name).read_text(encoding="utf-8"),
            id_=name,
            metadata={"file_name": name, "lang": lang},
            excluded_embed_metadata_keys=["file_name"],
        )
        for name, lang in (
            ("en_manual.md", "en"),
            ("en_policy.md", "en"),
            ("zh_narrative.md", "zh"),
        )
    ]
    documents.append(Document(text=SYNTHETIC, id_="synthetic", metadata={"kind": "synthetic"}))
    documents.append(Document(text="Only one sentence here.", id_="single"))
    documents.append(Document(text="  \n\n ", id_="blank"))
    return documents


def _infos(node: BaseNode) -> list[tuple[str, RelatedNodeInfo]]:
    pairs: list[tuple[str, RelatedNodeInfo]] = []
    for key, value in node.relationships.items():
        pairs += [(key.name, info) for info in (value if isinstance(value, list) else [value])]
    return pairs


def _node_record(node: BaseNode) -> dict[str, Any]:
    data = node.to_dict()
    data["_fields_set"] = sorted(node.model_fields_set)
    data["_relationships_built_with"] = [
        (key, sorted(info.model_fields_set), info.metadata is node.metadata)
        for key, info in _infos(node)
    ]
    data["_type"] = type(node).__name__
    return data


def _digest(nodes: list[BaseNode]) -> str:
    digest = hashlib.sha256()
    for node in nodes:
        line = json.dumps(_node_record(node), sort_keys=True, ensure_ascii=False, default=repr)
        digest.update(line.encode("utf-8") + b"\n")
    return digest.hexdigest()


def _custom_id(index: int, document: BaseNode) -> str:
    return f"{document.node_id}-{index}"


ADAPTIVE_SENTENCE = {"mode": "adaptive", "embed_unit": "sentence", "breakpoint_percentile": None}
CONFIGS: dict[str, dict[str, Any]] = {
    "fixed_window": {},
    "fixed_window_5_2": {"window_size": 5, "stride": 2},
    "fixed_sentence": {"embed_unit": "sentence"},
    "fixed_sentence_min_embed": {
        "embed_unit": "sentence",
        "window_size": 5,
        "min_embed_tokens": 12,
    },
    "adaptive_window": {"mode": "adaptive", "breakpoint_percentile": None},
    "adaptive_window_capped": {
        "mode": "adaptive",
        "breakpoint_percentile": None,
        "max_window_tokens": 90,
        "stride_ratio": 0.3,
        "max_window_sentences": 4,
        "split_at_paragraphs": True,
    },
    "adaptive_window_breakpoints": {
        "mode": "adaptive",
        "breakpoint_signal": "embedding",
        "embed_model": "hash",
    },
    # The per-document signal: embeddings for the Chinese document, words for the English ones
    # (at the 80th percentile the three signals give three different outputs). The presets'
    # default (lexical) is pinned by preset_*, the embedding signal by preset_*_embedding.
    "adaptive_window_auto_p80": {
        "mode": "adaptive",
        "breakpoint_signal": "auto",
        "breakpoint_percentile": 80.0,
        "embed_model": "hash",
    },
    "adaptive_sentence": ADAPTIVE_SENTENCE,
    "adaptive_sentence_benchmarked": {
        **ADAPTIVE_SENTENCE,
        "max_window_tokens": 280,
        "forward_ratio": 0.75,
        "min_embed_tokens": 16,
        "split_at_paragraphs": True,
    },
    "adaptive_sentence_forward_0": {**ADAPTIVE_SENTENCE, "forward_ratio": 0.0},
    "adaptive_sentence_forward_1": {
        **ADAPTIVE_SENTENCE,
        "forward_ratio": 1.0,
        "max_window_tokens": 60,
    },
    "adaptive_sentence_capped": {
        **ADAPTIVE_SENTENCE,
        "max_window_sentences": 3,
        "forward_ratio": 0.3,
        "keep_questions_with_answers": True,
    },
    "adaptive_sentence_breakpoints": {
        "mode": "adaptive",
        "embed_unit": "sentence",
        "breakpoint_signal": "embedding",
        "breakpoint_threshold": 0.2,
        "breakpoint_buffer": 2,
        "embed_model": "hash",
    },
    "adaptive_sentence_plain": {
        **ADAPTIVE_SENTENCE,
        "include_metadata": False,
        "include_prev_next_rel": False,
        "window_metadata_key": "ctx",
        "original_text_metadata_key": "sentence",
    },
    "adaptive_sentence_custom_ids": {**ADAPTIVE_SENTENCE, "id_func": _custom_id},
    "preset_general": {"preset": "general", "embed_model": "hash"},
    "preset_general_embedding": {
        "preset": "general",
        "breakpoint_signal": "embedding",
        "embed_model": "hash",
    },
    # the general preset before its window size was re-fitted to bge-small (256 -> 128 tokens)
    "preset_general_256": {"preset": "general", "max_window_tokens": 256, "embed_model": "hash"},
    "preset_general_256_embedding": {
        "preset": "general",
        "max_window_tokens": 256,
        "breakpoint_signal": "embedding",
        "embed_model": "hash",
    },
    "preset_technical": {"preset": "technical", "embed_model": "hash"},
    "preset_technical_embedding": {
        "preset": "technical",
        "breakpoint_signal": "embedding",
        "embed_model": "hash",
    },
    "preset_legal": {"preset": "legal", "embed_model": "hash"},
    "preset_legal_embedding": {
        "preset": "legal",
        "breakpoint_signal": "embedding",
        "embed_model": "hash",
    },
    "preset_qa": {"preset": "qa", "embed_model": "hash"},
    "preset_qa_embedding": {
        "preset": "qa",
        "breakpoint_signal": "embedding",
        "embed_model": "hash",
    },
}

EXPECTED: dict[str, str] = {
    "fixed_window": "a17d49ea717895e693466afa5efd82248e2b311f5daef8b7f2c0725ca239bfe0",
    "fixed_window_5_2": "ac9c12f3dc717502d5bf3df4e7dcf2233907bfb29755286713ba5a4fd7671441",
    "fixed_sentence": "871c8bf29798ad899b2a8e53319cbec5d4d30a6855d246fc5ae9ed5794635a2a",
    "fixed_sentence_min_embed": "54e00265d952559f92e9358aaa5e7183cf69ea98a326b565dc4b71967dd67421",
    "adaptive_window": "7860dd2ddca0407be7cedbe8cde9c6b042492be877df78e7b01ea89149afbcae",
    "adaptive_window_capped": "c3ead554f119e5ecea3a7ac474fe7433ccbf99c37f9dd71a3f4ffd2e5a3a4ae0",
    "adaptive_window_breakpoints": "48b142bd7d67cd4026f2fc41bbb051bc84af8926e0f728c64ea2cab1dfe56d4a",
    "adaptive_window_auto_p80": "a762e67194846dcabb72a8f7bd5f53b1063234696335b1f606a73366927a0c1b",
    "adaptive_sentence": "adfd01711a16cb121378c5a6024519ffec39ae8568a2f08ed461cca64f207b85",
    "adaptive_sentence_benchmarked": "894e42908ba1fffba11c67a07929d4b321ef95576eef04f5ff684d290fee11ff",
    "adaptive_sentence_forward_0": "2216b7e878ef8b2efe8247c1be4353ba72486f365d6b3b20a9f9df7905dc94be",
    "adaptive_sentence_forward_1": "28885e8ede254652a10b734125cb2d5331b611d5b85470ebb997e4739821e3e0",
    "adaptive_sentence_capped": "e872a08393a92e9e7b6ea6d951f8818a8a796f67b657e18b2792cb3e8c9e2ed8",
    "adaptive_sentence_breakpoints": "775c1739920166e2f06f2c4ce702b7408098b7045354435dbe2dc3b52e2f28b1",
    "adaptive_sentence_plain": "9da575ed1a2b319a04bc6e337f985f6487b29e2c19bc66a01feaf0bd835f952d",
    "adaptive_sentence_custom_ids": "13c37b025656ec5d21961a7a03a2f0f15e82784f8140e0e5ec05941d6372c894",
    "preset_general": "812c192aed079da2d1b3e57ccf5d6b8447c7b8a54d69aa6d783bd4544c35beac",
    "preset_general_embedding": "d29e0bf143e332cd277d23aaa02b7cb5eab05f15e55c06d8ddd606dacc846d4a",
    "preset_general_256": "1a0b0544e8314e2a27ca956c27a69c1faa40766b26dda385f906b1d20c74edc4",
    "preset_general_256_embedding": "48b142bd7d67cd4026f2fc41bbb051bc84af8926e0f728c64ea2cab1dfe56d4a",
    "preset_technical": "d92fe1e27bbf05758810fe2607b051b427de886feecb51331c8bed12aabff38c",
    "preset_technical_embedding": "bfb09b2a0a5797582fc504c6496d920c103828b0bea2fe1da4c79b48537ce248",
    "preset_legal": "4cf39c3d9c3fd4d2693a5a604ec38e130953f0957827b21e862d0c7253ee7a23",
    "preset_legal_embedding": "0946f393abab7efa941fc28cf7f1fee174bd928eb7643d5506ddf94fa100fc6f",
    "preset_qa": "3305a97cc919f49254b6c49f31ef29ac8ef6ceeff24fb17633b7b48450d10602",
    "preset_qa_embedding": "94a4f0ac0295e82ebe09d58a909af44fa61a3291196fdbfb6af50b60b9179bd7",
    "hierarchical": "45365e1e9dae14f4c5068edec60513f27002e125454825b9a1c1acbe303d4637",
}


def _parse(config: str) -> list[BaseNode]:
    if config == "hierarchical":
        parser: Any = HierarchicalSentenceNodeParser(chunk_sizes=[512, 128, 32])
    else:
        kwargs = dict(CONFIGS[config])
        if kwargs.get("embed_model") == "hash":
            kwargs["embed_model"] = HashEmbedding()
        parser = AdaptiveSlidingWindowNodeParser(**kwargs)
    return parser.get_nodes_from_documents(_documents())


@pytest.mark.parametrize("config", [*CONFIGS, "hierarchical"])
def test_output_matches_pinned_digest(config: str) -> None:
    nodes = _parse(config)
    assert nodes, config
    assert _digest(nodes) == EXPECTED[config]


def test_digest_sees_a_changed_metadata_value() -> None:
    nodes = _parse("adaptive_sentence")
    before = _digest(nodes)
    nodes[5].metadata["section_title"] = "changed"
    assert _digest(nodes) != before
