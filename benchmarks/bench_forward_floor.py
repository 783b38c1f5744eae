"""The least time a config's NAOPC bounds can take here: perturbed forward passes needed x seconds per pass.

    python benchmarks/bench_forward_floor.py [CONFIG] [--per-suite K] [--json OUT.json]

NAOPC (Edin et al. 2024) rescales each example's AOPC by the lowest and highest AOPC over orderings of its
tokens: exact over all 2^m subsets up to ``exact_up_to`` tokens, beam search beyond. The bounds depend on the
example only, not on the method, so no sharing across methods reduces them: each example needs its own set of
distinct perturbed texts through the model. For K sampled examples of every suite that runs ``naopc``, this
script computes the bounds as the evaluation does (same parameters, same memo of distinct deletion sets),
counts the distinct texts, and times them; ``floor_s`` = the suite's n x mean texts per example / measured
texts per second. It is a floor for the whole run: attributions, every other metric and timing come on top.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from attrbench.datasets import examples_for, sample  # noqa: E402
from attrbench.evals import naopc  # noqa: E402
from attrbench.models import load_model  # noqa: E402
from attrbench.ops.perturb import Deletions  # noqa: E402
from attrbench.ops.targets import resolve_text  # noqa: E402
from attrbench.registry import EVALS  # noqa: E402
from attrbench.runtime.config import read_config  # noqa: E402


def suite_floor(suite, per_suite: int, seed: int) -> dict:
    params = EVALS.get("naopc").with_params(**suite["eval_params"].get("naopc", {})).get_params()
    adapter = load_model(suite["model"], suite.get("dtype", "float32"))
    examples = sample(examples_for(adapter, suite["dataset"], suite["split"])[0], per_suite, seed)
    texts, tokens, ms, seconds = [], [], [], 0.0
    for example in examples:
        ids = adapter.encode([example.text]).input_ids[0].tolist()
        start = time.perf_counter()
        deletions = Deletions(adapter, ids, resolve_text(adapter, ids, example.target))
        if deletions.m >= 2:
            for kind in naopc.KINDS:
                naopc.bounds(deletions, kind, params["exact_up_to"], params["beam_width"])
        seconds += time.perf_counter() - start
        sets = deletions.evaluated
        texts.append(len(sets))
        tokens.append(sum(len(deletions.sequence(s)) for s in sets))
        ms.append(deletions.m)
    rate = sum(texts) / seconds
    return {"model": suite["model"], "dataset": suite["dataset"], "n": suite["n"], "sampled": len(examples),
            "mean_m": float(np.mean(ms)), "max_m": int(np.max(ms)), "texts_per_example": float(np.mean(texts)),
            "tokens_per_text": sum(tokens) / sum(texts), "texts_per_s": rate,
            "bounds_s_per_example": seconds / len(examples),
            "floor_s": suite["n"] * float(np.mean(texts)) / rate, **{f"naopc_{k}": v for k, v in params.items()}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", default="full")
    parser.add_argument("--per-suite", type=int, default=6, help="examples sampled per suite (default 6)")
    parser.add_argument("--json", help="write the table here too")
    args = parser.parse_args(argv)
    config = read_config(args.config)
    rows = [suite_floor(s | {"dtype": config["dtype"]}, args.per_suite, config["seed"])
            for s in config["suite"] if "naopc" in s["evals"]]
    table = pd.DataFrame(rows)
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.round(2).to_string(index=False))
    total = float(table["floor_s"].sum())
    print(f"\nNAOPC bounds alone, whole config '{config['name']}': {total:,.0f} s ({total / 60:.0f} min) "
          "on this machine")
    if args.json:
        Path(args.json).write_text(json.dumps({"config": config["name"], "suites": rows, "floor_s": total}, indent=1))


if __name__ == "__main__":
    main()
