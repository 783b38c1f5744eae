"""The results store of a run: one SQLite file in the run folder, one row per result.

A row is one evaluation's payload for one example: a method's score on it (e.g. its AOPCs), what
every method of the example shares (e.g. NAOPC's bounds; method ``-``), or an analysis of the model
on a whole sample (example ``sample:<hash>``). Its key names everything the payload depends on (the
model's weights hash, dtype, dataset and split, the evaluation and the method with their parameters,
the example's id, text and target), so adding a method, changing a parameter or raising n leaves
every stored row valid and computes only rows that are missing; a config may change between runs in
one folder, and the leaderboard is read from the rows the current config asks for.

SQLite rather than parquet: a shard's rows are committed in one transaction, so a run killed at any
moment (SIGKILL included) leaves only whole shards, and a resumed run appends without rewriting; the
file needs no server and ships with Python. Each row carries the sha256 of its payload, checked on
every read, so a damaged file is reported, never silently dropped. A published run may carry its rows as
``results.parquet`` instead (:func:`export_compact`, a fraction of the size for the repository); reading it
rebuilds the SQLite store once in the cache (:func:`run_store`).
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import zlib
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

try:
    import fcntl  # POSIX advisory locks; released by the OS when the holder dies, so a lock is never stale
except ImportError:  # Windows
    fcntl = None

from ..errors import AttrbenchError
from ..ops.hashing import text_sha256

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS results (
    key TEXT PRIMARY KEY, suite TEXT NOT NULL, eval TEXT NOT NULL, method TEXT NOT NULL, example TEXT NOT NULL,
    payload TEXT NOT NULL, sha256 TEXT NOT NULL, created TEXT NOT NULL);
"""
FORMAT = 2  # the row store; format 1 (one row per unit of many examples) is not read
SHARED = "-"  # the method of a row every method of an example shares


def row_key(weights: str, dtype: str, dataset: str, split: Optional[str], eval_key: str, method_key: str,
            example_id: str, tag: str = "") -> str:
    """The key of one result row: everything its payload depends on."""
    return text_sha256("|".join([weights, dtype, dataset, str(split), eval_key, method_key, example_id, tag]))


def dump_payload(payload: object) -> str:
    """A payload's stored text (its checksum is of this text; a compact file's rows are rebuilt to it)."""
    return json.dumps(payload, default=float, allow_nan=False)


class StoreError(AttrbenchError):
    """The store file is damaged, of another format, or holds results of other weights."""


