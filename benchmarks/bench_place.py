"""What placing a method of one's own on a published leaderboard costs: `attrbench run --extend PUBLISHED --plugins
FILE`, timed, for a cheap method (gradient × input under another name: one forward and one backward pass, about
three forward passes' time) and a sampled one (LIME with 50 samples under another name), each alone.

    python benchmarks/bench_place.py [--published reports/default] [--budget 10m] [--json OUT.json]

Per method: the rows the extension computed (its own, on the published cells), the wall and CPU seconds of the
whole command as a user runs it (loading the models and writing the report included), and per suite the
method's own median seconds per example (its timing rows) and the extension's computing seconds per example.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from attrbench.api import load_run  # noqa: E402
from attrbench.cli import main  # noqa: E402
from attrbench.registry import METHODS  # noqa: E402

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


def place(published: Path, method: str, budget: str, folder: Path) -> dict:
    """`attrbench run --extend PUBLISHED --plugins FILE --out OUT --budget B`, as a user types it (the published
    run's config is the default one)."""
    plugin = folder / f"{method}.py"
    plugin.write_text(PLUGINS[method])
    out = folder / method
    began, cpu = time.perf_counter(), time.process_time()
    code = main(["run", "--extend", str(published), "--plugins", str(plugin), "--out", str(out), "--budget", budget,
                 "--json"])
    wall, cpu = time.perf_counter() - began, time.process_time() - cpu
    METHODS.remove(method)  # the next method is placed alone, as a user's other file would be
    assert code == 0, f"the extension with {method} failed"
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
    return {"method": method, "rows": last["rows"], "attributions": last["attributions"],
            "model_rows": last["model_rows"], "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu, 1),
            "computing_seconds": round(last["seconds"], 1), "examples": examples,
            "computing_seconds_per_example": round(last["seconds"] / max(1, examples), 2), "suites": per_suite}


def main_() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--published", default="reports/default")
    parser.add_argument("--budget", default="10m")
    parser.add_argument("--json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="place-"))
    try:
        figures = {"published": args.published, "threads": torch.get_num_threads(),
                   "methods": [place(Path(args.published), m, args.budget, folder)
                               for m in ("my_grad_x_input", "my_lime")]}
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    for m in figures["methods"]:
        print(f"{m['method']}: {m['rows']} rows ({m['attributions']} attributions, {m['model_rows']} model outputs) "
              f"on {m['examples']} published examples; command {m['wall_seconds']} s wall, computing "
              f"{m['computing_seconds']} s = {m['computing_seconds_per_example']} s per example")
        for suite, s in m["suites"].items():
            print(f"    {suite}: n = {s['examples']}, the method itself {s['method_median_s']} s per example (median)")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main_()
