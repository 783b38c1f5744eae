"""Where a leaderboard's time goes, against a measured floor: per suite, distinct model inputs vs inputs sent,
forward seconds vs the floor, attribution seconds per method, end to end; and the cost of adding a method.

    python benchmarks/bench_leaderboard.py [CONFIG] [--n 4] [--repeat 1] [--add METHOD] [--device D] [--out DIR]
                                           [--suites 0,2] [--json OUT.json]

Each suite of CONFIG (default: the shipped default) runs alone on its first ``--n`` examples, scoring
evaluations only (the analyses rank nothing), from an empty folder, ``--repeat`` times; the figures are
those of the fastest run (timing noise only adds: ``benchmarks/bench_drift.py`` records how far identical batches
drift within one run). Printed per suite:

- ``requested``: model inputs the metrics asked for (repeats across methods and metrics included; soft
  erasure's masked-embedding samples count one input each); ``distinct``: the distinct ones; ``sent``: those
  that went through the model (0 repeats: ``sent = distinct``);
- ``forward s``: seconds in the model's forward passes; ``floor s``: what the inputs sent (the run's distinct
  inputs: from an empty folder, only an input no earlier round computed is sent) would cost in full batches,
  priced per length from this model's seconds per input measured at up to 12 lengths (:func:`floor_cost`), or
  the run's own forward seconds where those came out lower (the machine's speed drifts by tens of percent
  between minutes; a floor the run beat is no floor);
- ``attribution s``: the methods' own measured seconds (each first call, a warm-up, not counted);
- ``planning s`` (loading the model, sampling), ``computing s`` and its ratio to ``attribution s + floor s``
  (what is left: each method's first, warm-up call, the metrics' own bookkeeping, storing rows), and
  ``end-to-end s``.

``--add METHOD`` then runs the suite without METHOD in another folder, adds it, and prints the seconds of
the addition beside those of the whole run (before this engine, adding a method recomputed everything).
"""
from __future__ import annotations

import argparse
import copy
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attrbench.datasets.lookup import examples_for, sample  # noqa: E402
from attrbench.models import load_model  # noqa: E402
from attrbench.ops.batching import Batcher  # noqa: E402
from attrbench.ops.perturb import Forward, Readout  # noqa: E402
from attrbench.ops.targets import resolve_text  # noqa: E402
from attrbench.registry import EVALS, METHODS  # noqa: E402
from attrbench.runtime.config import read_config  # noqa: E402
from attrbench.runtime.options import RunOptions  # noqa: E402
from attrbench.runtime.pipeline import run_leaderboard  # noqa: E402


def scoring_suite(entry: dict, n: int) -> dict:
    """The suite on its first n examples, with its scoring evaluations only and every registered method."""
    suite = copy.deepcopy(entry)
    suite["n"] = n
    suite["evals"] = [e for e in suite["evals"] if EVALS.get(e).needs_methods]
    suite.pop("eval_n", None)
    return suite


BY_LENGTH = "floor s per input by length"


