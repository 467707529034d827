"""The on-disk cache of generated answers and support judgements (JSON lines, append only).

Each entry is written and flushed as soon as it is computed, so an interrupted run loses at
most the call in flight and a re-run resumes where it stopped; re-scoring reads the answers
back instead of generating them again. A key is the SHA-256 of everything that decides the
value: the kind, the LLM's identity (class, model, server, temperature, output limit), the
prompt template, the pipeline's settings, the question and the context (or, for a support
judgement, the sentence and the context). A line that cannot be read (a write cut short) is
skipped with a warning naming it.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

CACHE_FILE = "answers.jsonl"
_IDENTITY_FIELDS = ("model", "model_name", "api_base", "temperature", "max_tokens")


def llm_identity(llm: Any) -> dict[str, Any]:
    """What makes two LLM objects give the same answers: class and generation settings.

    >>> from llama_index.core.llms import MockLLM
    >>> llm_identity(MockLLM(max_tokens=8))["class"], llm_identity(MockLLM(max_tokens=8))["max_tokens"]
    ('MockLLM', 8)
    """
    identity: dict[str, Any] = {"class": type(llm).__name__}
    for name in _IDENTITY_FIELDS:
        value = getattr(llm, name, None)
        if value is not None:
            identity[name] = value if isinstance(value, (int, float, str)) else str(value)
    if "model" not in identity and "model_name" not in identity:
        identity["model_name"] = str(getattr(llm.metadata, "model_name", ""))
    return identity


def cache_key(*parts: Any) -> str:
    """SHA-256 of the parts as canonical JSON.

    >>> cache_key("a", {"b": 1}) == cache_key("a", {"b": 1}) != cache_key("a", {"b": 2})
    True
    """
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class AnswerCache:
    """``get(key)`` / ``put(key, value)`` over ``folder/answers.jsonl``.

    Args:
        folder: created when missing.

    Example:
        >>> import tempfile
        >>> cache = AnswerCache(tempfile.mkdtemp())
        >>> cache.put("k", {"answer": "3.5 bar"})
        >>> AnswerCache(cache.path.parent).get("k")
        {'answer': '3.5 bar'}
    """

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / CACHE_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._entries: dict[str, Any] = {}
        self.hits = 0
        self.misses = 0
        self._cut_short = False  # the file ends inside a line: start the next one afresh
        if self.path.is_file():
            self._load()

    def _load(self) -> None:
        with self.path.open("rb") as raw:
            raw.seek(0, 2)
            if raw.tell():
                raw.seek(-1, 2)
                self._cut_short = raw.read(1) != b"\n"
        with self.path.open(encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    entry = json.loads(line)
                    self._entries[entry["key"]] = entry["value"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    logger.warning(
                        "answer cache %s line %d is unreadable (a write cut short?): skipped",
                        self.path.name,
                        number,
                    )

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> Any:
        """The cached value, or ``None``."""
        value = self._entries.get(key)
        if value is None:
            self.misses += 1
        else:
            self.hits += 1
        return value

    def put(self, key: str, value: Any) -> None:
        """Store ``value`` (JSON-serialisable) and append it to the file at once."""
        self._entries[key] = value
        line = json.dumps({"key": key, "value": value}, ensure_ascii=False)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(("\n" if self._cut_short else "") + line + "\n")
            self._cut_short = False
            handle.flush()


__all__ = ["AnswerCache", "CACHE_FILE", "cache_key", "llm_identity"]
