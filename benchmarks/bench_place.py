"""What placing a method of one's own on a published leaderboard costs: `attrbench run --extend PUBLISHED --plugins
FILE`, timed, for a cheap method (gradient × input under another name: one forward and one backward pass, about
three forward passes' time) and a sampled one (LIME with 50 samples under another name), each alone.

    python benchmarks/bench_place.py [--published reports/default] [--budget 10m] [--methods my_grad_x_input,my_lime]
                                     [--whole] [--json OUT.json] [--keep FOLDER]

Per method: the rows the extension computed (its own, on the published cells), the wall and CPU seconds of the
whole command as a user runs it (loading the models and writing the report included), per suite the method's own
median seconds per example (its timing rows), the extension's computing seconds per example, and where its headline
verdict stands (provisional with its n, or complete). ``--whole``: each method is then placed on everything (every
suite, metric, check and example, the same command without a budget, into a new folder) and that command's time is
set against its floor: the model inputs the extension sent, per suite, at the seconds per input of full batches of
distinct inputs of those lengths (``bench_leaderboard.floor_cost``), plus the method's own attribution seconds.
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_leaderboard import floor_cost  # noqa: E402

import torch  # noqa: E402

from attrbench.api import load_run  # noqa: E402

PLUGINS = {"my_grad_x_input": '''
import attrbench
from attrbench.methods.grad_x_input import GradXInput


@attrbench.register
class MyGradXInput(GradXInput):
    """gradient x input, under a user's name: a cheap method."""
    name = "my_grad_x_input"
''', "my_lime": '''
import attrbench
from attrbench.registry import METHODS

LIME = METHODS.get("lime")


@attrbench.register
class MyLime(type(LIME)):
    """captum's LIME with its defaults, under a user's name: a sampled method."""

    def __init__(self):
        self.__dict__.update(LIME.__dict__)
        self.name = "my_lime"