class Store:
    def __init__(self, path: str | Path, readonly: bool = False):
        self.path = Path(path) if str(path) != ":memory:" else None
        self._held: Optional[dict[str, tuple[str, str]]] = None  # every row, once :meth:`hold` has read them
        try:
            if self.path is None:
                self.db = sqlite3.connect(":memory:", isolation_level=None)
            else:
                uri = f"file:{self.path.resolve()}?mode=ro" if readonly else str(self.path)
                self.db = sqlite3.connect(uri, timeout=30, isolation_level=None, uri=readonly)
            status = self.db.execute("PRAGMA quick_check").fetchone()[0]
            if status != "ok":
                raise sqlite3.DatabaseError(status)
            tables = {row[0] for row in self.db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            if "units" in tables:
                raise StoreError(f"{self.path} was written by an older attrbench (one row per unit of examples); "
                                 "rerun the config into a new folder (--out) to recompute it")
            if not readonly:
                self.db.executescript(SCHEMA)
                if self.meta("format") is None:
                    self.set_meta(format=FORMAT)
        except sqlite3.DatabaseError as err:
            raise StoreError(f"the results store {self.path} is corrupt ({err}); move it away and rerun to "
                             "recompute, nothing was read from it") from None

    # -- run metadata ------------------------------------------------------------------------
    def meta(self, key: str) -> Optional[object]:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def set_meta(self, **values) -> None:
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self._write_meta(values)

    def _write_meta(self, values: dict) -> None:
        self.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                            [(k, json.dumps(v, default=str)) for k, v in values.items()])

    # -- rows --------------------------------------------------------------------------------
    def done(self, keys: Iterable[str]) -> set[str]:
        """Those of ``keys`` that are stored (looked up in key order: neighbouring lookups share the index's pages,
        twice as fast as in the caller's order on a published run's half a million rows)."""
        keys, found = sorted(set(keys)), set()
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            found.update(row[0] for row in self.db.execute(
                f"SELECT key FROM results WHERE key IN ({','.join('?' * len(chunk))})", chunk))
        return found

    def examples(self, suite: str) -> set[str]:
        """The ids of the examples a suite has rows for (the sample of an analysis excluded)."""
        return {row[0] for row in self.db.execute(
            "SELECT DISTINCT example FROM results WHERE suite = ? AND example != 'sample'", (suite,))}

    def cells(self, suite: str) -> set[tuple[str, str]]:
        """The (evaluation key, example id) pairs a suite has rows for (the sample of an analysis excluded)."""
        return set(self.db.execute(
            "SELECT DISTINCT eval, example FROM results WHERE suite = ? AND example != 'sample'", (suite,)))

    def put(self, rows: list[dict], meta: Optional[dict] = None) -> None:
        """Store rows (``key, suite, eval, method, example, payload``) in one transaction: all or none,
        with ``meta`` values where given (a run's running totals). A row already stored is left as it is."""
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        values = []
        for row in rows:
            payload = dump_payload(row["payload"])
            values.append((row["key"], row["suite"], row["eval"], row["method"], row["example"], payload,
                           text_sha256(payload), stamp))
        with self.db:
            self.db.execute("BEGIN IMMEDIATE")
            self.db.executemany("INSERT OR IGNORE INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)
            self._write_meta(meta or {})

    def hold(self) -> None:
        """Read every row in one scan of the table and answer :meth:`get` from memory until :meth:`close`: a report
        reads nearly every row, and one scan is several times faster than looking up half a million keys (a
        published run's 500 k rows hold about 110 MB of text)."""
        self._held = {key: (payload, digest) for key, payload, digest in
                      self.db.execute("SELECT key, payload, sha256 FROM results")}

    def get(self, keys: Iterable[str]) -> dict[str, object]:
        """The payloads of those of ``keys`` that are stored; a row whose checksum fails raises."""
        keys, out = list(keys), {}
        held = self._held
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            if held is not None:
                found = [(key, *held[key]) for key in chunk if key in held]
            else:
                marks = ",".join("?" * len(chunk))
                query = f"SELECT key, payload, sha256 FROM results WHERE key IN ({marks})"
                found = self.db.execute(query, chunk).fetchall()
            for key, payload, digest in found:
                if text_sha256(payload) != digest:
                    raise StoreError(f"result '{key}' in {self.path} fails its checksum (the file was damaged); "
                                     "delete that row or the file and rerun to recompute it")
            # one parse of the chunk's payloads as a JSON array: a report reads half a million of them
            parsed = json.loads("[" + ",".join(p for _, p, _ in found) + "]")
            if len(parsed) != len(found):  # a payload that is not one JSON value: parsed alone, so that it fails alone
                parsed = [json.loads(payload) for _, payload, _ in found]
            out.update(zip((key for key, _, _ in found), parsed))
        return out

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]

    def close(self) -> None:
        self._held = None
        self.db.close()


# -- a published run's rows, compact ---------------------------------------------------------------
COMPACT = "results.parquet"  # a published run folder's rows in place of store.sqlite (tools/publish_run.py)
_COLUMNS = ("key", "suite", "eval", "method", "example", "payload", "created")
COMPACT_FORMAT = 2  # 1: every key and payload as text; 2: keys the plan gives left out, typed payload columns
_TYPED = "payload_"  # columns of payloads stored as typed values, one per evaluation and payload shape


def _planned_key(meta: dict) -> Callable[[str, str, str, str], Optional[str]]:
    """The key of a row of the run's plan, recomputed from its suite, evaluation, method and example (None for
    a row the plan does not name): a compact file leaves out the keys it can recompute, a third of its size."""
    suites = {suite["name"]: suite for suite in json.loads(meta.get("plan") or "[]")}
    tags = {name: {example: tag for example, tag in suite["examples"]} for name, suite in suites.items()}

    def key(suite: str, eval_key: str, method_key: str, example: str) -> Optional[str]:
        tag = tags.get(suite, {}).get(example)
        if tag is None:
            return None
        plan = suites[suite]
        return row_key(plan["weights"], plan["dtype"], plan["dataset"], plan["split"], eval_key, method_key,
                       example, tag)
    return key


