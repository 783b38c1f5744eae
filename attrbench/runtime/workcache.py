"""Shared work of a run, kept by content so that nothing is computed twice: across methods and metrics, resumes,
Ray workers and later runs in the same folder.

Two kinds of item, each addressed by everything it depends on:

- **model outputs on perturbed inputs**: the scored probability of a token sequence read at a row,
  keyed by the model's weights hash, dtype, readout (target index, contrast), row and token ids;
- **attributions**: a method's scores for an example, keyed by the weights hash, dtype, method with
  its parameters, text and target, with the cost of computing them (seconds, peak memory).

One SQLite file (``work.sqlite`` beside the run's store; ``None``: in memory only), in WAL mode so
several processes (Ray workers) read and write it at once; two workers that miss the same row at the same moment
(an input that examples in two shards share, such as the fully erased one) both compute it, and the second store
is a no-op. Every row carries a checksum that is
checked when read: a damaged row is dropped with a one-line warning and recomputed, never used; a
damaged file is moved aside and started afresh.
"""
from __future__ import annotations

import hashlib
import json
import sqlite3
import struct
import sys
import threading
from pathlib import Path
from typing import Iterable, Optional

SCHEMA = """
CREATE TABLE IF NOT EXISTS forward (key BLOB PRIMARY KEY, value REAL NOT NULL, check_ INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS attributions (key TEXT PRIMARY KEY, payload TEXT NOT NULL, sha256 TEXT NOT NULL);
"""


def _check(key: bytes, value: float) -> int:
    return int.from_bytes(hashlib.blake2b(key + struct.pack("<d", value), digest_size=7).digest(), "little")


def warn(message: str) -> None:
    print(f"attrbench: warning: {message}", file=sys.stderr)


class WorkCache:
    """Forward outputs and attributions by content (see the module docstring); thread-safe within a process."""

    def __init__(self, path: Optional[str | Path] = None):
        self.path = Path(path) if path else None
        self._lock = threading.Lock()
        self._forward: dict[bytes, float] = {}
        self.db = self._open()

    def _open(self) -> Optional[sqlite3.Connection]:
        if self.path is None:
            return None
        try:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
            if db.execute("PRAGMA quick_check").fetchone()[0] != "ok":
                raise sqlite3.DatabaseError("integrity check failed")
        except sqlite3.DatabaseError as err:
            aside = self.path.with_name(self.path.name + ".damaged")
            self.path.replace(aside)
            warn(f"the shared-work cache {self.path} is damaged ({err}); moved to {aside.name}, starting afresh")
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None, check_same_thread=False)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        return db

    # -- forward outputs -----------------------------------------------------------------------------
    def forward_get(self, keys: Iterable[bytes]) -> dict[bytes, float]:
        keys = list(keys)
        found = {k: self._forward[k] for k in keys if k in self._forward}
        rest = [k for k in keys if k not in found]
        if self.db is None or not rest:
            return found
        damaged = []
        with self._lock:
            for start in range(0, len(rest), 500):
                chunk = rest[start:start + 500]
                query = f"SELECT key, value, check_ FROM forward WHERE key IN ({','.join('?' * len(chunk))})"
                for key, value, check in self.db.execute(query, chunk):
                    if _check(key, value) == check:
                        found[key] = self._forward[key] = value
                    else:
                        damaged.append(key)
            if damaged:
                self.db.executemany("DELETE FROM forward WHERE key = ?", [(k,) for k in damaged])
        if damaged:
            warn(f"{len(damaged)} cached model outputs in {self.path} failed their checksum; recomputing them")
        return found

    def forward_put(self, items: dict[bytes, float]) -> None:
        self._forward.update(items)
        if self.db is None or not items:
            return
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("INSERT OR IGNORE INTO forward VALUES (?, ?, ?)",
                                [(k, v, _check(k, v)) for k, v in items.items()])
            self.db.execute("COMMIT")

    # -- attributions ------------------------------------------------------------------------------
    def attribution_get(self, key: str) -> Optional[dict]:
        if self.db is None:
            return None
        with self._lock:
            row = self.db.execute("SELECT payload, sha256 FROM attributions WHERE key = ?", (key,)).fetchone()
            if row is None:
                return None
            if hashlib.sha256(row[0].encode()).hexdigest() != row[1]:
                self.db.execute("DELETE FROM attributions WHERE key = ?", (key,))
                warn(f"a cached attribution in {self.path} failed its checksum; recomputing it")
                return None
        return json.loads(row[0])

    def attribution_put(self, key: str, payload: dict) -> None:
        if self.db is None:
            return
        text = json.dumps(payload, allow_nan=False)
        with self._lock:
            self.db.execute("INSERT OR REPLACE INTO attributions VALUES (?, ?, ?)",
                            (key, text, hashlib.sha256(text.encode()).hexdigest()))

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