def floor_cost(model: str, dataset: str, seed: int, lengths_sent: dict, device: str = "cpu") -> dict:
    """What the inputs a run sent (rows per length) cost in full batches: seconds per input measured at up to 12
    lengths spanning them (the fastest of three batches the batcher fills to its own limits, of distinct inputs
    drawn from the suite's own tokens: a forward pass costs the same whatever the ids), interpolated linearly
    between measured lengths. Priced per length, since cost per token is not constant: short inputs fill a batch
    by rows, not tokens, and batch shapes run at different speeds."""
    adapter, options = load_model(model, device=device), RunOptions(device=device)
    examples = sample(examples_for(adapter, dataset)[0], 8, seed)
    encoded = [adapter.tokenizer(example.text)["input_ids"] for example in examples]
    readout = next(Readout.of(resolved) for ids, example in zip(encoded, examples)
                   if (resolved := resolve_text(adapter, ids, example.target)).index is not None)
    pool, rng = [t for ids in encoded for t in ids], np.random.default_rng(seed)

    def seconds_per_row(length: int) -> float:  # the fastest of three full batches (timing noise only adds)
        best = np.inf
        for _ in range(3):
            batcher = Batcher(batch_tokens=options.batch_tokens, pad_tokens=options.pad_tokens)
            rows = max(1, min(batcher.max_batch, batcher.batch_tokens // length))
            sequences = [tuple(int(t) for t in rng.choice(pool, length)) for _ in range(rows)]
            batcher.answer([Forward(adapter, readout, sequences, [length - 1] * rows)])
            best = min(best, batcher.forward_seconds / batcher.rows_sent)
        return best

    seconds_per_row(8)  # warm-up
    sent = sorted((int(length), rows) for length, rows in lengths_sent.items())
    if not sent:
        return {"seconds": 0.0, "lengths": [], "measured": []}
    grid = sorted({int(x) for x in np.linspace(sent[0][0], sent[-1][0], 12)})
    measured = [seconds_per_row(length) for length in grid]
    floor = sum(rows * float(np.interp(length, grid, measured)) for length, rows in sent)
    return {"seconds": floor, "lengths": grid, "measured": measured}


def run_suite(config: dict, suite: dict, folder: Path) -> dict:
    one = {**{k: v for k, v in config.items() if k not in ("suite", "budget")}, "suite": [suite]}
    start = time.perf_counter()
    summary = run_leaderboard(one, folder, progress=False)
    summary["end_to_end"] = time.perf_counter() - start
    return summary


def fastest_run(config: dict, suite: dict, folder: Path, repeat: int) -> dict:
    """The fastest (least computing) of ``repeat`` runs of the suite, each from an empty folder: as with
    timeit, noise only adds time, and the floor is the fastest of its batches too."""
    runs = []
    for r in range(repeat):
        target = folder if r == 0 else folder.with_name(f"{folder.name}-repeat{r}")
        shutil.rmtree(target, ignore_errors=True)
        runs.append(run_suite(config, suite, target))
    return min(runs, key=lambda summary: summary["compute_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", default="default")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=1, help="runs per suite, the fastest reported (default 1)")
    parser.add_argument("--add", default="decompx", help="the method added to a finished run (default decompx; '' "
                        "for none)")
    parser.add_argument("--device", default="cpu", help="the runs' and the floor's device (default cpu)")
    parser.add_argument("--out", default="bench-leaderboard")
    parser.add_argument("--suites", help="the config's suites to run, by index: 0,2 (default: all)")
    parser.add_argument("--json")
    args = parser.parse_args()
    config = read_config(args.config)
    if args.suites:
        config["suite"] = [config["suite"][int(k)] for k in args.suites.split(",")]
    config["device"] = args.device
    out = Path(args.out)
    rows, additions = [], []
    for k, entry in enumerate(config["suite"]):
        suite = scoring_suite(entry, args.n)
        summary = fastest_run(config, suite, out / f"suite{k}", args.repeat)
        cost = floor_cost(suite["model"], suite["dataset"], config["seed"], summary["model_lengths"], args.device)
        floor = min(cost["seconds"], summary["forward_seconds"])  # the run's own passes, where those were faster
        rows.append({"suite": f"{Path(suite['model']).name} · {suite['dataset']}", "device": args.device,
                     "n": args.n, "repeats": args.repeat,
                     "methods": len(METHODS.names()), "requested": summary["requested_rows"],
                     "distinct": summary["distinct_rows"], "sent": summary["model_rows"],
                     "tokens sent": sum(length * n for length, n in summary["model_lengths"].items()),
                     "forward s": round(summary["forward_seconds"], 1),
                     "floor s": round(floor, 1), "measured floor s": round(cost["seconds"], 1),
                     "attribution s": round(summary["attribution_seconds"], 1),
                     "planning s": round(summary["plan_seconds"], 1),
                     "computing s": round(summary["compute_seconds"], 1),
                     "end-to-end s": round(summary["end_to_end"], 1),
                     "computing s per example": round(summary["compute_seconds"] / args.n, 2),
                     "computing × (attribution + floor)": round(
                         summary["compute_seconds"] / (summary["attribution_seconds"] + floor), 2)})
        rows[-1][BY_LENGTH] = {length: round(x, 6) for length, x in zip(cost["lengths"], cost["measured"])}
        print(pd.DataFrame(rows[-1:]).drop(columns=BY_LENGTH).to_string(index=False), flush=True)
        if args.add and k == 0:
            without = copy.deepcopy(suite)
            without["methods"] = "all"
            without["exclude_methods"] = [args.add]
            shutil.rmtree(out / f"suite{k}-add", ignore_errors=True)
            run_suite(config, without, out / f"suite{k}-add")
            added = run_suite(config, suite, out / f"suite{k}-add")
            additions.append({"suite": rows[-1]["suite"], "method added": args.add, "n": args.n,
                              "whole run s": rows[-1]["end-to-end s"], "addition s": round(added["end_to_end"], 1),
                              "rows computed": added["rows"], "model inputs sent": added["model_rows"],
                              "attributions": added["attributions"]})
            print(pd.DataFrame(additions).to_string(index=False), flush=True)
        if args.json:  # after every suite: a run stopped by a time limit keeps what it measured
            Path(args.json).write_text(json.dumps({"suites": rows, "additions": additions}, indent=1))
    print("\n" + pd.DataFrame(rows).drop(columns=BY_LENGTH).to_string(index=False))
    if additions:
        print("\n" + pd.DataFrame(additions).to_string(index=False))


if __name__ == "__main__":
    main()