'''}


def headline_places(run_dir: Path, method: str) -> dict:
    """Per suite, where ``method`` stands in its headline table: provisional (its n of the table's) or complete."""
    statistics = json.loads((run_dir / "statistics.json").read_text())
    out = {}
    for title, table in statistics.items():
        if not isinstance(table, dict) or not title.endswith(" · naopc") or "mean" not in table:
            continue
        suite = title.rsplit(" · ", 1)[0]
        placed = (table.get("provisional") or {}).get(method)
        if placed is not None:
            out[suite] = {"verdict": "provisional", "n": placed["n"], "beats": len(placed["beats"]),
                          "beaten_by": len(placed["beaten_by"]), "not_separated": len(placed["not_separated"])}
        elif method in table["mean"]:
            out[suite] = {"verdict": "complete", "n": (table.get("n_by_method") or {}).get(method)}
        elif any(method in same for same in (table.get("aliases") or {}).values()):  # one behaviour, one row
            kept = next(m for m, same in table["aliases"].items() if method in same)
            out[suite] = {"verdict": "complete", "same_as": kept, "n": (table.get("n_by_method") or {}).get(kept)}
        else:
            out[suite] = {"verdict": None}
    return out


def place(published: Path, config: str, method: str, budget: str, folder: Path, label: str = "") -> dict:
    """`attrbench run CONFIG --extend PUBLISHED --plugins FILE --out OUT --budget B`, as a user types it (CONFIG: the
    published run's)."""
    plugin = folder / f"{method}.py"
    plugin.write_text(PLUGINS[method])
    out = folder / f"{method}{label}"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    # a process of its own, as a user types it: its imports and model loading are in the time
    done = subprocess.run([sys.executable, "-m", "attrbench.cli", "run", config, "--extend", str(published),
                           "--plugins", str(plugin), "--out", str(out), "--budget", budget, "--json"],
                          stdout=subprocess.PIPE, text=True)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    assert done.returncode == 0, f"the extension with {method} failed"
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    [run_dir] = [path for path in out.iterdir() if path.is_dir()]
    run = load_run(run_dir)
    last = run.meta["last_run"]
    results = run.results
    timing = results[(results["eval"] == "timing") & (results.metric == "seconds_per_example")
                     & (results.method == method)]
    per_suite = {}
    for (model, dataset), rows in timing.groupby(["model", "dataset"]):
        per_suite[f"{model} · {dataset}"] = {"examples": rows.example.nunique(),
                                             "method_median_s": round(float(rows.value.median()), 4)}
    examples = sum(s["examples"] for s in per_suite.values())
    return {"method": method, "budget": budget, "rows": last["rows"], "attributions": last["attributions"],
            "model_rows": last["model_rows"], "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "computing_seconds": round(last["seconds"], 1), "report_seconds": round(summary["report_seconds"], 1),
            "planning_seconds": round(summary["plan_seconds"], 1), "forward_seconds": round(last["forward_seconds"], 1),
            "attribution_seconds": round(last["attribution_seconds"], 1), "examples": examples,
            "computing_seconds_per_example": round(last["seconds"] / max(1, examples), 2), "suites": per_suite,
            "headline": headline_places(run_dir, method), "sent": last.get("suites", {})}


def with_floor(placed: dict, seed: int, suites: dict) -> dict:
    """The whole command against its floor: the inputs each suite sent, in full batches, plus the attribution."""
    floors = {}
    for name, sent in placed.pop("sent").items():
        model, dataset = suites[name]
        cost = floor_cost(model, dataset, seed, sent["model_lengths"])
        floors[name] = {"model_rows": sent["model_rows"], "forward_seconds": round(sent["forward_seconds"], 1),
                        "floor_seconds": round(min(cost["seconds"], sent["forward_seconds"]), 1)}
    floor = sum(f["floor_seconds"] for f in floors.values())
    return {**placed, "floor_by_suite": floors, "floor_seconds": round(floor, 1),
            "wall_over_floor": round(placed["wall_seconds"] / floor, 2),
            "wall_over_floor_and_attribution": round(placed["wall_seconds"] / (floor + placed["attribution_seconds"]),
                                                     2)}


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published", default="reports/default")
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--methods", default=",".join(PLUGINS))
    parser.add_argument("--whole", action="store_true", help="also place each method on everything, with its floor")
    parser.add_argument("--json")
    parser.add_argument("--keep", help="keep the placed run folders in this folder (to profile their report)")
    args = parser.parse_args()
    published = Path(args.published)
    config = load_run(published).meta["config"]
    suites = {f"{s['model']}|{s['dataset']}:{s.get('split') or 'default'}": (s["model"], s["dataset"])
              for s in config["suite"]}
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="place-"))
    folder.mkdir(parents=True, exist_ok=True)
    figures = {"published": args.published, "threads": torch.get_num_threads(), "methods": [], "whole": []}
    try:
        for method in args.methods.split(","):
            figures["methods"].append(place(published, config["name"], method, args.budget, folder))
            figures["methods"][-1].pop("sent")
            if args.whole:
                figures["whole"].append(with_floor(place(published, config["name"], method, "100h", folder, "-whole"),
                                                   config["seed"], suites))
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    for m in figures["methods"] + figures["whole"]:
        print(f"{m['method']} (--budget {m['budget']}): {m['rows']} rows ({m['attributions']} attributions, "
              f"{m['model_rows']} model outputs) on {m['examples']} published examples; command {m['wall_seconds']} s "
              f"wall, computing {m['computing_seconds']} s = {m['computing_seconds_per_example']} s per example")
        for suite, s in m["suites"].items():
            print(f"    {suite}: n = {s['examples']}, the method itself {s['method_median_s']} s per example (median)")
        for suite, h in m["headline"].items():
            print(f"    headline {suite}: {h}")
        if "floor_seconds" in m:
            print(f"    floor {m['floor_seconds']} s + attribution {m['attribution_seconds']} s: the command is "
                  f"{m['wall_over_floor']}x the floor, {m['wall_over_floor_and_attribution']}x floor + attribution")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main_()
