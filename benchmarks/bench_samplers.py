"""The pooled perturbation methods' own time, apart from the model: LIME, KernelSHAP, Shapley sampling and occlusion
on a tiny random model (forward passes nearly free, as on a GPU), before and after a change, side by side.

    python benchmarks/bench_samplers.py [--before REV] [--n 64] [--model tiny-gpt2] [--repeat 3] [--json OUT.json]

Each method attributes the first ``--n`` SST-2 dev sentences (its default parameters; target: the next token) after a
warm-up call, one torch thread, in a fresh process per engine: ``before`` is the engine at git revision ``--before``
(checked out into a temporary worktree), ``after`` the working tree, alternately ``--repeat`` times; the fastest
run of each is shown (timing noise only adds), in milliseconds per sentence, with the largest difference between
the two engines' scores (a change of speed must not be a change of result).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

from bench_proxy import ROOT, in_tree, revision  # same folder: run as python benchmarks/bench_samplers.py
METHODS = ("lime", "kernel_shap", "shapley_sampling", "occlusion")


def measure(method: str, model: str, n: int) -> dict:
    """One method's seconds per sentence and scores, in this process (whichever ``attrbench`` it imports)."""
    import torch

    import attrbench
    from attrbench.datasets.lookup import examples_for
    from attrbench.models import load_model

    torch.set_num_threads(1)
    adapter = load_model(model)
    texts = [e.text for e in examples_for(load_model("minilm-l6-sst2"), "sst2")[0][:n]]
    attrbench.attribute(adapter, texts[:2], method, target="next")  # warm-up
    began = time.perf_counter()
    result = attrbench.attribute(adapter, texts, method, target="next")
    seconds = (time.perf_counter() - began) / len(texts)
    return {"seconds": seconds, "scores": [[float(v) for v in r[method].values] for r in result.results]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", default=None, help="git revision of the engine to compare with (default: none)")
    parser.add_argument("--n", type=int, default=64)
    parser.add_argument("--model", default="tiny-gpt2")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--json")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.model, args.n)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as scratch, contextlib.ExitStack() as stack:
        trees = {"before": stack.enter_context(revision(args.before, Path(scratch)))} if args.before else {}
        trees["after"] = ROOT
        for method in args.methods.split(","):
            runs: dict[str, list[dict]] = {name: [] for name in trees}
            for _ in range(args.repeat):
                for name, tree in trees.items():
                    runs[name].append(in_tree(tree, __file__, ["--measure", method, "--model", args.model,
                                                               "--n", str(args.n)]))
            row = {"method": method}
            for name, measured in runs.items():
                row[f"{name} ms per sentence"] = 1000 * min(m["seconds"] for m in measured)
            if args.before:
                row["before / after"] = row["before ms per sentence"] / row["after ms per sentence"]
                row["largest difference"] = max(
                    (abs(a - b) for p, q in zip(runs["before"][0]["scores"], runs["after"][0]["scores"])
                     for a, b in zip(p, q)), default=0.0)
            rows.append(row)
            print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    print(f"\n{args.model}, {args.n} SST-2 dev sentences, one torch thread, fastest of {args.repeat}, "
          f"{os.cpu_count()} CPUs")
    if args.json:
        before = args.before and subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", args.before],
                                                capture_output=True, text=True).stdout.strip()
        Path(args.json).write_text(json.dumps({"before": before, "model": args.model, "n": args.n,
                                               "repeat": args.repeat, "cpus": os.cpu_count(), "rows": rows},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
