"""What the shipped default leaderboard gets done within its budget on this machine, the engine at a git revision
and the working tree side by side: the question a user of README command 1 asks of a faster engine.

    python benchmarks/bench_default.py --before REV [--budget 14m] [--repeat 1] [--json OUT.json] [--keep DIR]

Each engine runs ``attrbench run --json`` (the default config; its own budget unless ``--budget``) from an empty
folder, in a process of its own, alternately, ``--repeat`` times. Printed per engine and suite, from the run's
store: per scoring evaluation, the examples on which every method the headline scores has a row (the complete block
its pairwise verdicts are computed on), and the rows stored; and the run's computing seconds. Budget-stopped runs are
compared by what they finished, not by their seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_proxy import ROOT, in_tree, revision  # same folder: run as python benchmarks/bench_default.py

HEADLINE = "naopc"  # the default config's headline evaluation
SCORING = ("soft_erasure", "erasure_aopc", "abpc", "faithfulness_corr", "ground_truth")


def run(tree: Path, folder: Path, budget: str | None) -> dict:
    """``attrbench run --json`` with ``tree``'s engine into ``folder``: its summary and per-suite counts."""
    arguments = ["run", "--out", str(folder), "--json", *(["--budget", budget] if budget else [])]
    summary = in_tree(tree, "-c", [f"from attrbench.cli import main; main({arguments!r})"])
    return {"computing s": summary["compute_seconds"], "rows": summary["rows"], "suites": counts(folder / "default")}


def counts(run_dir: Path) -> dict:
    """Per suite: for the headline and each other scoring evaluation, the examples with a row of every method the
    headline scores (the complete block a pairwise verdict is computed on); and the rows stored."""
    with sqlite3.connect(run_dir / "store.sqlite") as db:
        rows = db.execute("SELECT suite, eval, method, example FROM results").fetchall()
    out: dict[str, dict] = {}
    for suite in sorted({r[0] for r in rows}):
        mine = [r for r in rows if r[0] == suite]
        examples: dict[tuple[str, str], set] = {}
        for _, evaluation, method, example in mine:
            examples.setdefault((evaluation.split("(")[0], method), set()).add(example)
        methods = {m for e, m in examples if e == HEADLINE and m != "-" and not m.startswith("floor")}
        figures = {}
        for evaluation in (HEADLINE, *SCORING):
            blocks = [examples.get((evaluation, m), set()) for m in methods]
            if any(blocks):
                figures[evaluation] = len(set.intersection(*blocks))
        out[suite.split("|")[0]] = {**figures, "rows": len(mine)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", required=True, help="git revision of the engine to compare with")
    parser.add_argument("--budget", default=None, help="the runs' budget (default: the default config's)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--json")
    parser.add_argument("--keep", help="keep the runs' folders under this folder (default: a temporary one)")
    args = parser.parse_args()
    import pandas as pd

    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as scratch, revision(args.before, Path(scratch)) as before:
        trees = {"before": before, "after": ROOT}
        for r in range(args.repeat):
            for name, tree in trees.items():
                runs[name].append(run(tree, Path(args.keep or scratch) / f"{name}-{r}", args.budget))
                print(f"{name} run {r + 1}: {runs[name][-1]['rows']} rows", file=sys.stderr, flush=True)
    table = pd.DataFrame([{"engine": name, "run": r + 1, "suite": suite, **figures, "computing s": one["computing s"]}
                          for name, results in runs.items() for r, one in enumerate(results)
                          for suite, figures in one["suites"].items()])
    print(f"the default leaderboard within {args.budget or 'its budget'}, {args.before} (before) and the working tree "
          f"(after), {os.cpu_count()} CPUs:")
    print(table.to_string(index=False))
    if args.json:
        after = subprocess.run(["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True,
                               text=True, check=False).stdout.strip()
        Path(args.json).write_text(json.dumps({"before": args.before, "after": after, "budget": args.budget,
                                               "cpus": os.cpu_count(), "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
