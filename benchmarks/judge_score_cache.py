"""Benchmark-only: a judge whose raw model values are cached on disk, calibrated on read.

Re-running a benchmark with other thresholds or rules reads the raw values (a cross-encoder
logit, a cosine) from SQLite instead of scoring again; the calibration and thresholds are
applied on top, exactly as the library's judges do (``calibration(raw)``).
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr

from llama_index_ext_advrag.judges import BaseRelevanceJudge, Grade, ScoreCalibration


class RawScoreCache:
    """``(judge tag, query, text) -> raw value or None (unknown, with its reason)``."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        # CRAG grades in a worker thread (its timeouts): one connection, used under a lock
        self.db = sqlite3.connect(str(folder / "judge_raw.sqlite"), check_same_thread=False)
        self.lock = threading.Lock()
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS raw (key TEXT PRIMARY KEY, value REAL, reason TEXT)"
        )

    @staticmethod
    def key(tag: str, query: str, text: str) -> str:
        return hashlib.sha1(f"{tag}\0{query}\0{text}".encode()).hexdigest()

    def get(self, keys: list[str]) -> dict[str, tuple[float | None, str | None]]:
        found: dict[str, tuple[float | None, str | None]] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            with self.lock:
                rows = self.db.execute(
                    f"SELECT key, value, reason FROM raw WHERE key IN ({marks})", chunk
                ).fetchall()
            found.update({k: (v, r) for k, v, r in rows})
        return found

    def put(self, rows: list[tuple[str, float | None, str | None]]) -> None:
        with self.lock:
            self.db.executemany("INSERT OR REPLACE INTO raw VALUES (?, ?, ?)", rows)
            self.db.commit()


class CachedRawJudge(BaseRelevanceJudge):
    """Grades ``calibration(raw)`` where ``raw`` comes from the cache or from ``inner``
    (an uncalibrated judge whose ``Grade.raw`` is the model value)."""

    _inner: BaseRelevanceJudge = PrivateAttr()
    _cache: RawScoreCache = PrivateAttr()
    _tag: str = PrivateAttr()
    _calibration: ScoreCalibration = PrivateAttr()
    _scored: int = PrivateAttr(default=0)

    def __init__(
        self,
        inner: BaseRelevanceJudge,
        cache: RawScoreCache,
        tag: str,
        calibration: ScoreCalibration,
        **data: Any,
    ) -> None:
        data.setdefault("name", inner.name)
        super().__init__(**data)
        self._inner, self._cache, self._tag, self._calibration = inner, cache, tag, calibration

    @property
    def scored(self) -> int:
        """Pairs the model scored (not found in the cache)."""
        return self._scored

    def raw_values(self, query: str, texts: list[str]) -> list[tuple[float | None, str | None]]:
        keys = [RawScoreCache.key(self._tag, query, t) for t in texts]
        found = self._cache.get(keys)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        if missing:
            grades = self._inner.judge(query, missing)
            rows = [
                (RawScoreCache.key(self._tag, query, t), g.raw, None if g.known else g.reason)
                for t, g in zip(missing, grades, strict=True)
            ]
            self._cache.put(rows)
            self._scored += len(rows)
            found.update({k: (v, r) for k, v, r in rows})
        return [found[k] for k in keys]

    def _judge(self, query: str, texts: list[str]) -> list[Grade]:
        grades = []
        for raw, reason in self.raw_values(query, texts):
            if raw is None:
                grades.append(Grade.unknown(self.name, reason or "unknown"))
            else:
                grades.append(self.grade(self._calibration(raw), raw=raw))
        return grades
