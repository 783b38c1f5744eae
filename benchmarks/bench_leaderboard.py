"""Where a leaderboard's time goes, against a measured floor: per suite, distinct model inputs vs inputs sent,
forward seconds vs the floor, attribution seconds per method, end to end; and the cost of adding a method.

    python benchmarks/bench_leaderboard.py [CONFIG] [--n 4] [--add METHOD] [--out DIR] [--json OUT.json]

Each suite of CONFIG (default: the shipped default) runs alone on its first ``--n`` examples, scoring
evaluations only (the analyses rank nothing), from an empty folder. Printed per suite:

- ``requested``: model inputs the metrics asked for (repeats across methods and metrics included; soft
  erasure's masked-embedding samples count one input each); ``distinct``: the distinct ones; ``sent``: those
  that went through the model (0 repeats: ``sent = distinct``);
- ``forward s``: seconds in the model's forward passes; ``floor s``: what the inputs sent (the run's distinct
  inputs: from an empty folder, only an input no earlier round computed is sent) would cost in full batches,
  ``per_row * inputs + per_token * tokens``, with both rates fitted to this model's measured seconds per input
  at six lengths and lowered to lie at or below each (:func:`floor_cost`; the largest relative gap is printed);
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
from attrbench.runtime.pipeline import run_leaderboard  # noqa: E402


def scoring_suite(entry: dict, n: int) -> dict:
    """The suite on its first n examples, with its scoring evaluations only and every registered method."""
    suite = copy.deepcopy(entry)
    suite["n"] = n
    suite["evals"] = [e for e in suite["evals"] if EVALS.get(e).needs_methods]
    suite.pop("eval_n", None)
    return suite


def floor_cost(model: str, dataset: str, n: int, seed: int) -> dict:
    """Seconds per model input of L tokens in full batches, fitted as ``per_row + per_token * L``: measured on
    batches the batcher fills to its own limits (token budget, rows per batch) at six lengths spanning the
    suite's texts, of distinct inputs drawn from the suite's own tokens (a forward pass costs the same whatever
    the ids). Short inputs cost more per token (a batch of them is bounded by rows, not tokens), so a floor in
    texts/s or tokens/s alone misprices a run whose inputs differ in length from the measurement's. The fitted
    line is lowered until it is at or below every measurement, so that the floor never exceeds one."""
    adapter = load_model(model)
    examples = sample(examples_for(adapter, dataset)[0], max(n, 8), seed)
    encoded = [adapter.tokenizer(example.text)["input_ids"] for example in examples]
    readout = next(Readout.of(resolved) for ids, example in zip(encoded, examples)
                   if (resolved := resolve_text(adapter, ids, example.target)).index is not None)
    pool, rng = [t for ids in encoded for t in ids], np.random.default_rng(seed)

    def seconds_per_row(length: int, batches: int) -> float:
        batcher = Batcher()
        rows = batches * max(1, min(batcher.max_batch, batcher.batch_tokens // length))
        sequences = [tuple(int(t) for t in rng.choice(pool, length)) for _ in range(rows)]
        batcher.answer([Forward(adapter, readout, sequences, [length - 1] * rows)])
        return batcher.forward_seconds / batcher.rows_sent

    seconds_per_row(8, 1)  # warm-up
    lengths = sorted({int(x) for x in np.linspace(2, max(map(len, encoded)), 6)})
    measured = [seconds_per_row(length, 3) for length in lengths]
    per_token, per_row = np.polyfit(lengths, measured, 1)
    per_row -= max(0.0, float(np.max(per_row + per_token * np.array(lengths) - measured)))  # below every point
    fitted = per_row + per_token * np.array(lengths)
    return {"per_row": float(per_row), "per_token": float(per_token), "lengths": lengths,
            "measured": measured, "fit_error": float(np.max(np.abs(fitted / measured - 1)))}


def run_suite(config: dict, suite: dict, folder: Path) -> dict:
    one = {**{k: v for k, v in config.items() if k not in ("suite", "budget")}, "suite": [suite]}
    start = time.perf_counter()
    summary = run_leaderboard(one, folder, progress=False)
    summary["end_to_end"] = time.perf_counter() - start
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config", nargs="?", default="default")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--add", default="decompx", help="the method added to a finished run (default decompx)")
    parser.add_argument("--out", default="bench-leaderboard")
    parser.add_argument("--json")
    args = parser.parse_args()
    config = read_config(args.config)
    out = Path(args.out)
    rows, additions = [], []
    for k, entry in enumerate(config["suite"]):
        suite = scoring_suite(entry, args.n)
        summary = run_suite(config, suite, out / f"suite{k}")
        cost = floor_cost(suite["model"], suite["dataset"], args.n, config["seed"])
        floor = cost["per_row"] * summary["model_rows"] + cost["per_token"] * summary["model_tokens"]
        rows.append({"suite": f"{suite['model']} · {suite['dataset']}", "n": args.n,
                     "methods": len(METHODS.names()), "requested": summary["requested_rows"],
                     "distinct": summary["distinct_rows"], "sent": summary["model_rows"],
                     "tokens sent": summary["model_tokens"], "floor ms/input": round(1e3 * cost["per_row"], 3),
                     "floor ms/token": round(1e3 * cost["per_token"], 4), "floor fit error": round(cost["fit_error"], 3),
                     "forward s": round(summary["forward_seconds"], 1),
                     "floor s": round(floor, 1), "attribution s": round(summary["attribution_seconds"], 1),
                     "planning s": round(summary["plan_seconds"], 1),
                     "computing s": round(summary["compute_seconds"], 1),
                     "end-to-end s": round(summary["end_to_end"], 1),
                     "computing × (attribution + floor)": round(
                         summary["compute_seconds"] / (summary["attribution_seconds"] + floor), 2)})
        rows[-1]["floor measured"] = {length: round(x, 6) for length, x in zip(cost["lengths"], cost["measured"])}
        print(pd.DataFrame(rows[-1:]).to_string(index=False), flush=True)
        if args.add and k == 0:
            without = copy.deepcopy(suite)
            without["methods"] = "all"
            without["exclude_methods"] = [args.add]
            run_suite(config, without, out / f"suite{k}-add")
            added = run_suite(config, suite, out / f"suite{k}-add")
            additions.append({"suite": rows[-1]["suite"], "method added": args.add, "n": args.n,
                              "whole run s": rows[-1]["end-to-end s"], "addition s": round(added["end_to_end"], 1),
                              "rows computed": added["rows"], "model inputs sent": added["model_rows"],
                              "attributions": added["attributions"]})
            print(pd.DataFrame(additions).to_string(index=False), flush=True)
    print("\n" + pd.DataFrame(rows).to_string(index=False))
    if additions:
        print("\n" + pd.DataFrame(additions).to_string(index=False))
    if args.json:
        Path(args.json).write_text(json.dumps({"suites": rows, "additions": additions}, indent=1))


if __name__ == "__main__":
    main()
