"""Maintainers: grow a suite of the full comparison on its own, across machines, until it is complete.

    python tools/grow.py benchmarks/growing/gemma3-270m.toml --budget 150m [--out /tmp/grow]
    python tools/grow.py benchmarks/growing/gemma3-270m.toml --keep-only [--out /tmp/grow]   # a run started by hand

A suite that costs tens of CPU hours outlives any one machine. Its rows are kept beside its config as a compact
file (``results.parquet`` in a folder named like the config: zstd, a few hundred kB per hundred examples, no work
cache): this rebuilds the run folder from that file when the folder is missing, continues the run within the
budget (``attrbench run CONFIG --budget``), and writes the file back from the grown store, so that a later
machine continues where this one stopped. Rows are keyed by what they depend on (weights, data, evaluation,
method, example), not by the folder, so the finished suite's rows are the ones a run of the same suite into
reports/full would compute; publishing it is ``tools/publish_run.py``'s job, once, when it is complete.

Run it alone on the machine and do not pause it: the suite's cost rows (``timing``) are wall-clock seconds of each
attribution, so another job on the same cores, or a stopped process, goes into them. ``--drop-timing-before
'YYYY-MM-DD HH:MM:SS'`` removes the timing rows stored before that time (the store's local time) and the run
folder's attribution cache, so that the next run times those attributions again.
"""
import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from attrbench.runtime.store import COMPACT, Store, StoreError, export_compact, run_store, writer_lock

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("config", type=Path)
parser.add_argument("--budget", help="as attrbench run's --budget (e.g. 150m)")
parser.add_argument("--keep-only", action="store_true", help="only write the run folder's rows back beside the config")
parser.add_argument("--drop-timing-before", metavar="TIME",
                    help="remove the timing rows stored before TIME and the attribution cache, then keep (see above)")
parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "attrbench-grow",
                    help="parent of the run folder (default: the temporary directory)")
args = parser.parse_args()
if not args.budget and not args.keep_only and not args.drop_timing_before:
    parser.error("give --budget (how long to grow), --keep-only or --drop-timing-before")

kept = args.config.with_suffix("")  # the folder beside the config that holds its rows between machines
run_dir = args.out / "full"
if not (run_dir / "store.sqlite").is_file() and (kept / COMPACT).is_file():
    with tempfile.TemporaryDirectory() as cache:
        rebuilt = run_store(kept, Path(cache))  # verifies the file's page checksums and every row's sha256
        run_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(rebuilt, run_dir / "store.sqlite")
    print(f"rebuilt {run_dir} from {kept / COMPACT}", flush=True)
if args.drop_timing_before:  # cost rows measured while the machine did other work: timed again by the next run
    try:
        with writer_lock(run_dir), sqlite3.connect(run_dir / "store.sqlite") as db:  # refused while a run writes
            dropped = db.execute("DELETE FROM results WHERE eval = 'timing' AND created < ?",
                                 (args.drop_timing_before,)).rowcount
            for cache in run_dir.glob("work.sqlite*"):
                cache.unlink()
    except StoreError as err:
        sys.exit(f"error: {err}")
    print(f"dropped {dropped} timing rows stored before {args.drop_timing_before} and the attribution cache")
code = 0
if args.budget and not (args.keep_only or args.drop_timing_before):
    code = subprocess.call([str(Path(sys.executable).with_name("attrbench")), "run", str(args.config),
                            "--out", str(args.out), "--budget", args.budget])
if (run_dir / "store.sqlite").is_file():  # also after a failed run: every row stored is whole and kept
    kept.mkdir(parents=True, exist_ok=True)
    store = Store(run_dir / "store.sqlite", readonly=True)
    try:
        partial = kept / f"{COMPACT}.partial"
        rows = export_compact(store, partial)
    finally:
        store.close()
    partial.replace(kept / COMPACT)
    print(f"{rows} rows kept in {kept / COMPACT} ({(kept / COMPACT).stat().st_size / 1e6:.2f} MB)")
sys.exit(code)
