"""Maintainers: re-measure a method's cost in a run folder after a faster implementation of the same numbers.

    python tools/retime.py attrbench-runs/full attention_flow
    attrbench run full --out attrbench-runs --budget 5m    # recomputes and times only those attributions first

A row's key names a method and its parameters, not its code, and a reused attribution keeps the cost measured
when it was computed (``evals/timing.py``). So after a method is made faster without changing its
scores (its tests against the reference must say so first), the run's timing rows still show the old cost. This
deletes the method's timing rows from the store and its attributions from the shared-work cache; its other rows
stay, since its scores are unchanged. The next run of the same config computes those attributions again (the
shards holding them come first in its order), times them and writes the timing rows.
"""
import sqlite3
import sys
from contextlib import closing
from pathlib import Path

if len(sys.argv) != 3:
    sys.exit("usage: python tools/retime.py RUN_FOLDER METHOD")
run, method = Path(sys.argv[1]), sys.argv[2]
store, work = run / "store.sqlite", run / "work.sqlite"
if not store.exists():
    sys.exit(f"{store} does not exist: give a run folder with a SQLite store (a compact published folder is "
             "retimed in its run folder, then published again)")
with closing(sqlite3.connect(store)) as db, db:
    pattern = (method, f"{method}(%")
    timing = db.execute("DELETE FROM results WHERE eval = 'timing' AND (method = ? OR method LIKE ?)", pattern).rowcount
if not timing:
    sys.exit(f"{store} has no timing row of {method}: check the method's name (`attrbench methods`)")
cached = 0
if work.exists():
    with closing(sqlite3.connect(work)) as db, db:
        cached = db.execute("DELETE FROM attributions WHERE key LIKE ? OR key LIKE ?",
                            (f"%|{method}|%", f"%|{method}(%")).rowcount
print(f"{run}: deleted {timing} timing rows and {cached} cached attributions of {method}; "
      "the next run of its config recomputes and times them")
