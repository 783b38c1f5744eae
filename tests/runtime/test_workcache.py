"""The shared-work cache: kept across instances (resumes, workers), damaged rows and files recomputed with a
warning, never used."""
import sqlite3

from attrbench.runtime.workcache import WorkCache


def test_outputs_and_attributions_persist_across_instances(tmp_path):
    path = tmp_path / "work.sqlite"
    cache = WorkCache(path)
    cache.forward_put({b"k1": 0.25, b"k2": 0.5})
    cache.attribution_put("m|x", {"scores": [1.0, -2.0], "seconds": 0.1})
    cache.close()
    again = WorkCache(path)
    assert again.forward_get([b"k1", b"k2", b"k3"]) == {b"k1": 0.25, b"k2": 0.5}
    assert again.attribution_get("m|x") == {"scores": [1.0, -2.0], "seconds": 0.1}
    assert again.attribution_get("m|y") is None
    memory = WorkCache(None)  # no file: this process only
    memory.forward_put({b"k": 1.0})
    assert memory.forward_get([b"k"]) == {b"k": 1.0} and memory.attribution_get("m|x") is None


def test_damaged_rows_are_dropped_and_reported(tmp_path, capsys):
    path = tmp_path / "work.sqlite"
    cache = WorkCache(path)
    cache.forward_put({b"k1": 0.25, b"k2": 0.5})
    cache.attribution_put("m|x", {"scores": [1.0]})
    cache.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE forward SET value = 0.26 WHERE key = ?", (b"k1",))
        db.execute("UPDATE attributions SET payload = '{\"scores\": [2.0]}'")
    again = WorkCache(path)
    assert again.forward_get([b"k1", b"k2"]) == {b"k2": 0.5}
    assert again.attribution_get("m|x") is None
    err = capsys.readouterr().err
    assert "1 cached model outputs" in err and "failed its checksum" in err
    assert again.forward_get([b"k1"]) == {}  # the damaged row is gone, so it will be recomputed and stored


def test_a_damaged_file_is_moved_aside_and_started_afresh(tmp_path, capsys):
    path = tmp_path / "work.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    cache = WorkCache(path)
    cache.forward_put({b"k": 1.0})
    assert WorkCache(path).forward_get([b"k"]) == {b"k": 1.0}
    assert (tmp_path / "work.sqlite.damaged").is_file()
    assert "is damaged" in capsys.readouterr().err
