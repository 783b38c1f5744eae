"""Maintainers: recompute some of a published run's rows with this engine and compare them with the published ones.

    python tools/recompute_rows.py reports/default [--suites 0,1] [--examples 2] [--json OUT.json]

Copies the run's store (not its shared-work cache, so every attribution and model output is computed anew),
deletes the rows of the first ``--examples`` examples (in sampling order) of each chosen suite, every scoring
evaluation but timing (which measures the machine), recomputes exactly those, and compares them with the
published rows number by number (equal within 1e-6 + 1e-4 × |value|). A change to how the engine computes (batching,
devices) must leave a published run's rows as they were, to float tolerance. ``--json`` keeps the comparison, with
the commit and the machine, as a record.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from bench_proxy import payload_gap  # noqa: E402
from bench_readme_python import write_record  # noqa: E402

from attrbench.models.zoo import cache_dir  # noqa: E402
from attrbench.runtime.options import RunOptions  # noqa: E402
from attrbench.runtime.pipeline import config_pipeline  # noqa: E402
from attrbench.runtime.plan import Suite  # noqa: E402
from attrbench.runtime.store import Store, run_store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run")
    parser.add_argument("--suites", default="0", help="suite indices, comma-separated (default 0)")
    parser.add_argument("--examples", type=int, default=2)
    parser.add_argument("--json", help="write the comparison here as a record")
    args = parser.parse_args()
    published = run_store(Path(args.run), cache_dir())
    if published is None or published.suffix != ".sqlite":
        sys.exit(f"{args.run} has no store.sqlite (a compact folder: rebuild its store first)")
    chosen = {int(k) for k in args.suites.split(",")}
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        shutil.copy(published, folder / "store.sqlite")
        store = Store(folder / "store.sqlite")
        config = store.meta("config")
        pipeline = config_pipeline(config, RunOptions(progress=False), store=store, cache=folder / "work.sqlite")
        plans = pipeline.plan([Suite.from_config(entry) for entry in config["suite"]])
        only, before = [], {}
        for k, plan in enumerate(plans):
            cells = set()
            if k in chosen:
                ids = [e.id for e in plan.examples[:args.examples]]
                cells = {(e.key, i) for e, _ in plan.scoring if e.name != "timing" for i in ids}
                keys = [key for e, _, example, key in plan.rows() if (e.key, example.id) in cells]
                before.update(store.get(keys))
                with store.db:
                    store.db.executemany("DELETE FROM results WHERE key = ?", [(key,) for key in keys])
            only.append(cells)
        began = time.perf_counter()
        done = pipeline.execute(plans, only=only)
        seconds = time.perf_counter() - began
        after = store.get(list(before))
        store.close()
    differing, largest = [], (0.0, "")
    for key, payload in before.items():
        differs, *gap = payload_gap(payload, after.get(key))
        if differs:
            differing.append(key)
        largest = max(largest, tuple(gap))
    print(f"{len(before)} published rows of suites {args.suites} ({args.examples} examples each) recomputed in "
          f"{seconds:.0f} s ({done['attributions']} attributions, {done['model_rows']} model "
          f"inputs); {len(after)} stored again; {len(differing)} differ beyond 1e-6 + 1e-4 × |value| (largest "
          f"difference {largest[0]:.2e} at {largest[1] or '-'})")
    if args.json:
        write_record(args.json, {
            "command": f"python tools/recompute_rows.py {args.run} --suites {args.suites} --examples {args.examples}",
            "suites": sorted(chosen), "examples": args.examples, "rows": len(before), "stored again": len(after),
            "differing": len(differing), "largest difference": largest[0], "at": largest[1], "seconds": seconds,
            "attributions": done["attributions"], "model inputs": done["model_rows"]})
    sys.exit(1 if differing or len(after) != len(before) else 0)


if __name__ == "__main__":
    main()
