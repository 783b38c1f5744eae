"""What the random floor costs per example: model outputs and seconds of each evaluation's floor, on the first
examples of a suite's seeded sample, with the evaluation parameters of a run config (default: ``full``).

    python benchmarks/bench_floor.py [--config full] [--n 4] [--suite MODEL] [--evals naopc,abpc,...]
                                     [--draws R] [--modes run,alone] [--json OUT.json]

Per suite and evaluation, the floors of ``n`` examples are computed as one shard of a run computes them (every
request answered together, batched), in a fresh workspace: **alone** (nothing else computed before) and, for the
evaluations whose floor reuses what a run computes anyway, **in a run** (after the example's shared rows and the
faithfulness reference's attribution: what the floor adds to them). ``--draws`` sets the floor's draws (the cost of
the sampled floors is linear in it) to measure a slow model on fewer and scale up. Soft erasure's floor under minmax
importance mirrors its draws (the sufficiency masks are the comprehensiveness masks); it is also measured
unmirrored, as it was computed before, side by side.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attrbench.datasets.lookup import examples_for, sample  # noqa: E402
from attrbench.models import load_model  # noqa: E402
from attrbench.plugin.evaluation import Evaluation  # noqa: E402
from attrbench.registry import EVALS  # noqa: E402
from attrbench.runtime.config import read_config  # noqa: E402
from attrbench.runtime.plan import configured  # noqa: E402
from attrbench.runtime.workspace import Workspace  # noqa: E402


def shard(workspace: Workspace, jobs: dict) -> tuple[dict, int, float]:
    """Run a shard's generators together: (results, sequences sent through the model, seconds)."""
    before = workspace.batcher.rows_sent
    began = time.perf_counter()
    done = workspace.batcher.run(jobs)
    return done, workspace.batcher.rows_sent - before, time.perf_counter() - began


def measure(adapter, dataset: str, evaluation: Evaluation, examples: list, seed: int, modes: list[str]) -> dict:
    """The floor of ``examples`` alone, and after what a run computes before it (shared rows, the reference)."""
    out = {}
    for mode in modes:
        workspace = Workspace()
        works = [workspace.work(adapter, e, seed, dataset) for e in examples]
        for work in works:
            work.resolved  # the target's own forward pass: every row of the example needs it
        if mode == "in a run":
            shard(workspace, {k: evaluation.shared(w) for k, w in enumerate(works)})
            if evaluation.name == "faithfulness_corr":
                for work in works:
                    work.attribution(evaluation.reference_method_for(adapter, dataset))
        began = time.perf_counter()
        jobs = {k: evaluation.floor(w) for k, w in enumerate(works)}  # a plain return runs here (the reference)
        setup = time.perf_counter() - began
        done, sent, seconds = shard(workspace, jobs)
        payloads = [p for p in done.values() if p]
        fields = next((list(p["mc_se"]) for p in payloads if p.get("mc_se")), [])
        out[mode] = {"outputs_per_example": sent / len(works), "seconds_per_example": (seconds + setup) / len(works),
                     "exact": f"{sum(1 for p in payloads if (p.get('floor') or {}).get('exact'))}/{len(works)}",
                     "values": {f: [p.get(f) for p in payloads] for f in fields},
                     "mc_se": {f: [(p.get("mc_se") or {}).get(f) for p in payloads] for f in fields},
                     "features": [w.perturbations(getattr(evaluation, "perturbation", "delete"),
                                                  getattr(evaluation, "unit", "token")).m for w in works]}
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="full")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--suite", action="append", help="a model of the config (default: every suite)")
    parser.add_argument("--evals", help="comma-separated (default: every evaluation of the suite with a floor)")
    parser.add_argument("--draws", type=int, help="the floors' draws (default: FLOOR_DRAWS)")
    parser.add_argument("--modes", default="in a run", help="comma-separated: 'in a run' and/or 'alone'")
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.draws:
        Evaluation.floor_draws = args.draws
    config = read_config(args.config)
    modes = args.modes.split(",")
    results = []
    for suite in config["suite"]:
        if args.suite and suite["model"] not in args.suite:
            continue
        adapter = load_model(suite["model"], config["dtype"])
        examples = sample(examples_for(adapter, suite["dataset"])[0], args.n, config["seed"])
        names = [e for e in suite["evals"] if EVALS.get(e).has_floor and (
            not args.evals or e in args.evals.split(","))]
        for evaluation in configured(EVALS, names, suite.get("eval_params")):
            evaluation = evaluation.resolve(adapter, suite["dataset"], examples)
            variants = [(evaluation.name, evaluation)]
            if getattr(evaluation, "mirrored", lambda: False)():
                unmirrored = copy.copy(evaluation)
                unmirrored.mirrored = lambda: False  # both masks sent, as before the mirror
                variants.append((f"{evaluation.name} (unmirrored)", unmirrored))
            for label, variant in variants:
                row = {"model": suite["model"], "dataset": suite["dataset"], "eval": variant.key, "label": label,
                       "draws": variant.floor_draws, **measure(adapter, suite["dataset"], variant, examples,
                                                               config["seed"], modes)}
                results.append(row)
                report(row, label, modes)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


def report(row: dict, label: str, modes: list[str]) -> None:
    print(f"{row['model']:<15} {label:<30} " + "  ".join(
        f"{mode}: {row[mode]['outputs_per_example']:7.0f} outputs {row[mode]['seconds_per_example']:7.2f} s"
        f" (exact {row[mode]['exact']}, m {row[mode]['features']})" for mode in modes), flush=True)


if __name__ == "__main__":
    main()