def _shape(value: object) -> object:
    """What a payload's typed column depends on: its dict keys in order and each leaf's type."""
    if isinstance(value, dict):
        return tuple((k, _shape(v)) for k, v in value.items())
    return "list" if isinstance(value, list) else type(value).__name__


def _writable(kind) -> bool:
    """Whether parquet can hold a column of this arrow type: no struct without fields at any depth (an empty
    dict, such as an analysis record's ``eval_params``, inside a list or a dict)."""
    import pyarrow as pa  # heavy: only when publishing compactly

    if pa.types.is_struct(kind):
        return kind.num_fields > 0 and all(_writable(field.type) for field in kind)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return _writable(kind.value_type)
    return True


def _typed_columns(evals: list[str], payloads: list[str]) -> tuple[list[Optional[str]], dict[str, object]]:
    """Payloads as typed columns where that is lossless (each group of rows with one evaluation and payload shape
    is converted and converted back, and kept typed only if every row's text comes back identical); the rest
    as text. Typed floats compress to about a third of their decimal text."""
    import pyarrow as pa  # heavy: only when publishing compactly

    groups: dict[tuple, list[int]] = {}
    values = [json.loads(text) for text in payloads]
    for i, value in enumerate(values):
        shape = _shape(value)
        if isinstance(shape, tuple):  # a dict
            groups.setdefault((evals[i], shape), []).append(i)
    text, columns = list(payloads), {}
    for rows in groups.values():
        try:
            column = pa.array([values[i] for i in rows])
            back = column.to_pylist()
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            continue
        if not _writable(column.type):
            continue
        if all(dump_payload(b) == payloads[i] for b, i in zip(back, rows)):
            spread = [None] * len(payloads)
            for i, value in zip(rows, back):
                spread[i], text[i] = value, None
            columns[f"{_TYPED}{len(columns)}"] = pa.array(spread, type=column.type)
    return text, columns


def export_compact(store: Store, path: str | Path) -> int:
    """Write the store's rows and metadata to one parquet file (zstd, page checksums) that rebuilds the store
    row for row: keys the run's plan gives are left out and recomputed, payloads are typed columns where that
    is lossless, rows sorted so that like rows sit together. About a twentieth of the SQLite file. Returns the
    number of rows."""
    import pyarrow as pa  # heavy: only when publishing compactly
    import pyarrow.parquet as pq  # heavy: as above

    rows = store.db.execute(f"SELECT {', '.join(_COLUMNS)} FROM results ORDER BY suite, eval, method, example, "
                            "key").fetchall()
    meta = dict(store.db.execute("SELECT key, value FROM meta").fetchall())
    planned = _planned_key(meta)
    columns = {name: [row[i] for row in rows] for i, name in enumerate(_COLUMNS)}
    columns["key"] = [None if planned(*row[1:5]) == row[0] else row[0] for row in rows]
    columns["payload"], typed = _typed_columns(columns["eval"], columns["payload"])
    table = pa.table({**{name: pa.array(columns[name], pa.string()) for name in _COLUMNS}, **typed})
    # zlib: the plan lists every sampled example
    header = json.dumps({"format": COMPACT_FORMAT, "meta": meta, "rows": len(rows)}).encode()
    partial = Path(path).with_suffix(".partial")
    # no ARROW:schema: it would hold the header a second time (base64) and the parquet types say it all
    with pq.ParquetWriter(partial, table.schema, compression="zstd", compression_level=19, store_schema=False,
                          write_page_checksum=True,
                          use_dictionary=["suite", "eval", "method", "example", "created"]) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata({"attrbench": zlib.compress(header, 9)})  # pyarrow 17; read as schema metadata
    partial.replace(path)
    return len(rows)


