"""Where a leaderboard run's time goes: seconds per example per (model, evaluation, method), and totals.

    python benchmarks/bench_leaderboard.py RUN_DIR [RUN_DIR ...] [--json OUT.json] [--top 15]
    python benchmarks/bench_leaderboard.py --run [CONFIG] --out DIR [--scale F] [--json OUT.json]

The first form reads finished run folders (their ``store.sqlite``: every unit's wall seconds and the
examples it covered); the second runs a config first (default: the shipped default leaderboard)
into ``DIR``. A unit's seconds include the attributions it was the first to need: the run context
memoises them, so the evaluation that runs first for a method pays for them, and the rest reuse
them. Timing units measure themselves and are listed like the others.

``--scale F`` runs the config with every suite's n multiplied by F (at least 1 example) and adds an
``extrapolated`` table: each (model, dataset, evaluation)'s seconds times the config's n over the n
it ran, i.e. what the config would take at its own size if every example cost what the sampled
ones did. It is an estimate (fixed costs such as the first call of a method are scaled too).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attrbench.runtime.config import read_config, run_leaderboard  # noqa: E402
from attrbench.runtime.store import Store  # noqa: E402


def unit_rows(run_dir: Path) -> list[dict]:
    store = Store(run_dir / "store.sqlite")
    try:
        planned = set(store.meta("planned") or [])
        rows = []
        for unit in store.units():
            if planned and unit["key"] not in planned:
                continue
            ids = {i for r in unit["records"] for i in r.get("example_ids", [])}
            rows.append({"run": run_dir.name, "model": unit["model"], "dataset": unit["dataset"],
                         "eval": unit["eval"], "method": unit["method"], "seconds": unit["seconds"],
                         "examples": len(ids), "ids": ids})
        return rows
    finally:
        store.close()


def summarise(rows: list[dict], top: int) -> dict:
    frame = pd.DataFrame(rows)
    by_eval = frame.groupby(["run", "model", "dataset", "eval"]).agg(
        units=("seconds", "size"), seconds=("seconds", "sum"),
        examples=("ids", lambda sets: len(set().union(*sets)))).reset_index()
    scored = frame[frame["method"] != "-"]
    per_method = scored.groupby(["run", "model", "eval", "method"]).agg(
        seconds=("seconds", "sum"), examples=("examples", "sum")).reset_index()
    per_method["s_per_example"] = per_method["seconds"] / per_method["examples"].clip(lower=1)
    totals = frame.groupby(["run"]).agg(units=("seconds", "size"), seconds=("seconds", "sum")).reset_index()
    return {"by_eval": by_eval.sort_values("seconds", ascending=False),
            "slowest": per_method.sort_values("seconds", ascending=False).head(top),
            "by_model": frame.groupby(["run", "model"])["seconds"].sum().reset_index(),
            "totals": totals}


def extrapolate(by_eval: pd.DataFrame, full_n: dict) -> pd.DataFrame:
    """Each (model, dataset, evaluation)'s seconds scaled from the examples it ran to the config's n."""
    frame = by_eval.copy()
    frame["config_n"] = [full_n.get((m, d, e), n) for m, d, e, n in
                         zip(frame["model"], frame["dataset"], frame["eval"], frame["examples"])]
    frame["estimated_seconds"] = frame["seconds"] * frame["config_n"] / frame["examples"].clip(lower=1)
    total = pd.DataFrame([{"model": "all", "dataset": "", "eval": "total", "seconds": frame["seconds"].sum(),
                           "estimated_seconds": frame["estimated_seconds"].sum()}])
    columns = ["model", "dataset", "eval", "examples", "config_n", "seconds", "estimated_seconds"]
    return pd.concat([frame.sort_values("estimated_seconds", ascending=False)[columns], total], ignore_index=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dirs", nargs="*", help="finished run folders")
    parser.add_argument("--run", nargs="?", const="", metavar="CONFIG", help="run this config first (default: default)")
    parser.add_argument("--out", default="bench-runs", help="parent folder for --run")
    parser.add_argument("--json", help="also write the tables as JSON here")
    parser.add_argument("--top", type=int, default=15, help="how many of the slowest (evaluation, method) pairs")
    parser.add_argument("--scale", type=float, help="with --run: run every suite at n x SCALE and extrapolate")
    args = parser.parse_args()
    run_dirs = [Path(d) for d in args.run_dirs]
    full_n = {}
    if args.run is not None:
        config = read_config(args.run or None)
        if args.scale:
            for entry in config["suite"]:
                for name in entry["evals"]:
                    full_n[(entry["model"], entry["dataset"], name)] = entry["n"]
                entry["n"] = max(1, round(entry["n"] * args.scale))
            config["name"] += f"-x{args.scale:g}"
        run_dir = Path(args.out) / config["name"]
        run_leaderboard(config, run_dir, progress=True)
        run_dirs.append(run_dir)
    if not run_dirs:
        parser.error("give run folders, or --run [CONFIG]")
    rows = [row for d in run_dirs for row in unit_rows(d)]
    tables = summarise(rows, args.top)
    if full_n:
        tables["extrapolated"] = extrapolate(tables["by_eval"], full_n)
    print("(a unit's seconds include the attributions and shared work, e.g. NAOPC's bounds, it was the first "
          "to need)")
    with pd.option_context("display.width", 200, "display.max_rows", 200):
        for name, frame in tables.items():
            print(f"\n== {name}")
            print(frame.round(3).to_string(index=False))
    if args.json:
        Path(args.json).write_text(json.dumps({k: v.to_dict(orient="records") for k, v in tables.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
