"""The engine's own overhead, before and after a change, side by side: a leaderboard run on a tiny model, where a
forward pass costs little, so what is measured is everything that is not arithmetic (the launches a GPU pays for).

    python benchmarks/bench_proxy.py [--before REV] [--n 6] [--shard 6] [--geometry cpu|gpu] [--device D]
                                     [--repeat 2] [--json OUT.json]

The run: every registered method and the six scoring evaluations ``naopc, soft_erasure, erasure_aopc, abpc,
faithfulness_corr, timing`` on ``tiny-llama`` / ``sva-linzen``, ``--n`` examples, shard size ``--shard``, from an
empty folder, with the batch budget and padding of a CPU or (``--geometry gpu``) of a CUDA device: the proxy
stands in for a GPU, where a forward pass is cheap and launches are what cost. ``before`` is the engine at git
revision ``--before`` (checked out into a temporary worktree), ``after`` the working tree; each runs in its own
process, alternately, ``--repeat`` times, and the fastest run of each is shown (timing noise only adds). Printed
per engine:

- ``model calls``: forward passes of the model (its top module called), every caller counted (methods, metrics,
  target resolution, warm-ups), and per example;
- ``inputs sent``: sequences the metrics' batcher sent through the model; ``attributions``: attributions computed;
- ``computing s``: the run's computing seconds (planning excluded), and per example; ``attribution s``: the
  methods' own measured seconds; ``forward s``: the metrics' forward passes.

Then the two engines' stored rows are compared (timing rows left out): an engine that computes differently must
still store the same results, to float tolerance.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EVALS = ["naopc", "soft_erasure", "erasure_aopc", "abpc", "faithfulness_corr", "timing"]


def config(n: int, shard: int, device: str = "cpu") -> dict:
    return {"name": "proxy", "seed": 0, "dtype": "float32", "shard_size": shard, "device": device,
            "suite": [{"model": "tiny-llama", "dataset": "sva-linzen", "n": n, "methods": "all", "evals": EVALS}]}


def measure(n: int, shard: int, folder: Path, geometry: str, device: str = "cpu") -> dict:
    """One run in this process (whichever engine ``attrbench`` imports as): its counts and seconds. ``geometry``
    "gpu": the batch budget and padding a CUDA device gets (``RunOptions``), computed on the CPU."""
    import torch

    from attrbench.runtime.context import RunContext
    from attrbench.runtime.options import DEFAULT_BATCH_TOKENS, DEFAULT_PAD_TOKENS, RunOptions
    from attrbench.runtime.pipeline import run_leaderboard

    calls = {"n": 0}
    hooked: set[int] = set()
    adapter_of = RunContext.adapter

    def counting(self, name):  # every model a run loads counts its forward passes, whoever calls them
        adapter = adapter_of(self, name)
        if id(adapter.model) not in hooked:
            adapter.model.register_forward_pre_hook(lambda *_: calls.__setitem__("n", calls["n"] + 1))
            hooked.add(id(adapter.model))
        return adapter

    RunContext.adapter = counting
    torch.set_num_threads(torch.get_num_threads())
    shutil.rmtree(folder, ignore_errors=True)
    began = time.perf_counter()
    kind = {"cpu": "cpu", "gpu": "cuda"}[geometry]
    options = RunOptions(batch_tokens=DEFAULT_BATCH_TOKENS[kind], pad_tokens=DEFAULT_PAD_TOKENS[kind])
    summary = run_leaderboard(config(n, shard, device), folder, progress=False, options=options)
    return {"examples": n, "rows": summary["rows"], "model calls": calls["n"], "inputs sent": summary["model_rows"],
            "attributions": summary["attributions"], "computing s": summary["compute_seconds"],
            "attribution s": summary["attribution_seconds"], "forward s": summary["forward_seconds"],
            "end-to-end s": time.perf_counter() - began}


def in_tree(tree: Path, script: str, arguments: list[str]) -> dict:
    """``script arguments`` in a fresh process importing ``attrbench`` from ``tree``: its last line, as JSON."""
    path = os.pathsep.join(p for p in (str(tree), os.environ.get("PYTHONPATH", "")) if p)  # the tree's attrbench first
    env = {**os.environ, "PYTHONPATH": path, "TOKENIZERS_PARALLELISM": "false"}
    out = subprocess.run([sys.executable, script, *arguments], cwd=tree, env=env, capture_output=True, text=True,
                         check=False)
    if out.returncode or not out.stdout.strip():
        raise SystemExit(f"the run in {tree} failed or printed nothing:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def revision(rev: str, scratch: Path):
    """The engine at git revision ``rev``, checked out into a worktree under ``scratch`` while in use."""
    tree = scratch / "before"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev], check=True,
                   capture_output=True)
    try:
        yield tree
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False,
                       capture_output=True)


def child(tree: Path, n: int, shard: int, folder: Path, geometry: str, device: str) -> dict:
    """:func:`measure` in a fresh process importing ``attrbench`` from ``tree``."""
    return in_tree(tree, __file__, ["--measure", str(folder), "--n", str(n), "--shard", str(shard),
                                    "--geometry", geometry, "--device", device])


def leaves(value, path=""):
    """(path, number) of every number in a payload."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}")
    elif isinstance(value, list):
        for k, item in enumerate(value):
            yield from leaves(item, f"{path}[{k}]")
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path, float(value)


