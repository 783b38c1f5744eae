"""Maintainers: publish a finished run folder in reports/.

    python tools/publish_run.py attrbench-runs/default reports/default

Copies the store, and the part of the shared-work cache that extending the published run needs (``attrbench run
--extend``): every cached model output (NAOPC's bounds, the references' curves) and the
input attributions of scoring methods (the references of ``faithfulness_corr``). The token-to-token maps
are left out: only the analyses and timing read them, their rows are already in the store, extending adds
no analysis, and they are most of the file. With ``--without-work`` the shared-work cache is left out
altogether (a run to extend then recomputes the shared work it needs: NAOPC's bounds, the references).
With ``--compact`` the rows go to ``results.parquet`` (zstd, page checksums; about a tenth of the SQLite
file) instead of ``store.sqlite``; ``load_run``, ``attrbench report`` and ``--extend`` read either.
The documents (``leaderboard.md``, ``report.html``, ``statistics.json``, ``figures/``) are rendered again where
they are published: a grown folder's own would say what it was extended from.
"""
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from attrbench.registry import METHODS
from attrbench.report import write_report
from attrbench.runtime.store import COMPACT, Store, export_compact

FLAGS = ("--without-work", "--compact")
arguments = [a for a in sys.argv[1:] if a not in FLAGS]
if len(arguments) != 2:
    sys.exit("usage: python tools/publish_run.py RUN_FOLDER TARGET [--without-work] [--compact]")
source, target = map(Path, arguments)
with_work, compact = "--without-work" not in sys.argv[1:], "--compact" in sys.argv[1:]
if target.resolve() == source.resolve() or target.resolve() in source.resolve().parents:
    sys.exit(f"error: {target} holds the run folder {source}; publish into another folder")
files = ["leaderboard.md", "report.html", "statistics.json", "store.sqlite"] + ["work.sqlite"] * with_work
missing = [name for name in files if not (source / name).is_file()] + ["figures"] * (not (source / "figures").is_dir())
if missing == ["work.sqlite"]:
    sys.exit(f"error: {source} has no shared-work cache (work.sqlite); publish it with --without-work")
if missing:  # checked before the old target is removed, so a wrong source never costs a published run
    sys.exit(f"error: {source} is not a finished run folder (no {missing[0]}); run `attrbench report {source}` first")
final, target = target, target.with_name(target.name + ".partial")  # built beside it, swapped in when complete
if target.exists():
    shutil.rmtree(target)
target.mkdir(parents=True)
for name in ("store.sqlite", "work.sqlite")[:1 + with_work]:
    with closing(sqlite3.connect(source / name)) as src, closing(sqlite3.connect(target / name)) as dst:
        src.backup(dst)  # a consistent copy, rows still in a WAL file included
maps = [m.name for m in METHODS.all() if m.output == "maps"]
keys, dropped = [], []
if with_work:
    with closing(sqlite3.connect(target / "work.sqlite", isolation_level=None)) as db:
        keys = [key for (key,) in db.execute("SELECT key FROM attributions")]
        dropped = [key for key in keys if key.split("|")[2].split("(")[0] in maps]
        db.executemany("DELETE FROM attributions WHERE key = ?", [(key,) for key in dropped])
        db.execute("VACUUM")
        db.execute("PRAGMA journal_mode=DELETE")  # one file in the repository, no WAL beside it
with closing(sqlite3.connect(target / "store.sqlite", isolation_level=None)) as db:
    db.execute("VACUUM")
    db.execute("PRAGMA journal_mode=DELETE")
if compact:
    store = Store(target / "store.sqlite", readonly=True)
    try:
        rows = export_compact(store, target / COMPACT)
    finally:
        store.close()
    (target / "store.sqlite").unlink()
    print(f"{rows} rows in {COMPACT}")
write_report(target)  # rendered where it is published: a published folder is its own authority (no "extended from")
if final.exists():
    shutil.rmtree(final)  # only now: a publish that fails leaves the published run as it was
target.replace(final)
target = final
size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
left_out = (f"{len(dropped)} of {len(keys)} cached attributions were maps, left out" if with_work
            else "no shared-work cache")
print(f"{target}: {size / 1e6:.1f} MB ({left_out})")
