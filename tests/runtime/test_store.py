"""The store's compact form (results.parquet) on rows no leaderboard test run produces."""
import json
import sqlite3
import zlib

import pyarrow.parquet as pq
import pytest

from attrbench.runtime.store import COMPACT, Store, StoreError, export_compact, run_store


def _rows_of(path):
    with sqlite3.connect(path) as db:
        return sorted(db.execute("SELECT * FROM results")), sorted(db.execute("SELECT * FROM meta"))


def test_payloads_with_empty_dicts_at_any_depth_export_and_rebuild_bit_for_bit(tmp_path):
    """An analysis record's eval_params is {} inside a list: parquet cannot hold a struct without fields, so
    such a group stays text while its neighbours are typed, and the rebuilt store equals the original."""
    store = Store(tmp_path / "store.sqlite")
    record = {"eval": "layer_analysis", "eval_params": {}, "method_params": {}, "value": 0.25}
    payloads = [{"records": [dict(record, value=v / 7)]} for v in range(3)] \
        + [{}, {"values": [1.5, -0.0, 5e-324], "n": 3}, {"values": [2.5], "n": 1}, {"nested": {"empty": {}}}]
    store.put([{"key": f"k{i}", "suite": "s", "eval": "e" if i < 3 else f"e{i}", "method": "m",
                "example": "sample", "payload": p} for i, p in enumerate(payloads)])
    store.set_meta(plan=[])
    export_compact(store, tmp_path / COMPACT)
    store.close()
    table = pq.read_table(tmp_path / COMPACT)
    assert table.column("payload").null_count == 2  # the two float groups typed; every empty-dict group text
    # the header once: no ARROW:schema (it would repeat the header), the typed columns still read back typed
    assert set(pq.ParquetFile(tmp_path / COMPACT).metadata.metadata) == {b"attrbench"}
    assert str(table.schema.field("payload_0").type) == "struct<values: list<element: double>, n: int64>"
    rebuilt = run_store(tmp_path, tmp_path / "cache")
    assert _rows_of(rebuilt) == _rows_of(tmp_path / "store.sqlite")


def test_a_compact_file_of_a_newer_format_is_refused_in_one_line(tmp_path):
    store = Store(tmp_path / "store.sqlite")
    store.put([{"key": "k", "suite": "s", "eval": "e", "method": "m", "example": "x", "payload": {"v": 1.0}}])
    export_compact(store, tmp_path / COMPACT)
    store.close()
    (tmp_path / "store.sqlite").unlink()
    table = pq.read_table(tmp_path / COMPACT)
    header = json.loads(zlib.decompress(table.schema.metadata[b"attrbench"]))
    assert header["format"] == 2
    header["format"] = 3
    pq.write_table(table.replace_schema_metadata({"attrbench": zlib.compress(json.dumps(header).encode())}),
                   tmp_path / COMPACT)
    with pytest.raises(StoreError, match="newer than this attrbench reads") as err:
        run_store(tmp_path, tmp_path / "cache")
    assert "\n" not in str(err.value)
