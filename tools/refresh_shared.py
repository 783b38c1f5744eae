"""Maintainers: compute again the shared rows of one evaluation of a published run, after what they hold grew.

    python tools/refresh_shared.py reports/full faithfulness_corr OUT_FOLDER
    python tools/publish_run.py OUT_FOLDER reports/full --without-work --compact

A shared row (one per example, what every method's scores of it share) is kept as first stored: a run never
writes a row twice. When an evaluation's shared payload gains a field (faithfulness_corr's holds its reference's
scores, so that a method added to the run is not compared with a reference attributed again), a published run's
rows lack it. This copies the run's store to ``OUT_FOLDER`` with its documents (and its shared-work cache where
it ships one, whose cached attributions are then used), deletes that evaluation's shared rows, and computes
exactly those again (``Pipeline.execute(..., only=...)``); every other row is left as it is, and the script
checks that no row but those changed and that none is missing. The documents do not read these payloads:
publishing ``OUT_FOLDER`` renders them again, and they must come out as they were (``git diff`` shows nothing).
"""
from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from attrbench.models.zoo import cache_dir
from attrbench.runtime.options import RunOptions
from attrbench.runtime.pipeline import config_pipeline
from attrbench.runtime.plan import Suite
from attrbench.runtime.store import Store, run_store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("evaluation", help="the evaluation's name, e.g. faithfulness_corr")
    parser.add_argument("out", type=Path, help="a new folder: the run folder to publish")
    args = parser.parse_args()
    published = run_store(args.run, cache_dir())
    if published is None:
        sys.exit(f"error: {args.run} is not a run folder (no store.sqlite or results.parquet)")
    if args.out.exists():
        sys.exit(f"error: {args.out} exists; give a new folder")
    args.out.mkdir(parents=True)
    shutil.copyfile(published, args.out / "store.sqlite")
    for name in ("leaderboard.md", "report.html", "statistics.json", "work.sqlite"):
        if (args.run / name).is_file():
            shutil.copyfile(args.run / name, args.out / name)
    shutil.copytree(args.run / "figures", args.out / "figures")
    store = Store(args.out / "store.sqlite")
    config = store.meta("config")
    before = store.count()
    pipeline = config_pipeline(config, RunOptions(progress=True), store=store, cache=args.out / "work.sqlite")
    plans = pipeline.plan([Suite.from_config(entry) for entry in config["suite"]])
    cells = {}  # the evaluation's shared rows: key -> (suite, (evaluation key, example id))
    for k, plan in enumerate(plans):
        for evaluation, method, example, key, eval_key, _ in plan.keyed_rows():
            if method is None and evaluation.name == args.evaluation:
                cells[key] = (k, (eval_key, example.id))
    stored = store.done(list(cells))
    # exactly the cells whose shared row is deleted: a budgeted run's other cells stay as short as they are
    only = [{cell for key, (k, cell) in cells.items() if k == index and key in stored} for index in range(len(plans))]
    if not stored:
        sys.exit(f"error: {args.run} has no shared rows of '{args.evaluation}'")
    others = {key: digest for key, digest in store.db.execute("SELECT key, sha256 FROM results")
              if key not in stored}
    with store.db:
        store.db.executemany("DELETE FROM results WHERE key = ?", [(key,) for key in sorted(stored)])
    began = time.perf_counter()
    done = pipeline.execute(plans, only=only)
    after = dict(store.db.execute("SELECT key, sha256 FROM results"))
    store.close()
    changed = [key for key, digest in others.items() if after.get(key) != digest]
    if changed or len(after) != before or not stored <= set(after):
        sys.exit(f"error: {len(changed)} other rows changed, {before} rows before and {len(after)} after")
    print(f"{len(stored)} shared rows of {args.evaluation} computed again in {time.perf_counter() - began:.0f} s "
          f"({done['attributions']} attributions, {done['model_rows']} model inputs); the other "
          f"{len(others)} rows as they were. Publish: python tools/publish_run.py {args.out} TARGET [flags]")


if __name__ == "__main__":
    main()
