"""Maintainers: publish a finished run folder in reports/.

    python tools/publish_run.py attrbench-runs/default reports/default

Copies the documents (``leaderboard.md``, ``report.html``, ``statistics.json``, ``figures/``) and the
store, and the part of the shared-work cache that extending the published run needs
(``attrbench run --extend``): every cached model output (NAOPC's bounds, the references' curves) and the
input attributions of scoring methods (the references of ``faithfulness_corr``). The token-to-token maps
that only the analyses read are left out: extending adds no analysis, and they are most of the file.
"""
import shutil
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

from attrbench.registry import METHODS

source, target = Path(sys.argv[1]), Path(sys.argv[2])
if not (source / "store.sqlite").is_file():
    sys.exit(f"error: {source} is not a run folder (no store.sqlite)")
if target.exists():
    shutil.rmtree(target)
target.mkdir(parents=True)
for name in ("leaderboard.md", "report.html", "statistics.json"):
    shutil.copyfile(source / name, target / name)
shutil.copytree(source / "figures", target / "figures")
for name in ("store.sqlite", "work.sqlite"):
    with closing(sqlite3.connect(source / name)) as src, closing(sqlite3.connect(target / name)) as dst:
        src.backup(dst)  # a consistent copy, rows still in a WAL file included
maps = [m.name for m in METHODS.all() if m.output == "maps"]
with closing(sqlite3.connect(target / "work.sqlite", isolation_level=None)) as db:
    keys = [key for (key,) in db.execute("SELECT key FROM attributions")]
    dropped = [key for key in keys if key.split("|")[2].split("(")[0] in maps]
    db.executemany("DELETE FROM attributions WHERE key = ?", [(key,) for key in dropped])
    db.execute("VACUUM")
    db.execute("PRAGMA journal_mode=DELETE")  # one file in the repository, no WAL beside it
with closing(sqlite3.connect(target / "store.sqlite", isolation_level=None)) as db:
    db.execute("VACUUM")
    db.execute("PRAGMA journal_mode=DELETE")
size = sum(f.stat().st_size for f in target.rglob("*") if f.is_file())
print(f"{target}: {size / 1e6:.1f} MB ({len(dropped)} of {len(keys)} cached attributions were maps, left out)")