def payload_gap(old, new, rtol: float = 1e-4, atol: float = 1e-6) -> tuple[bool, float, str]:
    """Whether two payloads differ (another set of numbers, or one beyond ``atol + rtol * |old|``), and their
    largest difference with where it is."""
    a, b = dict(leaves(old)), dict(leaves(new))
    gaps = [(abs(a[p] - b[p]), p) for p in a.keys() & b.keys()]
    gap, where = max(gaps, default=(0.0, ""))
    return a.keys() != b.keys() or any(g > atol + rtol * abs(a[p]) for g, p in gaps), gap, where if gap else ""


def compare(before: Path, after: Path, rtol: float = 1e-4, atol: float = 1e-6) -> dict:
    """The rows of two runs' stores side by side (timing rows, which measure the machine, left out): how many
    differ beyond ``atol + rtol * |before|`` in some number, and the largest difference."""
    def rows(folder: Path) -> dict:
        with sqlite3.connect(folder / "store.sqlite") as db:
            return {key: (evaluation, method, json.loads(payload)) for key, evaluation, method, payload in db.execute(
                "SELECT key, eval, method, payload FROM results WHERE eval NOT LIKE 'timing%'")}

    old, new = rows(before), rows(after)
    differing, largest = [], (0.0, "")
    for key in old.keys() & new.keys():
        differs, *gap = payload_gap(old[key][2], new[key][2], rtol, atol)
        if differs:
            differing.append(f"{old[key][0]} / {old[key][1]}")
        largest = max(largest, tuple(gap))
    return {"rows compared": len(old.keys() & new.keys()), "only in one": len(old.keys() ^ new.keys()),
            "rows differing": len(differing), "largest difference": largest[0], "where": largest[1],
            "differing cells": sorted(set(differing))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=None, help="git revision of the engine to compare with (default: none)")
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--shard", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--geometry", choices=("cpu", "gpu"), default="cpu",
                        help="the batch budget and padding of this device kind (default cpu; gpu: a CUDA device's, "
                             "as the proxy stands in for one)")
    parser.add_argument("--device", default="cpu", help="the runs' device (default cpu)")
    parser.add_argument("--json")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.n, args.shard, Path(args.measure), args.geometry, args.device)))
        return
    import pandas as pd

    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        trees = {"before": stack.enter_context(revision(args.before, Path(scratch)))} if args.before else {}
        trees["after"] = ROOT
        runs: dict[str, list[dict]] = {name: [] for name in trees}
        for r in range(args.repeat):
            for name, tree in trees.items():
                runs[name].append(child(tree, args.n, args.shard, Path(scratch) / f"{name}-{r}", args.geometry,
                                        args.device))
                print(f"{name} run {r + 1}: {runs[name][-1]['computing s']:.1f} s computing", flush=True)
        agreement = compare(Path(scratch) / "before-0", Path(scratch) / "after-0") if args.before else None
    table = {}
    for name, measured in runs.items():
        best = min(measured, key=lambda m: m["computing s"])
        table[name] = {**best, "model calls per example": best["model calls"] / best["examples"],
                       "computing s per example": best["computing s"] / best["examples"]}
    frame = pd.DataFrame(table)
    if "before" in table:
        frame["before / after"] = [table["before"][k] / table["after"][k] if table["after"][k] else float("nan")
                                   for k in frame.index]
    print(f"\nthe proxy: tiny-llama / sva-linzen, every method, {', '.join(EVALS)}; n = {args.n}, shard "
          f"{args.shard}, on {args.device}, {args.geometry} batch geometry, fastest of {args.repeat} runs, "
          f"{os.cpu_count()} CPUs, torch threads {__import__('torch').get_num_threads()}")
    print(frame.round(3).to_string())
    if agreement:
        print(f"\nrows of the two engines (timing left out): {agreement['rows compared']} compared, "
              f"{agreement['only in one']} in one store only, {agreement['rows differing']} differ beyond 1e-6 + "
              f"1e-4 x |value| (largest difference {agreement['largest difference']:.2e} at "
              f"{agreement['where'] or '-'}){': ' if agreement['differing cells'] else ''}"
              f"{', '.join(agreement['differing cells'][:12])}")
    if args.json:
        Path(args.json).write_text(json.dumps({"before": args.before, "n": args.n, "shard": args.shard,
                                               "geometry": args.geometry, "device": args.device,
                                               "repeat": args.repeat, "cpus": os.cpu_count(), "runs": runs,
                                               "fastest": table, "rows": agreement}, indent=1))


if __name__ == "__main__":
    main()