def _compact_rows(table, header: dict) -> list[tuple]:
    """The store's rows from a compact file's table: left-out keys recomputed, typed payloads back to text."""
    import pyarrow.compute as pc  # heavy: only for a compact published folder

    names = table.column_names
    if tuple(names[:len(_COLUMNS)]) != _COLUMNS or not all(n.startswith(_TYPED) for n in names[len(_COLUMNS):]):
        raise ValueError(f"columns {names[:9]}")
    keys, payloads = table.column("key").to_pylist(), table.column("payload").to_pylist()
    for name in names[len(_COLUMNS):]:
        column = table.column(name)
        at = pc.indices_nonzero(column.is_valid())
        for i, value in zip(at, column.take(at).to_pylist()):
            payloads[i] = dump_payload(value)
    planned = _planned_key(header["meta"])
    suites, evals, methods, examples, created = (table.column(n).to_pylist() for n in _COLUMNS[1:5] + ("created",))
    out = []
    for i, (key, payload) in enumerate(zip(keys, payloads)):
        key = key or planned(suites[i], evals[i], methods[i], examples[i])
        if key is None or payload is None:
            raise ValueError(f"row {i} has no {'key' if key is None else 'payload'}")
        out.append((key, suites[i], evals[i], methods[i], examples[i], payload, text_sha256(payload), created[i]))
    return out


def run_store(run_dir: str | Path, cache: Path) -> Optional[Path]:
    """The SQLite store of a run folder: its store.sqlite, or, for a compact published folder, its
    results.parquet rebuilt once into ``cache`` (named by the file's content, so an edited file is rebuilt;
    each row's sha256 recomputed, the file's page checksums verified). None if the folder has neither."""
    run_dir = Path(run_dir)
    if (run_dir / "store.sqlite").is_file():
        return run_dir / "store.sqlite"
    source = run_dir / COMPACT
    if not source.is_file():
        return None
    import pyarrow.parquet as pq  # heavy: only for a compact published folder

    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:16]
    target = cache / "published" / f"{digest}.sqlite"
    if target.is_file():
        return target
    try:
        table = pq.read_table(source, page_checksum_verification=True)
        header = json.loads(zlib.decompress((table.schema.metadata or {})[b"attrbench"]))
        if header.get("format", 1) > COMPACT_FORMAT:
            raise StoreError(f"{source} is of compact format {header['format']}, newer than this attrbench reads "
                             f"({COMPACT_FORMAT}); read it with a newer attrbench")
        if table.num_rows != header["rows"]:
            raise ValueError(f"{table.num_rows} rows of {header['rows']}")
        values = _compact_rows(table, header)
    except (OSError, ValueError, KeyError, TypeError, zlib.error) as err:
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise StoreError(f"{source} is damaged ({first[:100]}); restore it (git checkout) or rerun the "
                         "config to recompute it") from None
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{digest}.{os.getpid()}.partial")
    partial.unlink(missing_ok=True)
    store = Store(partial)
    try:
        with store.db:
            store.db.execute("BEGIN IMMEDIATE")
            store.db.executemany("INSERT INTO results VALUES (?, ?, ?, ?, ?, ?, ?, ?)", values)
            store.db.executemany("INSERT OR REPLACE INTO meta VALUES (?, ?)", list(header["meta"].items()))
        store.db.execute("PRAGMA journal_mode=DELETE")
    finally:
        store.close()
    partial.replace(target)
    return target


def is_run_folder(run_dir: str | Path) -> bool:
    """Whether runs wrote this folder (it has their lock file), as opposed to a published copy of one."""
    return (Path(run_dir) / ".lock").is_file()


@contextmanager
def writer_lock(run_dir: Path) -> Iterator[None]:
    """One writer per run folder: an exclusive lock on ``run_dir/.lock`` for as long as a run writes. A second
    run on the folder is refused with a one-line error naming the holder; a holder that died (SIGKILL
    included) holds nothing, since the OS drops its lock. (Where there are no POSIX locks, not enforced.)"""
    handle = open(Path(run_dir) / ".lock", "a+")  # left behind: it also marks a folder that runs wrote
    if fcntl is None:
        handle.close()
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StoreError(f"{run_dir} is being written by {holder}; wait for it to finish, or run into another "
                         "folder (--out)") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"process {os.getpid()} (since {time.strftime('%Y-%m-%d %H:%M:%S')})")
    handle.flush()
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()
