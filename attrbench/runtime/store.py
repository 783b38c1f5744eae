"""The results store of a run: one SQLite file in the run folder.

SQLite rather than parquet: a unit's result is one row committed in one transaction, so a run
killed at any moment (SIGKILL included) leaves only whole rows, and a resumed run appends without
rewriting anything; the file needs no server and ships with Python. Each row carries the sha256
of its payload, checked on every read, so a damaged file is reported, never silently dropped.
"""
from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Iterable, Optional

from ..errors import AttrbenchError
from ..ops.hashing import text_sha256

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS units (
    key TEXT PRIMARY KEY, model TEXT NOT NULL, dataset TEXT NOT NULL, eval TEXT NOT NULL,
    method TEXT NOT NULL, shard INTEGER NOT NULL, seconds REAL NOT NULL, created TEXT NOT NULL,
    payload TEXT NOT NULL, sha256 TEXT NOT NULL);
"""


class StoreError(AttrbenchError):
    """The store file is damaged or belongs to another configuration."""


class Store:
    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path)
        try:
            uri = f"file:{self.path.resolve()}?mode=ro" if readonly else str(self.path)
            self.db = sqlite3.connect(uri, timeout=30, isolation_level=None, uri=readonly)
            status = self.db.execute("PRAGMA quick_check").fetchone()[0]
            if status != "ok":
                raise sqlite3.DatabaseError(status)
            if not readonly:
                self.db.executescript(SCHEMA)
        except sqlite3.DatabaseError as err:
            raise StoreError(f"the results store {self.path} is corrupt ({err}); move it away and rerun to "
                             "recompute, nothing was read from it") from None

    # -- run metadata ------------------------------------------------------------------------
    def meta(self, key: str) -> Optional[object]:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, **values) -> None:
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                                [(k, json.dumps(v, default=str)) for k, v in values.items()])

    # -- units -------------------------------------------------------------------------------
    def done(self) -> set[str]:
        return {row[0] for row in self.db.execute("SELECT key FROM units")}

    def put(self, key: str, unit: dict, records: list[dict], seconds: float) -> None:
        """Store one unit's records atomically (a unit already stored is left as it is)."""
        payload = json.dumps(records, default=float, allow_nan=False)
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.execute("INSERT OR IGNORE INTO units VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                            (key, unit["model"], unit["dataset"], unit["eval"], unit["method"], unit["shard"],
                             seconds, time.strftime("%Y-%m-%d %H:%M:%S"), payload, text_sha256(payload)))

    def units(self) -> Iterable[dict]:
        """Every stored unit with its records; a row whose checksum fails raises."""
        for key, model, dataset, eval_, method, shard, seconds, payload, digest in self.db.execute(
                "SELECT key, model, dataset, eval, method, shard, seconds, payload, sha256 FROM units ORDER BY rowid"):
            if text_sha256(payload) != digest:
                raise StoreError(f"unit '{key}' in {self.path} fails its checksum (the file was damaged); "
                                 "delete that row or the file and rerun to recompute it")
            try:
                records = json.loads(payload)
            except json.JSONDecodeError:
                raise StoreError(f"unit '{key}' in {self.path} is not valid JSON; rerun to recompute it") from None
            yield {"key": key, "model": model, "dataset": dataset, "eval": eval_, "method": method, "shard": shard,
                   "seconds": seconds, "records": records}

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM units").fetchone()[0]

    def close(self) -> None:
        self.db.close()
